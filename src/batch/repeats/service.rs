//! The service's order list, read before a batch sends anything ([`read_service`]), against the
//! ledger ([`check_service`]): orders of this batch another ledger made are refused; the rows of
//! other batches' orders are kept for the file to be checked against.

use std::collections::HashMap;

use futures::StreamExt;

use super::findings::short_date;
use crate::batch::outcome::{self, OpError};
use crate::batch::{order_body, window};
use crate::ledger::Ledger;

/// Full orders read at most to tell what the order list does not show of them: whose batch an
/// order is when its description was cut inside the name, which rows it holds when its first
/// row was cut. Past this, such orders are a refusal: they cannot be told.
const MAX_FULL_READS: usize = 200;

/// Full orders read at once.
const FULL_READS_AT_ONCE: usize = 16;

/// A refused key or version (exit 2) apart from a service that failed.
fn refused_or_failed(e: crate::api::ApiError) -> OpError {
    if outcome::is_auth_error(&e) {
        OpError::Auth(e)
    } else {
        OpError::Api(e)
    }
}

/// What the service's order list holds, read before a batch sends anything ([`read_service`]),
/// with the full orders read where the list says too little.
pub struct ServiceRead {
    window: window::ServiceWindow,
    /// Full orders read: service id -> (batch tag of its metadata, its references).
    full: HashMap<String, (Option<String>, Vec<String>)>,
    /// Orders that needed a full read and got none (past [`MAX_FULL_READS`], or processing).
    untold: usize,
}

/// Reads the service's order list back over its idempotency window (30 days and a margin,
/// [`window::window_since`]), and the full order of each entry whose description was cut where
/// it would tell its batch or its first row (at most `MAX_FULL_READS`).
pub async fn read_service(
    client: &crate::api::Client,
    batch: &str,
) -> Result<ServiceRead, OpError> {
    let since = window::window_since(chrono::Utc::now(), None);
    let window = window::read_window(client, since)
        .await
        .map_err(refused_or_failed)?;
    let mut untold = 0;
    let mut to_read = Vec::new();
    for o in &window.orders {
        let unclear = !o.is_unnamed()
            && (o.naming(batch) == order_body::BatchNaming::MayName || o.first_reference_cut);
        if !unclear {
            continue;
        }
        if to_read.len() >= MAX_FULL_READS || !o.status.is_terminal() {
            untold += 1;
        } else {
            to_read.push(o.id.clone());
        }
    }
    // A few at a time, as the polling reads finished orders.
    let reads: Vec<_> = futures::stream::iter(to_read.into_iter().map(|id| async move {
        let view =
            crate::api::client::read_retrying_until(client.deadline(), || client.order(&id)).await;
        (id, view)
    }))
    .buffer_unordered(FULL_READS_AT_ONCE)
    .collect()
    .await;
    let mut full = HashMap::new();
    for (id, view) in reads {
        match view.map_err(refused_or_failed)? {
            crate::api::models::OrderView::Done(order) => {
                let m = order.metadata.clone().unwrap_or_default();
                full.insert(
                    id,
                    (
                        order_body::batch_in_metadata(&m).map(str::to_string),
                        order_body::references_in_metadata(&m),
                    ),
                );
            }
            crate::api::models::OrderView::Processing(_) => untold += 1,
        }
    }
    Ok(ServiceRead {
        window,
        full,
        untold,
    })
}

/// What the service's order list holds that this ledger does not know ([`check_service`]).
#[derive(Debug, Clone, Default)]
pub struct AtTheService {
    /// Rows of other batches' orders, by reference: (batch, created).
    pub(super) rows: HashMap<String, (String, String)>,
    /// Of `rows`, those known from an order's first row only (its other rows are not known).
    pub first_rows_only: usize,
    /// Pages of the order list read, and paybatch's orders among them.
    pub pages: usize,
    pub orders: usize,
    /// How far back the list was read (RFC 3339), and whether it was read that far.
    pub since: String,
    pub complete: bool,
}

