//! The layout of a CSV file: the delimiter between its cells, whether it starts with a UTF-8
//! byte-order mark, and how its lines end. The reader finds the input file's
//! ([`crate::input::reader::BatchReader::format`]); the files paybatch writes from a batch (the
//! result file of `run` and `report`, the list of `payouts --list`) are written in the layout
//! chosen with `--out-format` ([`OutFormat`]), by default the input's: a spreadsheet set to `;`
//! then opens the result file as it opened the input. The ledger keeps both with the batch
//! (`batches.input_format`, `batches.result_format`), so `report` writes the same bytes `run`
//! wrote, even once the input file is gone.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The UTF-8 byte-order mark: Excel reads a CSV file as UTF-8 only when it starts with it.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How the lines of a file end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum LineEnd {
    /// `\n`: what earlier versions of paybatch wrote, and Unix tools expect.
    Lf,
    /// `\r\n`: what Excel writes.
    Crlf,
}

impl LineEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            LineEnd::Lf => "LF",
            LineEnd::Crlf => "CRLF",
        }
    }
}

/// Whether `d` can separate cells: an ASCII character that is not a letter, a digit, a quote,
/// a line break or NUL.
pub fn usable_delimiter(d: u8) -> bool {
    d.is_ascii() && !matches!(d, b'"' | b'\r' | b'\n' | 0) && !d.is_ascii_alphanumeric()
}

/// The layout of a CSV file. Its delimiter is always [`usable_delimiter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Stored", into = "Stored")]
pub struct FileFormat {
    delimiter: u8,
    bom: bool,
    line_end: LineEnd,
    /// Whether the amounts are written with a decimal comma (`19,60`).
    decimal_comma: bool,
}

/// A [`FileFormat`] as the ledger keeps it: `{"delimiter":";","bom":true,"line_end":"CRLF"}`.
#[derive(Serialize, Deserialize)]
struct Stored {
    delimiter: char,
    bom: bool,
    line_end: LineEnd,
    /// Kept only when true: a layout of a dot keeps the form earlier versions wrote.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    decimal_comma: bool,
}

impl TryFrom<Stored> for FileFormat {
    type Error = String;

    fn try_from(s: Stored) -> Result<Self, String> {
        u8::try_from(s.delimiter)
            .ok()
            .and_then(|d| FileFormat::new(d, s.bom, s.line_end))
            .map(|f| f.with_decimal_comma(s.decimal_comma))
            .ok_or_else(|| format!("`{}` cannot be a delimiter", s.delimiter.escape_default()))
    }
}

impl From<FileFormat> for Stored {
    fn from(f: FileFormat) -> Self {
        Stored {
            delimiter: char::from(f.delimiter),
            bom: f.bom,
            line_end: f.line_end,
            decimal_comma: f.decimal_comma,
        }
    }
}

impl FileFormat {
    /// `,`, LF, no BOM: what earlier versions of paybatch always wrote.
    pub const CSV: FileFormat = FileFormat {
        delimiter: b',',
        bom: false,
        line_end: LineEnd::Lf,
        decimal_comma: false,
    };

    /// `None` when `delimiter` cannot separate cells ([`usable_delimiter`]).
    pub fn new(delimiter: u8, bom: bool, line_end: LineEnd) -> Option<Self> {
        usable_delimiter(delimiter).then_some(FileFormat {
            delimiter,
            bom,
            line_end,
            decimal_comma: false,
        })
    }

    /// The same layout, its amounts written with a decimal comma when `comma`.
    pub fn with_decimal_comma(self, comma: bool) -> Self {
        FileFormat {
            decimal_comma: comma,
            ..self
        }
    }

    /// Whether the amounts are written with a decimal comma.
    pub fn decimal_comma(&self) -> bool {
        self.decimal_comma
    }

    /// An amount paybatch adds to a file of this layout (`19.60`, as every output shows it),
    /// with the layout's decimal mark: `19,60` where it is a comma.
    pub fn amount<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.decimal_comma && text.contains('.') {
            std::borrow::Cow::Owned(text.replace('.', ","))
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }

    pub fn delimiter(&self) -> u8 {
        self.delimiter
    }

    pub fn bom(&self) -> bool {
        self.bom
    }

    pub fn line_end(&self) -> LineEnd {
        self.line_end
    }

    /// Whether this is [`FileFormat::CSV`].
    pub fn is_plain_csv(&self) -> bool {
        *self == FileFormat::CSV
    }

    /// `` `;`, BOM, CRLF `` (a tab is named `tab`).
    pub fn describe(&self) -> String {
        let delimiter = match self.delimiter {
            b'\t' => "tab".to_string(),
            d => format!("`{}`", char::from(d)),
        };
        let bom = if self.bom { "BOM" } else { "no BOM" };
        let comma = if self.decimal_comma {
            ", decimal comma"
        } else {
            ""
        };
        format!("{delimiter}, {bom}, {}{comma}", self.line_end.as_str())
    }

