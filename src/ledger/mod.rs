//! The ledger: a SQLite file that records every step of a batch before it happens, so that a
//! killed run can be resumed by running the same command again without paying anyone twice.
//!
//! Discipline (after Brandur Leach's "idempotency keys in Postgres"): each phase is one
//! transaction, committed with `synchronous=FULL` before the network call it prepares; the
//! transitions allowed are listed in [`state`]. See docs/ledger.md.

pub mod approved;
pub mod history;
pub mod merge;
pub mod repeats;
pub mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use rusqlite_migration::{M, Migrations};

pub use state::{OrderState, RowState, row_state_for};

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

fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../migrations/001_init.sql")),
        M::up(include_str!("../../migrations/002_payment_method.sql")),
        M::up(include_str!("../../migrations/003_streaming_merge.sql")),
        M::up(include_str!(
            "../../migrations/004_one_intent_per_service_order.sql"
        )),
        M::up(include_str!("../../migrations/005_debited.sql")),
        M::up(include_str!("../../migrations/006_rebuilt_unsettled.sql")),
        M::up(include_str!("../../migrations/007_delivery.sql")),
        M::up_with_hook(
            include_str!("../../migrations/008_repeats.sql"),
            repeats::fill_likeness,
        ),
        M::up(include_str!("../../migrations/009_approved_plans.sql")),
    ])
}

/// Opens the SQLite connection to the ledger file `path` (canonical, prepared by
/// [`Ledger::open`]), sets it up and brings its schema to this version's.
fn connect(path: &Path) -> Result<Connection> {
    // Nor does SQLite follow a link that would have taken the file's place since.
    let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|source| LedgerError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
    let err = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(err)?;
    conn.set_prepared_statement_cache_capacity(64);
    // A new ledger's pages: 16 KiB (a million-row merge writes fewer, fuller pages; an
    // existing ledger keeps its own).
    conn.pragma_update(None, "page_size", 16384).map_err(err)?;
    set_write_ahead_log(&conn).map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(err)?;
    // 16 MiB of page cache (SQLite's default is 2): a million-row merge touches the
    // order-key index all over; pages are only taken as needed.
    conn.pragma_update(None, "cache_size", -16384)
        .map_err(err)?;
    migrate(&mut conn).map_err(|e| LedgerError::Migration {
        path: path.to_path_buf(),
        message: match e {
            rusqlite_migration::Error::MigrationDefinition(
                rusqlite_migration::MigrationDefinitionError::DatabaseTooFarAhead,
            ) => "it was written by a newer paybatch (a later schema than this one \
                  knows); use that version or a later one"
                .to_string(),
            // What SQLite said, without the statement (a whole migration).
            rusqlite_migration::Error::RusqliteError { err, .. } => err.to_string(),
            other => other.to_string(),
        },
    })?;
    // The journal of one statement inside a transaction (several rows to an INSERT) in
    // memory rather than in a temporary file; set after the migrations, whose statements
    // over every row of a large ledger would hold as much in memory.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(err)?;
    Ok(conn)
}

/// Brings the schema to this version's. Each migration is a transaction that also moves
/// `user_version` on; two processes opening a new ledger at once (a `status` beside the run
/// that creates it) may both start the same one: the one that loses sees the version moved
/// and goes on from there.
fn migrate(conn: &mut Connection) -> std::result::Result<(), rusqlite_migration::Error> {
    let version = |c: &Connection| {
        c.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
            .ok()
    };
    let mut tries = 0;
    loop {
        let before = version(conn);
        match migrations().to_latest(conn) {
            Err(rusqlite_migration::Error::RusqliteError { .. })
                if tries < MIGRATION_TRIES && version(conn) != before =>
            {
                tries += 1;
            }
            done => return done,
        }
    }
}

/// How many times a migration that another process made meanwhile is tried again (once a
/// migration, and some).
const MIGRATION_TRIES: usize = 16;

/// How long opening the ledger waits for a large merge of another process, written with a
/// rollback journal (see `merge::RollbackJournal`), to end so that the write-ahead log can be
/// set: about four million rows' worth on a small machine.
const WAIT_FOR_A_LARGE_MERGE: std::time::Duration = std::time::Duration::from_secs(30);

/// Sets the ledger's write-ahead log. While another process writes a large merge with a
/// rollback journal, SQLite refuses the change at once (busy, without waiting as for a lock);
/// it is tried again until [`WAIT_FOR_A_LARGE_MERGE`] has passed.
fn set_write_ahead_log(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let set =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
        let busy = match &set {
            // Another mode is kept as before (a ledger SQLite cannot give a log to).
            Ok(_) => return Ok(()),
            Err(e) => matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ),
        };
        if !busy || started.elapsed() >= WAIT_FOR_A_LARGE_MERGE {
            return set.map(drop);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    pub id: i64,
    pub name: String,
    pub input_path: String,
    pub input_hash: String,
    pub headers: Vec<String>,
    pub environment: String,
    pub base_url: String,
    pub key_fingerprint: String,
    pub created_at: String,
}

#[derive(Debug, Clone)]
pub struct NewBatch<'a> {
    pub name: &'a str,
    pub input_path: &'a str,
    pub input_hash: &'a str,
    pub headers: &'a [String],
    pub environment: &'a str,
    pub base_url: &'a str,
    pub key_fingerprint: &'a str,
}

/// The ledger's latest recorded row converted from `payment_currency` to `product_currency`
/// among the batches made with the service at `base_url`: a completed row of a one-item sync
/// order paid from a balance (embedded FX). Read newest first: found at once where the pair is
/// common; a pair never converted reads every row (about a second for 500,000 rows).
pub(crate) fn latest_conversion_in(
    conn: &Connection,
    path: &Path,
    base_url: &str,
    payment_currency: &str,
    product_currency: &str,
) -> Result<Option<Conversion>> {
    conn.query_row(
        "SELECT r.price, r.debited_amount, r.completed_at
         FROM rows r
         JOIN orders o ON o.id = r.order_id
         JOIN batches b ON b.id = r.batch_id
         WHERE r.debited_currency = ?2 AND r.state = 'COMPLETED'
           AND r.price IS NOT NULL AND r.debited_amount IS NOT NULL
           AND r.completed_at IS NOT NULL
           AND json_extract(r.spec, '$.currency') = ?3
           AND o.mode = 'sync' AND o.state = 'COMPLETED' AND o.card_id IS NULL
           AND b.base_url = ?1
         ORDER BY r.id DESC LIMIT 1",
        params![base_url, payment_currency, product_currency],
        |r| {
            Ok(Conversion {
                payment_currency: payment_currency.to_string(),
                product_currency: product_currency.to_string(),
                price: r.get(0)?,
                debited: r.get(1)?,
                completed_at: r.get(2)?,
            })
        },
    )
    .optional()
    .map_err(sqlerr(path))
}

/// A completed row of an order the service converted (embedded FX): its price in its product's
/// currency and what it took from the balance of another, as stored, and when it completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    pub payment_currency: String,
    pub product_currency: String,
    pub price: String,
    pub debited: String,
    pub completed_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRecord {
    pub id: i64,
    pub reference: String,
    pub position: i64,
    pub line: i64,
    /// The input cells: read by [`Ledger::visit_result_rows`] only (the result file and the
    /// report write them); empty where rows are read to be followed or checked, so that rows of
    /// a hundred thousand columns are not held a batch or an order at a time.
    pub fields: Vec<String>,
    pub spec: Option<String>,
    pub content_hash: String,
    pub state: RowState,
    pub attempt: i64,
    pub order_id: Option<i64>,
    pub item_index: Option<i64>,
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    pub price: Option<String>,
    pub discount: Option<String>,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
    pub completed_at: Option<String>,
    /// What the paying balance (or card) was charged for the row, once it completed.
    pub debited_amount: Option<String>,
    pub debited_currency: Option<String>,
    /// The number of the last merge whose file had the row ([`Ledger::merges`]).
    pub merged: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub id: i64,
    pub batch_id: i64,
    pub idempotency_key: String,
    pub body: Vec<u8>,
    pub mode: String,
    pub payment_currency: String,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: String,
    pub card_id: Option<String>,
    pub state: OrderState,
    pub service_order_id: Option<String>,
    pub sends: i64,
    pub polls: i64,
    pub created_at: String,
    pub first_sent_at: Option<String>,
    pub last_sent_at: Option<String>,
    /// The HTTP status of the last answer (none when the last send got no answer).
    pub last_http_status: Option<u16>,
    pub accepted_at: Option<String>,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
}

