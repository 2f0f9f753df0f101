//! The accounting journal of a period: a CSV a spreadsheet or an accounting tool imports
//! without edits. One line per paid attempt of a row (`date`, `batch`, `balance_currency`,
//! `debit_amount`, the group column when there is one, `product`, `reference`, `order_id`),
//! then one total line per balance currency: `reference` is `TOTAL`, `date`, `batch` and the
//! rest blank. Amounts are plain decimals (`.`, the currency's decimals, no grouping); every
//! cell is written as the result file writes it ([`result_cell`]: formulas neutralised,
//! control characters shown). Written atomically with mode 0600 (a [`PrivateFile`]).

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::batch::output::{PrivateFile, result_cell};
use crate::money::display_amount;

/// The `reference` of a total line.
pub const TOTAL: &str = "TOTAL";

/// One paid attempt of a row, as the journal books it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalLine<'a> {
    /// When it completed (RFC 3339): its UTC date is written.
    pub completed_at: &'a str,
    pub batch: &'a str,
    pub currency: &'a str,
    /// What left the balance, as the ledger recorded it.
    pub amount: &'a str,
    /// The value of the group column (empty without one).
    pub group: &'a str,
    pub product: &'a str,
    pub reference: &'a str,
    pub order_id: &'a str,
}

/// The journal being written; [`Journal::finish`] adds the totals and puts it in place.
pub struct Journal {
    file: PrivateFile,
    csv: csv::Writer<BufWriter<std::fs::File>>,
    group: bool,
    /// Balance currency -> (lines, total).
    totals: BTreeMap<String, (usize, Decimal)>,
}

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
        let file = PrivateFile::create(path)?;
        let mut csv =
            csv::WriterBuilder::new()
                .flexible(false)
                .from_writer(BufWriter::with_capacity(
                    256 * 1024,
                    file.file().try_clone()?,
                ));
        let mut header = vec!["date", "batch", "balance_currency", "debit_amount"];
        if let Some(g) = group {
            header.push(g);
        }
        header.extend(["product", "reference", "order_id"]);
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
        let total = self.totals.entry(line.currency.to_string()).or_default();
        total.0 += 1;
        total.1 += amount;
        let date = utc_date(line.completed_at);
        let amount = display_amount(amount, line.currency);
        self.write(&[
            &date,
            line.batch,
            line.currency,
            &amount,
            line.group,
            line.product,
            line.reference,
            line.order_id,
        ])
    }

    fn write(&mut self, cells: &[&str; 8]) -> io::Result<()> {
        for (i, cell) in cells.iter().enumerate() {
            if i == 4 && !self.group {
                continue;
            }
            self.csv
                .write_field(result_cell(cell, false).as_bytes())
                .map_err(csv_to_io)?;
        }
        self.csv.write_record(None::<&[u8]>).map_err(csv_to_io)
    }

    /// The totals per balance currency so far: (currency, lines, total).
    pub fn totals(&self) -> impl Iterator<Item = (&str, usize, Decimal)> {
        self.totals.iter().map(|(c, (n, t))| (c.as_str(), *n, *t))
    }

    /// Writes a total line per balance currency, makes the file durable and puts it in place.
    pub fn finish(mut self) -> io::Result<()> {
        let totals: Vec<(String, String)> = self
            .totals
            .iter()
            .map(|(c, (_, t))| (c.clone(), display_amount(*t, c)))
            .collect();
        for (currency, total) in &totals {
            self.write(&["", "", currency, total, "", "", TOTAL, ""])?;
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

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date("2026-11-30T23:30:00-02:00"), "2026-12-01");
        assert_eq!(utc_date("2026-11-30T10:00:00.000Z"), "2026-11-30");
    }
}
