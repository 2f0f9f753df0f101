//! Orders an account already holds when the simulator starts (`--seed-orders N`): finished
//! orders spread over the last days, some paybatch's and some not, stored at once without the
//! rate limit, for benchmarks and tests of reading the order list.
//!
//! Order `i` of `N` (0 the oldest) was created `span * (N - i) / N` before the start and
//! finished two seconds later. Its description is, by `i % 5`:
//!
//! | `i % 5` | description | items |
//! |---|---|---|
//! | 0 | `Team rewards i` | 1 |
//! | 1 | `paybatch KEY batch=seed-B row=SEED-i` | 1 |
//! | 2 | `paybatch KEY batch=seed-B rows=SEED-i (+2 more)` | 3 |
//! | 3 | `paybatch batch=seed-B row=SEED-i` (the older form) | 1 |
//! | 4 | `Quarterly bonus i` | 1 |
//!
//! with `B = (i / 5) % 3` and `KEY` a random UUID; paybatch's carry paybatch's `metadata`. An
//! order with `i % 23 == 7` is FAILED, every other one COMPLETED. Each item is a USD 10.00
//! payout link of AMZ-US (price 9.80). No balance is touched, and no answer is kept under the
//! orders' keys.
//!
//! With `paybatch_items` ([`super::SimConfig::seed_paybatch_items`], `sim serve
//! --seed-paybatch-items N`), every seeded order is instead a COMPLETED order of paybatch's
//! (of another ledger: its key is its own) with N items:
//! `paybatch KEY batch=seed-B rows=SEED-i-0 (+N-1 more)` (`row=SEED-i-0` for one item), and
//! metadata naming every row as paybatch writes it: `paybatch_batch`, `paybatch_attempts` (`1`)
//! and the references `SEED-i-0` .. `SEED-i-(N-1)` joined by `|`, in pieces of 200 characters
//! under `paybatch_rows`, `paybatch_rows_2`, ...

use std::collections::BTreeMap;
use std::time::Duration;

use rust_decimal::Decimal;

use super::faults::Chance;
use super::store::{ItemRow, OrderRow, iso_from_ms};
use paybatch_api::models::{
    OrderStatus, PaymentMethod, PaymentMethodType, ProductSelection, SelectionType,
};

/// How many finished orders the account holds at the start, and over how long before it they
/// were created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedOrders {
    pub count: usize,
    pub span: Duration,
}

/// The longest value of a metadata pair, and the metadata key of the references, as paybatch
/// writes them (the service's limits).
const METADATA_VALUE: usize = 200;
const ROWS_KEY: &str = "paybatch_rows";

/// The `metadata` paybatch gives an order of `batch` whose rows are `refs` (each row's first
/// attempt): the batch, the attempts and the `|`-joined references in pieces of
/// [`METADATA_VALUE`] characters.
fn paybatch_metadata(batch: &str, refs: &[String]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("paybatch_batch".to_string(), batch.to_string());
    m.insert("paybatch_attempts".to_string(), "1".to_string());
    let joined: Vec<char> = refs.join("|").chars().collect();
    for (n, piece) in joined.chunks(METADATA_VALUE).enumerate() {
        let key = if n == 0 {
            ROWS_KEY.to_string()
        } else {
            format!("{ROWS_KEY}_{}", n + 1)
        };
        m.insert(key, piece.iter().collect());
    }
    m
}

/// The description, the metadata and the number of items of seeded order `i` when every
/// seeded order is paybatch's, of `items` rows.
fn naming_paybatch(
    i: usize,
    key: &str,
    items: usize,
) -> (String, Option<BTreeMap<String, String>>, usize) {
    let batch = format!("seed-{}", (i / 5) % 3);
    let refs: Vec<String> = (0..items).map(|j| format!("SEED-{i}-{j}")).collect();
    let description = match refs.as_slice() {
        [one] => format!("paybatch {key} batch={batch} row={one}"),
        [first, rest @ ..] => format!(
            "paybatch {key} batch={batch} rows={first} (+{} more)",
            rest.len()
        ),
        [] => format!("paybatch {key} batch={batch}"),
    };
    (description, Some(paybatch_metadata(&batch, &refs)), items)
}