/// What deciding whether to send an intent needs (its body stays in the ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentHead {
    pub id: i64,
    pub idempotency_key: String,
    pub sends: i64,
    pub first_sent_at: Option<String>,
}

/// A row as the current input file has it, to be merged into the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingRow {
    pub reference: String,
    pub position: i64,
    pub line: i64,
    /// JSON array of the input cells, for the result file.
    pub fields: String,
    /// JSON of the validated row, `None` for an invalid row.
    pub spec: Option<String>,
    pub content_hash: String,
    /// How the row is delivered (`EMAIL`, `PAYOUT_LINK`), `None` for an invalid row.
    pub delivery: Option<&'static str>,
    pub valid: bool,
    pub error_message: Option<String>,
    /// A valid row left out because another batch has it (`--skip-repeats`): recorded
    /// SKIPPED, with why in `error_message`.
    pub skipped: bool,
}

impl IncomingRow {
    /// About how many bytes the row holds (its text): what a batch keeps in memory per row it
    /// holds, whatever the number of its columns.
    pub fn size(&self) -> usize {
        self.reference.len()
            + self.fields.len()
            + self.spec.as_ref().map_or(0, String::len)
            + self.content_hash.len()
            + self.error_message.as_ref().map_or(0, String::len)
    }

    /// What `rows.error_type` says of a row that is not to be paid: `invalid`, or `repeat`
    /// for a row left out by `--skip-repeats`.
    pub fn error_type(&self) -> Option<&'static str> {
        if self.skipped {
            Some("repeat")
        } else {
            (!self.valid).then_some("invalid")
        }
    }
}

/// What merging an input file into a batch found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub added: usize,
    pub unchanged: usize,
    pub updated: usize,
    /// Rows whose content changed after they were submitted: (reference, line, state).
    pub changed_after_submission: Vec<(String, i64, RowState)>,
    /// Rows in the ledger that the file no longer has, not yet submitted: now REMOVED.
    pub removed: Vec<String>,
    /// Rows the file no longer has but that were already sent (in an order sent, or in doubt,
    /// or answered): they stay, and are followed.
    pub missing_but_submitted: Vec<(String, RowState)>,
    /// The keys of the intents cancelled: never sent, and holding a row the file no longer has
    /// (now REMOVED, in `removed`).
    pub cancelled: Vec<String>,
    /// Rows of the cancelled intents still in the file, planned again in this merge.
    pub planned_again: usize,
    /// Rows of the cancelled intents still in the file, left PENDING for the next merge.
    pub pending_again: usize,
}

/// A row of a batch as the ledger holds it ([`Ledger::row_seen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRow {
    pub state: RowState,
    /// The hash of its payable content as last merged ([`crate::input::rules::content_hash`]).
    pub content_hash: String,
    /// The order it is in, if any.
    pub order_id: Option<i64>,
}

impl SeenRow {
    /// Whether a row of the file whose content hash is `content_hash` is a change the merge
    /// refuses: its payable content differs and something was planned or submitted for it
    /// (beyond PENDING), unless it is PLANNED in an intent the merge cancels (`cancelled`).
    pub fn refuses_change(&self, content_hash: &str, cancelled: impl Fn(i64) -> bool) -> bool {
        let may_change = matches!(
            self.state,
            RowState::Pending | RowState::Invalid | RowState::Removed | RowState::Skipped
        );
        let released = self.state == RowState::Planned && self.order_id.is_some_and(cancelled);
        !may_change && !released && self.content_hash != content_hash
    }
}

/// The batch's orders that hold a row an input file does not have, by what the next merge of
/// that file does with them ([`Ledger::orders_outside_file`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutsideFile {
    /// Intents never sent: the merge cancels them ([`merge::Merge::cancelling`]).
    pub to_cancel: BTreeSet<i64>,
    /// Every other order (sent, in doubt, or answered): followed whatever the file says.
    pub followed: BTreeSet<i64>,
    /// The rows the file does not have in intents to cancel (to be REMOVED): how many, and the
    /// first [`OutsideFile::NAMED`] references.
    pub unsent_rows: (usize, Vec<String>),
    /// The rows the file does not have in orders followed (already sent): how many, and the
    /// first [`OutsideFile::NAMED`] references.
    pub sent_rows: (usize, Vec<String>),
}

impl OutsideFile {
    /// Rows named at most in each list.
    pub const NAMED: usize = 5;

    fn name(list: &mut (usize, Vec<String>), reference: String) {
        list.0 += 1;
        if list.1.len() < Self::NAMED {
            list.1.push(reference);
        }
    }
}

/// One order to plan: its key and exact body (its rows: [`merge::Merge::plan`]).
#[derive(Debug, Clone)]
pub struct PlannedOrder {
    pub idempotency_key: String,
    pub body: Vec<u8>,
    pub mode: String,
    pub payment_currency: String,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: String,
    pub card_id: Option<String>,
}

/// What the service said about one item of a terminal order.
#[derive(Debug, Clone, Default)]
pub struct ItemOutcome {
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    pub price: Option<String>,
    pub discount: Option<String>,
    /// What the paying balance (or card) was charged for the item, and in which currency.
    pub debited: Option<(String, String)>,
}

/// The ledger used when none is given: `paybatch.db` in the working directory.
pub const DEFAULT_PATH: &str = "paybatch.db";

/// A transition of an order, and of its rows, for [`Ledger::transition_order`]: the state it
/// goes to and what the service said with it.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    pub to: OrderState,
    /// The service's order id, when the answer gave one.
    pub service_order_id: Option<&'a str>,
    pub http_status: Option<u16>,
    /// The answer's body, kept on the order.
    pub response: Option<&'a str>,
    /// (type, message) of a refusal or a failure.
    pub error: Option<(&'a str, &'a str)>,
    /// What the answer says of each item, by item index.
    pub items: &'a [ItemOutcome],
    pub completed_at: Option<&'a str>,
    /// Why, for the event log.
    pub cause: &'a str,
}

impl<'a> Transition<'a> {
    /// To `to`, for `cause`, with nothing more from the service.
    pub fn to(to: OrderState, cause: &'a str) -> Self {
        Transition {
            to,
            service_order_id: None,
            http_status: None,
            response: None,
            error: None,
            items: &[],
            completed_at: None,
            cause,
        }
    }
}

pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    /// Declared after `conn`: the connection is closed before the file counts as no longer
    /// open in this process.
    _here: OpenHere,
}

/// The ledger files this process has open, with how many connections each: only the first
/// connection to a file may open and close descriptors of it ([`Ledger::open`]).
static OPEN_HERE: std::sync::Mutex<BTreeMap<PathBuf, usize>> =
    std::sync::Mutex::new(BTreeMap::new());

/// One connection's place in [`OPEN_HERE`], given back when it is dropped.
struct OpenHere {
    path: PathBuf,
}

impl OpenHere {
    /// Counts one more connection to `path`; the first runs `prepare` (its work on the files)
    /// before any other connection of this process can be opened.
    fn enter(path: &Path, prepare: impl FnOnce() -> Result<()>) -> Result<Self> {
        let mut open = OPEN_HERE.lock().unwrap_or_else(|e| e.into_inner());
        if !open.contains_key(path) {
            prepare()?;
        }
        *open.entry(path.to_path_buf()).or_default() += 1;
        Ok(OpenHere {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for OpenHere {
    fn drop(&mut self) {
        let mut open = OPEN_HERE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.path) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.path);
            }
        }
    }
}

/// How far the sending of a batch got ([`Ledger::send_progress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendProgress {
    pub orders_sent: i64,
    pub orders_in_doubt: i64,
    pub rows_not_sent: i64,
}

