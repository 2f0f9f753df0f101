//! How a run ends: the error that stopped it ([`OpError`], with the help a person needs), what
//! kind of stop it was ([`Failure`]), and the summary of a run that went to its end
//! ([`RunSummary`], [`Outcome`]). The command line maps these to exit codes; nothing here knows
//! them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rust_decimal::Decimal;

use crate::api::ApiError;
use crate::catalog::CatalogError;
use crate::environment::{Environment, UsageError};
use crate::input::rules::Problems;
use crate::input::scan;
use crate::ledger::{Ledger, LedgerError, RowState};

use crate::ledger::lock::LockError;

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
    Reconcile(#[from] super::reconcile::ReconcileError),
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

/// How a run that went to its end came out, for the command line to turn into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every row completed.
    Completed,
    /// Rows failed, were rejected, invalid or mismatched, or the service stopped part of the
    /// batch: a person decides what next.
    NeedsAPerson,
    /// Rows are not finished: the same command resumes.
    Incomplete,
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
                OpError::AfterSending { .. } | OpError::Conflict { .. }
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
        use super::reconcile::ReconcileError;
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

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub batch: String,
    pub environment: Environment,
    pub result_path: PathBuf,
    /// The layout the result file was written in, and what chose it.
    pub result_format: crate::file_format::ResultFormat,
    pub counts: BTreeMap<RowState, i64>,
    /// Completed rows: (currency, face value total, price total).
    pub totals: BTreeMap<String, (Decimal, Decimal)>,
    pub incomplete_reason: Option<String>,
    /// Rows in orders per payment method (`balance USD`, `card card_x`).
    pub paid_by: BTreeMap<String, i64>,
    /// What left each paying balance (or card) for the completed rows: (`balance USD` or
    /// `card card_x`, currency) -> amount. Converted rows count in the payment currency.
    pub debited: BTreeMap<(String, String), Decimal>,
    /// What the service stopped during the run and a person must settle (a balance too low,
    /// the account's spending limit): one line each, with what is missing and what to do.
    pub stopped: Vec<String>,
    /// The batch's valid rows per delivery (`EMAIL`, `PAYOUT_LINK`).
    pub per_delivery: BTreeMap<String, i64>,
    /// COMPLETED rows whose order could not be confirmed as the one sent (the service's answer
    /// named neither its key nor its batch).
    pub unconfirmed: i64,
    /// COMPLETED rows whose order's total could not be checked (the service's answer left out
    /// the optional fields that check it: `transaction_detail` of a converted order).
    pub total_unconfirmed: i64,
    /// The first INVALID rows, named with their problems ([`INVALID_NAMED`] at most).
    pub invalid: Vec<String>,
    /// Rows planned again in new orders after the service refused other items of their
    /// orders, by the refusal's type ([`super::replan`]).
    pub replanned: Vec<(String, i64)>,
    /// The first rows of the run that pay a recipient what another batch paid them lately
    /// (likely repeats, paid: a warning), and how many there are in all.
    pub likely_repeats: Vec<LikelyPaid>,
    pub likely_repeats_total: usize,
}

/// A row a run paid that pays a recipient what another batch (`batch`, its row
/// `earlier_reference`, paid at `completed_at`) paid them lately: a likely repeat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LikelyPaid {
    pub reference: String,
    pub line: u64,
    pub batch: String,
    pub earlier_reference: String,
    pub completed_at: String,
}

/// INVALID rows named in a summary, at most (the result file has every one).
pub const INVALID_NAMED: i64 = 5;

impl RunSummary {
    /// The result file's path, then its layout when it is not plain CSV
    /// (`` nov.result.csv (`;`, BOM, CRLF: as the input) ``).
    pub fn result_file(&self) -> String {
        format!(
            "{}{}",
            self.result_path.display(),
            self.result_format.note()
        )
    }

    pub fn count(&self, state: RowState) -> i64 {
        self.counts.get(&state).copied().unwrap_or(0)
    }