/// What [`read_service`] read, against the ledger. Refused: orders the ledger does not know
/// that name the batch (another ledger's run of it: a colleague's laptop, a second cron host,
/// a lost ledger), with how to adopt them; orders still processing that the ledger does not
/// know (the list shows nothing of them: they may be this batch's, being paid elsewhere now,
/// exit 5); orders whose batch or rows could not be told. The rows of other batches' orders
/// are kept for the file to be checked against ([`super::Earlier::with_service`]).
pub fn check_service(
    read: ServiceRead,
    ledger: &Ledger,
    batch: &str,
    input: &std::path::Path,
) -> Result<AtTheService, OpError> {
    let ServiceRead {
        window,
        full,
        untold,
    } = read;
    let mut known = std::collections::HashSet::new();
    for o in &window.orders {
        if !o.is_unnamed() && ledger.knows_order(o.key.as_deref(), &o.id)? {
            known.insert(o.id.clone());
        }
        if o.is_unnamed() && ledger.knows_order(None, &o.id)? {
            known.insert(o.id.clone());
        }
    }
    let tag = order_body::batch_tag(batch);
    let mut ours = Vec::new();
    let mut rows = HashMap::new();
    let mut first_rows_only = 0;
    let mut processing = 0;
    for o in window.orders.iter().filter(|o| !known.contains(&o.id)) {
        if o.is_unnamed() {
            processing += 1;
            continue;
        }
        let read = full.get(&o.id);
        let names_batch = match (o.naming(batch), read) {
            (order_body::BatchNaming::Names, _) => true,
            (order_body::BatchNaming::MayName, Some((t, _))) => t.as_deref() == Some(tag.as_str()),
            // Not read: counted in `untold`.
            (order_body::BatchNaming::MayName, None) => false,
            (order_body::BatchNaming::Other, _) => false,
        };
        if names_batch {
            ours.push(o);
            continue;
        }
        let created = o.created_at.map(|t| t.to_rfc3339()).unwrap_or_default();
        let other = o.batch.clone().unwrap_or_default();
        match read {
            Some((t, references)) if !references.is_empty() => {
                let other = t.clone().unwrap_or(other);
                for r in references {
                    rows.entry(r.clone())
                        .or_insert_with(|| (other.clone(), created.clone()));
                }
            }
            _ if o.first_reference_cut => {}
            _ => {
                if let Some(r) = &o.first_reference {
                    first_rows_only += 1;
                    rows.entry(r.clone())
                        .or_insert_with(|| (other.clone(), created.clone()));
                }
            }
        }
    }
    refuse_what_cannot_be_told(&ours, processing, untold, batch, input)?;
    Ok(AtTheService {
        rows,
        first_rows_only,
        pages: window.pages,
        orders: window.orders.len(),
        since: window.since.to_rfc3339(),
        complete: window.complete,
    })
}

/// The refusals of [`check_service`]: orders of this batch the ledger does not know (`ours`),
/// unknown orders still processing, orders that could not be told (`untold`).
fn refuse_what_cannot_be_told(
    ours: &[&window::ListedOrder],
    processing: usize,
    untold: usize,
    batch: &str,
    input: &std::path::Path,
) -> Result<(), OpError> {
    if !ours.is_empty() {
        let first = ours
            .iter()
            .filter_map(|o| o.created_at)
            .min()
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "unknown".into());
        return Err(OpError::Refused {
            message: format!(
                "batch {} already has {} orders at the service (first {first}) that this ledger does not know; nothing was submitted",
                crate::text::escape(batch),
                ours.len()
            ),
            help: format!(
                "adopt them with `paybatch reconcile --batch {} --rebuild {}`, then run the same command: it pays only what is missing; if this is another batch that shares the name, give it its own with --batch NAME",
                crate::text::shell_word(batch),
                crate::text::shell_word(&input.display().to_string())
            ),
        });
    }
    if processing > 0 {
        return Err(OpError::Unsettled {
            message: format!(
                "{processing} orders are still processing at the service, and this ledger does not know them: the service shows nothing of them but their id, so they may be this batch's, being paid from another ledger now; nothing was submitted"
            ),
            help: "run the same command again once they finish (in a minute or two): the service then shows whose they are".into(),
        });
    }
    if untold > 0 {
        return Err(OpError::Refused {
            message: format!(
                "{untold} orders at the service show too little to tell whether they are this batch's or hold its rows (a description cut by a long batch name, more than {MAX_FULL_READS} to read whole, or still processing); nothing was submitted"
            ),
            help: "run again in a minute; if it stays, give the batch a shorter --batch name, or reconcile the batches they belong to into this ledger (paybatch reconcile --batch NAME --rebuild FILE)".into(),
        });
    }
    Ok(())
}

impl AtTheService {
    /// What the read found, for the person running the batch: one line, then warnings.
    pub fn lines(&self) -> (String, Vec<String>) {
        let head = format!(
            "service: {} page{} of its order list read back to {} ({} of paybatch's orders, none of this batch){}",
            self.pages,
            if self.pages == 1 { "" } else { "s" },
            short_date(&self.since),
            self.orders,
            if self.complete {
                ""
            } else {
                "; the list holds more than is read: older orders were not checked"
            }
        );
        let mut warnings = Vec::new();
        if self.first_rows_only > 0 {
            warnings.push(format!(
                "{} orders of other batches at the service are unknown to this ledger; the list shows only their first rows, which the file's rows are compared with",
                self.first_rows_only
            ));
        }
        (head, warnings)
    }
}
