//! The accounting journal of a period: a CSV a spreadsheet or an accounting tool imports
//! without edits. One `payment` line per paid attempt of a row (`line`, `date`,
//! `environment`, `batch`, `status`, `balance_currency`, `debit_amount`, the group column when
//! there is one, `product`, `reference`, `order_id`, `note`), then one `total` line per environment and
//! balance currency: `line` is `total`, `reference` is `TOTAL`, `date`, `batch` and the rest
//! blank. Money of one environment is never added to another's: a rehearsal on the simulator
//! has its own totals. Amounts are plain decimals (`.`, the currency's decimals, no grouping); every
//! cell is written as the result file writes it ([`result_cell`]: formulas neutralised,
//! control characters shown). Written atomically with mode 0600 (a [`PrivateFile`]).

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::batch::output::{PrivateFile, result_cell};
use crate::file_format::FileFormat;
use crate::money::display_amount;

/// The `reference` of a total line.
pub const TOTAL: &str = "TOTAL";

/// The `line` of a paid attempt.
pub const PAYMENT_LINE: &str = "payment";

/// The `line` of a total line.
pub const TOTAL_LINE: &str = "total";

/// One paid attempt of a row, as the journal books it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalLine<'a> {
    /// When it completed (RFC 3339): its UTC date is written.
    pub completed_at: &'a str,
    /// The batch's environment (`sim`, `playground`, `production`, `custom`).
    pub environment: &'a str,
    pub batch: &'a str,
    /// The row's state: `COMPLETED`, or `MISMATCH` (the service completed an order that is
    /// not the one sent: charged, for a person to check).
    pub status: &'a str,
    pub currency: &'a str,
    /// What left the balance, as the ledger recorded it.
    pub amount: &'a str,
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
    csv: csv::Writer<BufWriter<std::fs::File>>,
    group: bool,
    /// (environment, balance currency) -> (lines, total).
    totals: BTreeMap<(String, String), (usize, Decimal)>,
}

/// Where the group column's cell is among a line's cells.
const GROUP_CELL: usize = 7;

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
        let mut csv = format.writer(BufWriter::with_capacity(
            256 * 1024,
            file.file().try_clone()?,
        ))?;
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
        header.extend(["product", "reference", "order_id", "note"]);
        csv.write_record(header.iter().map(|c| result_cell(c, false).into_owned()))
            .map_err(csv_to_io)?;
        Ok(Journal {
            file,
            csv,
            group: group.is_some(),
            totals: BTreeMap::new(),
        })
    }

    /// Books one paid attempt; an amount the ledger holds that is not a decimal is refused.
    pub fn add(&mut self, line: &JournalLine<'_>) -> io::Result<()> {
        let amount = parse_decimal_text(line.amount).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "row {} of batch {}: the ledger's debited amount `{}` is not a decimal",
                    line.reference, line.batch, line.amount
                ),
            )
        })?;
        let total = self
            .totals
            .entry((line.environment.to_string(), line.currency.to_string()))
            .or_default();
        total.0 += 1;
        total.1 += amount;
        let date = utc_date(line.completed_at);
        let amount = display_amount(amount, line.currency);
        self.write(&[
            PAYMENT_LINE,
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
        ])
    }

    /// Writes one line; `cells` in the header's order, the group column's cell included.
    fn write(&mut self, cells: &[&str; 12]) -> io::Result<()> {
        for (i, cell) in cells.iter().enumerate() {
            if i == GROUP_CELL && !self.group {
                continue;
            }
            self.csv
                .write_field(result_cell(cell, false).as_bytes())
                .map_err(csv_to_io)?;
        }
        self.csv.write_record(None::<&[u8]>).map_err(csv_to_io)
    }

    /// The totals per environment and balance currency so far: (environment, currency,
    /// lines, total).
    pub fn totals(&self) -> impl Iterator<Item = (&str, &str, usize, Decimal)> {
        self.totals
            .iter()
            .map(|((e, c), (n, t))| (e.as_str(), c.as_str(), *n, *t))
    }

    /// Writes a total line per environment and balance currency, makes the file durable and
    /// puts it in place.
    pub fn finish(mut self) -> io::Result<()> {
        let totals: Vec<(String, String, String)> = self
            .totals
            .iter()
            .map(|((e, c), (_, t))| (e.clone(), c.clone(), display_amount(*t, c)))
            .collect();
        for (environment, currency, total) in &totals {
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
            ])?;
        }
        let mut buf = self
            .csv
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?;
        buf.flush()?;
        self.file.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(environment: &'a str, reference: &'a str, amount: &'a str) -> JournalLine<'a> {
        JournalLine {
            completed_at: "2026-10-15T12:00:00.000Z",
            environment,
            batch: "b",
            status: "COMPLETED",
            currency: "USD",
            amount,
            group: "",
            product: "AMZ-US",
            reference,
            order_id: "ord_1",
            note: "",
        }
    }

    #[test]
    fn totals_are_per_environment_and_a_total_line_is_marked_as_one() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("j.csv");
        let mut journal = Journal::create(&path, None).expect("created");
        journal.add(&line("sim", "TOTAL", "9.80")).expect("booked");
        journal
            .add(&line("production", "R-1", "10.00"))
            .expect("booked");
        journal
            .add(&JournalLine {
                note: "total not confirmed",
                ..line("sim", "R-2", "0.20")
            })
            .expect("booked");
        journal.finish().expect("written");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "line,date,environment,batch,status,balance_currency,debit_amount,product,reference,order_id,note",
                "payment,2026-10-15,sim,b,COMPLETED,USD,9.80,AMZ-US,TOTAL,ord_1,",
                "payment,2026-10-15,production,b,COMPLETED,USD,10.00,AMZ-US,R-1,ord_1,",
                "payment,2026-10-15,sim,b,COMPLETED,USD,0.20,AMZ-US,R-2,ord_1,total not confirmed",
                "total,,production,,,USD,10.00,,TOTAL,,",
                "total,,sim,,,USD,10.00,,TOTAL,,",
            ]
        );
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date("2026-11-30T23:30:00-02:00"), "2026-12-01");
        assert_eq!(utc_date("2026-11-30T10:00:00.000Z"), "2026-11-30");
    }
}
