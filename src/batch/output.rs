//! The result file: the input columns, then what happened to each row.
//!
//! It holds payout links, which are bearer instruments, so it is written with mode 0600 from the
//! first byte, atomically (a temporary file in the same directory, synced, then renamed over the
//! target). Finance teams open it in spreadsheets, so every cell that a spreadsheet would read as
//! a formula is neutralised. What the service said (ids, links, error messages) and the input's
//! cells are written as the terminal shows them ([`crate::text::cell`]): a control character or
//! a bidirectional override in the form `\u{1b}`, what is or looks like an API key hidden. The
//! ledger keeps every value as it was received.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use super::workbook::{Cell, SheetWriter, is_workbook};
use crate::file_format::FileFormat;
use crate::files;

pub use crate::input::columns::RESULT_COLUMNS;

/// One row of the result file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultLine {
    /// The input cells, in header order.
    pub fields: Vec<String>,
    pub status: String,
    pub order_id: Option<String>,
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    pub price: Option<String>,
    pub discount: Option<String>,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
    pub completed_at: Option<String>,
    /// `ACCOUNT_BALANCE:CUR` or `CARD:card-id`, once the row is in an order.
    pub payment_method: Option<String>,
    /// What the paying balance (or card) was charged for the row, and in which currency.
    pub debited_amount: Option<String>,
    pub debited_currency: Option<String>,
    /// The payout link's status as last read (ACTIVE, CLAIMED, CANCELLED, EXPIRED), since
    /// when, and when it expires.
    pub payout_status: Option<String>,
    pub payout_status_since: Option<String>,
    pub payout_expires_at: Option<String>,
    /// The earlier attempt this row's payout reissued (its link expired): `attempt N: ORDER-ID`.
    pub reissue_of: Option<String>,
    /// What all the row's attempts charged (the attempt in `debited_amount` and every earlier
    /// one reissued), in `debited_currency`; the sum of this column per currency is what left
    /// the balances for the batch.
    pub charged_all_attempts: Option<String>,
}

impl ResultLine {
    /// About how many bytes the line holds: its input cells (each a string, empty or not) and
    /// the text of the cells added.
    pub fn size(&self) -> usize {
        let cells: usize = self.fields.iter().map(String::capacity).sum();
        let added: usize = [
            &self.order_id,
            &self.item_id,
            &self.payout_url,
            &self.price,
            &self.discount,
            &self.error_type,
            &self.error_message,
            &self.completed_at,
            &self.payment_method,
            &self.debited_amount,
            &self.debited_currency,
            &self.payout_status,
            &self.payout_status_since,
            &self.payout_expires_at,
            &self.reissue_of,
            &self.charged_all_attempts,
        ]
        .iter()
        .map(|o| o.as_ref().map_or(0, String::len))
        .sum();
        self.fields.capacity() * std::mem::size_of::<String>() + cells + self.status.len() + added
    }

    /// The cells of the row: input cells, then one per [`RESULT_COLUMNS`] entry.
    fn cells(&self) -> impl Iterator<Item = &str> {
        fn opt(o: &Option<String>) -> &str {
            o.as_deref().unwrap_or("")
        }
        let added = [
            self.status.as_str(),
            opt(&self.order_id),
            opt(&self.item_id),
            opt(&self.payout_url),
            opt(&self.price),
            opt(&self.discount),
            opt(&self.error_type),
            opt(&self.error_message),
            opt(&self.completed_at),
            opt(&self.payment_method),
            opt(&self.debited_amount),
            opt(&self.debited_currency),
            opt(&self.payout_status),
            opt(&self.payout_status_since),
            opt(&self.payout_expires_at),
            opt(&self.reissue_of),
            opt(&self.charged_all_attempts),
        ];
        self.fields.iter().map(String::as_str).chain(added)
    }
}

/// What the result file holds in a cell: [`neutralize`]d, as [`crate::text::cell`] shows it;
/// a payout link that is not [`plain_link`] gets `'` before it, so that no spreadsheet takes
/// it for a link.
pub fn result_cell(cell: &str, is_link: bool) -> Cow<'_, str> {
    let shown = crate::text::cell(cell);
    if is_link && !cell.is_empty() && !plain_link(cell) {
        return Cow::Owned(format!("'{shown}"));
    }
    match shown {
        Cow::Borrowed(b) => neutralize(b),
        Cow::Owned(o) => Cow::Owned(neutralize(&o).into_owned()),
    }
}

