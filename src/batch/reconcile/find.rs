//! Finding the service's orders of a batch ([`find_orders`]) and naming their rows: from what
//! the ledger knows of its own orders ([`KnownOrders`]), else from what each order carries.

use std::collections::HashMap;

use crate::api::Client;
use crate::api::client::{PageQuery, read_retrying_until};
use crate::api::models::{OrderStatus, OrderSummary, OrderView};
use crate::batch::order_body;
use crate::ledger::RowKey;

use super::ReconcileError;

/// Longest walk through the order list.
const MAX_PAGES: usize = 10_000;

/// One service order of the batch, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundOrder {
    pub id: String,
    pub status: OrderStatus,
    /// The row of each item.
    pub rows: Vec<RowKey>,
}

/// What the ledger knows of a batch's orders, to name the rows of the orders the service lists:
/// the service's list shows a finished order's `description` (which starts with its idempotency
/// key) and nothing of a PROCESSING order but its id.
#[derive(Debug, Clone, Default)]
pub struct KnownOrders {
    /// The rows of each of the ledger's orders, by idempotency key.
    pub by_key: HashMap<String, Vec<RowKey>>,
    /// The same, by service order id.
    pub by_service_id: HashMap<String, Vec<RowKey>>,
}

/// Whose an order of the service's list is, as far as its list entry tells.
enum Owner {
    /// This batch's, with its rows.
    Rows(Vec<RowKey>),
    /// Paybatch's for this batch (or perhaps: a description cut inside the batch name), rows
    /// not named: the full order tells.
    Look,
    /// Perhaps this batch's: a PROCESSING order shows only its id and status.
    Unknown,
    /// Another batch's, or not paybatch's.
    Foreign,
}

/// Reads the rows of paybatch's older `description`, written before orders named their
/// idempotency key: `paybatch batch=NAME row=REF` (single-row orders; attempt unknown, 0).
fn rows_in_old_description(batch: &str, description: &str) -> Option<Vec<RowKey>> {
    let rest = description.strip_prefix(&format!("paybatch batch={batch} row="))?;
    if rest.contains(" (+") {
        return None;
    }
    Some(vec![RowKey::new(rest, 0)])
}

/// What a list entry (or a full order's `metadata` and `description`) says of its owner.
fn owner_of(
    batch: &str,
    status: OrderStatus,
    metadata: Option<&std::collections::BTreeMap<String, String>>,
    description: Option<&str>,
) -> Owner {
    if let Some(m) = metadata
        && order_body::batch_in_metadata(m).is_some()
    {
        return match order_body::rows_in_metadata(batch, m) {
            Some(rows) => Owner::Rows(rows),
            None if order_body::batch_in_metadata(m)
                == Some(order_body::batch_tag(batch).as_str()) =>
            {
                Owner::Look
            }
            None => Owner::Foreign,
        };
    }
    let Some(d) = description else {
        // paybatch always writes a description, but the list need not show it (the published
        // list does not promise it), and a PROCESSING order shows nothing: a finished order is
        // read whole, one still processing cannot be told.
        return if status.is_terminal() {
            Owner::Look
        } else {
            Owner::Unknown
        };
    };
    // The older description names its one row (a keyed one never starts `paybatch batch=`).
    if let Some(rows) = rows_in_old_description(batch, d) {
        return Owner::Rows(rows);
    }
    match order_body::batch_named_by(d, batch) {
        order_body::BatchNaming::Names | order_body::BatchNaming::MayName => Owner::Look,
        order_body::BatchNaming::Other => Owner::Foreign,
    }
}

/// An order of the account that may be of the batch but whose rows cannot be read: a PROCESSING
/// order the ledger does not know (the service shows nothing of it but its id and status), or a
/// finished one answered with neither description nor metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unattributed {
    pub id: String,
    /// Still PROCESSING: it names its rows once finished (answered in full).
    pub processing: bool,
}

/// Every order of `batch` at the service, and those that may be of `batch` but whose rows
/// cannot be read ([`Unattributed`]).
///
/// An order's rows come from the ledger when its description names a key the ledger holds (or
/// its id is one the ledger recorded), else from the full order's `metadata` once it is
/// finished.
pub async fn find_orders(
    client: &Client,
    batch: &str,
    known: &KnownOrders,
) -> Result<(Vec<FoundOrder>, Vec<Unattributed>), ReconcileError> {
    let mut query = PageQuery {
        limit: Some(500),
        ..Default::default()
    };
    let mut summaries: Vec<OrderSummary> = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = read_retrying_until(client.deadline(), || client.orders(&query)).await?;
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
    let mut unattributed = Vec::new();
    for s in summaries {
        let by_key = s
            .description
            .as_deref()
            .and_then(order_body::key_in_description)
            .and_then(|k| known.by_key.get(k));
        if let Some(rows) = by_key.or_else(|| known.by_service_id.get(&s.id)) {
            found.push(FoundOrder {
                id: s.id,
                status: s.status,
                rows: rows.clone(),
            });
            continue;
        }
        let mut owner = owner_of(
            batch,
            s.status,
            s.metadata.as_ref(),
            s.description.as_deref(),
        );
        let unknown_attempt = matches!(&owner, Owner::Rows(r) if r.iter().any(|k| k.attempt == 0));
        if (matches!(owner, Owner::Look) || unknown_attempt) && s.status.is_terminal() {
            // The list did not say enough: the full order carries the metadata.
            if let OrderView::Done(full) =
                read_retrying_until(client.deadline(), || client.order(&s.id)).await?
            {
                match owner_of(
                    batch,
                    full.status,
                    full.metadata.as_ref(),
                    full.description.as_deref(),
                ) {
                    Owner::Foreign => continue,
                    Owner::Rows(rows) => owner = Owner::Rows(rows),
                    _ => {}
                }
            }
        }
        match owner {
            Owner::Rows(rows) => found.push(FoundOrder {
                id: s.id,
                status: s.status,
                rows,
            }),
            Owner::Look | Owner::Unknown => unattributed.push(Unattributed {
                processing: s.status == OrderStatus::Processing,
                id: s.id,
            }),
            Owner::Foreign => {}
        }
    }
    Ok((found, unattributed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished order the list shows without a description (the published list does not
    /// promise one) may be this batch's: it is read whole, never taken for another's.
    #[test]
    fn a_finished_order_listed_without_description_is_read_not_ignored() {
        let finished = owner_of("nov", OrderStatus::Completed, None, None);
        assert!(matches!(finished, Owner::Look));
        let processing = owner_of("nov", OrderStatus::Processing, None, None);
        assert!(matches!(processing, Owner::Unknown));
        let other = owner_of(
            "nov",
            OrderStatus::Completed,
            None,
            Some("December bonus for the sales team"),
        );
        assert!(matches!(other, Owner::Foreign));
    }
}
