//! SIGINT (Ctrl-C) and SIGTERM during a run: the command stops the operation at its next wait,
//! says how far the batch got, and exits 130 or 143. Nothing is lost: every send is marked in
//! the ledger before it leaves, so an order whose answer did not come is in doubt and re-sent
//! with its key by the next run.

use std::path::Path;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::exit;
use crate::ledger::{Ledger, SendProgress};

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
}

impl Stop {
    pub fn code(self) -> i32 {
        match self {
            Stop::Interrupt => exit::INTERRUPTED,
            Stop::Terminate => exit::TERMINATED,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Stop::Interrupt => "interrupted",
            Stop::Terminate => "terminated",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
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
    pub async fn next(&mut self) -> Stop {
        tokio::select! {
            Some(()) = recv(&mut self.interrupt) => Stop::Interrupt,
            Some(()) = recv(&mut self.terminate) => Stop::Terminate,
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
pub struct Progress {
    pub sent: Option<SendProgress>,
}

impl Progress {
    /// `114 orders sent, 186 rows not sent yet`.
    pub fn describe(&self) -> String {
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

/// Reads how far `batch` got. The ledger is not created where there is none.
pub fn progress_of(ledger: &Path, batch: &str) -> Progress {
    let sent = ledger
        .exists()
        .then(|| Ledger::open(ledger).ok())
        .flatten()
        .and_then(|l| {
            let b = l.batch(batch).ok().flatten()?;
            l.send_progress(b.id).ok()
        });
    Progress { sent }
}
