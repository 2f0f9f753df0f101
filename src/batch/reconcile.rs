//! Reconciliation: compares the ledger with what the service itself holds. Every order paybatch
//! creates carries its batch and row references in `metadata` (and `description`), so the
//! service's order list answers "was this row already ordered?" even when the ledger was lost,
//! restored from an old backup, or holds an intent whose outcome is unknown.

use std::collections::HashMap;

use crate::api::client::PageQuery;
use crate::api::models::{OrderStatus, OrderSummary, OrderView};
use crate::api::{ApiError, Client};
use crate::ledger::{BatchRecord, Ledger, LedgerError, OrderState, RowState};

use super::plan;

/// Longest walk through the order list.
const MAX_PAGES: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot read the service's orders: {0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// One service order of the batch, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundOrder {
    pub id: String,
    pub status: OrderStatus,
    /// (row reference, attempt) per item.
    pub rows: Vec<(String, i64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Orders of this batch at the service.
    pub found: usize,
    /// Service orders the ledger did not know, now attached to their rows: (reference, order id).
    pub adopted: Vec<(String, String)>,
    /// In-doubt intents the service never turned into an order: cleared to be sent again.
    pub absent: Vec<String>,
    /// Orders whose status the ledger had behind the service's: (order id, from, to).
    pub updated: Vec<(String, String, String)>,
    /// Service orders for rows the ledger does not have: (reference, order id).
    pub unknown_rows: Vec<(String, String)>,
    /// Rows with more than one live service order: (reference, order ids). Needs a person.
    pub duplicates: Vec<(String, Vec<String>)>,
}

impl ReconcileReport {
    pub fn is_clean(&self) -> bool {
        self.adopted.is_empty()
            && self.absent.is_empty()
            && self.updated.is_empty()
            && self.unknown_rows.is_empty()
            && self.duplicates.is_empty()
    }
}

/// Reads (reference, attempt) pairs from paybatch's metadata, or from the description.
fn rows_of(
    batch: &str,
    metadata: Option<&std::collections::BTreeMap<String, String>>,
    description: Option<&str>,
) -> Option<Vec<(String, i64)>> {
    if let Some(m) = metadata
        && m.get("paybatch_batch").map(String::as_str) == Some(batch)
    {
        let refs: Vec<&str> = m.get("paybatch_rows")?.split('|').collect();
        let attempts: Vec<i64> = m
            .get("paybatch_attempts")
            .map(|a| a.split('|').map(|x| x.parse().unwrap_or(1)).collect())
            .unwrap_or_default();
        return Some(
            refs.iter()
                .enumerate()
                .map(|(i, r)| (r.to_string(), attempts.get(i).copied().unwrap_or(1)))
                .collect(),
        );
    }
    // Without metadata: "paybatch batch=NAME row=REF" (single-row orders; attempt unknown → 0).
    let text = description?;
    let rest = text.strip_prefix(&format!("paybatch batch={batch} row="))?;
    if rest.contains(" (+") {
        return None;
    }
    Some(vec![(rest.to_string(), 0)])
}

/// Every order of `batch` at the service.
pub async fn find_orders(client: &Client, batch: &str) -> Result<Vec<FoundOrder>, ReconcileError> {
    let mut query = PageQuery {
        limit: Some(500),
        ..Default::default()
    };
    let mut summaries: Vec<OrderSummary> = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = client.orders(&query).await?;
        let empty = page.items.is_empty();
        summaries.extend(page.items);
        match page.pagination.cursors.after {
            Some(after) if !empty && Some(&after) != query.after.as_ref() => {
                query.after = Some(after)
            }
            _ => break,
        }
    }
    let mut found = Vec::new();
    for s in summaries {
        let mine = s
            .description
            .as_deref()
            .is_some_and(|d| d.starts_with(&format!("paybatch batch={batch} ")))
            || s.metadata
                .as_ref()
                .is_some_and(|m| m.get("paybatch_batch").map(String::as_str) == Some(batch));
        if !mine {
            continue;
        }
        let mut rows = rows_of(batch, s.metadata.as_ref(), s.description.as_deref());
        if rows.is_none()
            || rows
                .as_ref()
                .is_some_and(|r| r.iter().any(|(_, a)| *a == 0))
        {
            // The list did not say enough: the full order carries the metadata.
            if let OrderView::Done(full) = client.order(&s.id).await? {
                rows = rows_of(batch, full.metadata.as_ref(), full.description.as_deref()).or(rows);
            }
        }
        if let Some(rows) = rows {
            found.push(FoundOrder {
                id: s.id,
                status: s.status,
                rows,
            });
        }
    }
    Ok(found)
}