impl Ledger {
    /// Opens (creating with mode 0600 if needed) and migrates the ledger. A path through a
    /// symbolic link opens the file it points to ([`canonical_path`]).
    pub fn open(path: &Path) -> Result<Self> {
        let given = path;
        if let Some(parent) = given.parent()
            && !parent.as_os_str().is_empty()
            && !parent.exists()
        {
            std::fs::create_dir_all(parent).map_err(|e| LedgerError::Io {
                path: given.to_path_buf(),
                message: e.to_string(),
            })?;
        }
        let canonical = canonical_path(given).map_err(|e| LedgerError::Io {
            path: given.to_path_buf(),
            message: e.to_string(),
        })?;
        let path = canonical.as_path();
        // Before SQLite opens anything: closing a descriptor of a file drops every POSIX lock
        // the process holds on it, SQLite's own included (on `-shm`, the lock that tells
        // another process this one has the ledger open: without it, a `status` run alongside
        // reset the shared memory under this process's feet). Once this process has the
        // ledger open, a second connection leaves the files alone.
        let here = OpenHere::enter(path, || {
            create_private_file(path)?;
            // The WAL and shared-memory files hold the same data: private too (SQLite creates
            // them with the ledger's own mode).
            for suffix in ["-wal", "-shm"] {
                narrow_side_file(&PathBuf::from(format!("{}{suffix}", path.display())))?;
            }
            Ok(())
        })?;
        let conn = connect(path)?;
        Ok(Ledger {
            conn,
            path: given.to_path_buf(),
            _here: here,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    // -----------------------------------------------------------------------------------------
    // Batches

    pub fn batch(&self, name: &str) -> Result<Option<BatchRecord>> {
        self.conn
            .query_row(
                "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                        key_fingerprint, created_at FROM batches WHERE name = ?1",
                [name],
                batch_from_row,
            )
            .optional()
            .map_err(sqlerr(&self.path))
    }

    pub fn batch_by_id(&self, id: i64) -> Result<Option<BatchRecord>> {
        self.conn
            .query_row(
                "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                        key_fingerprint, created_at FROM batches WHERE id = ?1",
                [id],
                batch_from_row,
            )
            .optional()
            .map_err(sqlerr(&self.path))
    }

    pub fn batches(&self) -> Result<Vec<BatchRecord>> {
        self.select_all(
            "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                    key_fingerprint, created_at FROM batches ORDER BY id",
            [],
            batch_from_row,
        )
    }

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
            .map_err(sqlerr(&self.path))
    }

    pub fn create_batch(&mut self, b: &NewBatch<'_>) -> Result<BatchRecord> {
        let tx = begin(&mut self.conn, &self.path)?;
        insert_batch(&tx, &self.path, b)?;
        commit(tx, &self.path)?;
        self.batch(b.name)?
            .ok_or_else(|| LedgerError::Corrupt("batch vanished after insert".into()))
    }

    /// Records the latest input file of a batch (path, hash, headers).
    pub fn update_batch_input(
        &mut self,
        batch_id: i64,
        input_path: &str,
        input_hash: &str,
        headers: &[String],
    ) -> Result<()> {
        let headers = serde_json::to_string(headers).unwrap_or_else(|_| "[]".into());
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE batches SET input_path = ?2, input_hash = ?3, headers = ?4, updated_at = ?5
             WHERE id = ?1",
            params![batch_id, input_path, input_hash, headers, now()],
        )?;
        commit(tx, &self.path)
    }

    // -----------------------------------------------------------------------------------------
    // Rows

    /// The rows of a batch, in input order, without their cells ([`RowRecord::fields`]).
    pub fn rows(&self, batch_id: i64) -> Result<Vec<RowRecord>> {
        self.query_rows(
            "WHERE batch_id = ?1 ORDER BY position, id",
            params![batch_id],
        )
    }

    /// The rows of an order, in item order, without their cells ([`RowRecord::fields`]).
    pub fn rows_of_order(&self, order_id: i64) -> Result<Vec<RowRecord>> {
        self.query_rows(
            "WHERE order_id = ?1 ORDER BY item_index, id",
            params![order_id],
        )
    }

    /// Rows without their cells (see [`RowRecord::fields`]).
    fn query_rows(&self, tail: &str, args: impl rusqlite::Params) -> Result<Vec<RowRecord>> {
        let columns = ROW_COLUMNS.replace("rows.fields,", "'[]',");
        let sql = format!("SELECT {columns} FROM rows {tail}");
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mapped = stmt.query_map(args, row_from).map_err(sqlerr(&self.path))?;
        let mut out = Vec::new();
        for item in mapped {
            out.push(parsed_row(item.map_err(sqlerr(&self.path))?)?);
        }
        Ok(out)
    }

    /// Visits the rows of a batch still in its input file (not REMOVED), in input order, each
    /// with what the result file says of its order; one row in memory at a time. Without
    /// `specs`, a row's `spec` and `content_hash` are left empty (not read).
    pub fn visit_result_rows<E: From<LedgerError>>(
        &self,
        batch_id: i64,
        specs: bool,
        mut visit: impl FnMut(RowRecord, Option<OrderLabel>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let columns = if specs {
            ROW_COLUMNS.to_string()
        } else {
            ROW_COLUMNS
                .replace("rows.spec,", "NULL,")
                .replace("rows.content_hash,", "'',")
        };
        let sql = format!(
            "SELECT {columns} FROM rows
             WHERE rows.batch_id = ?1 AND rows.state != 'REMOVED'
             ORDER BY rows.position, rows.id"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        // Orders by id, read once each: an order's later columns sit behind its body, which
        // can span many pages. Bounded, for batches of a million one-row orders.
        let mut labels: HashMap<i64, OrderLabel> = HashMap::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let row = parsed_row(row_from(r).map_err(sqlerr(&self.path))?)?;
            let order = match row.order_id {
                Some(id) => {
                    if !labels.contains_key(&id) {
                        if labels.len() >= 4096 {
                            labels.clear();
                        }
                        labels.insert(id, self.order_label(id)?);
                    }
                    labels.get(&id).cloned()
                }
                None => None,
            };
            visit(row, order)?;
        }
        Ok(())
    }

    fn order_label(&self, order_id: i64) -> Result<OrderLabel> {
        self.conn
            .prepare_cached(
                "SELECT service_order_id, payment_method, payment_currency, card_id
                 FROM orders WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([order_id], |r| {
                    Ok(OrderLabel {
                        service_order_id: r.get(0)?,
                        payment_method: r.get(1)?,
                        payment_currency: r.get(2)?,
                        card_id: r.get(3)?,
                    })
                })
            })
            .map_err(sqlerr(&self.path))
    }

    /// Currency, face value and price (as stored) of every COMPLETED row of a batch.
    pub fn completed_amounts(&self, batch_id: i64) -> Result<Vec<(String, String, String)>> {
        self.select_all(
            "SELECT COALESCE(json_extract(spec, '$.currency'), '?'),
                    COALESCE(json_extract(spec, '$.face_value'), '0'),
                    COALESCE(price, '0')
             FROM rows WHERE batch_id = ?1 AND state = 'COMPLETED'",
            [batch_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    /// The ledger's latest converted order of a currency pair ([`latest_conversion_in`]).
    pub fn latest_conversion(
        &self,
        base_url: &str,
        payment_currency: &str,
        product_currency: &str,
    ) -> Result<Option<Conversion>> {
        latest_conversion_in(
            &self.conn,
            &self.path,
            base_url,
            payment_currency,
            product_currency,
        )
    }

    /// What left each balance (or card) for the COMPLETED rows of a batch: (card id, charged
    /// currency, amount as stored), one per row that records it.
    pub fn debited_amounts(&self, batch_id: i64) -> Result<Vec<(Option<String>, String, String)>> {
        self.select_all(
            "SELECT o.card_id, r.debited_currency, r.debited_amount
             FROM rows r JOIN orders o ON o.id = r.order_id
             WHERE r.batch_id = ?1 AND r.state = 'COMPLETED' AND r.debited_amount IS NOT NULL",
            [batch_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    /// Rows in orders, per way of paying: (card id, payment currency, rows), in that order.
    pub fn rows_per_payment(&self, batch_id: i64) -> Result<Vec<(Option<String>, String, i64)>> {
        // Summed here, one order at a time: a GROUP BY would sort every order of the batch in
        // a temporary b-tree first (about 50 MB for a million one-row orders).
        let mut stmt = self
            .conn
            .prepare_cached(ROWS_PER_ORDER_AND_PAYMENT)
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        let mut out: BTreeMap<(Option<String>, String), i64> = BTreeMap::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let way = (
                r.get(0).map_err(sqlerr(&self.path))?,
                r.get(1).map_err(sqlerr(&self.path))?,
            );
            *out.entry(way).or_default() += r.get::<_, i64>(2).map_err(sqlerr(&self.path))?;
        }
        Ok(out
            .into_iter()
            .map(|((card, currency), rows)| (card, currency, rows))
            .collect())
    }

    /// The batch's valid rows (not taken out of the file) per delivery (`EMAIL`,
    /// `PAYOUT_LINK`), from their recorded deliveries.
    pub fn rows_per_delivery(&self, batch_id: i64) -> Result<Vec<(String, i64)>> {
        // Grouped in the order of `rows_batch_state` (batch, state, delivery): read from the
        // index alone, without a sort; the states are summed here.
        let counted: Vec<(String, i64)> = self.select_all(
            "SELECT delivery, COUNT(*) FROM rows
             WHERE batch_id = ?1 AND delivery IS NOT NULL AND state != 'REMOVED'
             GROUP BY state, delivery",
            [batch_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut out: BTreeMap<String, i64> = BTreeMap::new();
        for (delivery, rows) in counted {
            *out.entry(delivery).or_default() += rows;
        }
        Ok(out.into_iter().collect())
    }

    /// Visits the batch's rows that are PLANNED or REJECTED, each with its order's state and
    /// way of paying: what a stop of the service left unpaid is among them. One row in memory
    /// at a time.
    pub fn visit_planned_or_refused(
        &self,
        batch_id: i64,
        mut visit: impl FnMut(&HeldRow),
    ) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT r.state, r.error_type, r.spec, o.state, o.payment_currency, o.card_id
                 FROM rows r JOIN orders o ON o.id = r.order_id
                 WHERE r.batch_id = ?1 AND r.state IN ('PLANNED', 'REJECTED')",
            )
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let row_state: String = r.get(0).map_err(sqlerr(&self.path))?;
            let order_state: String = r.get(3).map_err(sqlerr(&self.path))?;
            visit(&HeldRow {
                row_state: parse_state(&row_state)?,
                error_type: r.get(1).map_err(sqlerr(&self.path))?,
                spec: r.get(2).map_err(sqlerr(&self.path))?,
                order_state: parse_state(&order_state)?,
                payment_currency: r.get(4).map_err(sqlerr(&self.path))?,
                card_id: r.get(5).map_err(sqlerr(&self.path))?,
            });
        }
        Ok(())
    }

    /// How many merges of an input file the batch has had: the rows of the latest file have
    /// this number ([`RowRecord::merged`]).
    pub fn merges(&self, batch_id: i64) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT merges FROM batches WHERE id = ?1")
            .and_then(|mut st| st.query_row([batch_id], |r| r.get(0)))
            .map_err(sqlerr(&self.path))
    }

    /// The reference of a row, by id.
    pub fn row_reference(&self, row_id: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT reference FROM rows WHERE id = ?1")
            .and_then(|mut st| st.query_row([row_id], |r| r.get(0)).optional())
            .map_err(sqlerr(&self.path))
    }

    /// The state of the batch's row with this reference, if the batch has one.
    pub fn row_state(&self, batch_id: i64, reference: &str) -> Result<Option<RowState>> {
        let state: Option<String> = self
            .conn
            .prepare_cached("SELECT state FROM rows WHERE batch_id = ?1 AND reference = ?2")
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| r.get(0))
                    .optional()
            })
            .map_err(sqlerr(&self.path))?;
        state.as_deref().map(parse_state).transpose()
    }

    /// What the ledger holds of one row of a batch, for checking a file against it without
    /// merging it ([`Ledger::row_seen`]): one look-up, by the same index as [`Ledger::row_state`].
    pub fn row_seen(&self, batch_id: i64, reference: &str) -> Result<Option<SeenRow>> {
        let found: Option<(String, String, Option<i64>)> = self
            .conn
            .prepare_cached(
                "SELECT state, content_hash, order_id FROM rows
                 WHERE batch_id = ?1 AND reference = ?2",
            )
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))?;
        found
            .map(|(state, content_hash, order_id)| {
                Ok(SeenRow {
                    state: parse_state(&state)?,
                    content_hash,
                    order_id,
                })
            })
            .transpose()
    }

    /// Counts of rows per state.
    pub fn row_counts(&self, batch_id: i64) -> Result<Vec<(RowState, i64)>> {
        let counted: Vec<(String, i64)> = self.select_all(
            "SELECT state, COUNT(*) FROM rows WHERE batch_id = ?1 GROUP BY state",
            [batch_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut out = counted
            .into_iter()
            .map(|(s, n)| Ok((parse_state(&s)?, n)))
            .collect::<Result<Vec<(RowState, i64)>>>()?;
        out.sort_by_key(|(s, _)| RowState::ALL.iter().position(|x| x == s));
        Ok(out)
    }

    /// How many of a batch's COMPLETED rows carry the note `error_type` (such as an order
    /// that could not be confirmed as the one sent).
    pub fn completed_rows_noted(&self, batch_id: i64, error_type: &str) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM rows
                 WHERE batch_id = ?1 AND state = 'COMPLETED' AND error_type = ?2",
                params![batch_id, error_type],
                |r| r.get(0),
            )
            .map_err(sqlerr(&self.path))
    }

    /// How far the sending of a batch got: orders sent (answered or not), orders sent without
    /// an answer recorded (in doubt), and rows not sent yet (no order, or an order never sent).
    pub fn send_progress(&self, batch_id: i64) -> Result<SendProgress> {
        let orders: Vec<(i64, i64)> = self.select_all(
            "SELECT COUNT(*), COALESCE(SUM(state = 'INTENT'), 0) FROM orders \
             WHERE batch_id = ?1 AND (sends > 0 OR state NOT IN ('INTENT', 'CANCELLED'))",
            [batch_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let rows: Vec<i64> = self.select_all(
            "SELECT COUNT(*) FROM rows r LEFT JOIN orders o ON o.id = r.order_id \
             WHERE r.batch_id = ?1 AND r.state IN ('PENDING', 'PLANNED') \
             AND (o.id IS NULL OR (o.state = 'INTENT' AND o.sends = 0))",
            [batch_id],
            |r| r.get(0),
        )?;
        let (sent, in_doubt) = orders.first().copied().unwrap_or_default();
        Ok(SendProgress {
            orders_sent: sent,
            orders_in_doubt: in_doubt,
            rows_not_sent: rows.first().copied().unwrap_or_default(),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Orders

    /// Up to `limit` of the batch's INTENT orders with an id above `after`, in id order, without
    /// their bodies: a batch can hold a million, so they are read a chunk at a time.
    pub fn intent_heads(&self, batch_id: i64, after: i64, limit: i64) -> Result<Vec<IntentHead>> {
        self.select_all(
            "SELECT id, idempotency_key, sends, first_sent_at FROM orders
             WHERE batch_id = ?1 AND state = 'INTENT' AND id > ?2 ORDER BY id LIMIT ?3",
            params![batch_id, after, limit],
            |r| {
                Ok(IntentHead {
                    id: r.get(0)?,
                    idempotency_key: r.get(1)?,
                    sends: r.get(2)?,
                    first_sent_at: r.get(3)?,
                })
            },
        )
    }

    pub fn order(&self, order_id: i64) -> Result<Option<OrderRecord>> {
        Ok(self
            .query_orders("WHERE id = ?1", params![order_id])?
            .into_iter()
            .next())
    }

    /// When the ledger's orders (of every batch) were last sent, for those sent since `since`
    /// (an RFC 3339 time as [`now`] writes it): what the service's rate window may still hold.
    pub fn sends_since(&self, since: &str) -> Result<Vec<String>> {
        self.select_all(
            "SELECT last_sent_at FROM orders WHERE last_sent_at >= ?1",
            [since],
            |r| r.get(0),
        )
    }

    /// Whether the batch was rebuilt while orders it could not attribute were still processing
    /// (and no reconciliation has found every order attributable since).
    pub fn is_unsettled(&self, batch_id: i64) -> Result<bool> {
        let flags: Vec<i64> = self.select_all(
            "SELECT unsettled FROM batches WHERE id = ?1",
            [batch_id],
            |r| r.get(0),
        )?;
        Ok(flags.first().copied().unwrap_or(0) != 0)
    }

    /// Marks the batch unsettled (see [`Ledger::is_unsettled`]), or settled again.
    pub fn set_unsettled(&mut self, batch_id: i64, unsettled: bool) -> Result<()> {
        self.conn
            .execute(
                "UPDATE batches SET unsettled = ?2 WHERE id = ?1",
                params![batch_id, unsettled as i64],
            )
            .map(drop)
            .map_err(sqlerr(&self.path))
    }

    /// The batch's orders that hold a row an input file does not have (`in_file` says which
    /// references the file has; see [`OutsideFile`]). Cheap for a batch of a million rows: the
    /// references are read from their index alone, and only the rows the file lacks are looked
    /// up, with their orders.
    pub fn orders_outside_file(
        &self,
        batch_id: i64,
        mut in_file: impl FnMut(&str) -> bool,
    ) -> Result<OutsideFile> {
        let mut references = self
            .conn
            .prepare_cached("SELECT reference FROM rows WHERE batch_id = ?1")
            .map_err(sqlerr(&self.path))?;
        let mut lookup = self
            .conn
            .prepare_cached(
                "SELECT r.state, o.id, o.state, o.sends = 0 AND o.last_sent_at IS NULL
                 FROM rows r JOIN orders o ON o.id = r.order_id
                 WHERE r.batch_id = ?1 AND r.reference = ?2",
            )
            .map_err(sqlerr(&self.path))?;
        let mut cursor = references.query([batch_id]).map_err(sqlerr(&self.path))?;
        let mut out = OutsideFile::default();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let reference: String = r.get(0).map_err(sqlerr(&self.path))?;
            if in_file(&reference) {
                continue;
            }
            let found = lookup
                .query_row(params![batch_id, reference], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, bool>(3)?,
                    ))
                })
                .optional()
                .map_err(sqlerr(&self.path))?;
            let Some((row_state, order, order_state, never_sent)) = found else {
                continue;
            };
            let (row_state, order_state): (RowState, OrderState) =
                (parse_state(&row_state)?, parse_state(&order_state)?);
            match (row_state, order_state) {
                (RowState::Removed, _) | (_, OrderState::Cancelled) => {}
                (RowState::Planned, OrderState::Intent) if never_sent => {
                    out.to_cancel.insert(order);
                    OutsideFile::name(&mut out.unsent_rows, reference);
                }
                _ => {
                    out.followed.insert(order);
                    OutsideFile::name(&mut out.sent_rows, reference);
                }
            }
        }
        Ok(out)
    }

    /// The idempotency key and exact body of order `order_id`, read one at a time.
    pub fn order_key_and_body(&self, order_id: i64) -> Result<Option<(String, Vec<u8>)>> {
        self.conn
            .prepare_cached("SELECT idempotency_key, body FROM orders WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([order_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// The ledger's order (of any batch) that holds service order `service_order_id`.
    pub fn order_by_service_id(&self, service_order_id: &str) -> Result<Option<OrderRecord>> {
        Ok(self
            .select_orders(
                "X''",
                "WHERE service_order_id = ?1",
                params![service_order_id],
            )?
            .into_iter()
            .next())
    }

    pub fn orders(&self, batch_id: i64) -> Result<Vec<OrderRecord>> {
        self.query_orders("WHERE batch_id = ?1 ORDER BY id", params![batch_id])
    }

    /// The batch's orders in `state`, without their bodies (`body` is empty).
    pub fn order_heads_in_state(
        &self,
        batch_id: i64,
        state: OrderState,
    ) -> Result<Vec<OrderRecord>> {
        self.select_orders(
            "X''",
            "WHERE batch_id = ?1 AND state = ?2 ORDER BY id",
            params![batch_id, state.as_str()],
        )
    }

    /// The batch's orders without their bodies (`body` is empty): what a summary needs, at a
    /// fraction of the memory for a large batch.
    pub fn order_heads(&self, batch_id: i64) -> Result<Vec<OrderRecord>> {
        self.select_orders("X''", "WHERE batch_id = ?1 ORDER BY id", params![batch_id])
    }

    fn query_orders(&self, tail: &str, args: impl rusqlite::Params) -> Result<Vec<OrderRecord>> {
        self.select_orders("body", tail, args)
    }

    fn select_orders(
        &self,
        body: &str,
        tail: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<OrderRecord>> {
        let sql = format!(
            "SELECT id, batch_id, idempotency_key, {body}, mode, payment_currency, state,
                    service_order_id, sends, polls, created_at, first_sent_at, accepted_at,
                    error_type, error_message, payment_method, card_id, last_sent_at,
                    last_http_status FROM orders {tail}"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mapped = stmt
            .query_map(args, |r| {
                Ok((
                    OrderRecord {
                        id: r.get(0)?,
                        batch_id: r.get(1)?,
                        idempotency_key: r.get(2)?,
                        body: r.get(3)?,
                        mode: r.get(4)?,
                        payment_currency: r.get(5)?,
                        payment_method: r.get(15)?,
                        card_id: r.get(16)?,
                        state: OrderState::Intent,
                        service_order_id: r.get(7)?,
                        sends: r.get(8)?,
                        polls: r.get(9)?,
                        created_at: r.get(10)?,
                        first_sent_at: r.get(11)?,
                        last_sent_at: r.get(17)?,
                        last_http_status: r.get(18)?,
                        accepted_at: r.get(12)?,
                        error_type: r.get(13)?,
                        error_message: r.get(14)?,
                    },
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(sqlerr(&self.path))?;
        let mut out = Vec::new();
        for item in mapped {
            let (mut o, state) = item.map_err(sqlerr(&self.path))?;
            o.state = parse_state(&state)?;
            out.push(o);
        }
        Ok(out)
    }

    /// Records, durably, that the order is about to be sent (once more). What the last send got
    /// back is cleared: until this send is answered, nothing is known of it.
    pub fn mark_sending(&mut self, order_id: i64) -> Result<()> {
        let at = now();
        let tx = begin(&mut self.conn, &self.path)?;
        let n = tx
            .execute(
                "UPDATE orders SET sends = sends + 1, last_sent_at = ?2,
                        first_sent_at = COALESCE(first_sent_at, ?2),
                        last_http_status = NULL, error_type = NULL, error_message = NULL
                 WHERE id = ?1 AND state = 'INTENT'",
                params![order_id, at],
            )
            .map_err(sqlerr(&self.path))?;
        if n != 1 {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order_id,
                from: "not INTENT".into(),
                to: "sending".into(),
            });
        }
        commit(tx, &self.path)
    }

    /// A transient failure of a send: the order stays an INTENT (in doubt), the error is kept.
    pub fn record_send_error(
        &mut self,
        order_id: i64,
        status: Option<u16>,
        error_type: &str,
        message: &str,
    ) -> Result<()> {
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE orders SET last_http_status = ?2, error_type = ?3, error_message = ?4
             WHERE id = ?1",
            params![order_id, status, error_type, message],
        )?;
        commit(tx, &self.path)
    }

    /// Moves an order (and its rows) to a new state, with what the service said.
    pub fn transition_order(&mut self, order_id: i64, t: Transition<'_>) -> Result<()> {
        let current = self
            .order(order_id)?
            .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
        if current.state == t.to {
            return Ok(());
        }
        check_order_transition(&current, &t)?;
        let rows = self.rows_of_order(order_id)?;
        let row_to = row_state_for(t.to);
        let tx = begin(&mut self.conn, &self.path)?;
        write_order_transition(&tx, &self.path, &current, &t)?;
        for row in &rows {
            if row.state != row_to {
                write_row_transition(&tx, &self.path, current.batch_id, row, row_to, &t)?;
            }
        }
        commit(tx, &self.path)
    }

    /// An intent that is never to be sent: REJECTED (its rows too) with the error `kind` and
    /// `message`, for `paybatch retry` to give its rows a new attempt.
    pub fn close_intent(
        &mut self,
        order_id: i64,
        kind: &str,
        message: &str,
        cause: &str,
    ) -> Result<()> {
        self.transition_order(
            order_id,
            Transition {
                error: Some((kind, message)),
                ..Transition::to(OrderState::Rejected, cause)
            },
        )
    }

    /// Reconciliation found no order at the service for an in-doubt intent: it was never
    /// created, so it may be sent again (with its recorded key and body).
    pub fn clear_in_doubt(&mut self, order_id: i64, cause: &str) -> Result<()> {
        let current = self
            .order(order_id)?
            .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE orders SET sends = 0, first_sent_at = NULL WHERE id = ?1 AND state = 'INTENT'",
            params![order_id],
        )?;
        event(
            &tx,
            current.batch_id,
            "order",
            order_id,
            Some("INTENT"),
            Some("INTENT"),
            cause,
        )
        .map_err(sqlerr(&self.path))?;
        commit(tx, &self.path)
    }

    /// Reconciliation found a service order for rows the ledger had not planned (a lost or
    /// restored ledger): records it, in one transaction, as an order the service accepted, with
    /// the key the rows would have used. Its body is not known and it is never sent.
    ///
    /// `rows` are (row id, attempt of the order at the service). A row is PENDING, or FAILED or
    /// REJECTED at an earlier attempt (the ledger missed a retry that the service has an order
    /// for): it moves to that attempt, as `paybatch retry` would have moved it, and then to
    /// SUBMITTED. Any other row refuses the whole adoption.
    pub fn adopt_order(
        &mut self,
        batch_id: i64,
        idempotency_key: &str,
        payment_currency: &str,
        rows: &[(i64, i64)],
        service_order_id: &str,
    ) -> Result<i64> {
        let at = now();
        let current: Vec<(i64, RowRecord)> = rows
            .iter()
            .map(|(id, attempt)| {
                self.query_rows("WHERE id = ?1", params![id])?
                    .into_iter()
                    .next()
                    .map(|r| (*attempt, r))
                    .ok_or_else(|| LedgerError::Corrupt(format!("row {id} not found")))
            })
            .collect::<Result<_>>()?;
        let tx = begin(&mut self.conn, &self.path)?;
        tx.execute(
            "INSERT INTO orders (batch_id, idempotency_key, body, mode, payment_currency, state,
                                 service_order_id, created_at, accepted_at)
             VALUES (?1, ?2, ?3, 'adopted', ?4, 'ACCEPTED', ?5, ?6, ?6)",
            params![
                batch_id,
                idempotency_key,
                Vec::<u8>::new(),
                payment_currency,
                service_order_id,
                at
            ],
        )
        .map_err(sqlerr(&self.path))?;
        let order_id = tx.last_insert_rowid();
        event(
            &tx,
            batch_id,
            "order",
            order_id,
            None,
            Some("ACCEPTED"),
            "reconcile: order found at the service",
        )
        .map_err(sqlerr(&self.path))?;
        for (index, (attempt, row)) in current.iter().enumerate() {
            let steps = adoption_steps(row, *attempt)?;
            adopt_row(
                &tx,
                &self.path,
                batch_id,
                row,
                *attempt,
                (order_id, index),
                steps,
            )?;
        }
        commit(tx, &self.path)?;
        Ok(order_id)
    }

    /// Counts one more status request for an order.
    pub fn count_poll(&mut self, order_id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE orders SET polls = polls + 1 WHERE id = ?1",
                params![order_id],
            )
            .map_err(sqlerr(&self.path))?;
        Ok(())
    }

    /// `paybatch retry`: FAILED and REJECTED rows become PENDING with the next attempt number
    /// (hence a new idempotency key). Returns the references made eligible.
    pub fn retry_rows(
        &mut self,
        batch_id: i64,
        references: Option<&[String]>,
    ) -> Result<Vec<String>> {
        // Only the failed and refused rows are read (a batch can hold a million).
        let candidates: Vec<(i64, String, String, i64)> = self
            .select_all(
                "SELECT id, reference, state, attempt FROM rows
                 WHERE batch_id = ?1 AND state IN ('FAILED', 'REJECTED')
                 ORDER BY position, id",
                [batch_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?
            .into_iter()
            .filter(|(_, reference, _, _)| references.is_none_or(|refs| refs.contains(reference)))
            .collect();
        let tx = begin(&mut self.conn, &self.path)?;
        let mut out = Vec::new();
        for (id, reference, state, attempt) in candidates {
            exec(
                &tx,
                &self.path,
                "UPDATE rows SET state = 'PENDING', attempt = attempt + 1, order_id = NULL,
                        item_index = NULL, item_id = NULL, payout_url = NULL, price = NULL,
                        discount = NULL, error_type = NULL, error_message = NULL,
                        completed_at = NULL
                 WHERE id = ?1",
                params![id],
            )?;
            event(
                &tx,
                batch_id,
                "row",
                id,
                Some(state.as_str()),
                Some("PENDING"),
                &format!("retry requested: attempt {}", attempt + 1),
            )
            .map_err(sqlerr(&self.path))?;
            out.push(reference);
        }
        commit(tx, &self.path)?;
        Ok(out)
    }

    /// The most recent events of a batch, newest first.
    pub fn events(&self, batch_id: i64, limit: i64) -> Result<Vec<EventRecord>> {
        self.select_all(
            "SELECT at, subject, subject_id, from_state, to_state, cause FROM events
             WHERE batch_id = ?1 ORDER BY id DESC LIMIT ?2",
            params![batch_id, limit],
            |r| {
                Ok(EventRecord {
                    at: r.get(0)?,
                    subject: r.get(1)?,
                    subject_id: r.get(2)?,
                    from_state: r.get(3)?,
                    to_state: r.get(4)?,
                    cause: r.get(5)?,
                })
            },
        )
    }

    // -----------------------------------------------------------------------------------------
    // Catalog cache

    /// The cached catalog of an environment and when it was fetched.
    pub fn cached_catalog(&self, environment: &str) -> Result<Option<(String, Vec<String>)>> {
        let fetched: Option<String> = self
            .conn
            .query_row(
                "SELECT fetched_at FROM catalog_syncs WHERE environment = ?1",
                [environment],
                |r| r.get(0),
            )
            .optional()
            .map_err(sqlerr(&self.path))?;
        let Some(fetched_at) = fetched else {
            return Ok(None);
        };
        let products = self.select_all(
            "SELECT product FROM catalog_products WHERE environment = ?1 ORDER BY code",
            [environment],
            |r| r.get::<_, String>(0),
        )?;
        Ok(Some((fetched_at, products)))
    }

    /// Replaces the cached catalog of an environment: (code, product JSON) pairs.
    pub fn store_catalog(
        &mut self,
        environment: &str,
        products: &[(String, String)],
    ) -> Result<()> {
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "DELETE FROM catalog_products WHERE environment = ?1",
            [environment],
        )?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT OR REPLACE INTO catalog_products (environment, code, product)
                     VALUES (?1, ?2, ?3)",
                )
                .map_err(sqlerr(&self.path))?;
            for (code, json) in products {
                stmt.execute(params![environment, code, json])
                    .map_err(sqlerr(&self.path))?;
            }
        }
        exec(
            &tx,
            &self.path,
            "INSERT OR REPLACE INTO catalog_syncs (environment, fetched_at, products)
             VALUES (?1, ?2, ?3)",
            params![environment, now(), products.len() as i64],
        )?;
        commit(tx, &self.path)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub at: String,
    pub subject: String,
    pub subject_id: i64,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub cause: String,
}

/// The columns of a [`RowRecord`], in the order [`row_from`] reads them.
const ROW_COLUMNS: &str = "rows.id, rows.reference, rows.position, rows.line, rows.fields,
    rows.spec, rows.content_hash, rows.state, rows.attempt, rows.order_id, rows.item_index,
    rows.item_id, rows.payout_url, rows.price, rows.discount, rows.error_type,
    rows.error_message, rows.completed_at, rows.debited_amount, rows.debited_currency,
    rows.merged";

/// A row as [`ROW_COLUMNS`] select it, with its state still as text.
fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<(RowRecord, String)> {
    let fields: String = r.get(4)?;
    Ok((
        RowRecord {
            id: r.get(0)?,
            reference: r.get(1)?,
            position: r.get(2)?,
            line: r.get(3)?,
            fields: serde_json::from_str(&fields).unwrap_or_default(),
            spec: r.get(5)?,
            content_hash: r.get(6)?,
            state: RowState::Pending,
            attempt: r.get(8)?,
            order_id: r.get(9)?,
            item_index: r.get(10)?,
            item_id: r.get(11)?,
            payout_url: r.get(12)?,
            price: r.get(13)?,
            discount: r.get(14)?,
            error_type: r.get(15)?,
            error_message: r.get(16)?,
            completed_at: r.get(17)?,
            debited_amount: r.get(18)?,
            debited_currency: r.get(19)?,
            merged: r.get(20)?,
        },
        r.get(7)?,
    ))
}

fn parsed_row((mut row, state): (RowRecord, String)) -> Result<RowRecord> {
    row.state = parse_state(&state)?;
    Ok(row)
}

/// A row or order state as stored; anything else is a corrupt ledger.
fn parse_state<S: std::str::FromStr<Err = state::UnknownState>>(text: &str) -> Result<S> {
    text.parse()
        .map_err(|e: state::UnknownState| LedgerError::Corrupt(e.to_string()))
}

/// A PLANNED or REJECTED row with what its order says ([`Ledger::visit_planned_or_refused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRow {
    pub row_state: RowState,
    pub error_type: Option<String>,
    /// The row's validated content (JSON), as recorded.
    pub spec: Option<String>,
    pub order_state: OrderState,
    pub payment_currency: String,
    pub card_id: Option<String>,
}

/// What the result file says of a row's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLabel {
    pub service_order_id: Option<String>,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: String,
    pub payment_currency: String,
    pub card_id: Option<String>,
}

