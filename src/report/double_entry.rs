//! The double-entry journal of a period (`report --journal-format double-entry`): for an
//! accounting tool's manual-journal import. Each paid attempt is one entry of two lines that
//! balance: the expense account of its group column's value (the cost centre) debited with what
//! the paying balance was charged, the prepaid balance account of the paying currency credited
//! with the same. A charge that is not believed yet (a MISMATCH order, or a COMPLETED row whose
//! total or order could not be confirmed) is debited to the suspense account of its currency
//! instead of an expense account. Which accounts an entry posts to is decided in one place,
//! [`accounts_of`].
//!
//! Columns: `entry`, `date`, `account`, `debit`, `credit`, `currency`, `memo`, the group column
//! (`cost_center` when the period has none), `batch`, `reference`, `order_id`, `environment`.
//! An entry is numbered from 1 in the order the journal books its attempts; both its lines carry
//! the number, the date (the UTC date of when the order became final, written as
//! `accounts.date_format` says) and the currency. Amounts are plain decimals (`.`, the
//! currency's decimals, no grouping, never negative), the other side's cell empty. An attempt
//! that charged nothing is not an entry (it moves no money). There are no total lines: every
//! line is a posting. Account names come from `[accounts]` in `paybatch.toml`
//! ([`crate::settings::Accounts`]). Cells are written as the result file writes them, in the
//! layout asked with `--out-format`; the file is private (mode 0600) and put in place
//! atomically.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::batch::output::{PrivateFile, result_cell};
use crate::file_format::FileFormat;
use crate::ledger::RowState;
use crate::money::display_amount;
use crate::report::journal::{JournalLine, LineKind, utc_date};
use crate::settings::Accounts;

/// The columns before the group column's.
pub const COLUMNS: [&str; 7] = [
    "entry", "date", "account", "debit", "credit", "currency", "memo",
];

/// The group column's name when the period has none (as `report` names its default).
const NO_GROUP: &str = "cost_center";

/// The columns after the group column's.
pub const TRAILING_COLUMNS: [&str; 4] = ["batch", "reference", "order_id", "environment"];

/// Where a paid attempt's money goes: the account debited and the account credited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    pub debit: String,
    pub credit: String,
}

/// The accounts of one paid attempt: what it charged is an expense of its group's value, or
/// suspense while the charge is not believed (MISMATCH, or a total or order not confirmed);
/// the money came from the prepaid balance of its currency.
pub fn accounts_of(accounts: &Accounts, line: &JournalLine<'_>) -> Posting {
    let debit = if in_suspense(line) {
        accounts.suspense_of(line.currency)
    } else {
        accounts.expense_of(line.group)
    };
    Posting {
        debit,
        credit: accounts.prepaid_of(line.currency),
    }
}

/// Whether the charge of `line` is not believed yet: a MISMATCH order, or a total or order
/// not confirmed.
fn in_suspense(line: &JournalLine<'_>) -> bool {
    line.kind == LineKind::Suspense
        || line.status == RowState::Mismatch.as_str()
        || !line.note.is_empty()
}

/// The double-entry journal being written; [`DoubleEntry::finish`] puts it in place.
pub struct DoubleEntry {
    file: PrivateFile,
    csv: csv::Writer<BufWriter<std::fs::File>>,
    accounts: Accounts,
    /// The layout: its decimal mark is the one amounts are written with.
    format: FileFormat,
    entries: u64,
    /// The accounts of the lines that are expenses, per paying currency and group value, as
    /// written (a few thousand at most: one per cost centre and currency).
    postings: HashMap<String, HashMap<String, Posting>>,
    /// The last time an entry was dated from, and its date as written.
    dated: (String, String),
}

impl DoubleEntry {
    /// Starts the journal at `path` with its header, in the layout `format`; `group` names
    /// the group column.
    pub fn create(
        path: &Path,
        group: Option<&str>,
        format: FileFormat,
        accounts: Accounts,
    ) -> io::Result<Self> {
        let file = PrivateFile::create(path)?;
        let mut csv = format.writer(BufWriter::with_capacity(
            256 * 1024,
            file.file().try_clone()?,
        ))?;
        let header = COLUMNS
            .iter()
            .copied()
            .chain([group.unwrap_or(NO_GROUP)])
            .chain(TRAILING_COLUMNS);
        csv.write_record(header.map(|c| result_cell(c, false).into_owned()))
            .map_err(csv_to_io)?;
        Ok(DoubleEntry {
            file,
            csv,
            accounts,
            format,
            entries: 0,
            postings: HashMap::new(),
            dated: (String::new(), String::new()),
        })
    }

