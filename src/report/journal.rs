//! The accounting journal of a period: a CSV a spreadsheet or an accounting tool imports
//! without edits. One line per attempt of a row booked in the period (`line`, `date`,
//! `environment`, `batch`, `status`, `balance_currency`, `debit_amount`, the group column when
//! there is one, `product`, `reference`, `order_id`, `note`, `kind`, `expected_amount`,
//! `expected_currency`, `service_completed_at`), then one `total` line per environment, kind
//! and balance currency: `line` is `total`, `reference` is `TOTAL`, `date`, `batch` and the rest
//! blank. A line is of one of two kinds ([`LineKind`]): `paid`, money believed to have left the
//! balance (`line` `payment`), or `suspense` (`line` `suspense`), an order held for a person
//! (MISMATCH) or whose total could not be confirmed: what the service claimed is in
//! `debit_amount`, what the rows were expected to cost (their face value) in `expected_amount`,
//! and it is totalled apart, never with what left the balance. The date of a line is the date it
//! was booked on (the ledger's one clock of the books); the service's own `completed_at` is in
//! `service_completed_at`. Money of one environment is never added to another's: a rehearsal on
//! the simulator has its own totals. Amounts are plain decimals (`.`, the currency's decimals,
//! no grouping); every cell is written as the result file writes it ([`result_cell`]: formulas
//! neutralised, control characters shown). Written atomically with mode 0600 (a
//! [`PrivateFile`]). A path ending in `.xlsx` is written as a workbook of the same lines
//! ([`crate::batch::workbook`]): the amounts as numbers, every other cell as text.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::batch::output::{PrivateFile, result_cell};
use crate::batch::workbook::{Cell, SheetWriter, is_workbook};
use crate::file_format::FileFormat;
use crate::money::display_amount;

/// The `reference` of a total line.
pub const TOTAL: &str = "TOTAL";

/// The `line` of a paid attempt.
pub const PAYMENT_LINE: &str = "payment";

/// The `line` of a suspense line.
pub const SUSPENSE_LINE: &str = "suspense";

/// The `line` of a total line.
pub const TOTAL_LINE: &str = "total";

/// What a line of the books is: money believed to have left a balance, or money held in
/// suspense for a person (a MISMATCH order, a total not confirmed), totalled apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    Paid,
    Suspense,
}

impl LineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Paid => "paid",
            LineKind::Suspense => "suspense",
        }
    }
}

/// One attempt of a row (or the rows of one MISMATCH order), as the journal books it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalLine<'a> {
    /// The date it is booked on (`YYYY-MM-DD`), or a time (RFC 3339) whose UTC date is.
    pub completed_at: &'a str,
    /// Paid, or held in suspense.
    pub kind: LineKind,
    /// The batch's environment (`sim`, `playground`, `production`, `custom`).
    pub environment: &'a str,
    pub batch: &'a str,
    /// The row's state: `COMPLETED`, or `MISMATCH` (the service completed an order that is
    /// not the one sent: charged, for a person to check).
    pub status: &'a str,
    pub currency: &'a str,
    /// What left the balance, as the ledger recorded it; for a suspense line what the
    /// service claimed (empty when its answer does not say).
    pub amount: &'a str,
    /// For a suspense line, what its rows were expected to cost (their face value) and in
    /// which currency; empty for a paid line.
    pub expected: &'a str,
    pub expected_currency: &'a str,
    /// The service's `completed_at` of the order, as answered (empty when it said none).
    pub service_completed_at: &'a str,
    /// The value of the group column (empty without one).
    pub group: &'a str,
    pub product: &'a str,
    pub reference: &'a str,
    pub order_id: &'a str,
    /// What of a COMPLETED row's order could not be confirmed (`total not confirmed`: the
    /// amount is the order's total as answered, unchecked; `order not confirmed`; both), else
    /// empty.
    pub note: &'a str,
}

/// The journal being written; [`Journal::finish`] adds the totals and puts it in place.
pub struct Journal {
    file: PrivateFile,
    csv: Sink,
    /// The layout of the CSV: its decimal mark is the one amounts are written with.
    format: FileFormat,
    group: bool,
    /// (environment, kind, balance currency) -> (lines, total).
    totals: BTreeMap<(String, LineKind, String), (usize, Decimal)>,
}

/// What the journal is written as: CSV, or a workbook (a path ending in `.xlsx`).
enum Sink {
    Csv(Box<csv::Writer<BufWriter<std::fs::File>>>),
    Workbook(Box<SheetWriter>),
}

/// Where the group column's cell is among a line's cells.
const GROUP_CELL: usize = 7;

