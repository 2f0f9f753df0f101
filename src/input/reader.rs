//! Reading a batch file: a streaming CSV reader that finds the columns paybatch knows (see
//! [`super::columns`]), checks the encoding, and yields one trimmed record at a time with the
//! line it starts on.
//!
//! The file is never loaded whole: the reader holds a `csv::Reader` over it and keeps only the
//! current record (and, while opening, the first line to detect the delimiter).

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crate::file_format::{FileFormat, LineEnd};

/// The columns a reader finds, also under the reader's path.
pub use super::columns::{ColumnMap, KNOWN_COLUMNS, canonical_column, normalize_header};
use super::problem::Problem;
/// A record and the longest field, also under the reader's path.
pub use super::record::{MAX_FIELD_BYTES, RawRecord};
use super::sheet::{SheetReader, Workbook};

/// The longest record accepted, in bytes. A longer one almost always comes from an unbalanced
/// quote that makes the rest of the file one field; reading stops there instead of loading it.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// How much of the file is looked at to find the header line's delimiter.
const SNIFF_LIMIT: usize = 64 * 1024;

/// Delimiters tried when none is given, in order of preference on a tie.
pub const CANDIDATE_DELIMITERS: [u8; 3] = [b',', b';', b'\t'];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputOptions {
    /// The field delimiter; `None` detects it from the header line.
    pub delimiter: Option<u8>,
    /// The sheet of a workbook to read; `None`: the first.
    pub sheet: Option<String>,
}

/// A streaming reader of a batch file: a CSV file, or a sheet of a workbook (`.xlsx`, `.ods`,
/// by the file's extension: [`Workbook::of`]). Both yield the same records, so every stage
/// after the reading is the same for both.
#[derive(Debug)]
pub struct BatchReader(Source);

#[derive(Debug)]
enum Source {
    Csv(CsvReader),
    Sheet(SheetReader),
}

impl BatchReader {
    /// Opens a batch file: a workbook by its extension, else CSV.
    pub fn open(path: &Path, opts: &InputOptions) -> Result<Self, Problem> {
        match Workbook::of(path) {
            Some(kind) => Ok(BatchReader(Source::Sheet(SheetReader::open(
                path,
                kind,
                opts.sheet.as_deref(),
            )?))),
            None => Ok(BatchReader(Source::Csv(CsvReader::open(path, opts)?))),
        }
    }

    /// Reads a CSV batch from memory (tests, fuzzing).
    pub fn from_bytes(data: Vec<u8>, opts: &InputOptions) -> Result<Self, Problem> {
        Ok(BatchReader(Source::Csv(CsvReader::from_bytes(data, opts)?)))
    }

    /// The header names as written (trimmed, BOM removed).
    pub fn headers(&self) -> &[String] {
        match &self.0 {
            Source::Csv(r) => r.headers(),
            Source::Sheet(r) => r.headers(),
        }
    }

    /// Which index holds which known column.
    pub fn columns(&self) -> &ColumnMap {
        match &self.0 {
            Source::Csv(r) => r.columns(),
            Source::Sheet(r) => r.columns(),
        }
    }

    /// The delimiter in use (given or detected); a workbook's is `,`, the delimiter of the
    /// layout its result file is written in by default.
    pub fn delimiter(&self) -> u8 {
        self.format().delimiter()
    }

    /// The file's layout (see [`CsvReader::format`]); a workbook's is Excel's CSV layout (`,`,
    /// BOM, CRLF), in which a result file is written as CSV for it.
    pub fn format(&self) -> FileFormat {
        match &self.0 {
            Source::Csv(r) => r.format(),
            Source::Sheet(_) => {
                FileFormat::new(b',', true, LineEnd::Crlf).unwrap_or(FileFormat::CSV)
            }
        }
    }

    /// The sheet read, when the file is a workbook.
    pub fn sheet(&self) -> Option<&str> {
        match &self.0 {
            Source::Csv(_) => None,
            Source::Sheet(r) => Some(r.sheet()),
        }
    }

    /// The next data record; `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<RawRecord, Problem>> {
        match &mut self.0 {
            Source::Csv(r) => r.next_record(),
            Source::Sheet(r) => r.next_record(),
        }
    }

    /// The SHA-256 (hex) of the file's bytes (see [`CsvReader::finish`]).
    pub fn finish(self) -> io::Result<String> {
        match self.0 {
            Source::Csv(r) => r.finish(),
            Source::Sheet(r) => Ok(r.finish()),
        }
    }
}