    /// Books one paid attempt as an entry of two lines; an amount the ledger holds that is not
    /// a decimal is refused.
    pub fn add(&mut self, line: &JournalLine<'_>) -> io::Result<()> {
        // A suspense line whose claim is unknown posts nothing: no amount is believed.
        if line.kind == LineKind::Suspense && line.amount.is_empty() {
            return Ok(());
        }
        let amount = parse_decimal_text(line.amount).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "row {} of batch {}: the ledger's debited amount `{}` is not a decimal",
                    line.reference, line.batch, line.amount
                ),
            )
        })?;
        if amount.is_zero() {
            return Ok(());
        }
        self.entries += 1;
        let Posting { debit, credit } = self.posting_of(line);
        // A negative charge (money given back) posts the other way round.
        let (debit, credit) = if amount < Decimal::ZERO {
            (credit, debit)
        } else {
            (debit, credit)
        };
        if self.dated.0 != line.completed_at {
            let date = entry_date(line.completed_at, &self.accounts.date_format);
            self.dated = (
                line.completed_at.to_string(),
                result_cell(&date, false).into_owned(),
            );
        }
        // Digits and the layout's decimal mark only (`19,60` for a decimal-comma input):
        // written as they are.
        let shown = display_amount(amount.abs(), line.currency);
        let shown = self.format.amount(&shown).into_owned();
        let entry = self.entries.to_string();
        let memo = memo_of(line);
        let cell = |c| result_cell(c, false);
        let (currency, memo, group) = (cell(line.currency), cell(&memo), cell(line.group));
        let (batch, reference) = (cell(line.batch), cell(line.reference));
        let (order_id, environment) = (cell(line.order_id), cell(line.environment));
        for (account, debited, credited) in [
            (debit.as_str(), shown.as_str(), ""),
            (credit.as_str(), "", shown.as_str()),
        ] {
            let cells: [&str; 12] = [
                &entry,
                &self.dated.1,
                account,
                debited,
                credited,
                &currency,
                &memo,
                &group,
                &batch,
                &reference,
                &order_id,
                &environment,
            ];
            for cell in cells {
                self.csv.write_field(cell.as_bytes()).map_err(csv_to_io)?;
            }
            self.csv.write_record(None::<&[u8]>).map_err(csv_to_io)?;
        }
        Ok(())
    }

    /// The accounts of `line` ([`accounts_of`]), as written; an expense's are kept for the
    /// next line of the same currency and group value.
    fn posting_of(&mut self, line: &JournalLine<'_>) -> Posting {
        let written = |p: Posting| Posting {
            debit: result_cell(&p.debit, false).into_owned(),
            credit: result_cell(&p.credit, false).into_owned(),
        };
        if in_suspense(line) {
            return written(accounts_of(&self.accounts, line));
        }
        if let Some(p) = self
            .postings
            .get(line.currency)
            .and_then(|groups| groups.get(line.group))
        {
            return p.clone();
        }
        let p = written(accounts_of(&self.accounts, line));
        self.postings
            .entry(line.currency.to_string())
            .or_default()
            .insert(line.group.to_string(), p.clone());
        p
    }

    /// Makes the file durable and puts it in place.
    pub fn finish(self) -> io::Result<()> {
        let mut buf = self
            .csv
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?;
        buf.flush()?;
        self.file.commit()
    }
}