/// Compares the ledger's view of `batch` with the service's and, unless `dry_run`, repairs it.
pub async fn reconcile(
    ledger: &mut Ledger,
    client: &Client,
    batch: &BatchRecord,
    dry_run: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let found = find_orders(client, &batch.name).await?;
    let mut report = ReconcileReport {
        found: found.len(),
        ..Default::default()
    };
    let rows = ledger.rows(batch.id)?;
    let by_ref: HashMap<&str, &crate::ledger::RowRecord> =
        rows.iter().map(|r| (r.reference.as_str(), r)).collect();
    let orders = ledger.orders(batch.id)?;
    let by_service_id: HashMap<&str, &crate::ledger::OrderRecord> = orders
        .iter()
        .filter_map(|o| o.service_order_id.as_deref().map(|id| (id, o)))
        .collect();

    // Live service orders per reference: more than one is a duplicate payment.
    let mut live: HashMap<&str, Vec<&str>> = HashMap::new();
    for f in &found {
        if f.status != OrderStatus::Failed {
            for (r, _) in &f.rows {
                live.entry(r.as_str()).or_default().push(f.id.as_str());
            }
        }
    }
    for (r, ids) in &live {
        if ids.len() > 1 {
            let mut ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            ids.sort();
            report.duplicates.push((r.to_string(), ids));
        }
    }

    let mut claimed_orders = std::collections::HashSet::new();
    for f in &found {
        if let Some(known) = by_service_id.get(f.id.as_str()) {
            claimed_orders.insert(known.id);
            // Known order: bring its status up to date.
            if known.state == OrderState::Accepted && f.status.is_terminal() {
                report.updated.push((
                    f.id.clone(),
                    known.state.to_string(),
                    f.status.as_str().to_string(),
                ));
                if !dry_run {
                    apply_terminal(ledger, client, known.id, &f.id).await?;
                }
            }
            continue;
        }
        // Unknown to the ledger: find its rows.
        let ledger_rows: Vec<&crate::ledger::RowRecord> = f
            .rows
            .iter()
            .filter_map(|(r, _)| by_ref.get(r.as_str()).copied())
            .collect();
        if ledger_rows.len() != f.rows.len() {
            for (r, _) in &f.rows {
                if !by_ref.contains_key(r.as_str()) {
                    report.unknown_rows.push((r.clone(), f.id.clone()));
                }
            }
            continue;
        }
        // The rows' current order (an intent), or none (PENDING rows).
        let current = ledger_rows[0].order_id;
        let same_attempt = f
            .rows
            .iter()
            .zip(&ledger_rows)
            .all(|((_, attempt), row)| *attempt == 0 || *attempt == row.attempt);
        if !same_attempt {
            // An order of an earlier attempt (e.g. a failed one): history, not a repair.
            continue;
        }
        match current.and_then(|id| orders.iter().find(|o| o.id == id)) {
            Some(intent) if intent.state == OrderState::Intent => {
                claimed_orders.insert(intent.id);
                report
                    .adopted
                    .push((ledger_rows[0].reference.clone(), f.id.clone()));
                if !dry_run {
                    ledger.transition_order(
                        intent.id,
                        OrderState::Accepted,
                        Some(&f.id),
                        None,
                        None,
                        None,
                        &[],
                        None,
                        "reconcile: the service has this order",
                    )?;
                    if f.status.is_terminal() {
                        apply_terminal(ledger, client, intent.id, &f.id).await?;
                    }
                }
            }
            Some(_) => {}
            None if ledger_rows.iter().all(|r| r.state == RowState::Pending) => {
                report
                    .adopted
                    .push((ledger_rows[0].reference.clone(), f.id.clone()));
                if !dry_run {
                    let first = ledger_rows[0];
                    let keyed: Vec<(&str, i64)> = ledger_rows
                        .iter()
                        .map(|r| (r.reference.as_str(), r.attempt))
                        .collect();
                    let key = plan::order_key(&batch.environment, &batch.name, &keyed);
                    let currency = first
                        .spec
                        .as_deref()
                        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                        .and_then(|v| v["payment_currency"].as_str().map(str::to_string))
                        .unwrap_or_default();
                    let ids: Vec<i64> = ledger_rows.iter().map(|r| r.id).collect();
                    let order_id = ledger.adopt_order(batch.id, &key, &currency, &ids, &f.id)?;
                    if f.status.is_terminal() {
                        apply_terminal(ledger, client, order_id, &f.id).await?;
                    }
                }
            }
            None => {}
        }
    }

    // In-doubt intents with no order at the service: never created; safe to send again.
    for o in &orders {
        if o.state == OrderState::Intent && o.sends > 0 && !claimed_orders.contains(&o.id) {
            report.absent.push(o.idempotency_key.clone());
            if !dry_run {
                ledger
                    .clear_in_doubt(o.id, "reconcile: no order at the service for this intent")?;
            }
        }
    }
    report.adopted.sort();
    report.unknown_rows.sort();
    report.duplicates.sort();
    Ok(report)
}

async fn apply_terminal(
    ledger: &mut Ledger,
    client: &Client,
    order_id: i64,
    service_id: &str,
) -> Result<(), ReconcileError> {
    if let OrderView::Done(full) = client.order(service_id).await? {
        super::pipeline::record_terminal_in(ledger, order_id, &full, 200)?;
    }
    Ok(())
}
