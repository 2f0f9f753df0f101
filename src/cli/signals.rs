//! SIGINT (Ctrl-C) and SIGTERM during a run: the command stops the operation at its next wait,
//! says how far the batch got, and exits 130 or 143. Nothing is lost: every send is marked in
//! the ledger before it leaves, so an order whose answer did not come is in doubt and re-sent
//! with its key by the next run.

use std::path::Path;

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

/// Waits for SIGINT or SIGTERM (from the moment it is first polled; until then the default
/// handling stands). A signal that cannot be listened to is never reported.
pub async fn stop() -> Stop {
    let interrupt = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => Stop::Interrupt,
            Err(_) => std::future::pending().await,
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
                Stop::Terminate
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        s = interrupt => s,
        s = terminate => s,
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