/// The position of `payout_url` among [`RESULT_COLUMNS`].
const LINK_COLUMN: usize = 3;

/// The positions of the amounts among [`RESULT_COLUMNS`] (`price`, `discount`,
/// `debited_amount`, `charged_all_attempts`): written with the layout's decimal mark
/// ([`FileFormat::amount`]), and as numbers in a workbook.
pub const AMOUNT_COLUMNS: [usize; 4] = [4, 5, 10, 16];

/// Whether `url` is a plain `http://` or `https://` URL.
pub fn plain_link(url: &str) -> bool {
    let scheme = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        || url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    scheme
        && !url
            .chars()
            .any(|c| c.is_whitespace() || crate::text::is_unsafe(c))
}

/// What `path` is when it exists and is not a regular file: a symbolic link (never followed),
/// a directory, a device, a fifo or a socket. An output is written as a new file renamed over
/// its target, which would put a regular file in place of any of them (as root, in place of
/// `/dev/null` for the whole machine): such a target is refused. `None` when `path` does not
/// exist or is a regular file.
pub fn not_a_regular_file(path: &Path) -> Option<&'static str> {
    let kind = std::fs::symlink_metadata(path).ok()?.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_symlink() {
        return Some("a symbolic link");
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_fifo() {
            return Some("a fifo (named pipe)");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Whether `a` and `b` name the same file: their canonical paths are equal (a link, `..` or
/// another spelling is the same file), or, when one cannot be made canonical, their text is.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| crate::ledger::canonical_path(p).ok();
    match (canonical(a), canonical(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// Why a file asked for as output (`--out`, `--html`, `--journal`) must not be written: it is
/// the ledger, one of its side files (`-wal`, `-shm`, the lock), an input file, or one of the
/// `results` (the result files of batches, which hold their payout links), compared by their
/// canonical paths (a link, `..` or another spelling is the same file). `None` when it may be.
pub fn output_clash(
    out: &Path,
    ledger: &Path,
    inputs: &[&Path],
    results: &[&Path],
) -> Option<String> {
    let canonical = |p: &Path| crate::ledger::canonical_path(p).ok();
    let target = canonical(out)?;
    if let Some(l) = canonical(ledger) {
        let side = |suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", l.display()));
        if target == l {
            return Some(format!("{} is the ledger", out.display()));
        }
        for suffix in ["-wal", "-shm", "-journal", ".lock"] {
            if target == side(suffix) {
                return Some(format!("{} is the ledger's {suffix} file", out.display()));
            }
        }
        // The lock file beside the ledger as it was named.
        if canonical(&crate::ledger::lock::lock_path(ledger)).is_some_and(|lock| lock == target) {
            return Some(format!("{} is the ledger's lock file", out.display()));
        }
    }
    // The embedded simulator's state beside the ledger (the default rehearsal's service), and
    // its own -wal and -shm files.
    let state = crate::environment::embedded_state_path(ledger);
    if let Some(s) = canonical(&state) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if target.as_os_str() == format!("{}{suffix}", s.display()).as_str() {
                return Some(format!(
                    "{} is the embedded simulator's state{}",
                    out.display(),
                    if suffix.is_empty() { "" } else { " file" }
                ));
            }
        }
    }
    for input in inputs {
        if canonical(input).is_some_and(|i| i == target) {
            return Some(format!("{} is the input file", out.display()));
        }
    }
    for result in results {
        if canonical(result).is_some_and(|r| r == target) {
            return Some(format!(
                "{} is the result file of a batch (its payout links)",
                out.display()
            ));
        }
    }
    None
}

/// A cell made safe to open in a spreadsheet: prefixed with `'` when it starts with `=`, `+`,
/// `-`, `@` (or their full-width forms `＝`, `＋`, `－`, `＠`, which spreadsheets in East Asian
/// locales read the same way), a tab or a carriage return (which a spreadsheet could run as a
/// formula).
pub fn neutralize(cell: &str) -> Cow<'_, str> {
    const FORMULA_STARTS: [char; 10] = [
        '=', '+', '-', '@', '\t', '\r', '\u{ff1d}', '\u{ff0b}', '\u{ff0d}', '\u{ff20}',
    ];
    if cell.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// Writes the result file at `path` in layout `format`: `headers` then [`RESULT_COLUMNS`], one
/// row per line, every cell as `result_cell` writes it. Atomic, and mode 0600 even when it
/// replaces an existing file.
pub fn write_results(
    path: &Path,
    headers: &[String],
    format: FileFormat,
    lines: impl IntoIterator<Item = ResultLine>,
) -> io::Result<()> {
    let mut w = ResultWriter::create(path, headers, format)?;
    for line in lines {
        w.write(&line)?;
    }
    w.finish()
}

/// A file written atomically and privately: a temporary file beside the target, mode 0600 from
/// its creation, that [`PrivateFile::commit`] syncs and renames over the target; dropped
/// uncommitted, it is removed and the target is left as it was.
///
/// A process killed while writing leaves its temporary file (`.NAME.XXXXXX.tmp`, with the rows
/// and payout links written so far) behind: the next write of the same target removes it. A
/// temporary file being written is locked (an OS file lock, released when its process ends), so
/// only the ones whose writer is gone are removed.
pub struct PrivateFile {
    tmp: tempfile::NamedTempFile,
    path: std::path::PathBuf,
    dir: std::path::PathBuf,
    _unfinished: Unfinished,
}

/// The temporary files of the [`PrivateFile`]s of this process not yet in place: a run stopped
/// by a signal removes them ([`remove_unfinished`]) before it exits, whatever thread was
/// writing them.
static UNFINISHED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A temporary file listed in [`UNFINISHED`] while it lives.
struct Unfinished(std::path::PathBuf);

impl Unfinished {
    fn new(path: &Path) -> Self {
        UNFINISHED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_path_buf());
        Unfinished(path.to_path_buf())
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        let mut all = UNFINISHED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = all.iter().position(|p| p == &self.0) {
            all.swap_remove(at);
        }
    }
}

/// Removes the temporary files of this process's private files not yet in place (a result
/// file being written when the run was stopped): what they hold (payout links, addresses) is
/// not left behind. Their writers, if they go on, fail or write to nothing.
pub fn remove_unfinished() {
    let all = std::mem::take(&mut *UNFINISHED.lock().unwrap_or_else(|p| p.into_inner()));
    for path in all {
        let _ = std::fs::remove_file(path);
    }
}

impl PrivateFile {
    /// Starts the file that will replace `path`; a `path` that exists and is not a regular
    /// file ([`not_a_regular_file`]) is refused before anything is written.
    pub fn create(path: &Path) -> io::Result<Self> {
        if let Some(what) = not_a_regular_file(path) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("it is {what}: only a regular file is replaced by an output"),
            ));
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let prefix = format!(".{name}.");
        remove_stale_temporaries(dir, &prefix);
        let mut builder = tempfile::Builder::new();
        builder
            .prefix(&prefix)
            .suffix(TMP_SUFFIX)
            .rand_bytes(TMP_RANDOM_CHARS);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(files::PRIVATE_MODE));
        }
        // The error names the target (as the caller gives it), not the temporary file.
        let tmp = builder
            .tempfile_in(dir)
            .map_err(|e| temporary_error(&e, dir))?;
        // Also under an umask that the builder's mode does not override.
        files::set_private(tmp.as_file())?;
        // Marks it as being written (see `remove_stale_temporaries`); a file system without
        // locks only loses the clean-up of this file if the process is killed.
        let _ = tmp.as_file().try_lock();
        let unfinished = Unfinished::new(tmp.path());
        Ok(PrivateFile {
            tmp,
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            _unfinished: unfinished,
        })
    }

    /// The temporary file, to write to.
    pub fn file(&self) -> &File {
        self.tmp.as_file()
    }

    /// Makes the file durable and puts it in place of the target.
    pub fn commit(self) -> io::Result<()> {
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        // The rename is durable once the directory is synced.
        #[cfg(unix)]
        File::open(&self.dir)?.sync_all()?;
        Ok(())
    }
}

