//! A file written from a batch as a workbook (`--out FILE.xlsx`): one sheet, its header row
//! frozen, the amounts as numbers shown with their currency's decimals, every other cell as
//! text. A text cell is never a formula, whatever it starts with (`=`, `+`, `-`, `@`): it is
//! written as a string, which a spreadsheet shows and never evaluates. The rows are written
//! as they come, in constant memory (the writer keeps them in a private temporary file until
//! the workbook is put together); the workbook itself is written to the private file given
//! (mode 0600, renamed over its target once complete: [`super::output::PrivateFile`]).

use std::io;
use std::path::Path;

use rust_xlsxwriter::{Format, Workbook, Worksheet, XlsxError};

/// Whether `path` names a workbook to write (`.xlsx`, any case).
pub fn is_workbook(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("xlsx"))
}

/// A cell to write: text, or an amount (`19.60`, written as a number shown with as many
/// decimals as the text has).
pub enum Cell<'a> {
    Text(&'a str),
    Amount(&'a str),
}

/// The sheet being written.
pub struct SheetWriter {
    book: Workbook,
    sheet: Worksheet,
    row: u32,
    /// Number formats by decimals (`0`, `0.00`, `0.000`, ...), made once each.
    formats: Vec<Format>,
}

fn to_io(e: XlsxError) -> io::Error {
    io::Error::other(e.to_string())
}

impl SheetWriter {
    /// Starts the sheet with its header row, frozen.
    pub fn create(header: impl IntoIterator<Item = impl AsRef<str>>) -> io::Result<Self> {
        let mut book = Workbook::new();
        let mut sheet = book.new_worksheet_with_constant_memory().map_err(to_io)?;
        sheet.set_name("paybatch").map_err(to_io)?;
        let bold = Format::new().set_bold();
        for (i, name) in header.into_iter().enumerate() {
            let col = u16::try_from(i).map_err(|_| io::Error::other("too many columns"))?;
            sheet
                .write_string_with_format(0, col, name.as_ref(), &bold)
                .map_err(to_io)?;
        }
        sheet.set_freeze_panes(1, 0).map_err(to_io)?;
        let formats = (0..=8)
            .map(|places: usize| {
                let pattern = if places == 0 {
                    "0".to_string()
                } else {
                    format!("0.{}", "0".repeat(places))
                };
                Format::new().set_num_format(pattern)
            })
            .collect();
        Ok(SheetWriter {
            book,
            sheet,
            row: 0,
            formats,
        })
    }

    /// Adds a row.
    pub fn write<'a>(&mut self, cells: impl IntoIterator<Item = Cell<'a>>) -> io::Result<()> {
        self.row += 1;
        for (i, cell) in cells.into_iter().enumerate() {
            let col = u16::try_from(i).map_err(|_| io::Error::other("too many columns"))?;
            match cell {
                Cell::Text("") => {}
                Cell::Text(t) => {
                    self.sheet.write_string(self.row, col, t).map_err(to_io)?;
                }
                Cell::Amount(a) => self.amount(col, a)?,
            }
        }
        Ok(())
    }

    /// An amount as a number when it is a plain decimal (`19.60`, `19,60`), else as text.
    fn amount(&mut self, col: u16, text: &str) -> io::Result<()> {
        let plain = text.replace(',', ".");
        let places = plain.split_once('.').map_or(0, |(_, f)| f.len());
        let number = plain
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
            .then(|| plain.parse::<f64>().ok())
            .flatten();
        match (number, self.formats.get(places)) {
            (Some(n), Some(format)) => self
                .sheet
                .write_number_with_format(self.row, col, n, format)
                .map(|_| ())
                .map_err(to_io),
            _ if text.is_empty() => Ok(()),
            _ => self
                .sheet
                .write_string(self.row, col, text)
                .map(|_| ())
                .map_err(to_io),
        }
    }

    /// Puts the workbook together on `out`.
    pub fn finish(mut self, out: impl io::Write + io::Seek + Send) -> io::Result<()> {
        self.book.push_worksheet(self.sheet);
        self.book.save_to_writer(out).map_err(to_io)
    }
}
