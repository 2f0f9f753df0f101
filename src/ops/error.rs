//! The error every operation returns ([`OpError`], with the help a person needs) and what kind
//! of stop it was ([`Failure`]). The command line maps these to exit codes; nothing here knows
//! them.

use std::path::PathBuf;

use crate::api::ApiError;
use crate::batch::reconcile::ReconcileError;
use crate::catalog::CatalogError;
use crate::environment::UsageError;
use crate::input::rules::Problems;
use crate::input::scan;
use crate::ledger::lock::LockError;
use crate::ledger::{Ledger, LedgerError};

/// The error every operation returns (`run`, `validate`, `retry`, `reconcile`, `payouts`, ...),
/// with the help a person needs.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("{0}")]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("{} problem(s) in {}; nothing was submitted", .problems.len(), .input.display())]
    Invalid {
        input: PathBuf,
        /// The first of each kind, and how many of each.
        problems: Problems,
    },
    #[error("{message}")]
    Refused { message: String, help: String },
    #[error("{message}")]
    Binding { message: String, help: String },
    /// The service and the ledger disagree in a way only a person can settle.
    #[error("{message}")]
    Conflict { message: String, help: String },
    /// The service cannot tell yet whether rows are already ordered (a rebuilt batch with
    /// orders still processing): nothing was planned; the same command goes on later.
    #[error("{message}")]
    Unsettled { message: String, help: String },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("the service refused the credentials or version: {0}")]
    Auth(ApiError),
    #[error("{0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    #[error("cannot write {path}: {message}")]
    Io { path: PathBuf, message: String },
    /// An error after orders went out (`sent` says which): what was sent is recorded or in
    /// doubt, nothing is lost or paid twice, and the same command resumes. Never ends a
    /// command as if nothing had happened ([`OpError::after_sending`]).
    #[error("{cause}")]
    AfterSending { cause: Box<OpError>, sent: String },
}

impl From<scan::FileChanged> for OpError {
    fn from(e: scan::FileChanged) -> Self {
        OpError::Refused {
            message: e.to_string(),
            help: "run again once nothing writes to the file".into(),
        }
    }
}

/// What stopped a run, for the command line to turn into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A flag, a setting, the key, or a batch bound elsewhere: nothing was sent.
    Usage,
    /// Another process holds the ledger.
    Locked,
    /// The file (or the balance, or the approved digest) refused the plan: nothing was sent.
    Invalid,
    /// The service failed for a moment: the same command resumes.
    Incomplete,
    /// Anything else.
    Unexpected,
}

impl OpError {
    /// An error of the service: the key, environment or version refused ([`is_auth_error`]),
    /// or another.
    pub fn from_api(e: ApiError) -> Self {
        if is_auth_error(&e) {
            OpError::Auth(e)
        } else {
            OpError::Api(e)
        }
    }

    /// This error, met once `sent` orders of batch `batch` went out: an unexpected error (a
    /// full disk for the ledger or the result file, a damaged ledger) becomes
    /// [`OpError::AfterSending`], for the same command resumes what was sent. `sent` counts the
    /// orders this command sent; when it sent none, the ledger (`ledger`) says whether earlier
    /// runs of the batch did. Any other error is left as it is, and so is a conflict, which a
    /// person settles before anything is run again.
    pub fn after_sending(self, sent: u64, ledger: &std::path::Path, batch: &str) -> Self {
        if !self.resumes_after_sending() {
            return self;
        }
        let before = || -> Option<u64> {
            if !ledger.exists() {
                return None;
            }
            let l = Ledger::open(ledger).ok()?;
            let b = l.batch(batch).ok()??;
            l.send_progress(b.id)
                .ok()
                .and_then(|p| u64::try_from(p.orders_sent).ok())
        };
        let orders = match sent {
            0 => before().unwrap_or(0),
            n => n,
        };
        if orders == 0 {
            return self;
        }
        let sent = format!(
            "{} of batch {batch} {} sent to the service before this error, so money may have moved",
            crate::text::count(orders, "order", "orders"),
            if orders == 1 { "was" } else { "were" }
        );
        OpError::AfterSending {
            cause: Box::new(self),
            sent,
        }
    }

    /// This error, met while a reconciliation recorded in the ledger the service's orders of
    /// batch `batch`: an unexpected error becomes [`OpError::AfterSending`], for the orders are
    /// at the service and the same command goes on recording them. Any other error is left as
    /// it is.
    pub fn while_adopting(self, batch: &str) -> Self {
        if !self.resumes_after_sending() {
            return self;
        }
        OpError::AfterSending {
            cause: Box::new(self),
            sent: format!(
                "the service's orders of batch {batch} were being recorded in the ledger when this error came"
            ),
        }
    }

    /// Whether this error, met once orders went out, is resumed by the same command: an
    /// unexpected one other than a conflict.
    fn resumes_after_sending(&self) -> bool {
        self.failure() == Failure::Unexpected
            && !matches!(
                self,
                OpError::AfterSending { .. }
                    | OpError::Conflict { .. }
                    // The same command cannot mend a damaged ledger.
                    | OpError::Ledger(LedgerError::Corrupt(_))
            )
    }

