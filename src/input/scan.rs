//! Reading the input file, so that a file of any size costs memory for the rows with problems
//! only, never for the whole file. In two passes:
//!
//! 1. [`scan`] reads and checks every row (syntax, catalog, repeated references and likely
//!    duplicates by hash) and keeps only the problems and the digest of the bytes it read. An
//!    invalid file stops here, before anything is recorded.
//! 2. [`read_again`] reads the same file again and hands each row, as the ledger records it, to
//!    the merge. It ends by comparing the digest of the bytes it read with the first pass's:
//!    a file changed between the passes is refused ([`FileChanged`]) and whatever the second
//!    pass was doing must be rolled back.
//!
//! Or, for a batch new to the ledger, in one: [`read_once_in_parallel`] checks every row as
//! the first pass does and hands it on as the second does, and stops at the first problem (the
//! caller then rolls back and reads the file in two passes, which report every problem).

use std::borrow::Cow;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::row::{ContentText, IncomingRow};

use super::reader::{BatchReader, ColumnMap, InputOptions, RawRecord};
use super::rules::{
    self, CatalogIndex, Problem, Problems, RowSpec, Seen, ValidateOptions, Validator,
};

/// What the first pass found.
#[derive(Debug)]
pub struct Scan {
    pub headers: Vec<String>,
    pub columns: ColumnMap,
    /// The file's layout: its delimiter (given or detected; the second pass uses the same), BOM
    /// and line ends.
    pub format: crate::file_format::FileFormat,
    /// The sheet read, when the file is a workbook (the second pass reads the same).
    pub sheet: Option<String>,
    /// SHA-256 (hex) of the whole file.
    pub file_hash: String,
    pub rows: usize,
    pub valid_rows: usize,
    /// The problems: the first of each kind, and how many of each (bounded, whatever the
    /// number of bad rows).
    pub problems: Problems,
    /// The plan digest, when asked for (see [`PlanDigest`]).
    pub digest: Option<String>,
    /// The line each reference of a row that could be read was first on (by keyed hash: 24
    /// bytes a row): which invalid rows may be recorded under their own reference.
    references: Seen,
}

impl Scan {
    /// Whether the file has a row with this reference, spelt alike (by keyed hash: a reference
    /// it does not have is told apart but for a chance of 2^-96).
    pub fn has_reference(&self, reference: &str) -> bool {
        self.references
            .get_kind(&crate::reference::Folded(reference), &reference)
            .is_some_and(|(_, alike)| alike)
    }
}

/// Whether an approved digest (`sha256:HEX` or bare `HEX`, any case) is `actual`.
pub fn digests_match(expected: &str, actual: &str) -> bool {
    normalize_digest(expected).is_some_and(|e| Some(e) == normalize_digest(actual))
}

/// `sha256:` and 64 lower-case hex digits, or `None` when `text` is not a digest.
pub fn normalize_digest(text: &str) -> Option<String> {
    let t = text.trim();
    let hex_part = match t.get(..7) {
        Some(prefix) if prefix.eq_ignore_ascii_case("sha256:") => &t[7..],
        _ => t,
    };
    (hex_part.len() == 64 && hex_part.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| format!("sha256:{}", hex_part.to_ascii_lowercase()))
}

/// A digest shortened as paybatch shortens digests elsewhere (key fingerprints): `sha256:` and
/// its first 16 hex digits. Text that is not a digest is shortened the same way.
pub fn short_digest(digest: &str) -> String {
    let hex_part = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("sha256:{}", hex_part.chars().take(16).collect::<String>())
}

/// The plan digest that a person approves (`paybatch validate`) and `paybatch run
/// --expect-digest` insists on: SHA-256 over a version tag, the batch name, the environment name
/// and the content hash ([`crate::input::rules::content_hash`]) of every valid row in input order. Each part
/// is length-prefixed, so no choice of names can make two plans collide. Carried-through
/// columns, line numbers and invalid rows do not count: the digest covers exactly what would be
/// paid. Built row by row while the file is checked.
pub struct PlanDigest(Sha256);

impl PlanDigest {
    pub fn new(batch: &str, environment: &str) -> Self {
        let mut d = PlanDigest(Sha256::new());
        d.0.update(b"paybatch-plan-v1\n");
        d.put("batch", batch);
        d.put("environment", environment);
        d
    }

    fn put(&mut self, name: &str, value: &str) {
        // Length-prefixed, so no value can imitate a boundary.
        self.0.update(format!("{name}={}:", value.len()).as_bytes());
        self.0.update(value.as_bytes());
        self.0.update(b"\n");
    }

    /// Adds a valid row, by its content hash ([`crate::input::rules::content_hash`]).
    pub fn row(&mut self, spec: &RowSpec) {
        self.recorded_row(&rules::content_hash(spec));
    }

    /// Adds a valid row by the content hash the ledger recorded for it.
    pub fn recorded_row(&mut self, content_hash: &str) {
        self.put("row", content_hash);
    }

    pub fn finish(self) -> String {
        format!("sha256:{}", hex::encode(self.0.finalize()))
    }
}

/// The orders a batch's ledger holds for rows the file does not have and that are followed
/// whatever the file says (sent, in doubt, or answered), for [`plan_digest`]: each by its
/// idempotency key and the SHA-256 of its exact body.
#[derive(Debug, Default, Clone)]
pub struct OrdersOutside(Vec<(String, String)>);

impl OrdersOutside {
    pub fn add(&mut self, key: &str, body: &[u8]) {
        self.0
            .push((key.to_string(), hex::encode(Sha256::digest(body))));
    }

    /// Each order's key and the SHA-256 (hex) of its body, in the order of the keys.
    pub fn sorted(&self) -> Vec<(String, String)> {
        let mut orders = self.0.clone();
        orders.sort();
        orders
    }
}

/// The plan digest of a file for its batch: the file's digest ([`PlanDigest`]) when the ledger
/// holds no order for a row the file does not have (a batch new to the ledger, or whose orders
/// are all of rows the file has: those pay what the file's rows say, a change to a row sent
/// being refused); otherwise SHA-256 over a version tag, the file's digest and each such
/// order ([`OrdersOutside`]) in the order of the keys, so that a plan that pays more than the
/// file shows is approved as such. An intent never sent that holds a row the file does not have
/// is not one of them: the run cancels it.
pub fn plan_digest(file: String, orders: OrdersOutside) -> String {
    let mut orders = orders.0;
    if orders.is_empty() {
        return file;
    }
    orders.sort();
    let mut d = PlanDigest(Sha256::new());
    d.0.update(b"paybatch-plan-outside-v1\n");
    d.put("file", &file);
    for (key, body) in &orders {
        d.put("order", key);
        d.put("body", body);
    }
    d.finish()
}