/// Why the temporary file of an output could not be made in `dir`, without its name (which
/// the caller does not know: it names the target).
fn temporary_error(e: &io::Error, dir: &Path) -> io::Error {
    let os = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<io::Error>())
        .and_then(io::Error::raw_os_error)
        .or(e.raw_os_error());
    match (e.kind(), os) {
        (io::ErrorKind::NotFound, _) => io::Error::new(
            io::ErrorKind::NotFound,
            format!("the directory {} does not exist", dir.display()),
        ),
        (_, Some(code)) => io::Error::from_raw_os_error(code),
        (kind, None) => io::Error::new(kind, kind.to_string()),
    }
}

/// The result file being written, one line at a time, as a [`PrivateFile`]: the target is
/// replaced only by [`ResultWriter::finish`].
pub struct ResultWriter {
    file: PrivateFile,
    sink: Sink,
    format: FileFormat,
    inputs: usize,
    written: usize,
}

/// What a result file is written as: CSV in its layout, or a workbook (a `path` ending in
/// `.xlsx`).
enum Sink {
    Csv(Box<csv::Writer<io::BufWriter<File>>>),
    Workbook(Box<SheetWriter>),
}

impl ResultWriter {
    /// Starts the file at `path` in layout `format` (its BOM, delimiter and line ends), with
    /// its header line: `headers`, then [`RESULT_COLUMNS`]. A `path` ending in `.xlsx` is
    /// written as a workbook ([`super::workbook`]) with the same rows.
    pub fn create(path: &Path, headers: &[String], format: FileFormat) -> io::Result<Self> {
        let file = PrivateFile::create(path)?;
        let header_cells = headers
            .iter()
            .map(String::as_str)
            .chain(RESULT_COLUMNS)
            .map(|c| result_cell(c, false));
        let sink = if is_workbook(path) {
            let header = headers
                .iter()
                .map(String::as_str)
                .chain(RESULT_COLUMNS)
                .map(crate::text::cell);
            Sink::Workbook(Box::new(SheetWriter::create(header)?))
        } else {
            let mut csv = format.writer(io::BufWriter::with_capacity(
                256 * 1024,
                file.file().try_clone()?,
            ))?;
            csv.write_record(header_cells.map(|c| c.into_owned()))
                .map_err(csv_to_io)?;
            Sink::Csv(Box::new(csv))
        };
        Ok(ResultWriter {
            file,
            sink,
            format,
            inputs: headers.len(),
            written: 0,
        })
    }

