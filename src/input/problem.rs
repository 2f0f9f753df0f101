//! A problem of a batch file, located as precisely as possible (line, column, value), with what
//! was expected and what to do; and the bounded list of a file's problems. Shared by the reader
//! and its columns, the row rules (`row`, `validator`, `catalog_rules`) and everything that
//! reports them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// Something wrong with the batch file, located as precisely as possible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based line where the record starts; 0 when the problem concerns the file as a whole.
    pub line: u64,
    /// 1-based field index.
    pub column: Option<usize>,
    /// The column's name: the canonical name for the columns paybatch knows
    /// (`face_value` even when the header says `amount`), else the header as written.
    pub column_name: Option<String>,
    /// The offending value, as written (trimmed).
    pub value: Option<Box<str>>,
    /// What is wrong, and what was expected.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
    /// The sheet of a workbook the problem is in: it is then located as a spreadsheet names
    /// a cell (`Sheet1!C14`), its line being the sheet's row.
    /// (Boxed: a problem stays as small as it was for the CSV files that have no sheet.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sheet: Option<Box<String>>,
}

impl Problem {
    /// A problem with a line (or the file, line 0) but no particular column.
    /// A problem of the whole file (encoding, header, emptiness) rather than of one row:
    /// `--skip-invalid` cannot help with it.
    pub fn is_file_level(&self) -> bool {
        self.column.is_none() && self.line <= 1
    }

    pub fn file(line: u64, message: impl Into<String>) -> Self {
        Problem {
            line,
            column: None,
            column_name: None,
            value: None,
            message: concealed(message.into()),
            help: None,
            sheet: None,
        }
    }

    /// The same problem, in the sheet `sheet` of a workbook.
    pub fn in_sheet(mut self, sheet: &str) -> Self {
        self.sheet = Some(Box::new(concealed(sheet.to_string())));
        self
    }

    /// Where the problem is: `line 4, column 3`, or in a sheet `Sheet1!C4` (`Sheet1 row 4`
    /// for a whole row); empty for the file as a whole.
    pub fn place(&self) -> String {
        match (&self.sheet, self.line, self.column) {
            (Some(sheet), 0, _) => format!("sheet {}", show(sheet)),
            (Some(sheet), l, Some(c)) => format!(
                "{}!{}{l}",
                show(&sheet_reference(sheet)),
                column_letters(c - 1)
            ),
            (Some(sheet), l, None) => {
                format!("{} row {l}", show(&sheet_reference(sheet)))
            }
            (None, 0, None) => String::new(),
            (None, 0, Some(c)) => format!("column {c}"),
            (None, l, None) => format!("line {l}"),
            (None, l, Some(c)) => format!("line {l}, column {c}"),
        }
    }

    /// A problem in the column at 0-based `index`, named `name`.
    pub fn at(line: u64, index: usize, name: &str, message: impl Into<String>) -> Self {
        Problem {
            line,
            column: Some(index + 1),
            column_name: Some(concealed(name.to_string())),
            value: None,
            message: concealed(message.into()),
            help: None,
            sheet: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(concealed(help.into()));
        self
    }

    pub fn with_value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(concealed(value.into()).into_boxed_str());
        self
    }
}

/// The column letters of the 0-based column `index`, as a spreadsheet names it (`A`, `Z`,
/// `AA`).
pub fn column_letters(index: usize) -> String {
    let mut n = index + 1;
    let mut letters = Vec::new();
    while n > 0 {
        let rem = (n - 1) % 26;
        letters.push(b'A' + rem as u8);
        n = (n - 1) / 26;
    }
    letters.reverse();
    String::from_utf8(letters).unwrap_or_default()
}

/// A sheet's name as a formula names it: quoted (`'My sheet'`) when it is not letters, digits
/// and `_` only, a quote in it doubled.
pub fn sheet_reference(sheet: &str) -> String {
    if !sheet.is_empty() && sheet.chars().all(|c| c.is_alphanumeric() || c == '_') {
        sheet.to_string()
    } else {
        format!("'{}'", sheet.replace('\'', "''"))
    }
}

/// `text` with what is or looks like an API key in it hidden ([`crate::api::key::conceal`]).
/// Every text of a problem goes through it where the problem is made: its message, help, value
/// and column name echo the file.
fn concealed(text: String) -> String {
    match crate::api::key::conceal(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(shown) => shown,
    }
}

