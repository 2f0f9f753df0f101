//! A refusal of some items re-plans the others: when the service refuses an order and names
//! items of it (`items.N....` in its details), the rows of those items are REJECTED with the
//! service's reason, and the order's other rows are planned again in a new order, with a new key
//! (the refused order created nothing) and the same bytes for each item, and sent in the same
//! run. The new intent is committed with the refusal, in one transaction, before it is sent
//! ([`Ledger::replan_refused`]).
//!
//! Bounded: a row is planned again at most [`MAX_REPLANS`] times; past that, the other rows of
//! a refused order are REJECTED with the whole refusal, as a refusal that names no item leaves
//! them. So are they when the new order's metadata could not name them all within the service's
//! limits (references written against each other: [`order_body::metadata_fits`]); `paybatch
//! retry` plans them again, in orders that fit.

use crate::api::ApiError;
use crate::api::models::NewOrder;
use crate::ledger::{ItemRefusal, Ledger, OrderRecord, PlannedOrder, RowRecord};

use super::order_body;
use super::send_context::SendContext;
use crate::failpoint;
use crate::ops::error::OpError;

/// Most times one row is planned again after refusals of other items of its orders.
pub const MAX_REPLANS: i64 = 3;

/// The items of an order a refusal names, each with the service's reason
/// (`items.3.distribution_method.email_address: 'x' is not a valid email address`), in item
/// order; empty when it names none. Reads the published list of `{type, message, location}`
/// and the older object of field paths (`items[3].face_value`).
pub fn items_named(e: &ApiError) -> Vec<(i64, String)> {
    let ApiError::Service { body, .. } = e else {
        return Vec::new();
    };
    let mut named: Vec<(i64, String)> = Vec::new();
    for line in body.detail_lines() {
        let Some(index) = item_of(&line) else {
            continue;
        };
        match named.iter_mut().find(|(i, _)| *i == index) {
            Some((_, reason)) => {
                reason.push_str("; ");
                reason.push_str(&line);
            }
            None => named.push((index, line)),
        }
    }
    named.sort_by_key(|(i, _)| *i);
    named
}

/// The item a detail line (`location: message`) is about: `items.3....`, `items[3]....`.
fn item_of(line: &str) -> Option<i64> {
    let rest = line.strip_prefix("items")?;
    let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix('['))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = rest.get(digits.len()..)?;
    if !(after.starts_with('.') || after.starts_with(']') || after.starts_with(':')) {
        return None;
    }
    digits.parse().ok()
}

/// Records the refusal `e` of INTENT `order`, which names `named` of its items (see the
/// module). Returns the new order to send, if any.
pub fn replan(
    ledger: &mut Ledger,
    order: &OrderRecord,
    e: &ApiError,
    named: &[(i64, String)],
) -> Result<Option<i64>, OpError> {
    let rows = ledger.rows_of_order(order.id)?;
    let named_index = |row: &RowRecord| named.iter().any(|(i, _)| Some(*i) == row.item_index);
    let mut others: Vec<&RowRecord> = rows.iter().filter(|r| !named_index(r)).collect();
    others.sort_by_key(|r| r.item_index);
    let mut within_bound = true;
    for row in &others {
        within_bound &= ledger.replans_of_row(row.id)? < MAX_REPLANS;
    }
    // Items the order does not have name no row: the refusal is read as one of the whole
    // order (its rows would make the same key again).
    let names_rows = others.len() < rows.len();
    let new_order = if others.is_empty() || !within_bound || !names_rows {
        None
    } else {
        new_order(ledger, order, &others)?.filter(|o| !ledger.has_key(&o.idempotency_key))
    };
    let message = e.message();
    let refusal = ItemRefusal {
        http_status: e.status(),
        kind: e.kind(),
        message: &message,
        items: named,
    };
    Ok(ledger.replan_refused(order.id, refusal, new_order.as_ref())?)
}

