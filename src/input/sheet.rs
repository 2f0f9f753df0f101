//! Reading a batch from a workbook (`.xlsx`, `.ods`): one sheet, the first or the one named,
//! read as records of text cells, as the CSV reader yields them, so every later stage is the
//! same for both.
//!
//! A cell becomes the text a CSV export would hold: text as written (trimmed), a number as the
//! shortest decimal its value stands for (`10.99`, never `10.9900000001`: Rust's shortest
//! round-trip form, then read as a decimal, never computed in floating point), a boolean as
//! `TRUE` or `FALSE`. An amount cell (`face_value`) that holds a date or a formula is refused
//! with its address (`C14`): a formula's result is whatever the spreadsheet last computed, and
//! a date is not an amount. A cell that holds an error (`#N/A`) is refused wherever it is.
//!
//! An `.xlsx` sheet is read as a stream of cells on a thread of its own, a bounded number of
//! records ahead, so a sheet of any length costs the memory of a few rows; an `.ods` sheet is
//! read whole (the format has no streaming reader).

use std::fs::File;
use std::io::{self, BufReader, Seek};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use calamine::{Data, DataRef, Ods, Reader, Xlsx, open_workbook};
use sha2::{Digest, Sha256};

use super::columns::{ColumnMap, canonical_column};
use super::problem::Problem;
pub use super::problem::{column_letters, sheet_reference};
use super::record::{MAX_FIELD_BYTES, RawRecord};

/// Records read ahead of the one asked for.
const AHEAD: usize = 256;

/// The kinds of workbook read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workbook {
    Xlsx,
    Ods,
}

impl Workbook {
    /// The kind of workbook `path` names by its extension (any case); `None` for anything else,
    /// which is read as CSV.
    pub fn of(path: &Path) -> Option<Workbook> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "xlsx" | "xlsm" => Some(Workbook::Xlsx),
            "ods" => Some(Workbook::Ods),
            _ => None,
        }
    }
}

/// What the reading thread hands on.
enum Message {
    /// The header, read first: its names, where the known columns are, its row, and the
    /// SHA-256 (hex) of the file's bytes.
    Header {
        sheet: String,
        headers: Vec<String>,
        columns: ColumnMap,
        line: u64,
        hash: String,
    },
    Record(Result<RawRecord, Problem>),
}

/// A streaming reader of one sheet of a workbook.
pub struct SheetReader {
    sheet: String,
    headers: Vec<String>,
    columns: ColumnMap,
    hash: String,
    records: Receiver<Message>,
    pending: Option<Result<RawRecord, Problem>>,
}

impl std::fmt::Debug for SheetReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SheetReader")
            .field("sheet", &self.sheet)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl SheetReader {
    /// Opens the sheet `sheet` (the first when `None`) of the workbook at `path`.
    pub fn open(path: &Path, kind: Workbook, sheet: Option<&str>) -> Result<Self, Problem> {
        let (to_reader, records) = sync_channel(AHEAD);
        let path_owned = path.to_path_buf();
        let sheet_owned = sheet.map(str::to_string);
        std::thread::Builder::new()
            .name("paybatch-sheet".into())
            .spawn(move || {
                let out = Out(to_reader);
                if let Err(p) = read_workbook(&path_owned, kind, sheet_owned.as_deref(), &out) {
                    out.send(Message::Record(Err(p)));
                }
            })
            .map_err(|e| Problem::file(0, format!("cannot start reading the workbook: {e}")))?;
        let (sheet, headers, columns, line, hash) = match records.recv() {
            Ok(Message::Header {
                sheet,
                headers,
                columns,
                line,
                hash,
            }) => (sheet, headers, columns, line, hash),
            Ok(Message::Record(Err(p))) => return Err(p),
            Ok(Message::Record(Ok(_))) | Err(_) => {
                return Err(Problem::file(0, "the workbook could not be read"));
            }
        };
        let pending = match records.recv() {
            Ok(Message::Record(first)) => first,
            _ => {
                return Err(Problem::file(line, "the sheet has a header but no rows")
                    .with_help("add one row per payout below the header"));
            }
        };
        Ok(SheetReader {
            sheet,
            headers,
            columns,
            hash,
            records,
            pending: Some(pending),
        })
    }

    /// The name of the sheet read.
    pub fn sheet(&self) -> &str {
        &self.sheet
    }

    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    pub fn columns(&self) -> &ColumnMap {
        &self.columns
    }

    /// The next record; `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<RawRecord, Problem>> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        match self.records.recv() {
            Ok(Message::Record(r)) => Some(r),
            Ok(Message::Header { .. }) | Err(_) => None,
        }
    }

    /// The SHA-256 (hex) of the workbook's bytes, as read when it was opened.
    pub fn finish(self) -> String {
        self.hash
    }
}

