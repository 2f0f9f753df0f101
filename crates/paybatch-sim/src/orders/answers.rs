//! The answers built from a stored order: the full shape (finished orders and sync creations,
//! in either dated version), the partial shape of a processing order, and the entries of the
//! order list.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value, json};

use rust_decimal::Decimal;

use crate::life::PayoutClock;
use crate::store::{ItemRow, OrderRow, iso_from_ms};
use crate::{ApiVersion, done_ms};
use paybatch_api::models::{OrderStatus, PaymentMethod};

fn opt_text(value: &Option<String>) -> Value {
    value.clone().map(Value::String).unwrap_or(Value::Null)
}

fn payment_method_json(pm: &PaymentMethod) -> Value {
    serde_json::to_value(pm).unwrap_or(Value::Null)
}

/// The `transaction_detail` of a stored order. Older state files kept only the `fx` of the
/// payment currency's entry (null, a rate, or an object of rates).
fn transaction_detail(o: &OrderRow) -> Value {
    let is_detail = |m: &Map<String, Value>| {
        !m.is_empty()
            && m.values()
                .all(|v| v.get("value").is_some_and(Value::is_string))
    };
    match &o.fx {
        Value::Object(m) if is_detail(m) => o.fx.clone(),
        Value::Null => json!({ o.currency.clone(): {"value": o.total_price.to_string()} }),
        legacy => json!({ o.currency.clone(): {"value": o.total_price.to_string(), "fx": legacy} }),
    }
}

/// The first fields of an order, shared by the full shape and the list (basic details).
fn basic(o: &OrderRow) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("id".into(), Value::String(o.id.clone()));
    m.insert("status".into(), Value::String(o.status.as_str().into()));
    m.insert("created_at".into(), Value::String(o.created_at.clone()));
    if let Some(done) = &o.completed_at {
        m.insert("completed_at".into(), Value::String(done.clone()));
    }
    m.insert("description".into(), opt_text(&o.description));
    m.insert(
        "payment_method".into(),
        payment_method_json(&o.payment_method),
    );
    m.insert("currency".into(), Value::String(o.currency.clone()));
    m.insert(
        "total_price".into(),
        Value::String(o.total_price.to_string()),
    );
    m.insert(
        "total_discount".into(),
        Value::String(o.total_discount.to_string()),
    );
    m
}

fn metadata_json(metadata: &Option<BTreeMap<String, String>>) -> Value {
    match metadata {
        Some(m) => serde_json::to_value(m).unwrap_or(Value::Null),
        None => Value::Null,
    }
}

/// The full shape of a `COMPLETED` or `FAILED` order (also the 200 answer of a sync creation).
/// A failed order's items carry no payout, and the order a `message`. A completed order's
/// items carry their payout links as they stand at the `clock`'s now.
pub(crate) fn full_order(o: &OrderRow, version: ApiVersion, clock: &PayoutClock) -> Value {
    let completed = o.status == OrderStatus::Completed;
    let done = done_ms(o);
    let items: Vec<Value> = o
        .items
        .iter()
        .map(|it| item_json(it, completed, version, clock, done))
        .collect();
    let mut m = basic(o);
    m.insert("items".into(), Value::Array(items));
    m.insert("transaction_detail".into(), transaction_detail(o));
    m.insert("metadata".into(), metadata_json(&o.metadata));
    if o.status == OrderStatus::Failed
        && let Some(message) = &o.message
    {
        m.insert("message".into(), Value::String(message.clone()));
    }
    Value::Object(m)
}

/// One item of the full shape; a completed order's item carries its payout (`redemption_url`
/// in version 2023-07-27), its order finished at `done_ms`.
fn item_json(
    it: &ItemRow,
    completed: bool,
    version: ApiVersion,
    clock: &PayoutClock,
    done_ms: i64,
) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), Value::String(it.id.clone()));
    m.insert("distribution_method".into(), it.distribution_method.clone());
    m.insert(
        "products".into(),
        serde_json::to_value(&it.products).unwrap_or(Value::Null),
    );
    m.insert(
        "face_value".into(),
        Value::String(it.face_value.to_string()),
    );
    m.insert("price".into(), Value::String(it.price.to_string()));
    m.insert("currency".into(), Value::String(it.currency.clone()));
    let mut discount = it.discount_multiplier;
    discount.rescale(2);
    m.insert(
        "discount_multiplier".into(),
        Value::String(discount.to_string()),
    );
    match (completed, version) {
        (false, _) => {}
        (true, ApiVersion::V2023) => {
            m.insert(
                "redemption_url".into(),
                Value::String(it.payout_url.clone()),
            );
        }
        (true, ApiVersion::V2024) => {
            m.insert("payout".into(), payout_json(it, clock, done_ms));
        }
    }
    Value::Object(m)
}

/// The `payout` of a completed item (version 2024-02-05): its link's status at the clock's
/// now, since when, and when the link expires. `expiry_date` is the account's link expiry,
/// never the product's; without link expiry it is left out (read as null): the published
/// schema types it as a string, so `null` would not be within it.
fn payout_json(it: &ItemRow, clock: &PayoutClock, done_ms: i64) -> Value {
    let link = clock.link(&it.id, done_ms);
    let mut payout = Map::new();
    payout.insert("status".into(), Value::String(link.status.as_str().into()));
    payout.insert(
        "status_updated_at".into(),
        Value::String(iso_from_ms(link.since_ms)),
    );
    payout.insert("url".into(), Value::String(it.payout_url.clone()));
    if let Some(until) = link.expires_ms {
        payout.insert("expiry_date".into(), Value::String(iso_from_ms(until)));
    }
    Value::Object(payout)
}