impl Iterator for BatchReader {
    type Item = Result<RawRecord, Problem>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// A streaming reader of a CSV batch file.
pub struct CsvReader {
    reader: csv::Reader<Tap>,
    /// The bytes of the current record, shared with the [`Tap`] the csv reader reads through.
    tapped: Arc<Mutex<Tapped>>,
    headers: Vec<String>,
    columns: ColumnMap,
    delimiter: u8,
    /// Whether the file starts with a UTF-8 byte-order mark.
    bom: bool,
    /// How the first line (the header) ends.
    line_end: LineEnd,
    /// The first data record, read while opening (to refuse a file without rows).
    pending: Option<Result<RawRecord, Problem>>,
    record: csv::ByteRecord,
    done: bool,
    /// SHA-256 of every byte read from the file so far (see [`CsvReader::finish`]).
    digest: Arc<Mutex<Sha256>>,
}

impl std::fmt::Debug for CsvReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvReader")
            .field("headers", &self.headers)
            .field("columns", &self.columns)
            .field("delimiter", &(self.delimiter as char))
            .finish_non_exhaustive()
    }
}

impl CsvReader {
    /// Opens a batch file.
    pub fn open(path: &Path, opts: &InputOptions) -> Result<Self, Problem> {
        let file = File::open(path).map_err(|e| {
            Problem::file(0, format!("cannot open `{}`: {e}", path.display())).with_help(
                "check the path, and that the file is readable by the user running paybatch",
            )
        })?;
        Self::from_reader(Box::new(file), opts)
    }

    /// Reads a batch from memory (tests, fuzzing).
    pub fn from_bytes(data: Vec<u8>, opts: &InputOptions) -> Result<Self, Problem> {
        Self::from_reader(Box::new(Cursor::new(data)), opts)
    }

    fn from_reader(inner: Box<dyn Read + Send>, opts: &InputOptions) -> Result<Self, Problem> {
        if let Some(d) = opts.delimiter {
            check_delimiter(d)?;
        }
        let digest = Arc::new(Mutex::new(Sha256::new()));
        let mut inner: Box<dyn Read + Send> = Box::new(Hashed {
            inner,
            digest: Arc::clone(&digest),
        });
        let mut head = read_head(&mut inner)?;
        if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
            return Err(Problem::file(1, "the file is encoded as UTF-16").with_help(
                "save it as UTF-8 (in Excel: Save As > \"CSV UTF-8 (Comma delimited)\")",
            ));
        }
        let bom = head.starts_with(crate::file_format::BOM);
        if bom {
            head.drain(..3);
        }
        let delimiter = opts.delimiter.unwrap_or_else(|| sniff_delimiter(&head));
        let line_end = first_line_ending(&head);
        let tapped = Arc::new(Mutex::new(Tapped::default()));
        let source = Tap {
            inner: Box::new(Cursor::new(head).chain(inner)),
            tapped: Arc::clone(&tapped),
        };
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(delimiter)
            .trim(csv::Trim::None)
            .from_reader(source);