/// The sending side: `false` once the reader is gone (the thread then stops).
struct Out(SyncSender<Message>);

impl Out {
    fn send(&self, m: Message) -> bool {
        self.0.send(m).is_ok()
    }
}

/// A cell's value, as the reading needs it.
enum Value {
    Empty,
    Text(String),
    Number(String),
    Bool(bool),
    Date(String),
    Error(String),
}

impl Value {
    fn of_ref(v: DataRef<'_>) -> Value {
        match v {
            DataRef::Empty => Value::Empty,
            DataRef::String(s) => Value::Text(s),
            DataRef::SharedString(s) => Value::Text(s.to_string()),
            DataRef::Int(i) => Value::Number(i.to_string()),
            DataRef::Float(f) => Value::Number(format!("{f}")),
            DataRef::Bool(b) => Value::Bool(b),
            DataRef::DateTime(d) => Value::Date(d.to_string()),
            DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => Value::Date(s),
            DataRef::Error(e) => Value::Error(e.to_string()),
        }
    }

    fn of_data(v: &Data) -> Value {
        match v {
            Data::Empty => Value::Empty,
            Data::String(s) => Value::Text(s.clone()),
            Data::Int(i) => Value::Number(i.to_string()),
            Data::Float(f) => Value::Number(format!("{f}")),
            Data::Bool(b) => Value::Bool(*b),
            Data::DateTime(d) => Value::Date(d.to_string()),
            Data::DateTimeIso(s) | Data::DurationIso(s) => Value::Date(s.clone()),
            Data::Error(e) => Value::Error(e.to_string()),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Value::Empty => true,
            Value::Text(s) => s.trim().is_empty(),
            _ => false,
        }
    }
}

/// Hashes the file's bytes, then reads the sheet from the same open file.
fn read_workbook(
    path: &Path,
    kind: Workbook,
    sheet: Option<&str>,
    out: &Out,
) -> Result<(), Problem> {
    let cannot = |e: &dyn std::fmt::Display| {
        Problem::file(0, format!("cannot open `{}`: {e}", path.display())).with_help(
            "check the path, and that the file is a workbook readable by the user running paybatch",
        )
    };
    let mut file = File::open(path).map_err(|e| cannot(&e))?;
    let mut digest = Sha256::new();
    io::copy(&mut file, &mut digest).map_err(|e| cannot(&e))?;
    let hash = hex::encode(digest.finalize());
    file.rewind().map_err(|e| cannot(&e))?;
    let mut cells = Cells::new(out, hash);
    match kind {
        Workbook::Xlsx => {
            let mut book: Xlsx<_> = Xlsx::new(BufReader::new(file)).map_err(|e| cannot(&e))?;
            let name = chosen_sheet(&book.sheet_names(), sheet)?;
            cells.sheet = name.clone();
            let mut reader = book.worksheet_cells_reader(&name).map_err(|e| cannot(&e))?;
            loop {
                let next = reader.next_cell_with_formula().map_err(|e| cannot(&e))?;
                let Some(cell) = next else { break };
                let value = Value::of_ref(cell.value);
                if !cells.cell(cell.pos, value, cell.formula)? {
                    return Ok(());
                }
            }
        }
        Workbook::Ods => {
            drop(file);
            let mut book: Ods<_> = open_workbook(path).map_err(|e| cannot(&e))?;
            let name = chosen_sheet(&book.sheet_names(), sheet)?;
            cells.sheet = name.clone();
            let range = book.worksheet_range(&name).map_err(|e| cannot(&e))?;
            let formulas = book.worksheet_formula(&name).map_err(|e| cannot(&e))?;
            for (row, col, value) in range.used_cells() {
                let (r, c) = (
                    row as u32 + range.start().map_or(0, |s| s.0),
                    col as u32 + range.start().map_or(0, |s| s.1),
                );
                let formula = formulas
                    .get_value((r, c))
                    .filter(|f| !f.is_empty())
                    .cloned();
                if !cells.cell((r, c), Value::of_data(value), formula)? {
                    return Ok(());
                }
            }
        }
    }
    cells.end();
    Ok(())
}