/// The plan digest `plan` with the rows of the file the ledger holds at a later attempt than
/// their first (`attempts`: reference and attempt, made payable again by `retry` or `retry
/// --expired`): `plan` itself when there is none (every row at its first attempt), otherwise
/// SHA-256 over a version tag, `plan` and each such row by reference and attempt, in the order
/// of the references. A retry makes a new plan: the rows it makes payable again are paid
/// once more, and a plan approved before it is not the plan after it. Sending, polling and
/// recording answers change no attempt: a resumed run keeps its digest.
pub fn fold_attempts<'a>(
    plan: String,
    attempts: impl IntoIterator<Item = (&'a str, i64)>,
) -> String {
    let mut attempts: Vec<(&str, i64)> = attempts.into_iter().collect();
    if attempts.is_empty() {
        return plan;
    }
    attempts.sort();
    let mut d = PlanDigest(Sha256::new());
    d.0.update(b"paybatch-plan-attempts-v1\n");
    d.put("plan", &plan);
    for (reference, attempt) in &attempts {
        d.put("row", reference);
        d.put("attempt", &attempt.to_string());
    }
    d.finish()
}

/// The first pass: reads and checks every row of `path`. `digest_of` (batch, environment) asks
/// for the plan digest; `visit` sees every valid row, in file order. A problem with the file as
/// a whole (missing, not UTF-8, no header, no rows) is the `Err`. Nothing is kept of an invalid
/// row but its problems' counts (and the first few problems): the second pass finds them again.
pub fn scan(
    path: &Path,
    input: &InputOptions,
    catalog: &CatalogIndex,
    options: &ValidateOptions,
    digest_of: Option<(&str, &str)>,
    mut visit: impl FnMut(&RowSpec),
) -> Result<Scan, Problem> {
    let mut reader = BatchReader::open(path, input)?;
    let headers = reader.headers().to_vec();
    let columns = reader.columns().clone();
    let sheet = reader.sheet().map(str::to_string);
    let mut format = reader.format();
    let asked_comma = options.decimal_comma;
    let options: &ValidateOptions = &for_file(options, &format);
    let mut marks = DecimalMarks::default();
    let mut validator = Validator::new(catalog, options.clone());
    let mut digest = digest_of.map(|(batch, env)| PlanDigest::new(batch, env));
    let mut rows = 0;
    let mut valid_rows = 0;
    let mut problems = Problems::default();
    for next in reader.by_ref() {
        rows += 1;
        let checked = check(next, &columns, &headers, options, Some(&mut validator));
        match with_sheet(checked, sheet.as_deref()) {
            Checked::Valid(record, mut spec) => {
                marks.see(&record, &columns);
                valid_rows += 1;
                spec.fields = record.fields;
                if let Some(d) = digest.as_mut() {
                    d.row(&spec);
                }
                visit(&spec);
            }
            Checked::Invalid { found, .. } => problems.extend(found),
        }
    }
    let file_hash = reader.finish().map_err(|e| {
        Problem::file(0, format!("cannot read {}: {e}", path.display()))
            .with_help("check that the file is readable and not being written")
    })?;
    format = format.with_decimal_comma(marks.comma(asked_comma));
    Ok(Scan {
        headers,
        columns,
        format,
        sheet,
        file_hash,
        rows,
        valid_rows,
        problems,
        digest: digest.map(PlanDigest::finish),
        references: validator.into_references(),
    })
}

/// One record, checked. (Made and taken apart once a row, never stored: boxing the large
/// variant would only add an allocation a row.)
#[allow(clippy::large_enum_variant)]
enum Checked {
    /// Payable: the record and its spec.
    Valid(RawRecord, RowSpec),
    /// Not payable: its line, its cells (none when it could not be split into the header's
    /// columns), its reference cell and every problem found.
    Invalid {
        line: u64,
        fields: Option<Vec<String>>,
        reference: String,
        found: Vec<Problem>,
    },
}

/// Checks a record as read: its syntax, then (with a validator) the catalog and the rows
/// before it. Without a validator a row whose syntax is valid counts as valid.
fn check(
    next: Result<RawRecord, Problem>,
    columns: &ColumnMap,
    headers: &[String],
    options: &ValidateOptions,
    validator: Option<&mut Validator<'_>>,
) -> Checked {
    let record = match next {
        Ok(record) => record,
        Err(problem) => {
            return Checked::Invalid {
                line: problem.line,
                fields: None,
                reference: String::new(),
                found: vec![problem],
            };
        }
    };
    // The cells move into the spec for the checks (which quote them) and back: never copied.
    match rules::parse_record_owned(columns, headers, record, options) {
        Ok(mut spec) => {
            let found = validator.map(|v| v.check(&spec)).unwrap_or_default();
            let record = RawRecord {
                line: spec.line,
                fields: std::mem::take(&mut spec.fields),
            };
            if found.is_empty() {
                Checked::Valid(record, spec)
            } else {
                Checked::Invalid {
                    line: record.line,
                    reference: spec.reference,
                    fields: Some(record.fields),
                    found,
                }
            }
        }
        Err((record, found)) => Checked::Invalid {
            line: record.line,
            reference: record
                .fields
                .get(columns.reference)
                .cloned()
                .unwrap_or_default(),
            fields: Some(record.fields),
            found,
        },
    }
}

/// The options of a file of layout `format`: a comma is a decimal separator where asked
/// (`--decimal-comma`) and where the delimiter is `;` or a tab (a comma cannot be both the
/// delimiter and the decimal mark of an unquoted cell).
fn for_file<'a>(
    options: &'a ValidateOptions,
    format: &crate::file_format::FileFormat,
) -> Cow<'a, ValidateOptions> {
    if options.decimal_comma || !matches!(format.delimiter(), b';' | b'\t') {
        return Cow::Borrowed(options);
    }
    Cow::Owned(ValidateOptions {
        decimal_comma: true,
        ..options.clone()
    })
}