        let mut this = CsvReader {
            reader,
            tapped,
            headers: Vec::new(),
            columns: ColumnMap::default(),
            delimiter,
            bom,
            line_end,
            pending: None,
            record: csv::ByteRecord::new(),
            done: false,
            digest,
        };
        let (header_line, headers) = match this.read_fields()? {
            Some(h) => h,
            None => {
                return Err(Problem::file(1, "the file is empty").with_help(
                    "the first line must be a header naming the columns, e.g. \
                     `reference,product_code,face_value,currency,email`, then one line per payout",
                ));
            }
        };
        this.columns = ColumnMap::from_headers(&headers, header_line)?;
        this.headers = headers;
        match this.next_checked() {
            None => {
                return Err(
                    Problem::file(header_line, "the file has a header but no rows")
                        .with_help("add one line per payout below the header"),
                );
            }
            Some(first) => this.pending = Some(first),
        }
        Ok(this)
    }

    /// The header names as written (trimmed, BOM removed).
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// Which index holds which known column.
    pub fn columns(&self) -> &ColumnMap {
        &self.columns
    }

    /// The delimiter in use (given or detected).
    pub fn delimiter(&self) -> u8 {
        self.delimiter
    }

    /// The file's layout: its delimiter, whether it starts with a byte-order mark, and how its
    /// first line ends (a file mixing line ends is taken as its first line ends).
    pub fn format(&self) -> FileFormat {
        FileFormat::new(self.delimiter, self.bom, self.line_end).unwrap_or(FileFormat::CSV)
    }

    /// The next data record; `None` at the end. A problem with one record does not end the
    /// reading: the records after it follow (an I/O error does end it).
    pub fn next_record(&mut self) -> Option<Result<RawRecord, Problem>> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        self.next_checked()
    }

    /// Reads the next non-blank record and checks its field count.
    fn next_checked(&mut self) -> Option<Result<RawRecord, Problem>> {
        match self.read_fields() {
            Err(p) => Some(Err(p)),
            Ok(None) => None,
            Ok(Some((line, fields))) => {
                if fields.len() != self.headers.len() {
                    let (n, h) = (fields.len(), self.headers.len());
                    return Some(Err(Problem::file(
                        line,
                        format!(
                            "this row has {n} field{} but the header has {h}",
                            if n == 1 { "" } else { "s" }
                        ),
                    )
                    .with_help(
                        "check for a missing or extra delimiter; a value that contains the \
                         delimiter or a quote must be quoted (\"...\")",
                    )));
                }
                Some(Ok(RawRecord { line, fields }))
            }
        }
    }

    /// Reads the next record that is not blank, as checked and trimmed strings.
    /// `Ok(None)` at the end of the file.
    fn read_fields(&mut self) -> Result<Option<(u64, Vec<String>)>, Problem> {
        loop {
            if self.done {
                return Ok(None);
            }
            let more = match self.reader.read_byte_record(&mut self.record) {
                Ok(more) => more,
                Err(e) => {
                    self.done = true;
                    let line = lock(&self.tapped).peek_start();
                    return Err(read_problem(line, e));
                }
            };
            if !more {
                self.done = true;
                return Ok(None);
            }
            // csv's own line count is off for CRLF files and skipped blank lines: count here.
            let start = self.record.position().map_or(0, |p| p.byte());
            let end = self.reader.position().byte();
            let line = lock(&self.tapped).pass(start, end);
            if self
                .record
                .iter()
                .all(|f| f.iter().all(|b| b.is_ascii_whitespace()))
            {
                continue;
            }
            let mut fields = Vec::with_capacity(self.record.len());
            for (i, raw) in self.record.iter().enumerate() {
                match check_field(raw, line, i) {
                    Ok(f) => fields.push(f),
                    Err(mut p) => {
                        if let Some(h) = self.headers.get(i) {
                            let name =
                                canonical_column(h).map_or_else(|| h.clone(), str::to_string);
                            p.column_name = Some(name);
                        }
                        return Err(p);
                    }
                }
            }
            return Ok(Some((line, fields)));
        }
    }
}

impl CsvReader {
    /// Reads what is left of the file and returns the SHA-256 (hex) of all its bytes: the
    /// digest of exactly the bytes the records came from, even when reading stopped early.
    pub fn finish(self) -> io::Result<String> {
        let mut tap = self.reader.into_inner();
        io::copy(&mut tap.inner, &mut io::sink())?;
        let digest = self
            .digest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        Ok(hex::encode(digest.finalize()))
    }
}

/// The file under everything else: every byte read is added to the digest.
struct Hashed {
    inner: Box<dyn Read + Send>,
    digest: Arc<Mutex<Sha256>>,
}

impl Read for Hashed {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        self.digest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .update(&out[..n]);
        Ok(n)
    }
}

/// The bytes read from the file and not yet passed by a complete record, and the line breaks
/// of those that were.
#[derive(Debug, Default)]
struct Tapped {
    /// Offset in the stream of `bytes[head]`.
    start: u64,
    /// `bytes[..head]` are passed and wait to be dropped (in bulk, not record by record).
    head: usize,
    bytes: Vec<u8>,
    lines: LineCounter,
}

impl Tapped {
    /// The bytes not yet passed by a complete record.
    fn live(&self) -> &[u8] {
        &self.bytes[self.head..]
    }

    /// Passes the record at stream offsets `start..end`: the line it starts on.
    fn pass(&mut self, start: u64, end: u64) -> u64 {
        let upto = usize::try_from(end.saturating_sub(self.start))
            .unwrap_or(usize::MAX)
            .min(self.live().len());
        let first = self
            .lines
            .count(&self.bytes[self.head..self.head + upto], self.start, start);
        self.head += upto;
        self.start += upto as u64;
        first
    }