/// Each order of a batch with its way of paying and its number of rows (`?1`: the batch).
const ROWS_PER_ORDER_AND_PAYMENT: &str = "SELECT o.card_id, o.payment_currency,
        (SELECT COUNT(*) FROM rows WHERE rows.order_id = o.id)
 FROM orders o WHERE o.batch_id = ?1";

fn sqlerr(path: &Path) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
    move |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        source,
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

/// Inserts a new batch (and its CREATED event) in `tx`; returns its id.
fn insert_batch(tx: &Transaction<'_>, path: &Path, b: &NewBatch<'_>) -> Result<i64> {
    let at = now();
    let headers = serde_json::to_string(b.headers).unwrap_or_else(|_| "[]".into());
    exec(
        tx,
        path,
        "INSERT INTO batches (name, input_path, input_hash, headers, environment, base_url,
                              key_fingerprint, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        params![
            b.name,
            b.input_path,
            b.input_hash,
            headers,
            b.environment,
            b.base_url,
            b.key_fingerprint,
            at
        ],
    )?;
    let id = tx.last_insert_rowid();
    event(tx, id, "batch", id, None, Some("CREATED"), "batch created").map_err(sqlerr(path))?;
    Ok(id)
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

fn batch_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BatchRecord> {
    let headers: String = r.get(4)?;
    Ok(BatchRecord {
        id: r.get(0)?,
        name: r.get(1)?,
        input_path: r.get(2)?,
        input_hash: r.get(3)?,
        headers: serde_json::from_str(&headers).unwrap_or_default(),
        environment: r.get(5)?,
        base_url: r.get(6)?,
        key_fingerprint: r.get(7)?,
        created_at: r.get(8)?,
    })
}

fn event(
    tx: &Transaction<'_>,
    batch_id: i64,
    subject: &str,
    subject_id: i64,
    from: Option<&str>,
    to: Option<&str>,
    cause: &str,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(
        "INSERT INTO events (batch_id, at, subject, subject_id, from_state, to_state, cause)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![
            batch_id,
            now(),
            subject,
            subject_id,
            from,
            to,
            cause
        ])
    })
}

