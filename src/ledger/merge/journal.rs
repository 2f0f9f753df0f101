//! A large merge written with a rollback journal instead of the write-ahead log.

use super::Ledger;

/// Merges of at least this many rows are written with a rollback journal (see
/// [`RollbackJournal`]).
pub(super) const ROWS_WITH_ROLLBACK_JOURNAL: usize = 20_000;

/// A large merge's transaction written with SQLite's rollback journal instead of the ledger's
/// write-ahead log, which is given back when the merge ends (commit or rollback).
///
/// In the log, every page the merge writes is written twice: into the log, then copied into
/// the ledger file by the checkpoint that follows the commit, which for a million rows is
/// more than half a gigabyte copied while the run waits. A rollback journal keeps only the
/// former content of the pages the transaction changes; the pages it adds at the end of the
/// file (nearly all of a new batch's) need none, so they are written once. The commit is as
/// durable: the journal, then the ledger file, are synced, and so is the directory once the
/// journal is deleted (`synchronous=EXTRA`, without which a power cut could bring the journal
/// back and undo the commit). A merge cut short by a crash is rolled back from the journal when
/// the ledger is next opened.
///
/// Leaving the log needs the ledger to be open nowhere else: when another connection has it
/// open (a `status` alongside), the merge stays in the log. While the merge runs, another
/// process that opens the ledger waits for it (up to the ledger's busy timeout) instead of
/// reading the state before it.
pub(super) struct RollbackJournal<'l> {
    ledger: &'l Ledger,
}

impl<'l> RollbackJournal<'l> {
    pub(super) fn for_rows(ledger: &'l Ledger, rows: usize) -> Option<Self> {
        if rows < ROWS_WITH_ROLLBACK_JOURNAL {
            return None;
        }
        let mode = ledger
            .conn
            .pragma_update_and_check(None, "journal_mode", "DELETE", |r| {
                r.get::<_, String>("journal_mode")
            });
        match mode {
            Ok(mode) if mode.eq_ignore_ascii_case("delete") => {
                // Set before the journal can be given back: `drop` restores both.
                let journal = RollbackJournal { ledger };
                match ledger.conn.pragma_update(None, "synchronous", "EXTRA") {
                    Ok(()) => Some(journal),
                    Err(e) => {
                        tracing::debug!("large merge in the write-ahead log: {e}");
                        None
                    }
                }
            }
            Ok(mode) => {
                tracing::debug!("large merge in journal mode {mode}");
                None
            }
            Err(e) => {
                tracing::debug!("large merge in the write-ahead log: {e}");
                None
            }
        }
    }
}

impl Drop for RollbackJournal<'_> {
    fn drop(&mut self) {
        // Should this fail, the ledger stays readable and durable with its rollback journal
        // (and `synchronous=EXTRA`), and the next connection to it sets the log again
        // (`connect`).
        let conn = &self.ledger.conn;
        if let Err(e) = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| {
                r.get::<_, String>("journal_mode")
            })
            .and_then(|_| conn.pragma_update(None, "synchronous", "FULL"))
        {
            tracing::warn!(
                "{}: the write-ahead log could not be set again: {e}",
                self.ledger.path.display()
            );
        }
    }
}