/// Where the amount (`debit_amount`) is among a line's cells.
const AMOUNT_CELL: usize = 6;

/// The cell of a suspense line's expected amount.
const EXPECTED_CELL: usize = 13;

fn csv_to_io(e: csv::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// The UTC date (`YYYY-MM-DD`) of a time as the ledger or the service recorded it (RFC 3339);
/// the text as it is when it is not one.
pub fn utc_date(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| t.with_timezone(&chrono::Utc).format("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| at.to_string())
}

impl Journal {
    /// Starts the journal at `path` with its header; `group` names the group column (the
    /// `--group-by` column), left out when `None`.
    pub fn create(path: &Path, group: Option<&str>) -> io::Result<Self> {
        Self::create_as(path, group, FileFormat::CSV)
    }

    /// [`Journal::create`], in the layout `format` (delimiter, byte-order mark, line ends).
    pub fn create_as(path: &Path, group: Option<&str>, format: FileFormat) -> io::Result<Self> {
        let file = PrivateFile::create(path)?;
        let mut header = vec![
            "line",
            "date",
            "environment",
            "batch",
            "status",
            "balance_currency",
            "debit_amount",
        ];
        if let Some(g) = group {
            header.push(g);
        }
        header.extend([
            "product",
            "reference",
            "order_id",
            "note",
            "kind",
            "expected_amount",
            "expected_currency",
            "service_completed_at",
        ]);
        let csv = if is_workbook(path) {
            Sink::Workbook(Box::new(SheetWriter::create(
                header.iter().map(|c| crate::text::cell(c)),
            )?))
        } else {
            let mut csv = format.writer(BufWriter::with_capacity(
                256 * 1024,
                file.file().try_clone()?,
            ))?;
            csv.write_record(header.iter().map(|c| result_cell(c, false).into_owned()))
                .map_err(csv_to_io)?;
            Sink::Csv(Box::new(csv))
        };
        Ok(Journal {
            file,
            csv,
            format,
            group: group.is_some(),
            totals: BTreeMap::new(),
        })
    }

    /// Books one line; an amount the ledger holds that is not a decimal is refused (a
    /// suspense line whose claim is unknown has none, and adds nothing to its total).
    pub fn add(&mut self, line: &JournalLine<'_>) -> io::Result<()> {
        let unknown = line.kind == LineKind::Suspense && line.amount.is_empty();
        let amount = match parse_decimal_text(line.amount) {
            Some(amount) => amount,
            None if unknown => Decimal::ZERO,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "row {} of batch {}: the ledger's debited amount `{}` is not a decimal",
                        line.reference, line.batch, line.amount
                    ),
                ));
            }
        };
        let total = self
            .totals
            .entry((
                line.environment.to_string(),
                line.kind,
                line.currency.to_string(),
            ))
            .or_default();
        total.0 += 1;
        total.1 += amount;
        let date = utc_date(line.completed_at);
        let amount = match unknown {
            true => String::new(),
            false => display_amount(amount, line.currency),
        };
        let expected = match parse_decimal_text(line.expected) {
            Some(e) => display_amount(e, line.expected_currency),
            None => line.expected.to_string(),
        };
        let what = match line.kind {
            LineKind::Paid => PAYMENT_LINE,
            LineKind::Suspense => SUSPENSE_LINE,
        };
        self.write(&[
            what,
            &date,
            line.environment,
            line.batch,
            line.status,
            line.currency,
            &amount,
            line.group,
            line.product,
            line.reference,
            line.order_id,
            line.note,
            line.kind.as_str(),
            &expected,
            line.expected_currency,
            line.service_completed_at,
        ])
    }

    /// Writes one line; `cells` in the header's order, the group column's cell included.
    fn write(&mut self, cells: &[&str; 16]) -> io::Result<()> {
        let group = self.group;
        let kept = cells
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != GROUP_CELL || group);
        let csv = match &mut self.csv {
            Sink::Csv(csv) => csv,
            Sink::Workbook(sheet) => {
                let shown: Vec<(usize, std::borrow::Cow<str>)> =
                    kept.map(|(i, c)| (i, crate::text::cell(c))).collect();
                return sheet.write(shown.iter().map(|(i, c)| {
                    if *i == AMOUNT_CELL || (*i == EXPECTED_CELL && !c.is_empty()) {
                        Cell::Amount(c)
                    } else {
                        Cell::Text(c)
                    }
                }));
            }
        };
        for (i, cell) in kept {
            // Amounts with the layout's decimal mark (`19,60` for a decimal-comma input).
            let cell = match i == AMOUNT_CELL || i == EXPECTED_CELL {
                true => self.format.amount(cell),
                false => std::borrow::Cow::Borrowed(*cell),
            };
            csv.write_field(result_cell(&cell, false).as_bytes())
                .map_err(csv_to_io)?;
        }
        csv.write_record(None::<&[u8]>).map_err(csv_to_io)
    }

    /// The totals per environment, kind and balance currency so far: (environment, kind,
    /// currency, lines, total).
    pub fn totals(&self) -> impl Iterator<Item = (&str, LineKind, &str, usize, Decimal)> {
        self.totals
            .iter()
            .map(|((e, k, c), (n, t))| (e.as_str(), *k, c.as_str(), *n, *t))
    }

    /// Writes a total line per environment, kind (paid first) and balance currency, makes the
    /// file durable and puts it in place.
    pub fn finish(mut self) -> io::Result<()> {
        let mut totals: Vec<(LineKind, String, String, String)> = self
            .totals
            .iter()
            .map(|((e, k, c), (_, t))| (*k, e.clone(), c.clone(), display_amount(*t, c)))
            .collect();
        totals.sort();
        for (kind, environment, currency, total) in &totals {
            self.write(&[
                TOTAL_LINE,
                "",
                environment,
                "",
                "",
                currency,
                total,
                "",
                "",
                TOTAL,
                "",
                "",
                kind.as_str(),
                "",
                "",
                "",
            ])?;
        }
        match self.csv {
            Sink::Csv(csv) => {
                let mut buf = csv
                    .into_inner()
                    .map_err(|e| io::Error::other(e.to_string()))?;
                buf.flush()?;
            }
            Sink::Workbook(sheet) => {
                let mut out = BufWriter::new(self.file.file().try_clone()?);
                sheet.finish(&mut out)?;
                out.flush()?;
            }
        }
        self.file.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(environment: &'a str, reference: &'a str, amount: &'a str) -> JournalLine<'a> {
        JournalLine {
            completed_at: "2026-10-15T12:00:00.000Z",
            kind: LineKind::Paid,
            environment,
            batch: "b",
            status: "COMPLETED",
            currency: "USD",
            amount,
            expected: "",
            expected_currency: "",
            service_completed_at: "2026-10-15T11:59:00Z",
            group: "",
            product: "AMZ-US",
            reference,
            order_id: "ord_1",
            note: "",
        }
    }

    #[test]
    fn totals_are_per_environment_and_kind_and_suspense_is_never_added_to_what_was_paid() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("j.csv");
        let mut journal = Journal::create(&path, None).expect("created");
        journal.add(&line("sim", "TOTAL", "9.80")).expect("booked");
        journal
            .add(&line("production", "R-1", "10.00"))
            .expect("booked");
        journal
            .add(&JournalLine {
                kind: LineKind::Suspense,
                note: "total not confirmed",
                expected: "10",
                expected_currency: "USD",
                ..line("sim", "R-2", "0.20")
            })
            .expect("booked");
        journal
            .add(&JournalLine {
                kind: LineKind::Suspense,
                status: "MISMATCH",
                note: "the answer does not say what it cost",
                ..line("sim", "R-3", "")
            })
            .expect("booked");
        journal.finish().expect("written");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "line,date,environment,batch,status,balance_currency,debit_amount,product,reference,order_id,note,kind,expected_amount,expected_currency,service_completed_at",
                "payment,2026-10-15,sim,b,COMPLETED,USD,9.80,AMZ-US,TOTAL,ord_1,,paid,,,2026-10-15T11:59:00Z",
                "payment,2026-10-15,production,b,COMPLETED,USD,10.00,AMZ-US,R-1,ord_1,,paid,,,2026-10-15T11:59:00Z",
                "suspense,2026-10-15,sim,b,COMPLETED,USD,0.20,AMZ-US,R-2,ord_1,total not confirmed,suspense,10.00,USD,2026-10-15T11:59:00Z",
                "suspense,2026-10-15,sim,b,MISMATCH,USD,,AMZ-US,R-3,ord_1,the answer does not say what it cost,suspense,,,2026-10-15T11:59:00Z",
                "total,,production,,,USD,10.00,,TOTAL,,,paid,,,",
                "total,,sim,,,USD,9.80,,TOTAL,,,paid,,,",
                "total,,sim,,,USD,0.20,,TOTAL,,,suspense,,,",
            ]
        );
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date("2026-11-30T23:30:00-02:00"), "2026-12-01");
        assert_eq!(utc_date("2026-11-30T10:00:00.000Z"), "2026-11-30");
    }
}