/// Which decimal mark the amounts of a file are written with, as far as its valid rows show.
#[derive(Default)]
struct DecimalMarks {
    comma: bool,
}

impl DecimalMarks {
    fn see(&mut self, record: &RawRecord, columns: &ColumnMap) {
        self.comma |= record
            .fields
            .get(columns.face_value)
            .is_some_and(|v| v.contains(','));
    }

    /// Whether the file's decimal mark is a comma: asked for, or an amount written with one.
    fn comma(&self, asked: bool) -> bool {
        asked || self.comma
    }
}

/// `checked`, its problems located in the sheet `sheet` of a workbook.
fn with_sheet(checked: Checked, sheet: Option<&str>) -> Checked {
    match (checked, sheet) {
        (
            Checked::Invalid {
                line,
                fields,
                reference,
                found,
            },
            Some(sheet),
        ) => Checked::Invalid {
            line,
            fields,
            reference,
            found: found
                .into_iter()
                .map(|p| {
                    if p.sheet.is_none() {
                        p.in_sheet(sheet)
                    } else {
                        p
                    }
                })
                .collect(),
        },
        (other, _) => other,
    }
}

fn joined(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The file is not the one the first pass read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} changed while it was being read ({reason}); nothing of this run was recorded", .path)]
pub struct FileChanged {
    pub path: String,
    pub reason: String,
}

/// The second pass: reads `path` again and hands `each` every row as the ledger records it,
/// with its spec when it is valid (without its cells: `handed_on`). Invalid rows are found again as the first pass found them
/// (the same checks in the same order; only for a file that had problems), and recorded with
/// every one of their problems. Fails with [`FileChanged`] (after the last row) when the file is
/// not the one [`scan`] read: the caller must then undo what `each` did.
pub fn read_again<E: From<FileChanged>>(
    scan: &Scan,
    path: &Path,
    catalog: &CatalogIndex,
    options: &ValidateOptions,
    mut each: impl FnMut(IncomingRow, Option<RowSpec>) -> Result<(), E>,
) -> Result<(), E> {
    let changed = |reason: &str| FileChanged {
        path: path.display().to_string(),
        reason: reason.to_string(),
    };
    let mut reader = open_again(scan, path).map_err(|reason| changed(&reason))?;
    let options: &ValidateOptions = &for_file(options, &scan.format);
    let mut validator =
        (!scan.problems.is_empty()).then(|| Validator::new(catalog, options.clone()));
    // The references of invalid rows recorded so far (each is recorded under it once).
    let mut taken = Seen::new();
    let mut position = 0i64;
    let mut valid = 0;
    for next in reader.by_ref() {
        let checked = check(
            next,
            &scan.columns,
            &scan.headers,
            options,
            validator.as_mut(),
        );
        match with_sheet(checked, scan.sheet.as_deref()) {
            Checked::Valid(record, spec) => {
                valid += 1;
                each(valid_row(&record, &spec, position), Some(handed_on(spec)))?;
            }
            Checked::Invalid {
                line,
                fields,
                reference,
                found,
            } => {
                let reference = invalid_reference(scan, &mut taken, reference, line);
                each(
                    invalid_row(scan, reference, position, line, fields, &found),
                    None,
                )?;
            }
        }
        position += 1;
    }
    if position as usize != scan.rows || valid != scan.valid_rows {
        return Err(changed("it has another number of rows, or of valid rows").into());
    }
    let hash = reader.finish().map_err(|e| changed(&e.to_string()))?;
    if hash != scan.file_hash {
        return Err(changed("its content is not the same").into());
    }
    Ok(())
}

/// Opens `path` again with the first pass's delimiter; why it is not the same file, when its
/// header already says so.
fn open_again(scan: &Scan, path: &Path) -> Result<BatchReader, String> {
    let reader = BatchReader::open(
        path,
        &InputOptions {
            delimiter: Some(scan.format.delimiter()),
            sheet: scan.sheet.clone(),
        },
    )
    .map_err(|p| p.message)?;
    if reader.headers() != scan.headers.as_slice() {
        return Err("its header is not the same".to_string());
    }
    Ok(reader)
}

/// A valid row as the ledger records it.
fn valid_row(record: &RawRecord, spec: &RowSpec, position: i64) -> IncomingRow {
    IncomingRow {
        reference: spec.reference.clone(),
        position,
        line: record.line as i64,
        fields: fields_json(&record.fields),
        spec: Some(ContentText::of(&spec.content)),
        content_hash: rules::content_hash(spec),
        delivery: Some(spec.distribution.as_str()),
        valid: true,
        error_message: None,
        skipped: false,
    }
}

/// A valid row's spec as it is handed on with the row: without its cells ([`RowSpec::fields`]),
/// which the row holds already (`IncomingRow::fields`, as the ledger records them). Rows wait
/// between the reading and the recording, and for their order: a row of a hundred thousand
/// columns would otherwise be held twice, once as as many strings.
fn handed_on(mut spec: RowSpec) -> RowSpec {
    spec.fields = Vec::new();
    spec
}

/// The reference an invalid row is recorded under. It keeps its own when no other row has it;
/// otherwise (or when it has none) it is recorded as `#line-N`, so every row of the file has a
/// line in the result.
fn invalid_reference(scan: &Scan, taken: &mut Seen, reference: String, line: u64) -> String {
    let own = !reference.is_empty()
        && scan
            .references
            .get_kind(&crate::reference::Folded(&reference), &reference.as_str())
            .is_none_or(|(first, _)| first == line)
        && taken.first_or_insert(&reference.as_str(), line).is_none();
    if own {
        reference
    } else {
        format!("#line-{line}")
    }
}

/// An invalid row as the ledger records it, with every one of its problems.
fn invalid_row(
    scan: &Scan,
    reference: String,
    position: i64,
    line: u64,
    fields: Option<Vec<String>>,
    found: &[Problem],
) -> IncomingRow {
    // Cells that could not be split into the header's columns: as many empty ones.
    let fields = fields.unwrap_or_else(|| vec![String::new(); scan.headers.len()]);
    let content_hash = format!("invalid:{}", fields.join("\u{1f}"));
    IncomingRow {
        reference,
        position,
        line: line as i64,
        fields: fields_json(&fields),
        spec: None,
        content_hash,
        delivery: None,
        valid: false,
        error_message: Some(joined(found)),
        skipped: false,
    }
}

/// Rows handed from the reading thread to the recording one at a time, at most.
const CHUNK_ROWS: usize = 1024;