/// The sheet asked for, or the first; a name the workbook does not have is refused with the
/// names it has.
fn chosen_sheet(names: &[String], asked: Option<&str>) -> Result<String, Problem> {
    match asked {
        None => names.first().cloned().ok_or_else(|| {
            Problem::file(0, "the workbook has no sheet").with_help("add a sheet with the rows")
        }),
        Some(a) => names
            .iter()
            .find(|n| n.as_str() == a)
            .cloned()
            .ok_or_else(|| {
                let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                Problem::file(0, format!("the workbook has no sheet named `{a}`")).with_help(
                    format!("its sheets are {}: name one with --sheet", list.join(", ")),
                )
            }),
    }
}

/// Cells in row order, made into the header and then records.
struct Cells<'a> {
    out: &'a Out,
    hash: String,
    sheet: String,
    /// The header once read: its width and where `face_value` is.
    header: Option<(usize, usize)>,
    /// The header's names, to name the column of a problem.
    names: Vec<String>,
    /// The row being gathered (0-based) and its cells.
    row: Option<u32>,
    values: Vec<(u32, Value, Option<String>)>,
}

impl<'a> Cells<'a> {
    fn new(out: &'a Out, hash: String) -> Self {
        Cells {
            out,
            hash,
            sheet: String::new(),
            header: None,
            names: Vec::new(),
            row: None,
            values: Vec::new(),
        }
    }

    /// Takes one cell; `Ok(false)` once the reader is gone.
    fn cell(
        &mut self,
        pos: (u32, u32),
        value: Value,
        formula: Option<String>,
    ) -> Result<bool, Problem> {
        if self.row != Some(pos.0) {
            if !self.flush()? {
                return Ok(false);
            }
            self.row = Some(pos.0);
        }
        if !value.is_empty() || formula.is_some() {
            self.values.push((pos.1, value, formula));
        }
        Ok(true)
    }

    /// Hands on the row gathered: the header first, then records; a blank row is skipped.
    fn flush(&mut self) -> Result<bool, Problem> {
        let Some(row) = self.row else {
            return Ok(true);
        };
        let values = std::mem::take(&mut self.values);
        if values.is_empty() {
            return Ok(true);
        }
        let line = u64::from(row) + 1;
        match self.header {
            None => self.header_row(line, values),
            Some((width, amount)) => {
                let record = self.record(line, values, width, amount);
                Ok(self.out.send(Message::Record(record)))
            }
        }
    }

    fn header_row(
        &mut self,
        line: u64,
        values: Vec<(u32, Value, Option<String>)>,
    ) -> Result<bool, Problem> {
        let width = values.last().map_or(0, |v| v.0 as usize + 1);
        let mut headers = vec![String::new(); width];
        for (col, value, _) in values {
            headers[col as usize] = text_of(value).trim().to_string();
        }
        let columns = ColumnMap::from_headers(&headers, line)?;
        self.header = Some((width, columns.face_value));
        self.names = headers.clone();
        Ok(self.out.send(Message::Header {
            sheet: self.sheet.clone(),
            headers,
            columns,
            line,
            hash: self.hash.clone(),
        }))
    }