/// Why an order cannot move from its `current` state as `t` says: a transition the table does
/// not allow, or a paid (or in-flight) state without the service's order id.
fn check_order_transition(current: &OrderRecord, t: &Transition<'_>) -> Result<()> {
    let (order_id, to) = (current.id, t.to);
    // An intent is cancelled only by the merge of a file that no longer has one of its rows,
    // which takes its rows out of it (`merge::Merge::close`).
    if !current.state.can_become(to) || to == OrderState::Cancelled {
        return Err(LedgerError::Transition {
            subject: "order",
            id: order_id,
            from: current.state.to_string(),
            to: to.to_string(),
        });
    }
    if matches!(
        to,
        OrderState::Accepted | OrderState::Completed | OrderState::Failed
    ) && t
        .service_order_id
        .or(current.service_order_id.as_deref())
        .is_none()
    {
        // Never mark a row paid (or in flight) without the service's order id.
        return Err(LedgerError::Corrupt(format!(
            "order {order_id}: {to} without a service order id"
        )));
    }
    Ok(())
}

/// Writes an order's move from its `current` state as `t` says, and its event.
fn write_order_transition(
    tx: &Transaction<'_>,
    path: &Path,
    current: &OrderRecord,
    t: &Transition<'_>,
) -> Result<()> {
    let at = now();
    exec(
        tx,
        path,
        "UPDATE orders SET state = ?2,
                service_order_id = COALESCE(?3, service_order_id),
                last_http_status = COALESCE(?4, last_http_status),
                last_response = COALESCE(?5, last_response),
                error_type = ?6, error_message = ?7,
                accepted_at = CASE WHEN ?3 IS NOT NULL THEN COALESCE(accepted_at, ?8)
                                   ELSE accepted_at END,
                finished_at = CASE WHEN ?9 THEN ?8 ELSE finished_at END
         WHERE id = ?1",
        params![
            current.id,
            t.to.as_str(),
            t.service_order_id,
            t.http_status,
            t.response,
            t.error.map(|e| e.0),
            t.error.map(|e| e.1),
            at,
            t.to.is_terminal()
        ],
    )?;
    event(
        tx,
        current.batch_id,
        "order",
        current.id,
        Some(current.state.as_str()),
        Some(t.to.as_str()),
        t.cause,
    )
    .map_err(sqlerr(path))?;
    Ok(())
}

