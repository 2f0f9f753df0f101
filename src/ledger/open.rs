//! Opening the ledger: its file made private and safe to open (no symbolic links, only an
//! SQLite database), its connection set up and its schema migrated.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use super::{Ledger, LedgerError, Result, repeats};
use crate::files;

/// How many times a migration that another process made meanwhile is tried again (once a
/// migration, and some).
const MIGRATION_TRIES: usize = 16;

/// How long opening the ledger waits for a large merge of another process, written with a
/// rollback journal (see `merge::RollbackJournal`), to end so that the write-ahead log can be
/// set: about four million rows' worth on a small machine.
const WAIT_FOR_A_LARGE_MERGE: std::time::Duration = std::time::Duration::from_secs(30);

/// The ledger files this process has open, with how many connections each: only the first
/// connection to a file may open and close descriptors of it ([`Ledger::open`]).
static OPEN_HERE: std::sync::Mutex<BTreeMap<PathBuf, usize>> =
    std::sync::Mutex::new(BTreeMap::new());

/// One connection's place in [`OPEN_HERE`], given back when it is dropped.
pub(super) struct OpenHere {
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

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

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
            books_clock: None,
            _here: here,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        M::up(include_str!("../../migrations/010_payouts.sql")),
        M::up(include_str!("../../migrations/011_result_format.sql")),
        M::up(include_str!("../../migrations/012_approvals.sql")),
        M::up(include_str!("../../migrations/013_service_orders.sql")),
        M::up(include_str!("../../migrations/014_plan_approvals.sql")),
        M::up(include_str!("../../migrations/015_books.sql")),
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
    // 8 MiB of page cache (SQLite's default is 2): a million-row merge of one row an order
    // touches the order-key index all over; pages are only taken as needed. 16 MiB held 10 to
    // 20 MB more at the peak of a million-row merge, for the same CPU time at 200 rows an order
    // and about 1.5 s less system time at one row an order.
    conn.pragma_update(None, "cache_size", -8192).map_err(err)?;
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
        c.pragma_query_value(None, "user_version", |r| r.get::<_, i64>("user_version"))
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

/// Sets the ledger's write-ahead log. While another process writes a large merge with a
/// rollback journal, SQLite refuses the change at once (busy, without waiting as for a lock);
/// it is tried again until [`WAIT_FOR_A_LARGE_MERGE`] has passed.
fn set_write_ahead_log(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let set = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| {
            r.get::<_, String>("journal_mode")
        });
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
    let mut file = files::open_no_follow(path, true, "").map_err(io)?;
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
    files::set_private(&file).map_err(io)
}

/// Narrows a side file of the ledger (`-wal`, `-shm`) to mode 0600, if it exists and is a
/// regular file.
fn narrow_side_file(path: &Path) -> Result<()> {
    match files::open_no_follow(path, false, "") {
        Ok(file) => files::set_private(&file).map_err(|e| LedgerError::Io {
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
                .pragma_query_value(None, "user_version", |r| r.get("user_version"))
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
            .pragma_query_value(None, "user_version", |r| r.get("user_version"))
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