fn csv_to_io(e: csv::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// The date of an entry: the UTC time `at` (RFC 3339) written as `format` says; the UTC date
/// (`YYYY-MM-DD`, or the text as it is) when `at` is not a time or `format` cannot write it.
pub fn entry_date(at: &str, format: &str) -> String {
    use std::fmt::Write as _;
    let Ok(time) = chrono::DateTime::parse_from_rfc3339(at) else {
        return utc_date(at);
    };
    let mut out = String::new();
    match write!(out, "{}", time.with_timezone(&chrono::Utc).format(format)) {
        Ok(()) => out,
        Err(_) => utc_date(at),
    }
}

/// What an entry says in words: the product and reference paid, the batch, and why a charge
/// is in suspense (no comma or semicolon of its own, for importers that split lines naively).
fn memo_of(line: &JournalLine<'_>) -> String {
    let mut memo = format!(
        "reward {} ({}) of batch {}",
        line.reference, line.product, line.batch
    );
    if line.status == RowState::Mismatch.as_str() {
        memo.push_str(" - MISMATCH: the order completed otherwise than sent");
    }
    if !line.note.is_empty() {
        memo.push_str(" - ");
        memo.push_str(line.note);
    }
    memo
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn line<'a>(
        reference: &'a str,
        group: &'a str,
        currency: &'a str,
        amount: &'a str,
    ) -> JournalLine<'a> {
        JournalLine {
            completed_at: "2026-11-30T23:30:00-02:00",
            environment: "production",
            batch: "nov",
            status: "COMPLETED",
            currency,
            amount,
            group,
            product: "AMZ-US",
            reference,
            order_id: "ord_1",
            note: "",
            kind: LineKind::Paid,
            expected: "",
            expected_currency: "",
            service_completed_at: "",
        }
    }

    /// The file's lines, split on `delimiter` (no cell of these tests is quoted).
    fn cells(path: &Path, delimiter: char) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(path).expect("read");
        text.lines()
            .map(|l| l.split(delimiter).map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn every_entry_balances_in_its_currency_on_the_accounts_of_its_line() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("de.csv");
        let accounts = Accounts {
            expense: "6100:{cost_centre}".into(),
            ..Accounts::default()
        };
        let mut j = DoubleEntry::create(&path, Some("cost_center"), FileFormat::CSV, accounts)
            .expect("created");
        j.add(&line("R-1", "MKT", "USD", "9.8")).expect("booked");
        j.add(&line("R-2", "", "EUR", "12.50")).expect("booked");
        j.add(&line("R-3", "OPS", "USD", "0.00"))
            .expect("nothing to book");
        j.add(&JournalLine {
            status: "MISMATCH",
            ..line("R-4", "OPS", "GBP", "1000.00")
        })
        .expect("booked");
        j.add(&JournalLine {
            note: "total not confirmed",
            ..line("R-5", "OPS", "USD", "3.10")
        })
        .expect("booked");
        j.finish().expect("written");
        let lines = cells(&path, ',');
        assert_eq!(
            lines[0],
            [
                "entry",
                "date",
                "account",
                "debit",
                "credit",
                "currency",
                "memo",
                "cost_center",
                "batch",
                "reference",
                "order_id",
                "environment"
            ]
        );
        assert_eq!(
            lines[1],
            [
                "1",
                "2026-12-01",
                "6100:MKT",
                "9.80",
                "",
                "USD",
                "reward R-1 (AMZ-US) of batch nov",
                "MKT",
                "nov",
                "R-1",
                "ord_1",
                "production"
            ]
        );
        assert_eq!(
            &lines[2][..6],
            [
                "1",
                "2026-12-01",
                "Prepaid rewards balance USD",
                "",
                "9.80",
                "USD"
            ]
        );
        assert_eq!(&lines[3][2..4], ["Rewards expense", "12.50"]);
        assert_eq!(
            &lines[5][..4],
            ["3", "2026-12-01", "Rewards suspense GBP", "1000.00"]
        );
        assert_eq!(&lines[7][2..4], ["Rewards suspense USD", "3.10"]);
        assert_eq!(
            lines.len(),
            9,
            "the attempt that charged nothing is no entry"
        );
        // Per entry and currency, debits equal credits; each entry has one currency.
        let mut balance: BTreeMap<(String, String), Decimal> = BTreeMap::new();
        for l in &lines[1..] {
            let amount = |s: &str| s.parse::<Decimal>().unwrap_or_default();
            *balance.entry((l[0].clone(), l[5].clone())).or_default() +=
                amount(&l[3]) - amount(&l[4]);
        }
        assert_eq!(balance.len(), 4);
        assert!(balance.values().all(Decimal::is_zero), "{balance:?}");
    }

    #[test]
    fn dates_follow_the_format_and_the_layout_is_the_one_asked() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("de.csv");
        let accounts = Accounts {
            date_format: "%m/%d/%Y".into(),
            ..Accounts::default()
        };
        let layout =
            FileFormat::new(b';', true, crate::file_format::LineEnd::Crlf).expect("a layout");
        let mut j = DoubleEntry::create(&path, None, layout, accounts).expect("created");
        j.add(&line("R-1", "", "USD", "-2.5")).expect("booked");
        j.finish().expect("written");
        let bytes = std::fs::read(&path).expect("read");
        assert!(bytes.starts_with(crate::file_format::BOM));
        let text = String::from_utf8_lossy(&bytes[3..]).into_owned();
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert!(lines[0].starts_with("entry;date;account;debit;credit;currency;memo;cost_center;"));
        // Money given back posts the other way round.
        assert!(
            lines[1].starts_with("1;12/01/2026;Prepaid rewards balance USD;2.50;;USD;"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with("1;12/01/2026;Rewards expense;;2.50;USD;"),
            "{}",
            lines[2]
        );
        assert_eq!(entry_date("not a time", "%d"), "not a time");
    }
}