/// Writes the move of one row of an order to `to`, with what `t` says of its item, and its
/// event; refused when the table does not allow it.
fn write_row_transition(
    tx: &Transaction<'_>,
    path: &Path,
    batch_id: i64,
    row: &RowRecord,
    to: RowState,
    t: &Transition<'_>,
) -> Result<()> {
    if !row.state.can_become(to) {
        return Err(LedgerError::Transition {
            subject: "row",
            id: row.id,
            from: row.state.to_string(),
            to: to.to_string(),
        });
    }
    let item = row
        .item_index
        .and_then(|i| t.items.get(i as usize))
        .cloned()
        .unwrap_or_default();
    // A paid row is compared with the rows of later batches (`repeats`).
    let likeness = (to == RowState::Completed)
        .then(|| row.spec.as_deref().and_then(repeats::likeness_of_spec))
        .flatten();
    exec(
        tx,
        path,
        "UPDATE rows SET state = ?2,
                item_id = COALESCE(?3, item_id), payout_url = COALESCE(?4, payout_url),
                price = COALESCE(?5, price), discount = COALESCE(?6, discount),
                error_type = ?7, error_message = ?8,
                completed_at = COALESCE(?9, completed_at),
                debited_amount = COALESCE(?10, debited_amount),
                debited_currency = COALESCE(?11, debited_currency),
                likeness = COALESCE(?12, likeness)
         WHERE id = ?1",
        params![
            row.id,
            to.as_str(),
            item.item_id,
            item.payout_url,
            item.price,
            item.discount,
            t.error.map(|e| e.0),
            t.error.map(|e| e.1),
            t.completed_at,
            item.debited.as_ref().map(|d| d.0.as_str()),
            item.debited.as_ref().map(|d| d.1.as_str()),
            likeness
        ],
    )?;
    event(
        tx,
        batch_id,
        "row",
        row.id,
        Some(row.state.as_str()),
        Some(to.as_str()),
        t.cause,
    )
    .map_err(sqlerr(path))?;
    Ok(())
}