/// The message of an order still `PROCESSING`.
const PROCESSING_MESSAGE: &str = "The order is being processed; read it again in a few seconds.";

/// The partial shape of a `PROCESSING` order: `{id, status, message}`.
pub(crate) fn partial_order(o: &OrderRow) -> Value {
    json!({
        "id": o.id,
        "status": o.status.as_str(),
        "message": PROCESSING_MESSAGE,
    })
}

/// An element of the order list: the basic details of a finished order, `{id, status,
/// message}` of a processing one. With `with_metadata` (the older list), every order has the
/// basic details and its `metadata` (`{}` when it has none). Serialised as it stands (a page
/// holds up to 500), in the field order of the full shape.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum ListEntry<'a> {
    Partial {
        id: &'a str,
        status: &'static str,
        message: &'static str,
    },
    Basic {
        id: &'a str,
        status: &'static str,
        created_at: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        completed_at: Option<&'a str>,
        description: Option<&'a str>,
        payment_method: &'a PaymentMethod,
        currency: &'a str,
        total_price: String,
        total_discount: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<&'a BTreeMap<String, String>>,
    },
}

/// The `metadata` of the older list's entry of an order without any.
static NO_METADATA: BTreeMap<String, String> = BTreeMap::new();

/// The list's entry of `o` (see [`ListEntry`]).
pub(crate) fn list_entry(o: &OrderRow, with_metadata: bool) -> ListEntry<'_> {
    if !with_metadata && o.status == OrderStatus::Processing {
        return ListEntry::Partial {
            id: &o.id,
            status: o.status.as_str(),
            message: PROCESSING_MESSAGE,
        };
    }
    ListEntry::Basic {
        id: &o.id,
        status: o.status.as_str(),
        created_at: &o.created_at,
        completed_at: o.completed_at.as_deref(),
        description: o.description.as_deref(),
        payment_method: &o.payment_method,
        currency: &o.currency,
        total_price: o.total_price.to_string(),
        total_discount: o.total_discount.to_string(),
        metadata: with_metadata.then(|| o.metadata.as_ref().unwrap_or(&NO_METADATA)),
    }
}

/// The answer of `POST /order/estimate` (`OrderPriceResponse`): the order priced as
/// `POST /order` would charge it, amounts as exact JSON numbers, `discount_multiplier` with two
/// decimals, and the `transaction_detail` of an order (with `fx` when a currency is converted).
pub(crate) fn estimate_answer(priced: &super::Priced) -> Value {
    let number = |d: Decimal| {
        serde_json::Number::from_str(&d.to_string())
            .map(Value::Number)
            .unwrap_or(Value::Null)
    };
    let items: Vec<Value> = priced
        .items
        .iter()
        .map(|it| {
            let mut discount = it.discount_multiplier;
            discount.rescale(2);
            json!({
                "products": serde_json::to_value(&it.products).unwrap_or(Value::Null),
                "face_value": number(it.face_value),
                "price": number(it.price),
                "discount_multiplier": discount.to_string(),
                "currency": it.currency,
            })
        })
        .collect();
    json!({
        "payment_method": {
            "type": "ACCOUNT_BALANCE",
            "currency": priced.currency,
        },
        "items": items,
        "currency": priced.currency,
        "total_discount": number(priced.total_discount),
        "total_price": number(priced.total_price),
        "transaction_detail": priced.transaction_detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use paybatch_api::models::PaymentMethodType;

    fn order(status: OrderStatus, metadata: Option<BTreeMap<String, String>>) -> OrderRow {
        OrderRow {
            seq: 1,
            id: "O-1".into(),
            key_fingerprint: "fp".into(),
            idempotency_key: "k".into(),
            status,
            outcome: OrderStatus::Completed,
            created_at: "2026-11-01T10:00:00.000Z".into(),
            created_ms: 0,
            due_ms: 0,
            completed_at: (status != OrderStatus::Processing)
                .then(|| "2026-11-01T10:00:02.000Z".into()),
            description: (metadata.is_some()).then(|| "d \"quoted\"".into()),
            metadata,
            payment_method: PaymentMethod {
                kind: PaymentMethodType::AccountBalance,
                card_id: None,
                currency: Some("USD".into()),
            },
            currency: "USD".into(),
            total_price: Decimal::new(980, 2),
            total_discount: Decimal::new(20, 2),
            fx: Value::Null,
            message: None,
            items: vec![],
        }
    }

    /// The list's entries are the basic details of the full shape, field for field.
    #[test]
    fn list_entries_are_the_basic_details() {
        let meta = BTreeMap::from([("paybatch_batch".to_string(), "nov".to_string())]);
        for o in [
            order(OrderStatus::Completed, Some(meta.clone())),
            order(OrderStatus::Failed, None),
            order(OrderStatus::Processing, Some(meta)),
        ] {
            let entry = serde_json::to_string(&list_entry(&o, false)).unwrap();
            let expected = if o.status == OrderStatus::Processing {
                partial_order(&o)
            } else {
                Value::Object(basic(&o))
            };
            assert_eq!(entry, serde_json::to_string(&expected).unwrap());
            let mut older = basic(&o);
            older.insert(
                "metadata".into(),
                serde_json::to_value(o.metadata.clone().unwrap_or_default()).unwrap(),
            );
            let entry = serde_json::to_string(&list_entry(&o, true)).unwrap();
            assert_eq!(entry, serde_json::to_string(&Value::Object(older)).unwrap());
        }
    }
}