    /// Passes the line breaks the live bytes start with: blank lines, which no record holds
    /// (the one before was passed, the next starts after them). So a run of blank lines, however
    /// long, is neither kept nor counted toward the record-size limit.
    fn pass_blank_lines(&mut self) {
        let n = self
            .live()
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        if n > 0 {
            let (start, to) = (self.start, self.start + n as u64);
            self.pass(start, to);
        }
    }

    /// The line the next record starts on, as far as the bytes read so far show.
    fn peek_start(&self) -> u64 {
        self.lines.peek_start(self.live())
    }
}

/// The reader under the csv reader: keeps a copy of what it reads until the record that holds
/// it is done, so that line numbers can be counted exactly; refuses records over
/// [`MAX_RECORD_BYTES`].
struct Tap {
    inner: Box<dyn Read + Send>,
    tapped: Arc<Mutex<Tapped>>,
}

/// The marker of the error [`Tap`] returns for an over-long record.
#[derive(Debug)]
struct RecordTooLong;

impl std::fmt::Display for RecordTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a record is longer than {} KiB", MAX_RECORD_BYTES / 1024)
    }
}

impl std::error::Error for RecordTooLong {}

impl Read for Tap {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        let mut t = lock(&self.tapped);
        if t.head > 0 && (t.head == t.bytes.len() || t.head >= 64 * 1024) {
            let head = t.head;
            t.bytes.drain(..head);
            t.head = 0;
        }
        t.bytes.extend_from_slice(&out[..n]);
        t.pass_blank_lines();
        // Room for the csv reader's read-ahead beyond the record.
        if t.live().len() > MAX_RECORD_BYTES + 64 * 1024 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, RecordTooLong));
        }
        Ok(n)
    }
}

fn lock(m: &Mutex<Tapped>) -> MutexGuard<'_, Tapped> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts line breaks (`\n`, `\r\n` or a lone `\r`) in the bytes records are read from.
#[derive(Debug, Default)]
struct LineCounter {
    /// Line breaks before `Tapped::start`.
    breaks: u64,
    /// Whether the byte before `Tapped::start` is `\r`.
    prev_cr: bool,
}

impl LineCounter {
    /// Counts the line breaks of `bytes` (at stream offset `offset`): returns the line of the
    /// first byte at or after `start` that is not a line break (blank lines before it skipped).
    fn count(&mut self, bytes: &[u8], offset: u64, start: u64) -> u64 {
        let mut first = None;
        for (k, &b) in bytes.iter().enumerate() {
            if first.is_none() && offset + k as u64 >= start && b != b'\r' && b != b'\n' {
                first = Some(self.breaks + 1);
            }
            match b {
                b'\n' => {
                    if !self.prev_cr {
                        self.breaks += 1;
                    }
                    self.prev_cr = false;
                }
                b'\r' => {
                    self.breaks += 1;
                    self.prev_cr = true;
                }
                _ => self.prev_cr = false,
            }
        }
        first.unwrap_or(self.breaks + 1)
    }

    /// The line the next record starts on, as far as the bytes read so far (`live`) show.
    fn peek_start(&self, live: &[u8]) -> u64 {
        let mut breaks = self.breaks;
        let mut prev_cr = self.prev_cr;
        for &b in live {
            match b {
                b'\n' if prev_cr => prev_cr = false,
                b'\n' => breaks += 1,
                b'\r' => {
                    breaks += 1;
                    prev_cr = true;
                }
                _ => break,
            }
        }
        breaks + 1
    }
}

fn read_problem(line: u64, e: csv::Error) -> Problem {
    if let csv::ErrorKind::Io(io) = e.kind()
        && io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<RecordTooLong>().is_some())
    {
        return Problem::file(
            line,
            format!(
                "the record starting here is longer than {} KiB; reading stopped",
                MAX_RECORD_BYTES / 1024
            ),
        )
        .with_help(
            "check this line for an unbalanced quote (\") that makes the rest of the file one \
             field; a quote inside a quoted value is written twice (\"\")",
        );
    }
    Problem::file(line, format!("cannot read the file: {e}"))
}