    /// Adds a line; a line whose input cells do not match the header is refused.
    pub fn write(&mut self, line: &ResultLine) -> io::Result<()> {
        self.written += 1;
        if line.fields.len() != self.inputs {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "result row {} has {} input cells but the header has {}",
                    self.written,
                    line.fields.len(),
                    self.inputs
                ),
            ));
        }
        let inputs = self.inputs;
        let is_amount = |i: usize| i >= inputs && AMOUNT_COLUMNS.contains(&(i - inputs));
        let csv = match &mut self.sink {
            Sink::Csv(csv) => csv,
            Sink::Workbook(sheet) => {
                let shown: Vec<Cow<str>> = line.cells().map(crate::text::cell).collect();
                return sheet.write(shown.iter().enumerate().map(|(i, c)| {
                    if is_amount(i) {
                        Cell::Amount(c)
                    } else {
                        Cell::Text(c)
                    }
                }));
            }
        };
        let link = inputs + LINK_COLUMN;
        for (i, cell) in line.cells().enumerate() {
            let cell = if is_amount(i) {
                self.format.amount(cell)
            } else {
                Cow::Borrowed(cell)
            };
            csv.write_field(result_cell(&cell, i == link).as_bytes())
                .map_err(csv_to_io)?;
        }
        csv.write_record(None::<&[u8]>).map_err(csv_to_io)
    }

    /// Makes the file durable and puts it in place of the target.
    pub fn finish(self) -> io::Result<()> {
        match self.sink {
            Sink::Csv(csv) => {
                let mut buf = csv
                    .into_inner()
                    .map_err(|e| io::Error::other(e.to_string()))?;
                buf.flush()?;
            }
            Sink::Workbook(sheet) => {
                let mut out = io::BufWriter::new(self.file.file().try_clone()?);
                sheet.finish(&mut out)?;
                out.flush()?;
            }
        }
        self.file.commit()
    }
}