/// The description, the metadata and the number of items of seeded order `i`.
fn naming(i: usize, key: &str) -> (String, Option<BTreeMap<String, String>>, usize) {
    let batch = format!("seed-{}", (i / 5) % 3);
    let first = format!("SEED-{i}");
    let meta = |refs: Vec<String>| Some(paybatch_metadata(&batch, &refs));
    match i % 5 {
        0 => (format!("Team rewards {i}"), None, 1),
        1 => (
            format!("paybatch {key} batch={batch} row={first}"),
            meta(vec![first.clone()]),
            1,
        ),
        2 => (
            format!("paybatch {key} batch={batch} rows={first} (+2 more)"),
            meta(vec![
                first.clone(),
                format!("{first}-b"),
                format!("{first}-c"),
            ]),
            3,
        ),
        3 => (
            format!("paybatch batch={batch} row={first}"),
            meta(vec![first.clone()]),
            1,
        ),
        _ => (format!("Quarterly bonus {i}"), None, 1),
    }
}

fn item(ids: &Chance) -> ItemRow {
    ItemRow {
        id: format!("E-{}", ids.token(9)),
        distribution_method: serde_json::json!({"type": "PAYOUT_LINK"}),
        products: ProductSelection {
            kind: SelectionType::Single,
            value: Some("AMZ-US".to_string()),
            values: None,
        },
        face_value: Decimal::new(1000, 2),
        price: Decimal::new(980, 2),
        currency: "USD".to_string(),
        discount_multiplier: Decimal::new(2, 2),
        payout_url: format!(
            "https://playground.example/redeem/{}",
            ids.token(24).to_ascii_lowercase()
        ),
        expiry_months: 12,
    }
}