/// The bytes of rows ([`IncomingRow::size`]) a chunk is handed on at, whatever its number of
/// rows: a file of very wide rows (a hundred thousand columns carried through) holds a few
/// rows at a time between the two threads, not a thousand.
const CHUNK_BYTES: usize = 1 << 20;

/// Why the reading thread stopped early.
enum ReaderStop {
    Changed(FileChanged),
    /// The recording side stopped (it has its own error).
    Closed,
}

impl From<FileChanged> for ReaderStop {
    fn from(e: FileChanged) -> Self {
        ReaderStop::Changed(e)
    }
}

/// A row as the ledger records it, with its spec when it is valid.
type Given = (IncomingRow, Option<RowSpec>);

/// Runs `read` on a thread of its own and hands the rows it gives, a chunk at a time, to
/// `each` on the calling thread: reading, checking and encoding the rows overlaps recording
/// them. Returns what `read` returned, unless `each` failed first (then the reading stops at
/// its next chunk).
fn overlapped<T: Send, E>(
    read: impl FnOnce(&mut dyn FnMut(Given) -> Result<(), ReaderStop>) -> Result<T, ReaderStop> + Send,
    mut each: impl FnMut(IncomingRow, Option<RowSpec>) -> Result<(), E>,
) -> Result<Result<T, ReaderStop>, E> {
    std::thread::scope(|threads| {
        let (to_record, chunks) = std::sync::mpsc::sync_channel::<Vec<Given>>(4);
        let reader = threads.spawn(move || {
            let mut chunk = Vec::with_capacity(CHUNK_ROWS);
            let mut bytes = 0;
            let out = read(&mut |given: Given| {
                bytes += given.0.size();
                chunk.push(given);
                if chunk.len() == CHUNK_ROWS || bytes >= CHUNK_BYTES {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_ROWS));
                    bytes = 0;
                    to_record.send(full).map_err(|_| ReaderStop::Closed)?;
                }
                Ok(())
            })?;
            if !chunk.is_empty() {
                to_record.send(chunk).map_err(|_| ReaderStop::Closed)?;
            }
            Ok(out)
        });
        let mut recorded = Ok(());
        'chunks: for chunk in chunks.iter() {
            for (row, spec) in chunk {
                if let Err(e) = each(row, spec) {
                    recorded = Err(e);
                    break 'chunks;
                }
            }
        }
        // The reader's next send fails once the receiver is gone: it stops.
        drop(chunks);
        let read = match reader.join() {
            Ok(read) => read,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        recorded?;
        Ok(read)
    })
}

/// [`read_again`] on a thread of its own (`overlapped`). The same guarantee: a
/// [`FileChanged`] comes after the last row, and the caller must undo what `each` did.
pub fn read_again_in_parallel<E: From<FileChanged>>(
    scan: &Scan,
    path: &Path,
    catalog: &CatalogIndex,
    options: &ValidateOptions,
    each: impl FnMut(IncomingRow, Option<RowSpec>) -> Result<(), E>,
) -> Result<(), E> {
    let read = overlapped(
        |give| read_again(scan, path, catalog, options, |row, spec| give((row, spec))),
        each,
    )?;
    match read {
        Ok(()) => Ok(()),
        Err(ReaderStop::Changed(e)) => Err(e.into()),
        Err(ReaderStop::Closed) => Err(FileChanged {
            path: path.display().to_string(),
            reason: "the reading stopped before the end".into(),
        }
        .into()),
    }
}

/// What else the reading thread of [`read_once_in_parallel`] does with each valid row: it is
/// told the header, then each row's cells (in file order) with its spec.
pub trait OnValidRow: Send {
    /// The file's header and layout, before its first row.
    fn start(&mut self, headers: &[String], format: crate::file_format::FileFormat);
    fn row(&mut self, fields: Vec<String>, spec: &RowSpec);
}

/// What the file system says of a file: it is the same file, with the same content, only while
/// this stays the same.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
    changed: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        modified: m.modified().ok(),
        changed: (m.ctime(), m.ctime_nsec()),
    })
}

/// One pass instead of two, for a file expected to be valid: reads and checks every row as
/// [`scan`] does (without a plan digest) and hands each one, as the ledger records it, to
/// `each`, overlapped as in [`read_again_in_parallel`]; `cells` is handed each valid row's
/// cells on the reading thread. Returns the [`Scan`] the first pass would have returned; `None`
/// as soon as a row has a problem, when the file cannot be read, or when it was written to,
/// replaced or truncated while it was read (its size, times and inode before the pass and
/// after the last row was handed on differ; two passes compare the bytes of both reads): the
/// caller must then undo what `each` did and read the file in two passes ([`scan`], which finds
/// every problem, then [`read_again`]). `expected_rows`, about how many rows the file has,
/// sizes the tables of the rows read.
pub fn read_once_in_parallel<E>(
    path: &Path,
    input: &InputOptions,
    catalog: &CatalogIndex,
    options: &ValidateOptions,
    expected_rows: usize,
    cells: Option<&mut dyn OnValidRow>,
    each: impl FnMut(IncomingRow, Option<RowSpec>) -> Result<(), E>,
) -> Result<Option<Scan>, E> {
    let Some(before) = stamp(path) else {
        return Ok(None);
    };
    let read = overlapped(
        |give| {
            let Ok(mut reader) = BatchReader::open(path, input) else {
                return Ok(None);
            };
            let headers = reader.headers().to_vec();
            let columns = reader.columns().clone();
            let sheet = reader.sheet().map(str::to_string);
            let asked_comma = options.decimal_comma;
            let options: &ValidateOptions = &for_file(options, &reader.format());
            let mut marks = DecimalMarks::default();
            let mut validator = Validator::for_rows(catalog, options.clone(), expected_rows);
            let mut cells = cells;
            if let Some(c) = cells.as_deref_mut() {
                c.start(&headers, reader.format());
            }
            let mut rows = 0usize;
            for next in reader.by_ref() {
                match check(next, &columns, &headers, options, Some(&mut validator)) {
                    Checked::Valid(record, spec) => {
                        marks.see(&record, &columns);
                        let row = valid_row(&record, &spec, rows as i64);
                        if let Some(c) = cells.as_deref_mut() {
                            c.row(record.fields, &spec);
                        }
                        give((row, Some(handed_on(spec))))?;
                    }
                    Checked::Invalid { .. } => return Ok(None),
                }
                rows += 1;
            }
            let format = reader.format().with_decimal_comma(marks.comma(asked_comma));
            let Ok(file_hash) = reader.finish() else {
                return Ok(None);
            };
            Ok(Some(Scan {
                headers,
                columns,
                format,
                sheet,
                file_hash,
                rows,
                valid_rows: rows,
                problems: Problems::default(),
                digest: None,
                references: validator.into_references(),
            }))
        },
        each,
    )?;
    // Stopped early: the recording side failed (its error came first) or the file needs two
    // passes.
    let read = read.unwrap_or(None);
    Ok(read.filter(|_| stamp(path).is_some_and(|after| after == before)))
}

