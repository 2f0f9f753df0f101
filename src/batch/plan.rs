//! Turning validated rows into orders: the deterministic idempotency key and the exact body.
//! Both are committed to the ledger before the first send and never rebuilt afterwards.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::api::models::{
    DistributionMethod, DistributionType, NewOrder, NewOrderItem, PaymentMethod, PaymentMethodType,
    ProductSelection,
};

use super::validate::RowSpec;

/// The namespace of paybatch's UUID v5 idempotency keys.
pub const KEY_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a4e_58b3_4d0e_9a71_c3e2_5b8d_0f47);

/// Longest `description` the service accepts.
pub const MAX_DESCRIPTION: usize = 128;

/// UUID v5 of (environment, batch, row reference, attempt): the same row and attempt always get
/// the same key; a retry (next attempt) gets a new one.
pub fn idempotency_key(environment: &str, batch: &str, reference: &str, attempt: i64) -> String {
    let mut name = key_prefix(environment, batch);
    push_part(&mut name, reference);
    push_part(&mut name, &attempt.to_string());
    Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes()).to_string()
}

/// Each part is length-prefixed, so no choice of names can make two key inputs collide.
fn push_part(name: &mut String, part: &str) {
    name.push_str(&part.len().to_string());
    name.push(':');
    name.push_str(part);
}

fn key_prefix(environment: &str, batch: &str) -> String {
    let mut name = String::from("paybatch-key-v1/");
    push_part(&mut name, environment);
    push_part(&mut name, batch);
    name
}

/// The key of an order of several rows: UUID v5 of (environment, batch, every row reference and
/// attempt in item order). An order of one row gets that row's [`idempotency_key`].
pub fn order_key(environment: &str, batch: &str, rows: &[(&str, i64)]) -> String {
    match rows {
        [(reference, attempt)] => idempotency_key(environment, batch, reference, *attempt),
        many => {
            let mut name = key_prefix(environment, batch);
            push_part(&mut name, "order");
            for (reference, attempt) in many {
                push_part(&mut name, reference);
                push_part(&mut name, &attempt.to_string());
            }
            Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes()).to_string()
        }
    }
}

/// `description`: the batch and row reference, so the service itself can answer "was this row
/// already ordered?" (cut to 128 characters; `metadata` carries the full values).
pub fn description(batch: &str, references: &[&str]) -> String {
    let text = match references {
        [one] => format!("paybatch batch={batch} row={one}"),
        [first, rest @ ..] => format!("paybatch batch={batch} row={first} (+{} more)", rest.len()),
        [] => format!("paybatch batch={batch}"),
    };
    truncate_chars(&text, MAX_DESCRIPTION)
}

fn truncate_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// How an order is paid: from the balance in `currency`, or by `card` in `currency`.
pub fn payment_method(currency: &str, card: Option<&str>) -> PaymentMethod {
    match card {
        Some(card) => PaymentMethod {
            kind: PaymentMethodType::Card,
            card_id: Some(card.to_string()),
            currency: Some(currency.to_string()),
        },
        None => PaymentMethod {
            kind: PaymentMethodType::AccountBalance,
            card_id: None,
            currency: Some(currency.to_string()),
        },
    }
}

/// The exact body of an order paying `rows` (one item per row, in this order) with `payment`.
pub fn order_body(
    batch: &str,
    payment: &PaymentMethod,
    rows: &[(&RowSpec, i64)],
) -> Result<Vec<u8>, serde_json::Error> {
    let items = rows
        .iter()
        .map(|(row, _)| NewOrderItem {
            face_value: row.face_value,
            distribution_method: DistributionMethod {
                kind: row.distribution,
                email_address: match row.distribution {
                    DistributionType::Email => row.email.clone(),
                    DistributionType::PayoutLink => None,
                },
                template_id: None,
            },
            products: ProductSelection::of(&row.product_codes),
        })
        .collect();
    let refs: Vec<&str> = rows.iter().map(|(r, _)| r.reference.as_str()).collect();
    let mut metadata = BTreeMap::new();
    metadata.insert("paybatch_batch".to_string(), batch.to_string());
    metadata.insert("paybatch_rows".to_string(), refs.join("|"));
    metadata.insert(
        "paybatch_attempts".to_string(),
        rows.iter()
            .map(|(_, a)| a.to_string())
            .collect::<Vec<_>>()
            .join("|"),
    );
    let body = NewOrder {
        payment_method: payment.clone(),
        items,
        description: Some(description(batch, &refs)),
        metadata: Some(metadata),
    };
    serde_json::to_vec(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_change_with_each_part() {
        let k = idempotency_key("sim", "nov", "EMP-1", 1);
        assert_eq!(k, idempotency_key("sim", "nov", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "nov", "EMP-1", 2));
        assert_ne!(k, idempotency_key("production", "nov", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "dec", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "nov", "EMP-2", 1));
        // No ambiguity from joining: ("a b", "c") differs from ("a", "b c").
        assert_ne!(
            idempotency_key("sim", "a\u{1f}b", "c", 1),
            idempotency_key("sim", "a", "b\u{1f}c", 1)
        );
    }

    #[test]
    fn order_keys_of_one_row_are_row_keys_and_groups_differ_by_member() {
        assert_eq!(
            order_key("sim", "nov", &[("EMP-1", 1)]),
            idempotency_key("sim", "nov", "EMP-1", 1)
        );
        let ab = order_key("sim", "nov", &[("A", 1), ("B", 1)]);
        assert_eq!(ab, order_key("sim", "nov", &[("A", 1), ("B", 1)]));
        assert_ne!(ab, order_key("sim", "nov", &[("A", 1), ("B", 2)]));
        assert_ne!(ab, order_key("sim", "nov", &[("B", 1), ("A", 1)]));
        assert_ne!(ab, order_key("sim", "nov", &[("A", 1)]));
    }

    #[test]
    fn description_fits_the_service_limit() {
        let long = "x".repeat(300);
        assert_eq!(description(&long, &["r"]).chars().count(), MAX_DESCRIPTION);
        assert_eq!(
            description("nov", &["EMP-1"]),
            "paybatch batch=nov row=EMP-1"
        );
    }
}