    /// One record of `width` cells, or the first problem of its cells.
    fn record(
        &self,
        line: u64,
        values: Vec<(u32, Value, Option<String>)>,
        width: usize,
        amount: usize,
    ) -> Result<RawRecord, Problem> {
        let mut fields = vec![String::new(); width];
        for (col, value, formula) in values {
            let index = col as usize;
            let at = |message: String| self.problem(line, index, message);
            if index >= width {
                return Err(at(format!(
                    "this row has a cell beyond the header's {width} columns"
                ))
                .with_help("remove it, or name its column in the header row"));
            }
            if let Value::Error(e) = &value {
                return Err(at(format!("the cell holds the error {e}"))
                    .with_help("correct the cell, or the formula that gives it"));
            }
            if index == amount {
                if let Some(f) = formula {
                    return Err(at(format!("the amount is a formula (={f})")).with_help(
                        "an amount must be typed, not computed: paste the values in place of \
                         the formulas (Paste Special > Values)",
                    ));
                }
                if let Value::Date(d) = &value {
                    return Err(at(format!("the amount is a date ({d})"))
                        .with_help("format the column as a number (or text) and type the amount"));
                }
            }
            let text = text_of(value);
            if text.len() > MAX_FIELD_BYTES {
                return Err(at(format!(
                    "this cell is {} bytes long; the limit is {} KiB",
                    text.len(),
                    MAX_FIELD_BYTES / 1024
                )));
            }
            if let Some(c) = text.trim().chars().find(|c| c.is_control() && *c != '\t') {
                return Err(at(format!(
                    "the control character `{}` in the cell",
                    c.escape_default()
                ))
                .with_help(
                    "remove it: a cell may not hold control characters other than the tab",
                ));
            }
            fields[index] = text.trim().to_string();
        }
        Ok(RawRecord { line, fields })
    }

    /// A problem of the cell at `line` and 0-based `index`, named by sheet and address.
    fn problem(&self, line: u64, index: usize, message: String) -> Problem {
        let name = self
            .names
            .get(index)
            .map_or("", |h| canonical_column(h).unwrap_or(h));
        Problem::at(line, index, name, message).in_sheet(&self.sheet)
    }

    /// The last row.
    fn end(&mut self) {
        let _ = self
            .flush()
            .map_err(|p| self.out.send(Message::Record(Err(p))));
        if self.header.is_none() {
            self.out
                .send(Message::Record(Err(Problem::file(1, "the sheet is empty")
                    .in_sheet(&self.sheet)
                    .with_help(
                        "the first row must be a header naming the columns, e.g. `reference`, \
                 `product_code`, `face_value`, `currency`, `email`, then one row per payout",
                    ))));
        }
    }
}

/// The text a cell stands for.
fn text_of(value: Value) -> String {
    match value {
        Value::Empty => String::new(),
        Value::Text(s) | Value::Number(s) | Value::Date(s) | Value::Error(s) => s,
        Value::Bool(true) => "TRUE".into(),
        Value::Bool(false) => "FALSE".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_sheets_are_named_as_a_spreadsheet_names_them() {
        assert_eq!(column_letters(0), "A");
        assert_eq!(column_letters(2), "C");
        assert_eq!(column_letters(25), "Z");
        assert_eq!(column_letters(26), "AA");
        assert_eq!(column_letters(27), "AB");
        assert_eq!(column_letters(701), "ZZ");
        assert_eq!(column_letters(702), "AAA");
        assert_eq!(sheet_reference("Sheet1"), "Sheet1");
        assert_eq!(sheet_reference("Nov payouts"), "'Nov payouts'");
        assert_eq!(sheet_reference("Bob's"), "'Bob''s'");
        assert_eq!(Workbook::of(Path::new("a/b.XLSX")), Some(Workbook::Xlsx));
        assert_eq!(Workbook::of(Path::new("b.ods")), Some(Workbook::Ods));
        assert_eq!(Workbook::of(Path::new("b.csv")), None);
    }
}
