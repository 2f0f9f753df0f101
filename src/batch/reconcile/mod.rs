//! Reconciliation: compares the ledger with what the service itself holds. Every order paybatch
//! creates carries its batch and row references in `metadata` (and `description`), so the
//! service's order list answers "was this row already ordered?" even when the ledger was lost,
//! restored from an old backup, or holds an intent whose outcome is unknown.
//!
//! One room each: finding the service's orders of a batch and naming their rows (`find`),
//! applying what was found to the ledger (`apply`), when an in-doubt intent's key may be given
//! up (`policy`), and the report of what was found and done (`report`).

use std::time::Duration;

use crate::api::{ApiError, Client};
use crate::ledger::{BatchRecord, Ledger, LedgerError};

mod apply;
mod find;
mod policy;
mod report;

use apply::Reconciliation;

pub use find::{FoundOrder, KnownOrders, find_orders};
pub use policy::{SETTLE, key_is_spent, settle_time};
pub use report::ReconcileReport;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot read the service's orders: {0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Whether a reconciliation repairs the ledger or only reports what it would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    Repair,
    DryRun,
}

/// Compares the ledger's view of `batch` with the service's and, with [`Apply::Repair`],
/// repairs it.
///
/// The service's orders are taken oldest attempt first. An order answering an intent of the
/// same attempt is recorded on that intent. Otherwise an order is recorded only when it is the
/// latest attempt the service has for each of its rows, and only for rows the ledger has not
/// ordered yet (PENDING: a lost ledger, or a backup from before planning) or has as FAILED or
/// REJECTED at an earlier attempt (a backup from before a retry): the row moves to the
/// service's attempt, so that its next key is never one the service already used. An intent of
/// an earlier attempt than one the service has, with no order of its own there, is superseded:
/// it is marked REJECTED and never sent. An in-doubt intent the service has no order for is
/// cleared to be sent again with its key, unless its key is spent ([`key_is_spent`], with the
/// in-doubt `window` and [`settle_time`] of `shorter_settle`), none of its rows is in an order
/// the service lists, and every order of the batch that the service lists could be read and
/// needs no person.
///
/// `shorter_settle` is the settling time `PAYBATCH_SETTLE_SECONDS` gives, read by the caller
/// ([`crate::settings::settle_override`]); only a simulator's batch takes it.
pub async fn reconcile(
    ledger: &mut Ledger,
    client: &Client,
    batch: &BatchRecord,
    window: Duration,
    shorter_settle: Option<Duration>,
    apply: Apply,
) -> Result<ReconcileReport, ReconcileError> {
    let dry_run = apply == Apply::DryRun;
    let mut work = Reconciliation::read(ledger, client, batch, dry_run)?;
    let service = work.list_service_orders().await?;
    work.report_duplicates(&service);
    work.supersede_intents(&service)?;
    work.release_unsent_intents(&service)?;
    for f in &service.found {
        work.take_order(f, &service).await?;
    }
    work.settle_in_doubt(&service, window, settle_time(batch, shorter_settle))?;
    work.finish()
}