    /// Completed when every row is; needs a person when rows failed, were rejected, invalid or
    /// mismatched, or the service stopped a balance or the account ([`RunSummary::stopped`]);
    /// incomplete while rows are not finished.
    pub fn outcome(&self) -> Outcome {
        let unfinished = self.count(RowState::Pending)
            + self.count(RowState::Planned)
            + self.count(RowState::Submitted);
        if !self.stopped.is_empty() {
            Outcome::NeedsAPerson
        } else if unfinished > 0 || self.incomplete_reason.is_some() {
            Outcome::Incomplete
        } else if self.count(RowState::Failed)
            + self.count(RowState::Rejected)
            + self.count(RowState::Invalid)
            + self.count(RowState::Mismatch)
            > 0
        {
            Outcome::NeedsAPerson
        } else {
            Outcome::Completed
        }
    }
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

/// The summary of a batch as the ledger has it now.
pub fn summarize(
    ledger: &Ledger,
    batch_id: i64,
    batch: &str,
    environment: &Environment,
    result_path: PathBuf,
    incomplete_reason: Option<String>,
) -> Result<RunSummary, OpError> {
    let counts: BTreeMap<RowState, i64> = ledger.row_counts(batch_id)?.into_iter().collect();
    let mut totals: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
    for (currency, face, price) in ledger.completed_amounts(batch_id)? {
        let parse = |t: &str| crate::api::decimal::parse_decimal_text(t).unwrap_or_default();
        let entry = totals.entry(currency).or_default();
        entry.0 += face;
        entry.1 += parse(&price);
    }
    let debited = debited_totals(ledger, batch_id)?;
    let mut paid_by: BTreeMap<String, i64> = BTreeMap::new();
    for (card, currency, rows) in ledger.rows_per_payment(batch_id)? {
        let method = match card {
            Some(card) => format!("card {card}"),
            None => format!("balance {currency}"),
        };
        *paid_by.entry(method).or_default() += rows;
    }
    let per_delivery = ledger.rows_per_delivery(batch_id)?.into_iter().collect();
    let (mut unconfirmed, mut total_unconfirmed) = (0, 0);
    for error_type in super::record::Unconfirmed::TYPES {
        let rows = ledger.completed_rows_noted(batch_id, error_type)?;
        let noted = super::record::Unconfirmed::of(Some(error_type));
        unconfirmed += if noted.order { rows } else { 0 };
        total_unconfirmed += if noted.total { rows } else { 0 };
    }
    let invalid = if counts.get(&RowState::Invalid).copied().unwrap_or(0) > 0 {
        ledger.first_invalid_rows(batch_id, INVALID_NAMED)?
    } else {
        Vec::new()
    };
    Ok(RunSummary {
        unconfirmed,
        total_unconfirmed,
        invalid,
        replanned: ledger.replanned_rows(batch_id)?,
        likely_repeats: Vec::new(),
        likely_repeats_total: 0,
        paid_by,
        debited,
        per_delivery,
        batch: batch.to_string(),
        environment: environment.clone(),
        result_format: ledger.result_format(batch_id)?,
        result_path,
        counts,
        totals,
        incomplete_reason,
        stopped: Vec::new(),
    })
}

/// What left each paying balance (or card) for the completed rows of a batch: (`balance CUR`
/// or `card ID`, currency) -> amount.
pub fn debited_totals(
    ledger: &Ledger,
    batch_id: i64,
) -> Result<BTreeMap<(String, String), Decimal>, LedgerError> {
    let mut out: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    for (card, currency, amount) in ledger.debited_amounts(batch_id)? {
        let payer = match card {
            Some(card) => format!("card {card}"),
            None => format!("balance {currency}"),
        };
        let amount = crate::api::decimal::parse_decimal_text(&amount).unwrap_or_default();
        *out.entry((payer, currency)).or_default() += amount;
    }
    Ok(out)
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
