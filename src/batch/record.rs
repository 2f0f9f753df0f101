//! Recording what the service answered for an order: a finished order is checked against what
//! was sent ([`super::verify`]) and recorded COMPLETED or FAILED with what it says of each item
//! (payout link, price, what left the paying balance), or MISMATCH with what differs. Used by
//! the run (sync answers, polling) and by reconciliation.

use crate::api::models::{Order, OrderItem, OrderStatus};
use crate::ledger::{ItemOutcome, Ledger, LedgerError, OrderState};

use super::plan;
use super::verify;

/// What the paying balance (or card) was charged for `item` of the completed `order` paid in
/// `paid_in`: the item's price when it is priced in that currency; for an order of one item
/// the service converted (embedded FX), the order's price, which is in the payment currency.
fn debited(order: &Order, item: &OrderItem, paid_in: &str) -> Option<(String, String)> {
    match item.currency.as_deref() {
        Some(c) if c == paid_in => item.price.map(|p| (p.to_string(), paid_in.to_string())),
        None => item.price.map(|p| (p.to_string(), paid_in.to_string())),
        Some(_) if order.items.len() == 1 => order.total_price.map(|p| {
            (
                p.to_string(),
                order
                    .currency
                    .clone()
                    .unwrap_or_else(|| paid_in.to_string()),
            )
        }),
        Some(_) => None,
    }
}

/// What the ledger's order `order_id` holds of an answer naming service order `service_id`
/// that makes it a mismatch: the id belongs to another of the ledger's orders.
pub fn id_of_another_order(
    ledger: &Ledger,
    order_id: i64,
    service_id: &str,
) -> Result<Option<String>, LedgerError> {
    Ok(ledger
        .order_by_service_id(service_id)?
        .filter(|other| other.id != order_id)
        .map(|other| {
            format!(
                "the service answered with order {service_id}, which the ledger holds for another intent (key {})",
                other.idempotency_key
            )
        }))
}

/// Records the ledger's order `order_id` as MISMATCH: the service's answer is not what was
/// sent. Its rows need a person; the service's answer is kept on the order.
pub fn record_mismatch(
    ledger: &mut Ledger,
    order_id: i64,
    service_id: Option<&str>,
    response: Option<&str>,
    http: u16,
    differences: &[String],
) -> Result<(), LedgerError> {
    let message = format!(
        "the service's answer differs from the order sent: {}; a person must compare it with the account's orders",
        differences.join("; ")
    );
    ledger.transition_order(
        order_id,
        OrderState::Mismatch,
        service_id,
        Some(http),
        response,
        Some(("order_mismatch", &message)),
        &[],
        None,
        "the service's answer differs from the order sent",
    )
}

/// Records a terminal order (COMPLETED or FAILED) and what it says of each item, once it is
/// checked against what was sent (see [`super::verify`]); an order that differs is recorded
/// MISMATCH instead.
pub fn record_terminal_in(
    ledger: &mut Ledger,
    order_id: i64,
    order: &Order,
    http: u16,
) -> Result<(), LedgerError> {
    let record = ledger
        .order(order_id)?
        .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
    let mut differences = Vec::new();
    let another = id_of_another_order(ledger, order_id, &order.id)?;
    differences.extend(another.clone());
    if let Some(known) = record.service_order_id.as_deref()
        && known != order.id
    {
        differences.push(format!(
            "the service answered with order {}, the ledger holds order {known}",
            order.id
        ));
    }
    if order.status == OrderStatus::Completed || !order.items.is_empty() {
        let rows = ledger.rows_of_order(order_id)?;
        // An order adopted from the service has no body: what its rows asked for stands in.
        let body = if record.body.is_empty() {
            let payment = plan::payment_method(&record.payment_currency, record.card_id.as_deref());
            let specs: Vec<Option<&str>> = rows.iter().map(|r| r.spec.as_deref()).collect();
            verify::body_of_rows(payment, &specs)
        } else {
            Ok(record.body.clone())
        };
        let sent: Vec<verify::SentRow> = rows
            .iter()
            .map(|r| verify::SentRow {
                currency: r
                    .spec
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                    .and_then(|v| v["currency"].as_str().map(str::to_string)),
                reference: r.reference.clone(),
            })
            .collect();
        match body {
            Ok(body) => differences.extend(verify::differences(&body, &sent, order)),
            Err(why) => differences.push(why),
        }
    }
    if !differences.is_empty() {
        let response = serde_json::to_string(order).ok();
        let id = if another.is_some() {
            None
        } else {
            Some(order.id.as_str())
        };
        return record_mismatch(
            ledger,
            order_id,
            id,
            response.as_deref(),
            http,
            &differences,
        );
    }
    let paid_in = record.payment_currency.as_str();
    let items: Vec<ItemOutcome> = order
        .items
        .iter()
        .map(|item| ItemOutcome {
            item_id: item.id.clone(),
            payout_url: item.payout_url().map(str::to_string),
            price: item.price.map(|p| p.to_string()),
            discount: match (item.face_value, item.price) {
                (Some(f), Some(p)) => Some((f - p).to_string()),
                _ => None,
            },
            debited: (order.status == OrderStatus::Completed)
                .then(|| debited(order, item, paid_in))
                .flatten(),
        })
        .collect();
    let response = serde_json::to_string(order).ok();
    let (to, error, cause) = match order.status {
        OrderStatus::Completed => (OrderState::Completed, None, "order completed"),
        _ => (
            OrderState::Failed,
            Some((
                "order_failed",
                order
                    .message
                    .clone()
                    .unwrap_or_else(|| "the service reports the order FAILED".into()),
            )),
            "order failed at the service",
        ),
    };
    ledger.transition_order(
        order_id,
        to,
        Some(&order.id),
        Some(http),
        response.as_deref(),
        error.as_ref().map(|(t, m)| (*t, m.as_str())),
        &items,
        order.completed_at.as_deref(),
        cause,
    )
}