/// About how many rows (records after the header) the file at `path` has, without parsing it
/// (a read of its bytes): its records end at a line end (`\n`, `\r` or both) outside a quoted
/// cell, lines of nothing but delimiters and blanks do not count (the reader skips them), and a
/// quote opens a quoted cell only at the start of a cell (`delimiter`, or any of `,`, `;`, tab
/// and `|` when it is not given). Only an estimate: the reader decides. `None` when the file
/// cannot be read, and for a workbook (its bytes are compressed: it is read in two passes).
pub fn estimate_rows(path: &Path, delimiter: Option<u8>) -> Option<usize> {
    if super::sheet::Workbook::of(path).is_some() {
        return None;
    }
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut count = RowCount::new(delimiter);
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        count.chunk(&buf[..n]);
    }
    Some(count.rows())
}

/// The count of [`estimate_rows`], fed the file's bytes in order.
struct RowCount {
    delimiter: Option<u8>,
    records: usize,
    /// The byte before, as far as a record is concerned: a line end at the start.
    prev: u8,
    /// The line so far holds more than delimiters and blanks.
    content: bool,
    /// Inside a quoted cell; and whether the byte before, inside it, was a quote (a doubled
    /// quote stays inside, a single one closes the cell).
    quoted: bool,
    quote_seen: bool,
}

impl RowCount {
    fn new(delimiter: Option<u8>) -> Self {
        RowCount {
            delimiter,
            records: 0,
            prev: b'\n',
            content: false,
            quoted: false,
            quote_seen: false,
        }
    }

    fn separates(&self, b: u8) -> bool {
        match self.delimiter {
            Some(d) => b == d,
            None => matches!(b, b',' | b';' | b'\t' | b'|'),
        }
    }

    /// The next byte.
    fn byte(&mut self, b: u8) {
        if self.quoted {
            if self.quote_seen {
                self.quote_seen = false;
                if b == b'"' {
                    return;
                }
                self.quoted = false;
                self.prev = b'"';
            } else {
                self.quote_seen = b == b'"';
                return;
            }
        }
        if b == b'\n' || b == b'\r' {
            self.records += usize::from(self.content);
            self.content = false;
        } else if !self.separates(b) && b != b' ' && b != b'\t' {
            self.content = true;
            let at_cell_start =
                self.prev == b'\n' || self.prev == b'\r' || self.separates(self.prev);
            self.quoted = b == b'"' && at_cell_start;
        }
        self.prev = b;
    }

    /// The next bytes, as [`RowCount::byte`] one at a time, but where nothing can change until
    /// a line end or a quote, the bytes up to the next of those are passed over at once (memchr):
    /// the rest of a line that has content (only a quote opening a cell or the line's end
    /// counts there), or a quoted cell (only a quote counts).
    fn chunk(&mut self, chunk: &[u8]) {
        let mut at = 0;
        while at < chunk.len() {
            let rest = &chunk[at..];
            let next = if self.quoted && !self.quote_seen {
                Some(memchr::memchr(b'"', rest))
            } else if self.content && !self.quoted {
                Some(memchr::memchr3(b'\n', b'\r', b'"', rest))
            } else {
                None
            };
            // Outside a quoted cell, `prev` becomes the last byte passed over.
            let passed = match next {
                None | Some(Some(0)) => 0,
                Some(Some(k)) => k,
                Some(None) => rest.len(),
            };
            if passed > 0 && !self.quoted {
                self.prev = rest[passed - 1];
            }
            at += passed;
            if let Some(&b) = chunk.get(at) {
                self.byte(b);
                at += 1;
            }
        }
    }

    /// The rows after the header.
    fn rows(&self) -> usize {
        (self.records + usize::from(self.content)).saturating_sub(1)
    }
}