    /// Starts a file of this layout on `out`: the BOM when it has one, then a CSV writer with
    /// its delimiter and line ends (a cell holding the delimiter, a quote or a line break is
    /// quoted).
    pub fn writer<W: Write>(&self, mut out: W) -> io::Result<csv::Writer<W>> {
        if self.bom {
            out.write_all(BOM)?;
        }
        let terminator = match self.line_end {
            LineEnd::Lf => csv::Terminator::Any(b'\n'),
            LineEnd::Crlf => csv::Terminator::CRLF,
        };
        Ok(csv::WriterBuilder::new()
            .flexible(false)
            .delimiter(self.delimiter)
            .terminator(terminator)
            .quote_style(csv::QuoteStyle::Necessary)
            .from_writer(out))
    }

    /// As the ledger keeps it (see [`FileFormat::from_stored`]).
    pub fn to_stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What [`FileFormat::to_stored`] wrote; `None` for anything else.
    pub fn from_stored(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// The layout asked for with `--out-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutFormat {
    /// As the input file: its delimiter, BOM and line ends (the default).
    Same,
    /// `,`, LF, no BOM: what earlier versions wrote; for scripts.
    Csv,
    /// `,`, CRLF, BOM.
    Excel,
    /// `;`, CRLF, BOM: Excel where the list separator is `;`.
    ExcelSemicolon,
    /// Tab, LF, no BOM.
    Tsv,
}

impl OutFormat {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [OutFormat; 5] = [
        OutFormat::Same,
        OutFormat::Csv,
        OutFormat::Excel,
        OutFormat::ExcelSemicolon,
        OutFormat::Tsv,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutFormat::Same => "same",
            OutFormat::Csv => "csv",
            OutFormat::Excel => "excel",
            OutFormat::ExcelSemicolon => "excel-semicolon",
            OutFormat::Tsv => "tsv",
        }
    }

    /// What the value writes, as `--help` says it.
    pub fn help(self) -> &'static str {
        match self {
            OutFormat::Same => "as the input file: its delimiter, BOM and line ends (the default)",
            OutFormat::Csv => "`,`, LF, no BOM: what earlier versions wrote; for scripts",
            OutFormat::Excel => "`,`, CRLF, BOM",
            OutFormat::ExcelSemicolon => {
                "`;`, CRLF, BOM: for Excel where the list separator is `;`"
            }
            OutFormat::Tsv => "tab, LF, no BOM",
        }
    }

    /// The layout this value writes for an input file of layout `input` (`None`: not known, as
    /// in a ledger of an earlier version, which [`OutFormat::Same`] writes as plain CSV).
    pub fn resolve(self, input: Option<FileFormat>) -> FileFormat {
        let fixed = |delimiter, bom, line_end| FileFormat {
            delimiter,
            bom,
            line_end,
            decimal_comma: false,
        };
        // `excel-semicolon` is for a spreadsheet whose decimal mark is the input's.
        let comma = input.is_some_and(|i| i.decimal_comma);
        match self {
            OutFormat::Same => input.unwrap_or(FileFormat::CSV),
            OutFormat::Csv => FileFormat::CSV,
            OutFormat::Excel => fixed(b',', true, LineEnd::Crlf),
            OutFormat::ExcelSemicolon => fixed(b';', true, LineEnd::Crlf).with_decimal_comma(comma),
            OutFormat::Tsv => fixed(b'\t', false, LineEnd::Lf),
        }
    }
}

impl fmt::Display for OutFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OutFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        OutFormat::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let all: Vec<&str> = OutFormat::ALL.iter().map(|f| f.as_str()).collect();
                format!(
                    "`{s}` is not a result file format: use one of {}",
                    all.join(", ")
                )
            })
    }
}

/// The layout of a batch's result file and what chose it, as the ledger keeps it
/// (`batches.result_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultFormat {
    #[serde(flatten)]
    pub format: FileFormat,
    /// `same` when it is the input's, else the `--out-format` given.
    pub chosen: OutFormat,
}

impl ResultFormat {
    /// What a batch without a recorded layout (made by an earlier version) writes: plain CSV,
    /// as it always did.
    pub const EARLIER: ResultFormat = ResultFormat {
        format: FileFormat::CSV,
        chosen: OutFormat::Csv,
    };

    /// `chosen`, for an input file of layout `input`.
    pub fn of(chosen: OutFormat, input: Option<FileFormat>) -> Self {
        ResultFormat {
            format: chosen.resolve(input),
            chosen,
        }
    }

    /// What a summary says after the result file's name: nothing for plain CSV, else
    /// `` (`;`, BOM, CRLF: as the input) `` or `` (tab, no BOM, LF: --out-format tsv) ``.
    pub fn note(&self) -> String {
        if self.format.is_plain_csv() {
            return String::new();
        }
        let why = match self.chosen {
            OutFormat::Same => "as the input".to_string(),
            other => format!("--out-format {other}"),
        };
        format!(" ({}: {why})", self.format.describe())
    }