/// Checks one raw field (size, NUL, UTF-8) and returns it trimmed.
fn check_field(raw: &[u8], line: u64, index: usize) -> Result<String, Problem> {
    let at = |message: String| Problem {
        column_name: None,
        ..Problem::at(line, index, "", message)
    };
    if raw.len() > MAX_FIELD_BYTES {
        return Err(at(format!(
            "this field is {} bytes long; the limit is {} KiB",
            raw.len(),
            MAX_FIELD_BYTES / 1024
        ))
        .with_help(
            "check for an unbalanced quote (\") that makes the rest of the file one field",
        ));
    }
    if let Some(pos) = raw.iter().position(|b| *b == 0) {
        return Err(
            at(format!("NUL byte at byte {} of this field", pos + 1)).with_help(
                "this is not a text CSV file, or it is UTF-16 without a byte order mark; \
             save it as \"CSV UTF-8\"",
            ),
        );
    }
    match std::str::from_utf8(raw) {
        Ok(s) => {
            let value = s.trim();
            // A tab is a character a cell may hold; any other control character (a line break
            // inside quotes, ESC, a carriage return, a backspace) can hide or change what a
            // terminal or a spreadsheet shows of the row.
            if let Some((pos, c)) = value
                .chars()
                .enumerate()
                .find(|(_, c)| c.is_control() && *c != '\t')
            {
                return Err(at(format!(
                    "the control character `{}` at character {} of `{}`",
                    c.escape_default(),
                    pos + 1,
                    super::problem::show(value)
                ))
                .with_value(value)
                .with_help(
                    "remove it: a cell may not hold control characters (line breaks, escape \
                     sequences) other than the tab; check how the file was exported",
                ));
            }
            Ok(value.to_string())
        }
        Err(e) => {
            let lossy: String = String::from_utf8_lossy(raw)
                .trim()
                .chars()
                .take(100)
                .collect();
            Err(at(format!(
                "invalid UTF-8 at byte {} of `{}`",
                e.valid_up_to() + 1,
                super::problem::show(&lossy)
            ))
            .with_value(lossy)
            .with_help(
            "the file must be UTF-8; it may be Latin-1 or Windows-1252: save it as \"CSV UTF-8\"",
            ))
        }
    }
}

fn check_delimiter(d: u8) -> Result<(), Problem> {
    if !crate::file_format::usable_delimiter(d) {
        return Err(Problem::file(
            0,
            format!("`{}` cannot be used as the delimiter", d.escape_ascii()),
        )
        .with_help("use `,`, `;` or a tab (`\\t`), or leave the delimiter out to detect it"));
    }
    Ok(())
}

/// Reads the start of the file: up to the end of the first non-blank line (outside quotes), at
/// most [`SNIFF_LIMIT`] bytes.
fn read_head(inner: &mut Box<dyn Read + Send>) -> Result<Vec<u8>, Problem> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match inner.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Problem::file(0, format!("cannot read the file: {e}"))),
        };
        if n == 0 {
            return Ok(head);
        }
        head.extend_from_slice(&chunk[..n]);
        // A `\r` last may be the first half of a `\r\n`: the next byte says.
        let line_read =
            first_line_end(&head).is_some_and(|i| head[i] == b'\n' || i + 1 < head.len());
        if head.len() >= SNIFF_LIMIT || line_read {
            return Ok(head);
        }
    }
}

/// Where the first non-blank line ends (outside quotes), if the data holds its end.
fn first_line_end(data: &[u8]) -> Option<usize> {
    let mut in_quotes = false;
    let mut content = false;
    for (i, &b) in data.iter().enumerate() {
        match b {
            b'"' => in_quotes = !in_quotes,
            b'\n' | b'\r' if !in_quotes && content => return Some(i),
            b if !b.is_ascii_whitespace() && !matches!(b, 0xEF | 0xBB | 0xBF) => content = true,
            _ => {}
        }
    }
    None
}

/// How the first non-blank line ends: CRLF when with `\r\n`, else LF (a lone `\r` too).
fn first_line_ending(head: &[u8]) -> LineEnd {
    match first_line_end(head) {
        Some(i) if head[i..].starts_with(b"\r\n") => LineEnd::Crlf,
        _ => LineEnd::Lf,
    }
}