    pub fn failure(&self) -> Failure {
        match self {
            OpError::AfterSending { .. } => Failure::Incomplete,
            OpError::Usage(_) | OpError::Binding { .. } | OpError::Auth(_) => Failure::Usage,
            OpError::Locked(LockError::Held { .. }) => Failure::Locked,
            OpError::Invalid { .. } | OpError::Refused { .. } => Failure::Invalid,
            OpError::Unsettled { .. } => Failure::Incomplete,
            _ if self.is_transient() => Failure::Incomplete,
            _ => Failure::Unexpected,
        }
    }

    /// The service failed for a moment (a 5xx, a 429, a dropped connection) even after the
    /// reads were tried again: nothing is lost, and the same command resumes.
    pub fn is_transient(&self) -> bool {
        match self {
            OpError::Api(e)
            | OpError::Catalog(CatalogError::Api(e))
            | OpError::Reconcile(ReconcileError::Api(e)) => e.is_transient(),
            _ => false,
        }
    }

    pub fn help(&self) -> Option<String> {
        match self {
            OpError::AfterSending { sent, .. } => Some(resume_after_sending(sent)),
            OpError::Usage(c) => Some(c.help().to_string()).filter(|h| !h.is_empty()),
            OpError::Locked(LockError::Held { .. }) => Some(
                "wait for the other run to finish; a killed run releases the lock by itself".into(),
            ),
            OpError::Refused { help, .. }
            | OpError::Binding { help, .. }
            | OpError::Conflict { help, .. }
            | OpError::Unsettled { help, .. } => Some(help.clone()),
            OpError::Auth(e) if e.kind() == "version_removed" || e.status() == Some(410) => {
                Some(format!(
                    "paybatch asks for the service's API version {}, which the service has switched off: nothing more was sent; install a paybatch release that speaks a current version, then run the same command again",
                    crate::api::models::API_VERSION
                ))
            }
            OpError::Auth(e) if e.kind() == "invalid_version" => Some(format!(
                "the service does not know the API version {} that paybatch asks for: check the base URL, or update paybatch",
                crate::api::models::API_VERSION
            )),
            OpError::Auth(_) => Some(
                "check that the key was copied completely, that it belongs to this environment, and that it was not revoked (paybatch ping)".into(),
            ),
            OpError::Invalid { problems, .. } if problems.all_file_level() => {
                Some("fix the file as said above (encoding, header row, rows) and run again".into())
            }
            OpError::Invalid { .. } => Some(
                "fix the rows above and run again; --skip-invalid pays the valid rows and marks the others INVALID".into(),
            ),
            _ if self.is_transient() => Some(
                "nothing is lost: check the service's address and the network (paybatch ping), then run the same command again to resume".into(),
            ),
            OpError::Reconcile(_) => {
                Some("check the key and environment with `paybatch ping`".into())
            }
            _ => None,
        }
    }
}

/// The help of an error met once orders went out (`sent` says which): how to resume.
pub fn resume_after_sending(sent: &str) -> String {
    format!(
        "{sent}; nothing is lost or paid twice: fix what the error says, then run the same command again to resume"
    )
}

/// Errors that say the key, environment or version is wrong: no row is at fault.
pub fn is_auth_error(e: &ApiError) -> bool {
    // `ordering_restricted` (403) is the account's spending limit, not its credentials.
    e.kind() != "ordering_restricted"
        && (matches!(
            e.kind(),
            "unauthorized"
                | "invalid_api_key"
                | "forbidden"
                | "invalid_version"
                | "version_removed"
        ) || matches!(e.status(), Some(401) | Some(403) | Some(410)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpected_error_once_orders_went_out_is_resumed() {
        let dir = tempfile::tempdir().expect("dir");
        let ledger = dir.path().join("none.db");
        let full = || OpError::Io {
            path: "nov.result.csv".into(),
            message: "no storage space".into(),
        };
        // Nothing sent, no ledger: as it was.
        let e = full().after_sending(0, &ledger, "nov");
        assert!(matches!(e, OpError::Io { .. }));
        assert_eq!(e.failure(), Failure::Unexpected);
        // Sent: the same command resumes, and the help says what went out.
        let e = full().after_sending(3, &ledger, "nov");
        assert_eq!(e.failure(), Failure::Incomplete);
        assert_eq!(
            e.to_string(),
            "cannot write nov.result.csv: no storage space"
        );
        let help = e.help().expect("a help");
        assert!(
            help.starts_with("3 orders of batch nov were sent"),
            "{help}"
        );
        assert!(
            help.ends_with("run the same command again to resume"),
            "{help}"
        );
        assert!(
            full()
                .after_sending(1, &ledger, "nov")
                .help()
                .is_some_and(|h| h.starts_with("1 order of batch nov was sent"))
        );
        // A conflict is for a person; another failure keeps its exit.
        let conflict = OpError::Conflict {
            message: "m".into(),
            help: "h".into(),
        };
        assert!(matches!(
            conflict.after_sending(3, &ledger, "nov"),
            OpError::Conflict { .. }
        ));
        let refused = OpError::Refused {
            message: "m".into(),
            help: "h".into(),
        };
        assert_eq!(
            refused.after_sending(3, &ledger, "nov").failure(),
            Failure::Invalid
        );
        assert_eq!(full().while_adopting("nov").failure(), Failure::Incomplete);
    }
}