    pub fn to_stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What [`ResultFormat::to_stored`] wrote; `None` for anything else.
    pub fn from_stored(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(format: FileFormat, rows: &[&[&str]]) -> Vec<u8> {
        let mut w = format.writer(Vec::new()).expect("in memory");
        for row in rows {
            w.write_record(*row).expect("in memory");
        }
        w.into_inner().expect("in memory")
    }

    #[test]
    fn each_value_writes_its_bytes() {
        let rows: &[&[&str]] = &[&["a", "b;c", "d,e"], &["x\ty", "\"q\"", ""]];
        let bytes = |f: OutFormat| written(f.resolve(None), rows);
        assert_eq!(
            bytes(OutFormat::Csv),
            b"a,b;c,\"d,e\"\nx\ty,\"\"\"q\"\"\",\n"
        );
        assert_eq!(
            bytes(OutFormat::Excel),
            b"\xEF\xBB\xBFa,b;c,\"d,e\"\r\nx\ty,\"\"\"q\"\"\",\r\n"
        );
        assert_eq!(
            bytes(OutFormat::ExcelSemicolon),
            b"\xEF\xBB\xBFa;\"b;c\";d,e\r\nx\ty;\"\"\"q\"\"\";\r\n"
        );
        assert_eq!(
            bytes(OutFormat::Tsv),
            b"a\tb;c\td,e\n\"x\ty\"\t\"\"\"q\"\"\"\t\n"
        );
        assert_eq!(bytes(OutFormat::Same), bytes(OutFormat::Csv));
    }

    #[test]
    fn same_is_the_input_and_plain_csv_when_the_input_is_not_known() {
        let input = FileFormat::new(b'|', true, LineEnd::Crlf).expect("usable");
        assert_eq!(OutFormat::Same.resolve(Some(input)), input);
        assert_eq!(OutFormat::Same.resolve(None), FileFormat::CSV);
        assert_eq!(OutFormat::Tsv.resolve(Some(input)).delimiter(), b'\t');
    }

    #[test]
    fn kept_and_read_back_and_nothing_else_is_read() {
        let f = OutFormat::ExcelSemicolon.resolve(None);
        assert_eq!(
            f.to_stored(),
            r#"{"delimiter":";","bom":true,"line_end":"CRLF"}"#
        );
        assert_eq!(FileFormat::from_stored(&f.to_stored()), Some(f));
        let r = ResultFormat::of(OutFormat::Tsv, Some(f));
        assert_eq!(ResultFormat::from_stored(&r.to_stored()), Some(r));
        for bad in [
            "",
            "csv",
            r#"{"delimiter":"a","bom":true,"line_end":"CRLF"}"#,
            r#"{"delimiter":"\"","bom":true,"line_end":"CRLF"}"#,
            r#"{"delimiter":"é","bom":true,"line_end":"CRLF"}"#,
            r#"{"delimiter":";","bom":true,"line_end":"CR"}"#,
        ] {
            assert_eq!(FileFormat::from_stored(bad), None, "{bad}");
        }
    }

    #[test]
    fn values_are_named_and_unknown_ones_refused_with_the_list() {
        for f in OutFormat::ALL {
            assert_eq!(f.as_str().parse::<OutFormat>(), Ok(f));
        }
        let e = "xlsx".parse::<OutFormat>().unwrap_err();
        assert!(e.contains("same, csv, excel, excel-semicolon, tsv"), "{e}");
    }

    #[test]
    fn the_input_decimal_comma_is_kept_by_same_and_excel_semicolon_only() {
        let input = FileFormat::new(b';', true, LineEnd::Crlf)
            .expect("usable")
            .with_decimal_comma(true);
        for f in [OutFormat::Same, OutFormat::ExcelSemicolon] {
            let out = f.resolve(Some(input));
            assert!(out.decimal_comma(), "{f}");
            assert_eq!(out.amount("19.60"), "19,60");
        }
        for f in [OutFormat::Csv, OutFormat::Excel, OutFormat::Tsv] {
            let out = f.resolve(Some(input));
            assert!(!out.decimal_comma(), "{f}");
            assert_eq!(out.amount("19.60"), "19.60");
        }
        // Kept with the batch, and a layout of a dot stored as earlier versions stored it.
        assert_eq!(
            input.to_stored(),
            r#"{"delimiter":";","bom":true,"line_end":"CRLF","decimal_comma":true}"#
        );
        assert_eq!(FileFormat::from_stored(&input.to_stored()), Some(input));
        let r = ResultFormat::of(OutFormat::Same, Some(input));
        assert_eq!(ResultFormat::from_stored(&r.to_stored()), Some(r));
        assert!(r.note().contains("decimal comma"), "{}", r.note());
    }

    #[test]
    fn the_summary_names_a_layout_other_than_plain_csv() {
        let semicolon = FileFormat::new(b';', true, LineEnd::Crlf);
        assert_eq!(
            ResultFormat::of(OutFormat::Same, semicolon).note(),
            " (`;`, BOM, CRLF: as the input)"
        );
        assert_eq!(
            ResultFormat::of(OutFormat::Tsv, semicolon).note(),
            " (tab, no BOM, LF: --out-format tsv)"
        );
        assert_eq!(ResultFormat::of(OutFormat::Csv, semicolon).note(), "");
        assert_eq!(ResultFormat::EARLIER.note(), "");
    }
}