const TMP_SUFFIX: &str = ".tmp";
const TMP_RANDOM_CHARS: usize = 6;

/// Removes the temporary files that killed writes of the target left in `dir`: the regular
/// files named `PREFIX` + 6 letters or digits + `.tmp` whose lock no process holds. Best
/// effort: a file that cannot be checked or removed is left.
fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let random = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(TMP_SUFFIX));
        let ours = random.is_some_and(|r| {
            r.len() == TMP_RANDOM_CHARS && r.bytes().all(|b| b.is_ascii_alphanumeric())
        });
        // Not followed if it is a link: only a regular file of that name is ours.
        if !ours || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let Ok(file) = options.open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn csv_to_io(e: csv::Error) -> io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_amount_columns_are_the_amounts() {
        let named: Vec<&str> = AMOUNT_COLUMNS.iter().map(|i| RESULT_COLUMNS[*i]).collect();
        assert_eq!(
            named,
            [
                "price",
                "discount",
                "debited_amount",
                "charged_all_attempts"
            ]
        );
        assert_eq!(RESULT_COLUMNS[LINK_COLUMN], "payout_url");
    }

    use super::*;

    #[test]
    fn neutralizes_formula_starts() {
        for (cell, want) in [
            ("=SUM(A1:A3)", "'=SUM(A1:A3)"),
            ("+1", "'+1"),
            ("-5", "'-5"),
            ("@cmd", "'@cmd"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("\u{ff1d}HYPERLINK(\"x\")", "'\u{ff1d}HYPERLINK(\"x\")"),
            ("\u{ff0b}1", "'\u{ff0b}1"),
            ("\u{ff0d}1", "'\u{ff0d}1"),
            ("\u{ff20}SUM(A1)", "'\u{ff20}SUM(A1)"),
            ("plain", "plain"),
            ("", ""),
            ("a=b", "a=b"),
            ("10.50", "10.50"),
        ] {
            assert_eq!(neutralize(cell), want, "{cell:?}");
        }
        assert!(matches!(neutralize("ok"), Cow::Borrowed(_)));
    }

    #[test]
    fn what_the_service_said_is_written_escaped_and_odd_links_as_text() {
        assert_eq!(RESULT_COLUMNS[LINK_COLUMN], "payout_url");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let headers = vec!["reference".to_string(), "note".to_string()];
        let mut done = line(&["R1", "tab\there \u{202e}"], "COMPLETED");
        done.order_id = Some("O-1\u{1b}]8;;http://evil\u{7}".into());
        done.item_id = Some("E-1\u{9b}2J".into());
        done.payout_url = Some("https://example.com/p/abc\u{2066}".into());
        done.error_message = Some("=\u{1b}[2Jbad".into());
        let mut plain = line(&["R2", "x"], "COMPLETED");
        plain.payout_url = Some("https://example.com/p/def".into());
        let mut odd = line(&["R3", "x"], "COMPLETED");
        odd.payout_url = Some("javascript:alert(1)".into());
        write_results(&path, &headers, FileFormat::CSV, [done, plain, odd]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            !text
                .chars()
                .any(|c| crate::text::is_unsafe(c) && c != '\n' && c != '\t'),
            "{text:?}"
        );
        let rows = read(&path);
        assert_eq!(rows[1][1], "tab\there \\u{202e}");
        assert_eq!(rows[1][3], "O-1\\u{1b}]8;;http://evil\\u{7}");
        assert_eq!(rows[1][4], "E-1\\u{9b}2J");
        assert_eq!(rows[1][5], "'https://example.com/p/abc\\u{2066}");
        assert_eq!(rows[1][9], "'=\\u{1b}[2Jbad");
        assert_eq!(rows[2][5], "https://example.com/p/def");
        assert_eq!(rows[3][5], "'javascript:alert(1)");
    }

    fn line(fields: &[&str], status: &str) -> ResultLine {
        ResultLine {
            fields: fields.iter().map(|s| s.to_string()).collect(),
            status: status.into(),
            ..Default::default()
        }
    }

    fn read(path: &Path) -> Vec<Vec<String>> {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_path(path)
            .unwrap();
        r.records()
            .map(|r| r.unwrap().iter().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn writes_input_then_result_columns_neutralised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let headers = vec!["reference".to_string(), "note".to_string()];
        let mut done = line(&["R1", "=HYPERLINK(\"x\")"], "COMPLETED");
        done.order_id = Some("ord_1".into());
        done.payout_url = Some("https://example.com/p/abc".into());
        done.price = Some("9.80".into());
        done.discount = Some("-0.20".into());
        let mut failed = line(&["R2", "multi\nline, with comma"], "FAILED");
        failed.error_type = Some("validation".into());
        failed.error_message = Some("@bad".into());
        write_results(&path, &headers, FileFormat::CSV, [done, failed]).unwrap();

        let rows = read(&path);
        assert_eq!(rows.len(), 3);
        let mut want_header = headers.clone();
        want_header.extend(RESULT_COLUMNS.iter().map(|s| s.to_string()));
        assert_eq!(rows[0], want_header);
        assert_eq!(rows[1][1], "'=HYPERLINK(\"x\")");
        assert_eq!(rows[1][2], "COMPLETED");
        assert_eq!(rows[1][3], "ord_1");
        assert_eq!(rows[1][5], "https://example.com/p/abc");
        assert_eq!(rows[1][7], "'-0.20");
        assert_eq!(rows[2][1], "multi\nline, with comma");
        assert_eq!(rows[2][9], "'@bad");
        assert!(rows.iter().all(|r| r.len() == 2 + RESULT_COLUMNS.len()));
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn every_layout_neutralises_the_same_cells_and_quotes_its_own_delimiter() {
        use crate::file_format::OutFormat;
        let dir = tempfile::tempdir().unwrap();
        let headers = vec!["reference".to_string(), "note".to_string()];
        let mut done = line(&["R1", "=1+1"], "COMPLETED");
        done.payout_url = Some("javascript:x".into());
        let semi = line(&["R2", "a;b, c\td"], "FAILED");
        let mut read_as = Vec::new();
        for f in OutFormat::ALL {
            let format = f.resolve(None);
            let path = dir.path().join(format!("{f}.csv"));
            write_results(&path, &headers, format, [done.clone(), semi.clone()]).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(
                bytes.starts_with(crate::file_format::BOM),
                format.bom(),
                "{f}"
            );
            let crlf = bytes.windows(2).filter(|w| w == b"\r\n").count();
            let lf = bytes.iter().filter(|b| **b == b'\n').count();
            let want_crlf = format.line_end() == crate::file_format::LineEnd::Crlf;
            assert_eq!((lf, crlf), (3, if want_crlf { 3 } else { 0 }), "{f}");
            let body = &bytes[if format.bom() { 3 } else { 0 }..];
            let mut r = csv::ReaderBuilder::new()
                .has_headers(false)
                .delimiter(format.delimiter())
                .from_reader(body);
            let rows: Vec<Vec<String>> = r
                .records()
                .map(|r| r.unwrap().iter().map(str::to_string).collect())
                .collect();
            assert_eq!(rows[1][1], "'=1+1", "{f}");
            assert_eq!(rows[1][5], "'javascript:x", "{f}");
            assert_eq!(rows[2][1], "a;b, c\td", "{f}");
            read_as.push(rows);
        }
        assert!(
            read_as.windows(2).all(|w| w[0] == w[1]),
            "the same cells in every layout"
        );
        let semicolon = std::fs::read_to_string(dir.path().join("excel-semicolon.csv")).unwrap();
        assert!(semicolon.contains("\"a;b, c\td\""), "{semicolon}");
        let tsv = std::fs::read_to_string(dir.path().join("tsv.csv")).unwrap();
        assert!(tsv.contains("\"a;b, c\td\""), "{tsv}");
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_private_even_when_it_replaces_another() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        for f in crate::file_format::OutFormat::ALL {
            std::fs::write(&path, "old").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            write_results(
                &path,
                &["reference".to_string()],
                f.resolve(None),
                [line(&["R1"], "COMPLETED")],
            )
            .unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
            assert!(std::fs::read_to_string(&path).unwrap().contains("R1"));
        }
    }

    #[test]
    fn a_row_of_the_wrong_width_leaves_the_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "previous").unwrap();
        let err = write_results(
            &path,
            &["a".to_string(), "b".to_string()],
            FileFormat::CSV,
            [line(&["x"], "OK")],
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temporaries_of_killed_writes_are_removed_by_the_next_write_of_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        // What a write killed before its rename leaves: rows with payout links.
        let stale = dir.path().join(".out.csv.a1B2c3.tmp");
        std::fs::write(&stale, "R1,COMPLETED,https://example.com/p/secret\n").unwrap();
        // Not ours: another target's temporary, other names, a write still going on.
        let others = [
            dir.path().join(".other.csv.a1B2c3.tmp"),
            dir.path().join(".out.csv.toolong1.tmp"),
            dir.path().join("out.csv.a1B2c3.tmp"),
        ];
        for other in &others {
            std::fs::write(other, "x").unwrap();
        }
        let live = PrivateFile::create(&path).unwrap();
        assert!(!stale.exists(), "the killed write's temporary file is gone");
        let live_tmp = live.tmp.path().to_path_buf();
        write_results(
            &path,
            &["reference".to_string()],
            FileFormat::CSV,
            [line(&["R1"], "COMPLETED")],
        )
        .unwrap();
        assert!(
            live_tmp.exists(),
            "a temporary file being written is left alone"
        );
        for other in &others {
            assert!(other.exists(), "{}", other.display());
        }
        drop(live);
        assert!(!live_tmp.exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_target_that_is_not_a_regular_file_is_refused_before_anything_is_written() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.csv");
        std::fs::write(&target, "kept").unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fifo = dir.path().join("fifo.csv");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for (path, what) in [
            (&link, "a symbolic link"),
            (&fifo, "a fifo (named pipe)"),
            (&sub, "a directory"),
        ] {
            assert_eq!(not_a_regular_file(path), Some(what));
            let err = write_results(path, &[], FileFormat::CSV, [line(&[], "SKIPPED")])
                .err()
                .unwrap_or_else(|| panic!("{what} was written over"));
            assert!(err.to_string().contains(what), "{err}");
        }
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        assert!(sub.is_dir());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        // Nothing else was created (no temporary file left either).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
        assert_eq!(not_a_regular_file(&target), None);
        assert_eq!(not_a_regular_file(&dir.path().join("absent.csv")), None);
        // A device is refused without being opened or written.
        let null = Path::new("/dev/null");
        assert_eq!(not_a_regular_file(null), Some("a character device"));
        assert!(PrivateFile::create(null).is_err());
        let kind = std::fs::symlink_metadata(null).unwrap().file_type();
        assert!(kind.is_char_device(), "/dev/null is still a device");
    }

    #[test]
    fn a_file_in_a_missing_directory_names_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = PrivateFile::create(&dir.path().join("nodir").join("j.csv"))
            .err()
            .expect("no directory to write in");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!err.to_string().contains(".j.csv."), "{err}");
        assert!(err.to_string().contains("nodir does not exist"), "{err}");
    }

    #[test]
    fn a_result_file_is_a_clash() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("paybatch.db");
        let result = dir.path().join("b.SIMULATED.result.csv");
        std::fs::write(&result, "links").unwrap();
        let spelled = dir.path().join(".").join("b.SIMULATED.result.csv");
        let why = output_clash(&spelled, &ledger, &[], &[result.as_path()]);
        assert!(why.is_some_and(|w| w.contains("result file")));
        assert_eq!(output_clash(&spelled, &ledger, &[], &[]), None);
        assert!(same_file(&spelled, &result));
        assert!(!same_file(&spelled, &ledger));
    }

    #[test]
    fn a_file_without_input_columns_still_has_the_result_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub");
        std::fs::create_dir(&path).unwrap();
        let target = path.join("r.csv");
        write_results(&target, &[], FileFormat::CSV, [line(&[], "SKIPPED")]).unwrap();
        assert_eq!(read(&target)[1][0], "SKIPPED");
    }
}
