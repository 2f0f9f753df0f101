//! SIGINT (Ctrl-C) and SIGTERM during a run: the command stops the operation at its next wait,
//! says how far the batch got, and exits 130 or 143. Nothing is lost: every send is marked in
//! the ledger before it leaves, so an order whose answer did not come is in doubt and re-sent
//! with its key by the next run.

use std::path::Path;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::exit::Exit;
use crate::ledger::{Ledger, SendProgress};

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
}

impl StopSignal {
    pub fn exit(self) -> Exit {
        match self {
            StopSignal::Interrupt => Exit::Interrupted,
            StopSignal::Terminate => Exit::Terminated,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "interrupted",
            StopSignal::Terminate => "terminated",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

/// SIGINT and SIGTERM, caught from the moment the listener is made (until then the default
/// handling stands: a signal ends the process).
pub struct Listener {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl Listener {
    /// Catches both signals from now on; one that cannot be caught keeps its default handling.
    pub fn new() -> Self {
        Listener {
            interrupt: signal(SignalKind::interrupt()).ok(),
            terminate: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next signal caught.
    pub async fn next(&mut self) -> StopSignal {
        tokio::select! {
            Some(()) = recv(&mut self.interrupt) => StopSignal::Interrupt,
            Some(()) = recv(&mut self.terminate) => StopSignal::Terminate,
            else => std::future::pending().await,
        }
    }
}

impl Default for Listener {
    fn default() -> Self {
        Listener::new()
    }
}

async fn recv(signal: &mut Option<Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// How far a batch got, read from the ledger after the stop (none when there is no ledger or
/// no such batch yet: nothing was sent).
pub struct SentSoFar {
    pub sent: Option<SendProgress>,
    /// Why how far the batch got could not be read (the ledger stayed busy, or could not be
    /// opened): then nothing is said of what was sent.
    pub unread: Option<String>,
}

impl SentSoFar {
    /// `114 orders sent, 186 rows not sent yet`.
    pub fn describe(&self) -> String {
        if let Some(why) = &self.unread {
            return format!(
                "how far the batch got could not be read ({why}); `paybatch status` says it once the ledger is free"
            );
        }
        match &self.sent {
            None => "nothing was sent".to_string(),
            Some(p) => {
                let doubt = if p.orders_in_doubt > 0 {
                    format!(
                        " ({} without an answer yet, re-sent with the same key)",
                        p.orders_in_doubt
                    )
                } else {
                    String::new()
                };
                format!(
                    "{} orders sent{doubt}, {} rows not sent yet",
                    p.orders_sent, p.rows_not_sent
                )
            }
        }
    }
}

/// How long a stopped run waits to read how far it got: a large merge of its own, still
/// writing or being rolled back, holds the ledger until it ends.
const PROGRESS_WAIT: Duration = Duration::from_secs(5);

/// Reads how far `batch` got, waiting `PROGRESS_WAIT` at most. The ledger is not created
/// where there is none.
pub fn progress_of(ledger: &Path, batch: &str) -> SentSoFar {
    if !ledger.exists() {
        return SentSoFar {
            sent: None,
            unread: None,
        };
    }
    let (tell, told) = std::sync::mpsc::channel();
    let (path, name) = (ledger.to_path_buf(), batch.to_string());
    // Left to end with the process if the ledger stays busy.
    std::thread::spawn(move || {
        let _ = tell.send(read_progress(&path, &name));
    });
    match told.recv_timeout(PROGRESS_WAIT) {
        Ok(Ok(sent)) => SentSoFar { sent, unread: None },
        Ok(Err(e)) => SentSoFar {
            sent: None,
            unread: Some(e.to_string()),
        },
        Err(_) => SentSoFar {
            sent: None,
            unread: Some(format!(
                "the ledger stayed busy for {} s",
                PROGRESS_WAIT.as_secs()
            )),
        },
    }
}

fn read_progress(ledger: &Path, batch: &str) -> crate::ledger::Result<Option<SendProgress>> {
    let l = Ledger::open(ledger)?;
    let Some(b) = l.batch(batch)? else {
        return Ok(None);
    };
    l.send_progress(b.id).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a ledger nothing was sent; a ledger held by a large merge (its rollback journal
    /// keeps readers out) is not read as "nothing was sent" but said to be unread, in bounded
    /// time.
    #[test]
    fn a_ledger_held_by_a_merge_is_not_read_as_nothing_sent() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("l.db");
        let none = progress_of(&path, "b");
        assert_eq!(none.describe(), "nothing was sent");
        drop(Ledger::open(&path).expect("ledger"));
        let merge = rusqlite::Connection::open(&path).expect("merge");
        let mode: String = merge
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .expect("journal mode");
        assert_eq!(mode, "delete");
        merge.execute_batch("BEGIN EXCLUSIVE").expect("held");
        let held = progress_of(&path, "b");
        assert_eq!(held.sent, None);
        assert!(held.unread.is_some());
        let text = held.describe();
        assert!(!text.contains("nothing was sent"), "{text}");
        assert!(text.contains("could not be read"), "{text}");
        merge.execute_batch("ROLLBACK").expect("released");
        let free = progress_of(&path, "b");
        assert_eq!(free.unread, None);
        assert_eq!(free.describe(), "nothing was sent");
    }
}