impl fmt::Display for Problem {
    /// `line 4, column 3 (face_value): message`, then `  help: ...` on a second line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = self.place();
        f.write_str(&place)?;
        if let Some(name) = self.column_name.as_ref().filter(|n| !n.is_empty()) {
            write!(f, " ({})", show(name))?;
        }
        if !place.is_empty() {
            f.write_str(": ")?;
        }
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problem {}

/// Problems kept of each kind (see [`Problems`]).
pub const KEPT_PER_KIND: usize = 10;
/// Problems kept in all (see [`Problems`]).
pub const KEPT: usize = 50;

/// The problems of a file, in bounded memory whatever its size: the first [`KEPT_PER_KIND`] of
/// each kind (the column a problem is in, or `row` for a row as a whole), [`KEPT`] in all, in
/// file order; and how many there are of each kind. A file of a million bad rows costs the same
/// as one of a hundred, and its report stays short enough to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems {
    /// The problems kept, in file order.
    pub shown: Vec<Problem>,
    /// Every problem, counted per kind.
    pub per_kind: BTreeMap<String, usize>,
    /// Every problem, counted.
    pub total: usize,
    /// Whether every problem concerns the file as a whole ([`Problem::is_file_level`]).
    file_level_only: bool,
}

impl Problems {
    /// The kind a problem is counted under: its column's name, or `row`.
    pub fn kind(p: &Problem) -> &str {
        p.column_name.as_deref().unwrap_or("row")
    }

    pub fn push(&mut self, p: Problem) {
        if self.total == 0 {
            self.file_level_only = true;
        }
        self.total += 1;
        self.file_level_only &= p.is_file_level();
        let n = match self.per_kind.get_mut(Self::kind(&p)) {
            Some(n) => n,
            None => self.per_kind.entry(Self::kind(&p).to_string()).or_default(),
        };
        *n += 1;
        if *n <= KEPT_PER_KIND && self.shown.len() < KEPT {
            self.shown.push(p);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn len(&self) -> usize {
        self.total
    }

    /// Problems counted but not kept.
    pub fn omitted(&self) -> usize {
        self.total - self.shown.len()
    }

    /// Whether there are problems and every one concerns the file as a whole.
    pub fn all_file_level(&self) -> bool {
        self.total > 0 && self.file_level_only
    }
}

impl Extend<Problem> for Problems {
    fn extend<T: IntoIterator<Item = Problem>>(&mut self, iter: T) {
        for p in iter {
            self.push(p);
        }
    }
}

impl FromIterator<Problem> for Problems {
    fn from_iter<T: IntoIterator<Item = Problem>>(iter: T) -> Self {
        let mut all = Problems::default();
        all.extend(iter);
        all
    }
}

/// A value quoted in a message: an API key, or what looks like one, hidden
/// ([`crate::api::key::conceal`]); cut to 60 characters, control characters escaped
/// ([`crate::text::escape`]).
pub fn show(value: &str) -> String {
    const MAX: usize = 60;
    let value = &*crate::api::key::conceal(value);
    match value.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", crate::text::escape(&value[..end])),
        None => crate::text::escape(value).into_owned(),
    }
}

/// A value quoted in a message, as [`show`] shows it, in backticks.
pub(super) fn quoted(value: &str) -> String {
    format!("`{}`", show(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_kept_bounded_the_first_of_each_kind_and_counted() {
        let mut all = Problems::default();
        for line in 2..100_002u64 {
            let column = ["face_value", "email", "face_value", "face_value"][(line % 4) as usize];
            all.push(Problem::at(line, 2, column, "bad"));
        }
        all.push(Problem::file(
            100_002,
            "this row has 3 fields but the header has 4",
        ));
        assert_eq!(all.len(), 100_001);
        assert_eq!(all.per_kind["face_value"], 75_000);
        assert_eq!(all.per_kind["email"], 25_000);
        assert_eq!(all.per_kind["row"], 1);
        assert_eq!(all.shown.len(), 2 * KEPT_PER_KIND + 1);
        assert_eq!(all.omitted(), 100_001 - all.shown.len());
        // In file order, the first of each kind.
        assert_eq!(all.shown[0].line, 2);
        assert!(all.shown.windows(2).all(|w| w[0].line < w[1].line));
        assert!(!all.all_file_level());
        // Never more than KEPT, however many kinds.
        let many: Problems = (0..1000)
            .map(|k| Problem::at(2, k, &format!("c{k}"), "bad"))
            .collect();
        assert_eq!(many.shown.len(), KEPT);
        assert_eq!(many.per_kind.len(), 1000);
    }

    #[test]
    fn values_in_messages_are_escaped_and_cut() {
        assert_eq!(show("a\nb"), "a\\nb");
        assert_eq!(show(&"x".repeat(100)).chars().count(), 61);
    }
}