/// The order of `rows` (a refused order's others, in item order): its items as `order` sent
/// them, a new key, description and metadata. `None` when the body cannot be read back, or
/// when the metadata cannot name them all ([`order_body::metadata_fits`]).
fn new_order(
    ledger: &Ledger,
    order: &OrderRecord,
    rows: &[&RowRecord],
) -> Result<Option<PlannedOrder>, OpError> {
    let Some(batch) = ledger.batch_by_id(order.batch_id)? else {
        return Ok(None);
    };
    let Ok(sent) = serde_json::from_slice::<NewOrder>(&order.body) else {
        return Ok(None);
    };
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        let item = row
            .item_index
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| sent.items.get(i));
        match item {
            Some(item) => items.push(item.clone()),
            None => return Ok(None),
        }
    }
    let keyed: Vec<(&str, i64)> = rows
        .iter()
        .map(|r| (r.reference.as_str(), r.attempt))
        .collect();
    // Its metadata must name them within the service's limits, as the planner's orders do.
    if !order_body::metadata_fits(&keyed) {
        return Ok(None);
    }
    let references: Vec<&str> = keyed.iter().map(|(r, _)| *r).collect();
    let key = order_body::order_key(&batch.environment, &batch.name, &keyed);
    let body = NewOrder {
        payment_method: sent.payment_method.clone(),
        items,
        description: Some(order_body::description(&key, &batch.name, &references)),
        metadata: Some(order_body::metadata(&batch.name, &keyed)),
    };
    let body = serde_json::to_vec(&body).map_err(|e| OpError::Refused {
        message: format!("cannot encode an order of batch {}: {e}", batch.name),
        help: String::new(),
    })?;
    Ok(Some(PlannedOrder {
        idempotency_key: key,
        body,
        mode: order.mode,
        payment_currency: order.payment_currency.clone(),
        payment_method: order.payment_method,
        card_id: order.card_id.clone(),
    }))
}