/// The candidate that splits the first non-blank line into the most fields (ties: the earlier
/// candidate, so comma wins).
fn sniff_delimiter(head: &[u8]) -> u8 {
    let end = first_line_end(head).unwrap_or(head.len());
    let line = &head[..end];
    let mut counts = [0usize; 3];
    let mut in_quotes = false;
    for &b in line {
        if b == b'"' {
            in_quotes = !in_quotes;
        } else if !in_quotes && let Some(k) = CANDIDATE_DELIMITERS.iter().position(|d| *d == b) {
            counts[k] += 1;
        }
    }
    let mut best = 0;
    for k in 1..counts.len() {
        if counts[k] > counts[best] {
            best = k;
        }
    }
    CANDIDATE_DELIMITERS[best]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::fixtures::reader;

    fn records(r: BatchReader) -> Vec<Result<RawRecord, Problem>> {
        r.collect()
    }

    const HEADER: &str = "reference,product_code,face_value,currency,email\n";

    #[test]
    fn reads_records_with_their_lines() {
        let r = reader(&format!(
            "{HEADER}R1,AMZ-US,10,USD,a@example.com\n\nR2 , STEAM-US , 20 ,USD,\n"
        ))
        .unwrap();
        assert_eq!(r.delimiter(), b',');
        assert_eq!(
            r.headers(),
            [
                "reference",
                "product_code",
                "face_value",
                "currency",
                "email"
            ]
        );
        let recs: Vec<RawRecord> = records(r).into_iter().map(Result::unwrap).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].line, 2);
        assert_eq!(recs[1].line, 4);
        assert_eq!(recs[1].fields, ["R2", "STEAM-US", "20", "USD", ""]);
    }

    #[test]
    fn detects_the_delimiter_or_takes_the_given_one() {
        let tab = "reference\tproduct_code\tface_value\tcurrency\nR\tA,B\t1\tUSD\n";
        let r = reader(tab).unwrap();
        assert_eq!(r.delimiter(), b'\t');
        let recs = records(r);
        assert_eq!(recs[0].as_ref().unwrap().fields[1], "A,B");

        // Quoted delimiters do not count.
        assert_eq!(sniff_delimiter(b"\"a,b,c\";x;y\n"), b';');
        let r = reader("reference,product_code,face_value,currency\n\"R;1\",A,1,USD\n").unwrap();
        assert_eq!(r.delimiter(), b',');

        let opts = InputOptions {
            delimiter: Some(b';'),
            ..InputOptions::default()
        };
        let r = BatchReader::from_bytes(
            b"reference;product_code;face_value;currency\nR;A;1,5;USD\n".to_vec(),
            &opts,
        )
        .unwrap();
        assert_eq!(r.delimiter(), b';');
        assert!(
            BatchReader::from_bytes(
                b"x".to_vec(),
                &InputOptions {
                    delimiter: Some(b'"'),
                    ..InputOptions::default()
                }
            )
            .is_err()
        );
    }

    #[test]
    fn single_column_header_ties_to_comma() {
        assert_eq!(sniff_delimiter(b"reference\n"), b',');
        assert_eq!(sniff_delimiter(b"a,b;c\n"), b',');
        assert_eq!(sniff_delimiter(b"a;b;c,d\n"), b';');
        assert_eq!(sniff_delimiter(b"\n\n a\tb\tc\n"), b'\t');
    }

    #[test]
    fn quoted_fields_crlf_and_embedded_newlines() {
        let data = "reference,product_code,face_value,currency,note\r\nR1,A,1,USD,\"a, b\tand a comma\"\r\nR2,A,1,USD,\"two\r\nlines\"\r\nR3,A,1,USD,\"say \"\"hi\"\"\"\r\n";
        let recs = records(reader(data).unwrap());
        let first = recs[0].as_ref().unwrap();
        assert_eq!(first.fields[4], "a, b\tand a comma", "a tab is kept");
        assert_eq!(first.line, 2);
        // A line break inside quotes is a control character in a cell: refused, located.
        let e = recs[1].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (3, Some(5)));
        assert!(e.message.contains("control character `\\r`"), "{e}");
        let last = recs[2].as_ref().unwrap();
        assert_eq!(last.line, 5);
        assert_eq!(last.fields[4], "say \"hi\"");
    }

    #[test]
    fn control_characters_in_a_cell_are_a_problem_with_line_and_column() {
        let data = format!(
            "{HEADER}R1,A,1,USD,a@example.com\nR2,A,1,USD,\"x\x1b[2Jy\"\nR3,\u{9b}31m,1,USD,\nR4,A,1,USD,\x07\n"
        );
        let recs = records(reader(&data).unwrap());
        assert!(recs[0].is_ok());
        let e = recs[1].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (3, Some(5)));
        assert_eq!(e.column_name.as_deref(), Some("email"));
        assert!(
            e.message
                .contains("`\\u{1b}` at character 2 of `x\\u{1b}[2Jy`"),
            "{e}"
        );
        let e = recs[2].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (4, Some(2)));
        let e = recs[3].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (5, Some(5)));
        // The header too.
        let e = reader("reference,product_code,face_value,currency,no\x1bte\nR,A,1,USD,x\n")
            .unwrap_err();
        assert_eq!((e.line, e.column), (1, Some(5)));
    }

    #[test]
    fn bom_is_removed_and_utf16_refused() {
        let mut data = vec![0xEF, 0xBB, 0xBF];
        data.extend_from_slice(b"reference,product_code,face_value,currency\nR,A,1,USD\n");
        let r = BatchReader::from_bytes(data, &InputOptions::default()).unwrap();
        assert_eq!(r.headers()[0], "reference");
        assert_eq!(r.columns().reference, 0);

        for bom in [[0xFF, 0xFE], [0xFE, 0xFF]] {
            let mut data = bom.to_vec();
            data.extend_from_slice(&[b'r', 0, b'e', 0]);
            let e = BatchReader::from_bytes(data, &InputOptions::default()).unwrap_err();
            assert!(e.message.contains("UTF-16"), "{e}");
            assert!(e.help.as_deref().unwrap_or("").contains("UTF-8"));
        }
    }

    #[test]
    fn the_layout_is_the_delimiter_bom_and_first_line_end() {
        let format = |data: &[u8]| {
            BatchReader::from_bytes(data.to_vec(), &InputOptions::default())
                .unwrap()
                .format()
        };
        let excel =
            format(b"\xEF\xBB\xBFreference;product_code;face_value;currency\r\nR;A;1;USD\r\n");
        assert_eq!(
            (excel.delimiter(), excel.bom(), excel.line_end()),
            (b';', true, LineEnd::Crlf)
        );
        let tsv = format(b"reference\tproduct_code\tface_value\tcurrency\nR\tA\t1\tUSD\n");
        assert_eq!(
            (tsv.delimiter(), tsv.bom(), tsv.line_end()),
            (b'\t', false, LineEnd::Lf)
        );
        // Mixed line ends: as the first line (blank lines before it do not count).
        let mixed =
            format(b"\n\nreference,product_code,face_value,currency\r\nR,A,1,USD\nS,A,1,USD\n");
        assert_eq!(mixed.line_end(), LineEnd::Crlf);
        let mixed = format(b"reference,product_code,face_value,currency\nR,A,1,USD\r\n");
        assert_eq!(mixed.line_end(), LineEnd::Lf);
        // A lone `\r` is LF's kind: not CRLF.
        let cr = format(b"reference,product_code,face_value,currency\rR,A,1,USD\r");
        assert_eq!(cr.line_end(), LineEnd::Lf);
        // The `\r\n` of the header split across two reads of the file.
        let mut header = String::from("reference,product_code,face_value,currency,");
        while header.len() < 8191 {
            header.push('x');
        }
        let data = format!("{header}\r\nR,A,1,USD,\r\n");
        assert_eq!(data.as_bytes()[8191], b'\r');
        assert_eq!(format(data.as_bytes()).line_end(), LineEnd::Crlf);
    }

    #[test]
    fn bad_bytes_are_located() {
        let mut data = HEADER.as_bytes().to_vec();
        data.extend_from_slice(
            b"R1,A,1,USD,ok@example.com\nR2,A,1,USD,caf\xe9@example.com\nR3,A\x00,1,USD,\n",
        );
        let recs = records(BatchReader::from_bytes(data, &InputOptions::default()).unwrap());
        assert!(recs[0].is_ok());
        let e = recs[1].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (3, Some(5)));
        assert_eq!(e.column_name.as_deref(), Some("email"));
        assert!(
            e.message
                .contains("UTF-8 at byte 4 of `caf\u{fffd}@example.com`"),
            "{e}"
        );
        let e = recs[2].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (4, Some(2)));
        assert!(e.message.contains("NUL"), "{e}");
    }

    #[test]
    fn ragged_rows_and_oversized_fields() {
        let big = "x".repeat(MAX_FIELD_BYTES + 1);
        let data =
            format!("{HEADER}R1,A,1,USD\nR2,A,1,USD,,extra\nR3,A,1,USD,{big}\nR4,A,1,USD,\n");
        let recs = records(reader(&data).unwrap());
        assert_eq!(recs.len(), 4);
        let e = recs[0].as_ref().unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("4 fields") && e.message.contains("has 5"),
            "{e}"
        );
        let e = recs[1].as_ref().unwrap_err();
        assert!(e.message.contains("6 fields"), "{e}");
        let e = recs[2].as_ref().unwrap_err();
        assert_eq!((e.line, e.column), (4, Some(5)));
        assert!(recs[3].is_ok());
    }

    #[test]
    fn line_numbers_count_every_kind_of_line_break() {
        let data = "reference,product_code,face_value,currency\r\n\r\nR1,A,1,USD\rR2,\"A\n|B\",1,USD\n\n\nR3,A,1,USD";
        // (R2's line break inside quotes makes it a problem, located all the same.)
        let lines: Vec<u64> = records(reader(data).unwrap())
            .into_iter()
            .map(|r| r.map_or_else(|p| p.line, |r| r.line))
            .collect();
        assert_eq!(lines, [3, 4, 8]);
    }

    #[test]
    fn runs_of_blank_lines_do_not_count_toward_the_record_size_limit() {
        for blank in ["\n", "\r\n", "\r"] {
            let mut data = format!("{HEADER}R1,A,1,USD,\n");
            let n = (MAX_RECORD_BYTES + 300 * 1024) / blank.len();
            data.push_str(&blank.repeat(n));
            data.push_str("R2,A,1,USD,\n");
            let recs = records(reader(&data).unwrap());
            assert_eq!(recs.len(), 2, "{blank:?}: {:?}", recs.last());
            let r2 = recs[1].as_ref().expect("R2 is read");
            assert_eq!(r2.fields[0], "R2");
            // Header, R1, the blank lines, then R2 (a final "\r" of R1 pairs with no "\n").
            assert_eq!(r2.line, 3 + n as u64, "{blank:?}");
        }
    }

    #[test]
    fn an_unbalanced_quote_stops_reading_instead_of_loading_the_file() {
        let mut data = format!("{HEADER}R1,A,1,USD,\nR2,\"A,1,USD,\n");
        while data.len() < MAX_RECORD_BYTES + 200 * 1024 {
            data.push_str("R9,A,1,USD,x@example.com\n");
        }
        let recs = records(reader(&data).unwrap());
        assert_eq!(recs.len(), 2);
        assert!(recs[0].is_ok());
        let e = recs[1].as_ref().unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.help.as_deref().unwrap_or("").contains("unbalanced quote"),
            "{e}"
        );
    }

    #[test]
    fn empty_and_header_only_files() {
        for data in ["", "\n\n  \r\n", "\u{feff}"] {
            let e = reader(data).unwrap_err();
            assert!(e.message.contains("empty"), "{data:?}: {e}");
        }
        let e = reader(HEADER).unwrap_err();
        assert!(e.message.contains("no rows"), "{e}");
        let e = reader(&format!("{HEADER}\n ,,,, \n")).unwrap_err();
        assert!(e.message.contains("no rows"), "{e}");
    }

    #[test]
    fn the_reader_can_move_to_another_thread() {
        fn send<T: Send>(_: &T) {}
        send(&reader(&format!("{HEADER}R1,A,1,USD,\n")).unwrap());
    }

    #[test]
    fn opens_files_and_names_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch.csv");
        std::fs::write(&path, format!("{HEADER}R1,A,1,USD,\n")).unwrap();
        let r = BatchReader::open(&path, &InputOptions::default()).unwrap();
        assert_eq!(r.count(), 1);
        let e =
            BatchReader::open(&dir.path().join("nope.csv"), &InputOptions::default()).unwrap_err();
        assert!(e.message.contains("nope.csv"), "{e}");
    }

    #[test]
    fn long_header_line_beyond_one_chunk() {
        let extra: Vec<String> = (0..2000).map(|i| format!("extra_{i}")).collect();
        let header = format!(
            "reference;product_code;face_value;currency;{}\n",
            extra.join(";")
        );
        let row = format!("R;A;1;USD;{}\n", vec!["x"; 2000].join(";"));
        let r = reader(&format!("{header}{row}")).unwrap();
        assert_eq!(r.delimiter(), b';');
        assert_eq!(r.headers().len(), 2004);
        assert_eq!(records(r).len(), 1);
    }
}