/// The input cells as the ledger keeps them (`rows.fields`).
fn fields_json(fields: &[String]) -> String {
    serde_json::to_string(fields).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_compare_with_or_without_prefix_and_in_any_case() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert!(digests_match(&d, &d));
        assert!(digests_match(&"AB".repeat(32), &d));
        assert!(digests_match(&format!("SHA256:{}", "Ab".repeat(32)), &d));
        assert!(!digests_match(&format!("sha256:{}", "ac".repeat(32)), &d));
        assert!(!digests_match("sha256:abc", &d));
        assert!(!digests_match("", &d));
        assert_eq!(normalize_digest("sha256:é"), None);
    }

    fn catalog() -> CatalogIndex {
        CatalogIndex::new(crate::sim::catalog::Catalog::new().products().to_vec())
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(f.path(), text).expect("write");
        f
    }

    fn rows_of(scan: &Scan, path: &Path) -> Vec<IncomingRow> {
        let mut out = Vec::new();
        read_again(
            scan,
            path,
            &catalog(),
            &ValidateOptions::default(),
            |row, _| {
                out.push(row);
                Ok::<_, FileChanged>(())
            },
        )
        .expect("read again");
        out
    }

    const HEADER: &str = "reference,product_code,face_value,currency,email\n";

    /// The text the ledger stores of a valid row, pinned: ledgers written before read the
    /// same, and a row of a file merged again is found unchanged.
    #[test]
    fn the_stored_spec_text_is_pinned() {
        let spec = |email: Option<&str>, country: Option<&str>, card: Option<&str>| RowSpec {
            line: 2,
            reference: "R-1".into(),
            content: crate::row::RowContent {
                product_codes: vec!["AMZ-US".into(), "ITUNES-US".into()],
                face_value: "25.50".parse().expect("decimal"),
                currency: "USD".into(),
                distribution: crate::api::DistributionType::Email,
                email: email.map(str::to_string),
                payment_currency: "EUR".into(),
                country: country.map(str::to_string),
                card_id: card.map(str::to_string),
            },
            fields: vec!["ignored".into()],
            columns: Default::default(),
        };
        let stored = |spec: &RowSpec| {
            let record = RawRecord {
                line: 2,
                fields: Vec::new(),
            };
            let row = valid_row(&record, spec, 0);
            row.spec.expect("valid").as_str().to_string()
        };
        assert_eq!(
            stored(&spec(Some("jané@example.com"), Some("US"), Some("card_1"))),
            r#"{"product_codes":["AMZ-US","ITUNES-US"],"face_value":"25.50","currency":"USD","distribution":"EMAIL","email":"jané@example.com","payment_currency":"EUR","country":"US","card_id":"card_1"}"#
        );
        let mut link = spec(None, None, None);
        link.distribution = crate::api::DistributionType::PayoutLink;
        link.product_codes.truncate(1);
        link.face_value = "10".parse().expect("decimal");
        link.payment_currency = "USD".into();
        assert_eq!(
            stored(&link),
            r#"{"product_codes":["AMZ-US"],"face_value":"10","currency":"USD","distribution":"PAYOUT_LINK","payment_currency":"USD"}"#
        );
    }

    /// The count a byte at a time ([`RowCount::byte`]), as [`estimate_rows`] made it before it
    /// passed over the rest of a line with content and of a quoted cell at once: the yardstick
    /// of the test below.
    fn estimate_a_byte_at_a_time(text: &[u8], delimiter: Option<u8>) -> usize {
        let mut count = RowCount::new(delimiter);
        text.iter().for_each(|&b| count.byte(b));
        count.rows()
    }

    /// Texts of quotes, delimiters, blanks, line ends and letters in any order, short and
    /// across the read's 1 MiB chunks: the count passing over bytes at once is the count a
    /// byte at a time.
    #[test]
    fn the_estimate_passing_over_bytes_counts_as_a_byte_at_a_time() {
        let alphabet = b"ab\",;|\t \n\r\"x";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize
        };
        let mut texts: Vec<Vec<u8>> = (0..300)
            .map(|_| {
                let len = next() % 64;
                (0..len)
                    .map(|_| alphabet[next() % alphabet.len()])
                    .collect()
            })
            .collect();
        // Long lines and quoted cells that cross the chunks' boundary.
        let mut long = Vec::new();
        while long.len() < (1 << 20) + 5_000 {
            let line: &[u8] = match next() % 4 {
                0 => b"R-1,AMZ-US,10,USD,a@x.io\n",
                1 => b"R-2,\"a, \"\"quoted\"\"\ncell\",5\r\n",
                2 => b" , ,\t\n",
                _ => b"R-3,5\" screen,\"x\"\n",
            };
            long.extend_from_slice(line);
        }
        texts.push(long);
        for text in &texts {
            let f = tempfile::NamedTempFile::new().expect("temp file");
            std::fs::write(f.path(), text).expect("write");
            for delimiter in [None, Some(b';')] {
                assert_eq!(
                    estimate_rows(f.path(), delimiter),
                    Some(estimate_a_byte_at_a_time(text, delimiter)),
                    "{:?} {delimiter:?}",
                    String::from_utf8_lossy(&text[..text.len().min(80)])
                );
            }
        }
    }

    #[test]
    fn rows_are_estimated_from_line_ends_outside_quotes() {
        let est = |text: &str| estimate_rows(file(text).path(), None);
        assert_eq!(est(HEADER), Some(0));
        assert_eq!(est(""), Some(0));
        assert_eq!(
            est(&format!("{HEADER}A,AMZ-US,10,USD,\nB,AMZ-US,10,USD,\n")),
            Some(2)
        );
        // No line end after the last row; a quoted cell with line ends and doubled quotes.
        assert_eq!(
            est(&format!(
                "{HEADER}A,AMZ-US,10,USD,\"x\n\"\"y\"\"\n\"\nB,AMZ-US,10,USD,"
            )),
            Some(2)
        );
        // CRLF and CR line ends count once; blank lines do not count.
        assert_eq!(est("a,b\r\n1,2\r\n3,4\r\n"), Some(2));
        assert_eq!(est("a,b\r1,2\r3,4\r"), Some(2));
        assert_eq!(est("a,b\n\n1,2\n\n\r\n3,4\n\n\n"), Some(2));
        // Lines of nothing but delimiters and blanks are skipped, as the reader skips them.
        assert_eq!(est("a,b\n1,2\n,\n , \t\n3,4\n,,\n"), Some(2));
        // A quote inside an unquoted cell is a character, as the reader takes it.
        assert_eq!(est("a,b\n1,5\" screen\n3,4\n5,6\n"), Some(3));
        assert_eq!(
            estimate_rows(file("a;b\n1;\"x;\ny\"\n").path(), Some(b';')),
            Some(1)
        );
        assert_eq!(
            estimate_rows(Path::new("/nonexistent/file.csv"), None),
            None
        );
    }

    /// What a row of a file becomes, pinned byte for byte: its stored text, its content hash
    /// (by which the plan digest and the ledger know it) and the body of its order, sent (from
    /// the row as read) and as the stored rows stand for it (an order reconciliation adopted):
    /// one and the same.
    #[test]
    fn a_rows_stored_text_hash_and_order_body_are_pinned() {
        let text = format!("{HEADER}R-1,AMZ-US,25.50,USD,jane@example.com\nR-2,AMZ-US,10,USD,\n");
        let f = file(&text);
        let cat = catalog();
        let opts = ValidateOptions::default();
        let mut read = Vec::new();
        read_once_in_parallel(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            0,
            None,
            |row, spec| {
                read.push((row, spec.expect("valid")));
                Ok::<_, FileChanged>(())
            },
        )
        .expect("read once")
        .expect("a valid file");
        let stored: Vec<String> = read
            .iter()
            .map(|(row, _)| row.spec.as_ref().expect("stored").as_str().to_string())
            .collect();
        assert_eq!(
            stored,
            [
                r#"{"product_codes":["AMZ-US"],"face_value":"25.50","currency":"USD","distribution":"EMAIL","email":"jane@example.com","payment_currency":"USD"}"#,
                r#"{"product_codes":["AMZ-US"],"face_value":"10","currency":"USD","distribution":"PAYOUT_LINK","payment_currency":"USD"}"#,
            ]
        );
        // What the ledger reads back of each row.
        let read_back: Vec<crate::row::RowContent> = stored
            .iter()
            .map(|text| crate::row::RowContent::parse(text).expect("reads back"))
            .collect();
        for ((row, spec), content) in read.iter().zip(&read_back) {
            assert_eq!(row.content_hash, rules::content_hash(spec));
            assert_eq!(
                rules::content_hash_of(&row.reference, content),
                row.content_hash
            );
        }
        assert_eq!(
            read[0].0.content_hash,
            // The v1 definition (`content_hash.rs`), computed apart from this code.
            "324aca73f4d8ad900e1882c5eec93a9d91d7b591b9066ef6bf0a0905c3a3dca4"
        );
        let payment = crate::batch::order_body::payment_method("USD", None);
        let rows: Vec<(&RowSpec, i64)> = read.iter().map(|(_, spec)| (spec, 1)).collect();
        let sent =
            crate::batch::order_body::order_body("K", "nov", &payment, &rows).expect("a body");
        let contents: Vec<Option<&crate::row::RowContent>> = read_back.iter().map(Some).collect();
        let owner = crate::batch::verify::Owner {
            key: "K",
            batch: "nov",
            rows: &[("R-1", 1), ("R-2", 1)],
        };
        let adopted =
            crate::batch::verify::body_of_rows(payment, &contents, &owner).expect("a body");
        assert_eq!(
            String::from_utf8_lossy(&sent),
            String::from_utf8_lossy(&adopted)
        );
        assert_eq!(
            String::from_utf8_lossy(&sent),
            r#"{"payment_method":{"type":"ACCOUNT_BALANCE","currency":"USD"},"items":[{"face_value":25.50,"distribution_method":{"type":"EMAIL","email_address":"jane@example.com"},"products":{"type":"SINGLE","value":"AMZ-US"}},{"face_value":10,"distribution_method":{"type":"PAYOUT_LINK"},"products":{"type":"SINGLE","value":"AMZ-US"}}],"description":"paybatch K batch=nov rows=R-1 (+1 more)","metadata":{"paybatch_attempts":"1","paybatch_batch":"nov","paybatch_rows":"R-1|R-2"}}"#
        );
    }

    /// Reading once gives what the first pass gives for a valid file, hands every row over as
    /// the second pass does, and stops at a row with a problem.
    #[test]
    fn reading_once_finds_what_two_passes_find_and_stops_at_a_problem() {
        let text = format!("{HEADER}A,AMZ-US,10,USD,a@example.com\nB,AMZ-US,25.50,USD,\n");
        let f = file(&text);
        let cat = catalog();
        let opts = ValidateOptions::default();
        let first = scan(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            None,
            |_| {},
        )
        .expect("scan");
        let mut seen = Vec::new();
        let once = read_once_in_parallel(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            0,
            None,
            |row, spec| {
                assert!(spec.is_some());
                seen.push(row);
                Ok::<_, FileChanged>(())
            },
        )
        .expect("read once")
        .expect("a valid file");
        assert_eq!(
            (
                &once.headers,
                once.rows,
                once.valid_rows,
                &once.file_hash,
                once.format
            ),
            (
                &first.headers,
                first.rows,
                first.valid_rows,
                &first.file_hash,
                first.format
            )
        );
        assert!(once.problems.is_empty());
        assert_eq!(seen, rows_of(&first, f.path()));

        // The second row repeats the first one's reference: the pass stops there.
        let f = file(&format!(
            "{HEADER}A,AMZ-US,10,USD,\nA,AMZ-US,11,USD,\nC,AMZ-US,12,USD,\n"
        ));
        let mut seen = 0;
        let once = read_once_in_parallel(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            0,
            None,
            |_, _| {
                seen += 1;
                Ok::<_, FileChanged>(())
            },
        )
        .expect("read once");
        assert!(once.is_none());
        assert_eq!(seen, 1);
        // A file written to while it is read: every row was valid, but the pass does not
        // count (the two passes compare what they read).
        let f = file(&text);
        let mut appended = false;
        let once = read_once_in_parallel(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            0,
            None,
            |_, _| {
                if !appended {
                    appended = true;
                    let mut w = std::fs::OpenOptions::new()
                        .append(true)
                        .open(f.path())
                        .expect("open to append");
                    std::io::Write::write_all(&mut w, b"C,AMZ-US,12,USD,\n").expect("append");
                }
                Ok::<_, FileChanged>(())
            },
        )
        .expect("read once");
        assert!(appended);
        assert!(once.is_none(), "a file written to during the pass");
        // A file that cannot be read as a batch: the two passes say why.
        let f = file("");
        let once = read_once_in_parallel(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            0,
            None,
            |_, _| Ok::<_, FileChanged>(()),
        )
        .expect("read once");
        assert!(once.is_none());
    }

    #[test]
    fn every_row_gets_a_reference_of_its_own() {
        // Line 2 cannot be parsed but names A; line 3 is a valid A; line 4 repeats A; line 5
        // has no reference; lines 6 and 7 are two unparsable rows named B.
        let text = format!(
            "{HEADER}A,AMZ-US,oops,USD,\nA,AMZ-US,10,USD,\nA,AMZ-US,25.50,USD,\n,AMZ-US,10,USD,\nB,NOPE,x,USD,\nB,NOPE,y,USD,\n"
        );
        let f = file(&text);
        let cat = catalog();
        let s = scan(
            f.path(),
            &InputOptions::default(),
            &cat,
            &ValidateOptions::default(),
            None,
            |_| {},
        )
        .expect("scan");
        assert_eq!((s.rows, s.valid_rows), (6, 1));
        let rows = rows_of(&s, f.path());
        let refs: Vec<(&str, bool)> = rows
            .iter()
            .map(|r| (r.reference.as_str(), r.valid))
            .collect();
        assert_eq!(
            refs,
            [
                ("#line-2", false),
                ("A", true),
                ("#line-4", false),
                ("#line-5", false),
                ("B", false),
                ("#line-7", false)
            ]
        );
        let positions: Vec<i64> = rows.iter().map(|r| r.position).collect();
        assert_eq!(positions, [0, 1, 2, 3, 4, 5]);
        assert!(
            rows[2]
                .error_message
                .as_deref()
                .unwrap_or("")
                .contains("already used on line 3")
        );
    }

    #[test]
    fn a_file_changed_between_the_passes_is_refused() {
        let f = file(&format!("{HEADER}A,AMZ-US,10,USD,\nB,AMZ-US,25.50,USD,\n"));
        let cat = catalog();
        let opts = ValidateOptions::default();
        let s = scan(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            None,
            |_| {},
        )
        .expect("scan");
        // Same rows, same length, one amount changed.
        std::fs::write(
            f.path(),
            format!("{HEADER}A,AMZ-US,10,USD,\nB,AMZ-US,25.00,USD,\n"),
        )
        .expect("rewrite");
        let got = read_again(&s, f.path(), &cat, &opts, |_, _| Ok::<_, FileChanged>(()));
        let err = got.expect_err("a changed file");
        assert!(
            err.to_string().contains("changed while it was being read"),
            "{err}"
        );
        // A row more.
        std::fs::write(
            f.path(),
            format!("{HEADER}A,AMZ-US,10,USD,\nB,AMZ-US,25.50,USD,\nC,AMZ-US,10,USD,\n"),
        )
        .expect("rewrite");
        assert!(read_again(&s, f.path(), &cat, &opts, |_, _| Ok::<_, FileChanged>(())).is_err());
    }

    #[test]
    fn the_parallel_reading_hands_over_every_row_in_order_and_stops_when_told() {
        let cat = catalog();
        let opts = ValidateOptions::default();
        let mut text = HEADER.to_string();
        for i in 0..3000 {
            text.push_str(&format!("R{i},AMZ-US,10,USD,\n"));
        }
        let f = file(&text);
        let s = scan(
            f.path(),
            &InputOptions::default(),
            &cat,
            &opts,
            None,
            |_| {},
        )
        .expect("scan");
        let mut seen = Vec::new();
        read_again_in_parallel(&s, f.path(), &cat, &opts, |row, spec| {
            assert!(spec.is_some());
            seen.push(row.position);
            Ok::<_, FileChanged>(())
        })
        .expect("read");
        assert_eq!(seen, (0..3000).collect::<Vec<i64>>());

        // The recording side fails: its error comes back, and the reader stops.
        let mut count = 0;
        let got = read_again_in_parallel(&s, f.path(), &cat, &opts, |_, _| {
            count += 1;
            if count == 1500 {
                return Err(FileChanged {
                    path: "x".into(),
                    reason: "recording failed".into(),
                });
            }
            Ok(())
        });
        assert!(got.is_err_and(|e| e.reason == "recording failed"));
        assert_eq!(count, 1500);

        // The file changes under it: reported after the last row.
        std::fs::write(
            f.path(),
            text.replace("R2999,AMZ-US,10", "R2999,AMZ-US,25.50"),
        )
        .expect("rewrite");
        let got =
            read_again_in_parallel(&s, f.path(), &cat, &opts, |_, _| Ok::<_, FileChanged>(()));
        assert!(got.is_err_and(|e| e.reason.contains("content")));
    }

    #[test]
    fn the_file_hash_is_of_every_byte_even_after_a_stop() {
        // A BOM and an unbalanced quote that ends the reading: the hash still covers it all.
        let text = format!("\u{feff}{HEADER}A,AMZ-US,10,USD,\n\"B,AMZ-US,10,USD,\n");
        let f = file(&text);
        let s = scan(
            f.path(),
            &InputOptions::default(),
            &catalog(),
            &ValidateOptions::default(),
            None,
            |_| {},
        )
        .expect("scan");
        use sha2::Digest;
        assert_eq!(
            s.file_hash,
            hex::encode(sha2::Sha256::digest(text.as_bytes()))
        );
    }

    #[test]
    fn the_digest_covers_the_valid_rows_only() {
        let cat = catalog();
        let opts = ValidateOptions::default();
        let digest = |text: &str| {
            let f = file(text);
            scan(
                f.path(),
                &InputOptions::default(),
                &cat,
                &opts,
                Some(("nov", "sim")),
                |_| {},
            )
            .expect("scan")
            .digest
            .expect("digest")
        };
        let base = digest(&format!("{HEADER}A,AMZ-US,10,USD,\n"));
        assert_eq!(
            base,
            digest(&format!("{HEADER}A,AMZ-US,10,USD,\nB,NOPE,10,USD,\n"))
        );
        assert_ne!(base, digest(&format!("{HEADER}A,AMZ-US,25.50,USD,\n")));
    }

    /// A plan with no row at a later attempt keeps its digest; each row's attempt changes it,
    /// whatever order they are read in.
    #[test]
    fn rows_at_a_later_attempt_are_part_of_the_plan_digest() {
        let plan = PlanDigest::new("nov", "sim").finish();
        assert_eq!(fold_attempts(plan.clone(), []), plan);
        let retried = fold_attempts(plan.clone(), [("R-2", 2), ("R-1", 2)]);
        assert_ne!(retried, plan);
        assert_eq!(
            fold_attempts(plan.clone(), [("R-1", 2), ("R-2", 2)]),
            retried
        );
        assert_ne!(
            fold_attempts(plan.clone(), [("R-1", 2), ("R-2", 3)]),
            retried
        );
        assert_ne!(fold_attempts(plan.clone(), [("R-1", 2)]), retried);
        assert!(normalize_digest(&retried).is_some_and(|d| d == retried));
    }

    /// A file's digest stays the plan digest while the ledger follows no order for a row the
    /// file lacks; each such order (key and exact body) changes it, whatever order they are
    /// read in.
    #[test]
    fn orders_followed_for_rows_outside_the_file_are_part_of_the_plan_digest() {
        let file = PlanDigest::new("nov", "sim").finish();
        let with = |orders: &[(&str, &[u8])]| {
            let mut o = OrdersOutside::default();
            for (key, body) in orders {
                o.add(key, body);
            }
            plan_digest(file.clone(), o)
        };
        assert_eq!(with(&[]), file);
        let one = with(&[("k1", b"{}")]);
        assert_ne!(one, file);
        assert_ne!(one, with(&[("k1", b"{ }")]), "another body");
        assert_ne!(one, with(&[("k2", b"{}")]), "another key");
        assert_eq!(
            with(&[("k1", b"{}"), ("k2", b"[]")]),
            with(&[("k2", b"[]"), ("k1", b"{}")])
        );
        assert!(normalize_digest(&one).is_some_and(|d| d == one));
    }
}