/// Records the refusal `e` of order `order_id` of the sending, which names items of it (see
/// the module). Returns the new order to send, if any.
pub fn record(context: &SendContext, order_id: i64, e: &ApiError) -> Result<Option<i64>, OpError> {
    let named = items_named(e);
    // None when the order is not in the ledger.
    let replanned = context.with_ledger_blocking(|ledger| -> Result<_, OpError> {
        let Some(order) = ledger.order(order_id)? else {
            return Ok(None);
        };
        failpoint::hit("before_replan");
        Ok(Some(replan(ledger, &order, e, &named)?))
    })?;
    let Some(new) = replanned else {
        return Ok(None);
    };
    failpoint::hit("after_replan");
    context.patience.progress();
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ErrorBody;
    use crate::api::models::{
        DistributionMethod, DistributionType, NewOrderItem, PaymentMethod, PaymentMethodType,
        ProductSelection,
    };
    use crate::ledger::merge::Planning;
    use crate::ledger::{IncomingRow, OrderMode, OrderState, RowState};

    /// A ledger with one batch of `n` rows in one intent of `n` items, as the plan makes it.
    fn planned(n: i64) -> (tempfile::TempDir, Ledger, i64) {
        let (dir, mut ledger, batch_id) = crate::ledger::with_a_batch();
        let rows: Vec<IncomingRow> = (0..n).map(crate::ledger::sample_row).collect();
        let keyed: Vec<(&str, i64)> = rows.iter().map(|r| (r.reference.as_str(), 1)).collect();
        let key = order_body::order_key("sim", "b", &keyed);
        let body = NewOrder {
            payment_method: PaymentMethod {
                kind: PaymentMethodType::AccountBalance,
                card_id: None,
                currency: Some("USD".into()),
            },
            items: rows
                .iter()
                .map(|r| NewOrderItem {
                    face_value: rust_decimal::Decimal::new(1000, 2),
                    distribution_method: DistributionMethod {
                        kind: DistributionType::Email,
                        email_address: Some(format!("{}@example.com", r.reference)),
                        template_id: None,
                    },
                    products: ProductSelection::of(&["AMZ-US".to_string()]),
                })
                .collect(),
            description: None,
            metadata: None,
        };
        let order = PlannedOrder {
            idempotency_key: key,
            body: serde_json::to_vec(&body).expect("body"),
            mode: OrderMode::Async,
            payment_currency: "USD".into(),
            payment_method: PaymentMethodType::AccountBalance,
            card_id: None,
        };
        let mut merge = ledger.merge(batch_id, Planning::Plan).expect("merge");
        let mut to_plan = Vec::new();
        for row in &rows {
            let t = merge.row(row).expect("row").expect("to plan");
            to_plan.push((row, t));
        }
        let id = merge.plan(&order, &to_plan).expect("plan");
        merge.close().expect("close");
        merge.commit().expect("commit");
        (dir, ledger, id)
    }

    /// Each re-plan sends the other rows' items as they were sent, under a new key; a row is
    /// planned again at most `MAX_REPLANS` times, then rejected with the whole refusal.
    #[test]
    fn a_row_is_planned_again_at_most_max_replans_times() {
        let rows = MAX_REPLANS + 3;
        let (_dir, mut ledger, mut id) = planned(rows);
        let e = refusal(
            r#"[{"type":"value_error","message":"not taken","location":["items","0","distribution_method","email_address"]}]"#,
        );
        let named = items_named(&e);
        for round in 1..=MAX_REPLANS {
            let order = ledger.order(id).expect("read").expect("order");
            let next = replan(&mut ledger, &order, &e, &named)
                .expect("recorded")
                .expect("a new order");
            let new = ledger.order(next).expect("read").expect("new");
            assert_ne!(new.idempotency_key, order.idempotency_key);
            let body: NewOrder = serde_json::from_slice(&new.body).expect("a body");
            let emails: Vec<String> = body
                .items
                .iter()
                .filter_map(|i| i.distribution_method.email_address.clone())
                .collect();
            let want: Vec<String> = (round..rows).map(|i| format!("R{i}@example.com")).collect();
            assert_eq!(emails, want);
            let described = body.description.expect("description");
            assert!(described.contains(&new.idempotency_key), "{described}");
            id = next;
        }
        let order = ledger.order(id).expect("read").expect("order");
        assert_eq!(
            replan(&mut ledger, &order, &e, &named).expect("recorded"),
            None
        );
        let last = ledger.rows_of_order(id).expect("rows");
        assert_eq!(last.len() as i64, rows - MAX_REPLANS);
        assert!(last.iter().all(|r| r.state == RowState::Rejected));
        assert_eq!(
            ledger.order(id).expect("read").expect("order").state,
            OrderState::Rejected
        );
    }

    /// A refusal naming an item the order does not have is one of the whole order.
    #[test]
    fn an_item_the_order_does_not_have_rejects_the_whole_order() {
        let (_dir, mut ledger, id) = planned(3);
        let e = refusal(
            r#"[{"type":"value_error","message":"m","location":["items",7,"face_value"]}]"#,
        );
        let order = ledger.order(id).expect("read").expect("order");
        assert_eq!(
            replan(&mut ledger, &order, &e, &items_named(&e)).expect("ok"),
            None
        );
        let rows = ledger.rows_of_order(id).expect("rows");
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.state == RowState::Rejected));
    }

    fn refusal(details: &str) -> ApiError {
        let body: ErrorBody = serde_json::from_str(&format!(
            r#"{{"type":"validation_error","message":"see details","details":{details}}}"#
        ))
        .unwrap();
        ApiError::service(422, body, None)
    }

    #[test]
    fn the_items_a_refusal_names() {
        let e = refusal(
            r#"[{"type":"value_error","message":"'a' is not a valid email address","location":["items","3","distribution_method","email_address"]},
                {"type":"value_error","message":"too small","location":["items",1,"face_value"]},
                {"type":"missing","message":"Field required","location":["payment_method","currency"]}]"#,
        );
        let named = items_named(&e);
        assert_eq!(named.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(
            named[1].1,
            "items.3.distribution_method.email_address: 'a' is not a valid email address"
        );
        let old = refusal(r#"{"items[12].face_value":"too big"}"#);
        assert_eq!(items_named(&old)[0].0, 12);
        assert!(items_named(&refusal(r#"[{"message":"m","location":["items"]}]"#)).is_empty());
        assert!(items_named(&refusal(r#"[{"message":"m","location":["itemsx","1"]}]"#)).is_empty());
    }
}