/// The seeded orders of the API key whose fingerprint is `fp`, oldest first, for a start at
/// `now_ms`, made one at a time (millions of items are not held at once); every one of them
/// paybatch's, of `paybatch_items` rows, when that is given.
pub(crate) fn orders<'a>(
    seed: &'a SeedOrders,
    paybatch_items: Option<usize>,
    fp: &'a str,
    ids: &'a Chance,
    now_ms: i64,
) -> impl Iterator<Item = OrderRow> + 'a {
    let n = seed.count.max(1) as i128;
    let span = seed.span.as_millis() as i128;
    (0..seed.count).map(move |i| {
        let ago = i64::try_from(span * (n - i as i128) / n).unwrap_or(i64::MAX);
        let created_ms = now_ms.saturating_sub(ago);
        let done_ms = created_ms.saturating_add(2_000).min(now_ms);
        let key = uuid::Builder::from_random_bytes(ids.ulid_random().to_be_bytes())
            .into_uuid()
            .to_string();
        let (description, metadata, count) = match paybatch_items {
            Some(items) => naming_paybatch(i, &key, items),
            None => naming(i, &key),
        };
        let items: Vec<ItemRow> = (0..count).map(|_| item(ids)).collect();
        let total_price: Decimal = items.iter().map(|it| it.price).sum();
        let total_discount: Decimal = items.iter().map(|it| it.face_value - it.price).sum();
        let failed = paybatch_items.is_none() && i % 23 == 7;
        let status = if failed {
            OrderStatus::Failed
        } else {
            OrderStatus::Completed
        };
        let mut row = OrderRow {
            seq: 0,
            id: format!(
                "O-{}",
                ulid::Ulid::from_parts(created_ms.max(0) as u64, ids.ulid_random())
            ),
            key_fingerprint: fp.to_string(),
            idempotency_key: key,
            status,
            outcome: status,
            created_at: iso_from_ms(created_ms),
            created_ms,
            due_ms: done_ms,
            completed_at: Some(iso_from_ms(done_ms)),
            description: Some(description),
            metadata,
            payment_method: PaymentMethod {
                kind: PaymentMethodType::AccountBalance,
                card_id: None,
                currency: Some("USD".to_string()),
            },
            currency: "USD".to_string(),
            total_price,
            total_discount,
            fx: serde_json::Value::Null,
            message: None,
            items,
        };
        if failed {
            row.message = Some(super::store::failure_message(&row));
        }
        row
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_orders_are_spread_oldest_first_and_named_by_kind() {
        let seed = SeedOrders {
            count: 10,
            span: Duration::from_secs(10 * 24 * 3600),
        };
        let now = 1_800_000_000_000;
        let orders: Vec<OrderRow> = orders(&seed, None, "sha256:x", &Chance::new(1), now).collect();
        assert_eq!(orders.len(), 10);
        assert_eq!(orders[0].created_ms, now - 10 * 24 * 3600 * 1000);
        assert_eq!(orders[9].created_ms, now - 24 * 3600 * 1000);
        assert!(orders.windows(2).all(|w| w[0].created_ms < w[1].created_ms));
        let d = |i: usize| orders[i].description.clone().unwrap_or_default();
        assert_eq!(d(0), "Team rewards 0");
        assert!(d(1).starts_with("paybatch ") && d(1).ends_with(" batch=seed-0 row=SEED-1"));
        assert!(d(2).ends_with(" batch=seed-0 rows=SEED-2 (+2 more)"));
        assert_eq!(orders[2].items.len(), 3);
        assert_eq!(orders[2].total_price, Decimal::new(2940, 2));
        assert_eq!(d(8), "paybatch batch=seed-1 row=SEED-8");
        assert_eq!(orders[7].status, OrderStatus::Failed);
        assert!(orders[7].message.is_some());
        assert!(orders.iter().all(|o| o.completed_at.is_some()));
    }

    /// With `paybatch_items`, every order is a COMPLETED order of paybatch's with that many
    /// items, each row named in its metadata, 200 rows or one. That the description and metadata
    /// are exactly what paybatch writes is checked against paybatch's own writer and reader by
    /// `sim_orders::seeded_paybatch_orders_name_every_row_as_paybatch_writes_them` in the tool's
    /// suite.
    #[test]
    fn seeded_paybatch_orders_are_completed_with_every_row_named() {
        let seed = SeedOrders {
            count: 6,
            span: Duration::from_secs(24 * 3600),
        };
        let now = 1_800_000_000_000;
        for items in [200, 1] {
            let orders: Vec<OrderRow> =
                orders(&seed, Some(items), "sha256:x", &Chance::new(3), now).collect();
            assert_eq!(orders.len(), 6);
            for (i, o) in orders.iter().enumerate() {
                let batch = format!("seed-{}", (i / 5) % 3);
                let refs: Vec<String> = (0..items).map(|j| format!("SEED-{i}-{j}")).collect();
                assert_eq!(o.status, OrderStatus::Completed);
                assert_eq!(o.items.len(), items);
                let description = o.description.as_deref().unwrap_or_default();
                assert!(description.starts_with("paybatch "));
                assert!(description.contains(&format!(" batch={batch} ")));
                let meta = o.metadata.clone().unwrap_or_default();
                assert_eq!(meta.get("paybatch_batch"), Some(&batch));
                let mut named = meta.get(ROWS_KEY).cloned().unwrap_or_default();
                for n in 2..=meta.len() {
                    match meta.get(&format!("{ROWS_KEY}_{n}")) {
                        Some(piece) => named.push_str(piece),
                        None => break,
                    }
                }
                assert_eq!(named, refs.join("|"));
            }
        }
        let keys: std::collections::HashSet<String> =
            orders(&seed, Some(3), "sha256:x", &Chance::new(3), now)
                .map(|o| o.idempotency_key)
                .collect();
        assert_eq!(keys.len(), 6);
    }
}