/// The moves (from, to, cause) that bring `row` into an adopted order at `attempt`: PENDING
/// (after FAILED or REJECTED at an earlier attempt), PLANNED, SUBMITTED. Any other row refuses
/// the adoption.
fn adoption_steps(row: &RowRecord, attempt: i64) -> Result<Vec<(RowState, RowState, String)>> {
    let mut steps: Vec<(RowState, RowState, String)> = Vec::new();
    match row.state {
        RowState::Pending if attempt >= row.attempt => {}
        RowState::Failed | RowState::Rejected if attempt > row.attempt => steps.push((
            row.state,
            RowState::Pending,
            format!("reconcile: the service has attempt {attempt} of this row"),
        )),
        other => {
            return Err(LedgerError::Transition {
                subject: "row",
                id: row.id,
                from: other.to_string(),
                to: format!("an adopted order at attempt {attempt}"),
            });
        }
    }
    steps.push((RowState::Pending, RowState::Planned, "in an order".into()));
    steps.push((
        RowState::Planned,
        RowState::Submitted,
        "reconcile: order found at the service".into(),
    ));
    // The same table as every other transition (docs/ledger.md).
    if let Some((from, to, _)) = steps.iter().find(|(from, to, _)| !from.can_become(*to)) {
        return Err(LedgerError::Transition {
            subject: "row",
            id: row.id,
            from: from.to_string(),
            to: to.to_string(),
        });
    }
    Ok(steps)
}

/// Writes `row` as item `index` of the adopted order `order_id` at `attempt`, SUBMITTED, with
/// an event for each of its `steps`.
fn adopt_row(
    tx: &Transaction<'_>,
    path: &Path,
    batch_id: i64,
    row: &RowRecord,
    attempt: i64,
    (order_id, index): (i64, usize),
    steps: Vec<(RowState, RowState, String)>,
) -> Result<()> {
    tx.execute(
        "UPDATE rows SET state = 'SUBMITTED', attempt = ?2, order_id = ?3,
                item_index = ?4, item_id = NULL, payout_url = NULL, price = NULL,
                discount = NULL, error_type = NULL, error_message = NULL,
                completed_at = NULL
         WHERE id = ?1",
        params![row.id, attempt, order_id, index as i64],
    )
    .map_err(sqlerr(path))?;
    for (from, to, cause) in steps {
        event(
            tx,
            batch_id,
            "row",
            row.id,
            Some(from.as_str()),
            Some(to.as_str()),
            &cause,
        )
        .map_err(sqlerr(path))?;
    }
    Ok(())
}

