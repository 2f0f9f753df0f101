//! The ledger: a SQLite file that records every step of a batch before it happens, so that a
//! killed run can be resumed by running the same command again without paying anyone twice.
//!
//! Discipline (after Brandur Leach's "idempotency keys in Postgres"): each phase is one
//! transaction, committed with `synchronous=FULL` before the network call it prepares; the
//! transitions allowed are listed in [`state`]. See docs/ledger.md.

pub mod approvals;
pub mod approved;
pub mod attempts;
mod batches;
pub mod books;
mod catalog_cache;
mod columns;
mod events;
pub mod history;
pub mod lock;
pub mod merge;
mod open;
mod orders;
pub mod payouts;
pub mod repeats;
mod replan;
mod row_key;
mod rows;
pub mod service_orders;
pub mod state;
mod transitions;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction};

pub use crate::row::IncomingRow;
use batches::insert_batch;
pub use batches::{BatchRecord, Completion, Formats, NewBatch, SendProgress};
pub use columns::{Amount, Json, OrderMode, UnknownText};
pub use events::EventRecord;
use events::event;
use open::OpenHere;
pub use open::{canonical_path, create_private_file};
pub use orders::{IntentHead, OrderRecord, OutsideFile, PlannedOrder};
pub use payouts::{PayoutLife, PayoutStatus};
pub use replan::{ItemRefusal, REPLANNED};
pub use row_key::RowKey;
use rows::latest_conversion_in;
pub use rows::{Conversion, MergeReport, OrderLabel, RowRecord, SeenRow, Specs, UnpaidRow};
pub use state::{OrderState, RowState, row_state_for};
pub use transitions::{ItemOutcome, Transition};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger {path}: {source}{}", busy_hint(.source))]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("ledger {path}: cannot apply the schema: {message}")]
    Migration { path: PathBuf, message: String },
    #[error("ledger {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("ledger holds an impossible transition for {subject} {id}: {from} -> {to}")]
    Transition {
        subject: &'static str,
        id: i64,
        from: String,
        to: String,
    },
    #[error("ledger is damaged: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, LedgerError>;

impl LedgerError {
    /// The error SQLite gives a write to `path` when the disk is full (for the fail points that
    /// make a write fail that way).
    pub fn full_disk(path: &Path) -> Self {
        LedgerError::Sqlite {
            path: path.to_path_buf(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                Some("database or disk is full".into()),
            ),
        }
    }
}

/// What a person can do about a ledger another connection holds (SQLite's busy and locked).
fn busy_hint(source: &rusqlite::Error) -> &'static str {
    match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            " (another paybatch is writing to it, such as a run recording a large file in one \
             transaction: run this again once it has committed)"
        }
        _ => "",
    }
}

/// Current time as stored in the ledger (RFC 3339, UTC, milliseconds).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Whether a time the ledger recorded (see [`now`]) lies more than `age` in the past; false when
/// there is none or it cannot be read.
pub fn older_than(at: Option<&str>, age: std::time::Duration) -> bool {
    let Ok(age) = chrono::Duration::from_std(age) else {
        return false; // longer than any time the ledger can hold
    };
    at.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| chrono::Utc::now().signed_duration_since(t) > age)
}

/// The ledger used when none is given: `paybatch.db` in the working directory.
pub const DEFAULT_PATH: &str = "paybatch.db";

pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    /// The clock of the books ([`books::BooksClock`]): the wall clock when `None`.
    books_clock: Option<books::BooksClock>,
    /// Declared after `conn`: the connection is closed before the file counts as no longer
    /// open in this process.
    _here: OpenHere,
}

/// An error of SQLite at `path`; text a typed column does not know is a damaged ledger.
fn sqlerr(path: &Path) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
    move |source| match columns::unknown_text(&source) {
        Some(message) => LedgerError::Corrupt(message),
        None => LedgerError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Runs one statement of a transaction through the statement cache.
fn exec(
    tx: &Transaction<'_>,
    path: &Path,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<usize> {
    tx.prepare_cached(sql)
        .and_then(|mut st| st.execute(params))
        .map_err(sqlerr(path))
}

/// A transaction of a merge, which keeps the ledger borrowed (see [`merge::Merge`]): the caller
/// holds the ledger mutably, so no other transaction can be open on its connection.
fn begin_merge<'c>(conn: &'c Connection, path: &Path) -> Result<Transaction<'c>> {
    Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate).map_err(sqlerr(path))
}

fn begin<'c>(conn: &'c mut Connection, path: &Path) -> Result<Transaction<'c>> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlerr(path))
}

fn commit(tx: Transaction<'_>, path: &Path) -> Result<()> {
    tx.commit().map_err(sqlerr(path))
}

impl Ledger {
    /// Every row `sql` selects with `args`, each made by `map`.
    fn select_all<T>(
        &self,
        sql: &str,
        args: impl rusqlite::Params,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(sqlerr(&self.path))?;
        let rows = stmt.query_map(args, map).map_err(sqlerr(&self.path))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.read_error())
    }

    /// As [`sqlerr`], for reads: a stored row that cannot be read ([`columns::DamagedRow`])
    /// is named by its batch's name and its line.
    fn read_error(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |source| match columns::damaged_row(&source) {
            Some(d) => {
                let name = self
                    .conn
                    .query_row(
                        "SELECT name FROM batches WHERE id = ?1",
                        [d.batch_id],
                        |r| r.get("name"),
                    )
                    .ok();
                LedgerError::Corrupt(
                    columns::DamagedRow {
                        batch: name,
                        reason: d.reason.clone(),
                        ..*d
                    }
                    .to_string(),
                )
            }
            None => sqlerr(&self.path)(source),
        }
    }
}

/// Row `R{n}` of a file as the input stage gives it to the ledger: valid, on line `n + 2`,
/// paid by email, its stored row [`crate::row::RowContent::sample`]; for the tests of the
/// parts that merge, plan and move rows.
#[cfg(test)]
pub(crate) fn sample_row(n: i64) -> IncomingRow {
    IncomingRow {
        reference: format!("R{n}"),
        position: n,
        line: n + 2,
        fields: format!("[\"R{n}\"]"),
        spec: Some(crate::row::ContentText::of(
            &crate::row::RowContent::sample(),
        )),
        content_hash: format!("hash-{n}"),
        delivery: Some("EMAIL"),
        valid: true,
        error_message: None,
        skipped: false,
    }
}

/// A ledger in a temporary directory with one empty batch `b` of the simulator, for the tests of
/// the parts that stand on a batch: the directory (kept while the ledger is used), the ledger,
/// the batch's id.
#[cfg(test)]
pub(crate) fn with_a_batch() -> (tempfile::TempDir, Ledger, i64) {
    let dir = tempfile::tempdir().expect("dir");
    let mut ledger = Ledger::open(&dir.path().join("l.db")).expect("ledger");
    let batch = ledger
        .create_batch(&NewBatch {
            name: "b",
            input_path: "b.csv",
            input_hash: "h",
            headers: &["reference".to_string()],
            environment: "sim",
            base_url: "embedded-simulator",
            key_fingerprint: "sha256:0",
            formats: None,
        })
        .expect("batch");
    (dir, ledger, batch.id)
}