/// The file a ledger path names, spelled one way: symbolic links and `..` resolved, so that two
/// spellings of one ledger (a link to it, a linked directory) are one file, with one lock. A
/// ledger that does not exist yet is its directory's canonical path and its name; a link to
/// nothing is refused (creating through it would create a file elsewhere).
pub fn canonical_path(path: &Path) -> std::io::Result<PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "it is a symbolic link to a file that does not exist",
                ));
            }
            let name = path.file_name().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "it names no file")
            })?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            Ok(std::fs::canonicalize(parent)?.join(name))
        }
        Err(e) => Err(e),
    }
}

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Opens `path` (a canonical path, see [`canonical_path`]) without following a symbolic link,
/// creating it with mode 0600 if `create`; refuses anything but a regular file.
fn open_no_follow(path: &Path, create: bool) -> std::io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if create {
        options.create(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return std::io::Error::other(
                "it is a symbolic link; paybatch does not follow one there",
            );
        }
        e
    })?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// Creates the ledger file `path` (canonical) with mode 0600, or checks that an existing one is
/// a ledger (empty, or an SQLite database) before narrowing its mode to 0600. The mode is set on
/// the file opened, never through a path: a link or a file that is not a database is left as
/// it was. Its `-wal` and `-shm` files may not be symbolic links either (SQLite would write
/// the ledger's pages through them).
pub fn create_private_file(path: &Path) -> Result<()> {
    let io = |e: std::io::Error| LedgerError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if std::fs::symlink_metadata(&side).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(LedgerError::Io {
                path: side,
                message: "it is a symbolic link; paybatch does not follow one there (remove it)"
                    .into(),
            });
        }
    }
    let mut file = open_no_follow(path, true).map_err(io)?;
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    std::io::Read::by_ref(&mut file)
        .take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    if !head.is_empty() && head != SQLITE_HEADER {
        return Err(LedgerError::Io {
            path: path.to_path_buf(),
            message: "it is not a paybatch ledger (not an SQLite database); it was left as it is"
                .into(),
        });
    }
    set_private(&file).map_err(io)
}

/// Narrows a side file of the ledger (`-wal`, `-shm`) to mode 0600, if it exists and is a
/// regular file.
fn narrow_side_file(path: &Path) -> Result<()> {
    match open_no_follow(path, false) {
        Ok(file) => set_private(&file).map_err(|e| LedgerError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LedgerError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

/// Sets mode 0600 on an open file.
fn set_private(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Two processes opening a new ledger at once (a `status` beside the run creating it) both
    /// get it, at this version's schema.
    #[test]
    fn a_new_ledger_opened_twice_at_once_is_migrated_once_and_opened_by_both() {
        let dir = tempfile::tempdir().expect("dir");
        for n in 0..20 {
            let path = dir.path().join(format!("l{n}.db"));
            // The file exists, empty, as a run creating it leaves it for a moment.
            std::fs::write(&path, b"").expect("empty ledger");
            let start = std::sync::Arc::new(std::sync::Barrier::new(2));
            let opens: Vec<_> = (0..2)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        Ledger::open(&path).map(|l| l.batch("b").map(|b| b.is_none()))
                    })
                })
                .collect();
            for open in opens {
                let opened = open.join().expect("thread");
                assert!(matches!(opened, Ok(Ok(true))), "{n}: {opened:?}");
            }
            let conn = Connection::open(&path).expect("ledger");
            let version: i64 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .expect("version");
            assert_eq!(version, migrations_count() as i64);
        }
    }

    /// A ledger another connection holds says so, with what to do; other errors say nothing
    /// more.
    #[test]
    fn a_busy_ledger_says_another_paybatch_is_writing_to_it() {
        let error = |code| LedgerError::Sqlite {
            path: PathBuf::from("l.db"),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                Some("database is locked".into()),
            ),
        };
        for code in [rusqlite::ffi::SQLITE_BUSY, rusqlite::ffi::SQLITE_LOCKED] {
            let text = error(code).to_string();
            assert!(
                text.starts_with("ledger l.db: database is locked"),
                "{text}"
            );
            assert!(text.contains("another paybatch is writing to it"), "{text}");
        }
        let full = error(rusqlite::ffi::SQLITE_FULL).to_string();
        assert_eq!(full, "ledger l.db: database is locked");
    }

    /// A ledger of a later schema is refused, saying a newer paybatch wrote it, and left as it
    /// is.
    #[test]
    fn a_ledger_from_a_newer_paybatch_is_refused_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        drop(Ledger::open(&path).unwrap());
        let later = migrations_count() as i64 + 1;
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", later).unwrap();
        }
        let refused = Ledger::open(&path).err().expect("refused").to_string();
        assert!(refused.contains("written by a newer paybatch"), "{refused}");
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, later);
    }

    fn migrations_count() -> usize {
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
            .unwrap()
            .count()
    }

    /// The POSIX locks this process holds on `path`'s file (`/proc/locks`).
    #[cfg(target_os = "linux")]
    fn locks_held_on(path: &Path) -> usize {
        use std::os::unix::fs::MetadataExt;
        let inode = std::fs::metadata(path).unwrap().ino();
        let pid = std::process::id().to_string();
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 5
                    && f[1] == "POSIX"
                    && f[4] == pid
                    && f[5].ends_with(&format!(":{inode}"))
            })
            .count()
    }

    /// SQLite's locks on the shared memory tell other processes (a `status` alongside a run)
    /// that this one has the ledger open: opening the ledger, once or twice in one process,
    /// never drops them (closing any descriptor of a file drops the process's locks on it).
    #[cfg(target_os = "linux")]
    #[test]
    fn opening_the_ledger_again_keeps_the_locks_sqlite_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let shm = dir.path().join("ledger.db-shm");
        let first = Ledger::open(&path).unwrap();
        first.batch("any").unwrap();
        let held = locks_held_on(&shm);
        assert!(held > 0, "SQLite holds locks on the shared memory");
        let second = Ledger::open(&path).unwrap();
        second.batch("any").unwrap();
        assert!(locks_held_on(&shm) >= held);
        drop(second);
        first.batch("any").unwrap();
        assert_eq!(
            locks_held_on(&shm),
            held,
            "the first connection keeps its locks"
        );
        drop(first);
        // Closed and opened again: the files are prepared again, before SQLite opens them.
        let again = Ledger::open(&path).unwrap();
        again.batch("any").unwrap();
        assert!(locks_held_on(&shm) > 0);
    }

    #[test]
    fn a_link_to_a_file_that_is_not_a_ledger_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "not a database").unwrap();
        std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("paybatch.db");
        symlink(&notes, &link).unwrap();
        let e = Ledger::open(&link).err().expect("refused");
        assert!(e.to_string().contains("not a paybatch ledger"), "{e}");
        assert_eq!(mode_of(&notes), 0o644, "the link's target was not chmod-ed");
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "not a database");
        // A link to nothing: nothing is created where it points.
        let nowhere = dir.path().join("nowhere.db");
        let dangling = dir.path().join("dangling.db");
        symlink(&nowhere, &dangling).unwrap();
        assert!(Ledger::open(&dangling).is_err());
        assert!(!nowhere.exists());
    }

    #[test]
    fn a_link_in_place_of_the_write_ahead_log_is_refused_before_sqlite_writes_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paybatch.db");
        drop(Ledger::open(&path).expect("a new ledger"));
        let precious = dir.path().join("precious.txt");
        std::fs::write(&precious, "keep me").unwrap();
        std::fs::set_permissions(&precious, std::fs::Permissions::from_mode(0o644)).unwrap();
        symlink(&precious, dir.path().join("paybatch.db-wal")).unwrap();
        let e = Ledger::open(&path).err().expect("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
        assert_eq!(mode_of(&precious), 0o644);
    }

    #[test]
    fn a_ledger_opened_through_a_link_is_the_file_it_points_to() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.db");
        {
            let mut ledger = Ledger::open(&real).expect("new");
            ledger.store_catalog("sim@x", &[]).expect("write");
        }
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        let alias = dir.path().join("alias.db");
        symlink(&real, &alias).unwrap();
        let ledger = Ledger::open(&alias).expect("through the link");
        assert_eq!(ledger.path(), alias.as_path(), "shown as given");
        assert_eq!(mode_of(&real), 0o600, "the ledger itself is private");
        assert!(!dir.path().join("alias.db-wal").exists());
    }
}
