//! A finished order is checked against what was sent before anything of it is believed: the
//! service's answer must hold the items paybatch asked for (count, products, face values,
//! currencies, distribution), the payment method it asked for, and no negative or inflated
//! price; a COMPLETED order's items each carry a payout link, a FAILED order's items none. An
//! order that differs is recorded MISMATCH: its rows need a person, are never
//! COMPLETED and never sent again by themselves.

use rust_decimal::Decimal;

use crate::api::models::{
    DistributionMethod, DistributionType, NewOrder, NewOrderItem, Order, OrderItem, OrderStatus,
    PaymentMethod, PaymentMethodType, ProductSelection,
};

/// What the ledger holds of one row of the order, in item order: the product's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRow {
    pub reference: String,
    pub currency: Option<String>,
}

/// The order a row of the ledger asked for, as its stored spec (`rows.spec`) says: for an order
/// the ledger adopted from the service (reconciliation), which has no body of its own.
#[derive(serde::Deserialize)]
struct StoredSpec {
    product_codes: Vec<String>,
    #[serde(with = "rust_decimal::serde::str")]
    face_value: Decimal,
    distribution: String,
    email: Option<String>,
}

/// The body an order of `specs` (stored row specs, in item order) paid by `payment` stands for.
pub fn body_of_rows(payment: PaymentMethod, specs: &[Option<&str>]) -> Result<Vec<u8>, String> {
    let mut items = Vec::with_capacity(specs.len());
    for spec in specs {
        let spec: StoredSpec = spec
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| "a row of the order has no readable spec".to_string())?;
        let kind = match spec.distribution.as_str() {
            "EMAIL" => DistributionType::Email,
            "PAYOUT_LINK" => DistributionType::PayoutLink,
            _ => DistributionType::Other,
        };
        items.push(NewOrderItem {
            face_value: spec.face_value,
            distribution_method: DistributionMethod {
                kind,
                email_address: spec.email,
                template_id: None,
            },
            products: ProductSelection::of(&spec.product_codes),
        });
    }
    let order = NewOrder {
        payment_method: payment,
        items,
        description: None,
        metadata: None,
    };
    serde_json::to_vec(&order).map_err(|e| e.to_string())
}

/// What an item is asked for, compared whatever the order of items or of a choice's products:
/// products (sorted), face value (as a number), delivery and address.
fn item_key(
    products: &ProductSelection,
    face_value: Option<Decimal>,
    distribution: &DistributionMethod,
) -> (Vec<String>, Option<Decimal>, &'static str, String) {
    let mut codes = products.codes();
    codes.sort();
    (
        codes,
        face_value.map(|v| v.normalize()),
        distribution.kind.as_str(),
        distribution
            .email_address
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase(),
    )
}

/// Which answered item stands for each item sent: the service need not answer the items in
/// the order they were sent, so they are paired by what each asks for (the same position first,
/// among items alike). `None` for an item sent that no answered item matches.
fn pair_items(sent: &NewOrder, answer: &Order) -> Vec<Option<usize>> {
    let keys: Vec<_> = answer
        .items
        .iter()
        .map(|a| item_key(&a.products, a.face_value, &a.distribution_method))
        .collect();
    let mut used = vec![false; answer.items.len()];
    sent.items
        .iter()
        .enumerate()
        .map(|(i, asked)| {
            let want = item_key(
                &asked.products,
                Some(asked.face_value),
                &asked.distribution_method,
            );
            let j = std::iter::once(i)
                .chain(0..answer.items.len())
                .find(|j| *j < keys.len() && !used[*j] && keys[*j] == want)?;
            used[j] = true;
            Some(j)
        })
        .collect()
}

/// How `answer` differs from the order `body` paybatch sent for `rows`, or, when it holds what
/// was asked for, which answered item stands for each item sent (in the order sent).
pub fn check(body: &[u8], rows: &[SentRow], answer: &Order) -> Result<Vec<usize>, Vec<String>> {
    let sent: NewOrder = match serde_json::from_slice(body) {
        Ok(sent) => sent,
        Err(e) => {
            return Err(vec![format!(
                "the order's recorded body cannot be read: {e}"
            )]);
        }
    };
    let mut out = differences_of(&sent, answer);
    let pairs = pair_items(&sent, answer);
    for (i, pair) in pairs.iter().enumerate() {
        let (Some(j), Some(asked)) = (pair, sent.items.get(i)) else {
            continue;
        };
        let who = who(rows, i);
        item_differences(&who, &answer.items[*j], asked, rows.get(i), &mut out);
    }
    out.extend(link_differences(rows, answer, &pairs));
    if out.is_empty() && pairs.iter().all(Option::is_some) {
        return Ok(pairs.into_iter().flatten().collect());
    }
    for (i, asked) in sent.items.iter().enumerate() {
        if pairs.get(i).is_some_and(Option::is_none) && answer.items.len() == sent.items.len() {
            out.push(format!(
                "{}: no answered item is {} {} by {}",
                who(rows, i),
                asked.products.codes().join("|"),
                asked.face_value,
                asked.distribution_method.kind.as_str()
            ));
            if let Some(item) = answer.items.get(i) {
                item_differences(&who(rows, i), item, asked, rows.get(i), &mut out);
            }
        }
    }
    if out.is_empty() {
        out.push("the answered items cannot be paired with the items sent".into());
    }
    Err(out)
}

fn who(rows: &[SentRow], i: usize) -> String {
    rows.get(i).map_or_else(
        || format!("item {}", i + 1),
        |r| format!("item {} (row {})", i + 1, r.reference),
    )
}

/// Whether `item` carries a payout link (in either dated version's shape) that is not empty.
fn has_link(item: &OrderItem) -> bool {
    let given = |url: Option<&str>| url.is_some_and(|u| !u.trim().is_empty());
    given(item.payout.as_ref().and_then(|p| p.url.as_deref()))
        || given(item.redemption_url.as_deref())
}

/// What the payout links of a finished order say against its status. Every item of a COMPLETED
/// order carries its link (the published API requires `payout.url`, whatever the delivery): one
/// without it left the balance and cannot reach its recipient. No item of a FAILED order carries
/// one: an order that failed with links may have paid, and sending its rows again may pay twice.
/// Either needs a person.
fn link_differences(rows: &[SentRow], answer: &Order, pairs: &[Option<usize>]) -> Vec<String> {
    let named = |j: usize| {
        pairs
            .iter()
            .position(|p| *p == Some(j))
            .map_or_else(|| format!("answered item {}", j + 1), |i| who(rows, i))
    };
    match answer.status {
        OrderStatus::Completed => answer
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| !has_link(item))
            .map(|(j, _)| format!("{}: completed without a payout link", named(j)))
            .collect(),
        OrderStatus::Failed => {
            let linked: Vec<String> = answer
                .items
                .iter()
                .enumerate()
                .filter(|(_, item)| has_link(item))
                .map(|(j, _)| named(j))
                .collect();
            if linked.is_empty() {
                Vec::new()
            } else {
                vec![format!(
                    "failed, but its items carry payout links ({})",
                    linked.join(", ")
                )]
            }
        }
        _ => Vec::new(),
    }
}

/// The order-level differences (count, payment method, currency, totals).
fn differences_of(sent: &NewOrder, answer: &Order) -> Vec<String> {
    let mut out = Vec::new();
    if answer.items.len() != sent.items.len() {
        out.push(format!(
            "{} items answered, {} sent",
            answer.items.len(),
            sent.items.len()
        ));
    }
    if let Some(pm) = &answer.payment_method {
        if pm.kind != sent.payment_method.kind {
            out.push(format!(
                "paid by {}, sent {}",
                method_name(pm.kind),
                method_name(sent.payment_method.kind)
            ));
        }
        if pm.currency.is_some() && pm.currency != sent.payment_method.currency {
            out.push(format!(
                "payment currency {}, sent {}",
                shown(pm.currency.as_deref()),
                shown(sent.payment_method.currency.as_deref())
            ));
        }
        if sent.payment_method.card_id.is_some()
            && pm.card_id.is_some()
            && pm.card_id != sent.payment_method.card_id
        {
            out.push("paid by another card than the one sent".to_string());
        }
    }
    if let Some(currency) = &answer.currency
        && sent.payment_method.currency.as_ref() != Some(currency)
    {
        out.push(format!(
            "order currency {currency}, sent {}",
            shown(sent.payment_method.currency.as_deref())
        ));
    }
    for (name, value) in [
        ("total price", answer.total_price),
        ("total discount", answer.total_discount),
    ] {
        if let Some(v) = value
            && v < Decimal::ZERO
        {
            out.push(format!("negative {name} {v}"));
        }
    }
    out
}

fn item_differences(
    who: &str,
    item: &OrderItem,
    asked: &crate::api::models::NewOrderItem,
    row: Option<&SentRow>,
    out: &mut Vec<String>,
) {
    let sorted = |p: &ProductSelection| {
        let mut codes = p.codes();
        codes.sort();
        codes
    };
    if sorted(&item.products) != sorted(&asked.products) {
        out.push(format!(
            "{who}: products {}, sent {}",
            item.products.codes().join("|"),
            asked.products.codes().join("|")
        ));
    }
    match item.face_value {
        Some(v) if v == asked.face_value => {}
        Some(v) => out.push(format!("{who}: face value {v}, sent {}", asked.face_value)),
        None => out.push(format!("{who}: no face value answered")),
    }
    let sent_currency = row.and_then(|r| r.currency.as_deref());
    if let (Some(answered), Some(sent)) = (item.currency.as_deref(), sent_currency)
        && answered != sent
    {
        out.push(format!("{who}: currency {answered}, sent {sent}"));
    }
    if let Some(price) = item.price {
        if price < Decimal::ZERO {
            out.push(format!("{who}: negative price {price}"));
        } else if price > asked.face_value
            && item
                .currency
                .as_deref()
                .is_some_and(|c| Some(c) == sent_currency)
        {
            out.push(format!(
                "{who}: price {price} above its face value {}",
                asked.face_value
            ));
        }
    }
    let dm = &item.distribution_method;
    let asked_dm = &asked.distribution_method;
    if dm.kind != asked_dm.kind {
        out.push(format!(
            "{who}: delivered by {}, sent {}",
            dm.kind.as_str(),
            asked_dm.kind.as_str()
        ));
    } else if dm.email_address.is_some()
        && asked_dm.email_address.is_some()
        && !dm
            .email_address
            .as_deref()
            .unwrap_or_default()
            .eq_ignore_ascii_case(asked_dm.email_address.as_deref().unwrap_or_default())
    {
        out.push(format!(
            "{who}: emailed to another address than the one sent"
        ));
    }
}

fn method_name(kind: PaymentMethodType) -> &'static str {
    match kind {
        PaymentMethodType::AccountBalance => "ACCOUNT_BALANCE",
        PaymentMethodType::Card => "CARD",
        PaymentMethodType::Other => "another method",
    }
}

fn shown(v: Option<&str>) -> &str {
    v.unwrap_or("none")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"payment_method":{"type":"ACCOUNT_BALANCE","currency":"USD"},"items":[
        {"face_value":10,"distribution_method":{"type":"EMAIL","email_address":"a@b.example"},"products":{"type":"SINGLE","value":"AMZ-US"}},
        {"face_value":25.50,"distribution_method":{"type":"PAYOUT_LINK"},"products":{"type":"SINGLE","value":"AMZ-US"}}]}"#;

    fn rows() -> Vec<SentRow> {
        ["A", "B"]
            .iter()
            .map(|r| SentRow {
                reference: r.to_string(),
                currency: Some("USD".into()),
            })
            .collect()
    }

    fn answer() -> serde_json::Value {
        serde_json::json!({
            "id": "O-1", "status": "COMPLETED",
            "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
            "currency": "USD", "total_price": "34.79", "total_discount": "0.71",
            "items": [
                {"id": "E-1", "distribution_method": {"type": "EMAIL", "email_address": "A@B.example"},
                 "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "10.00",
                 "price": "9.80", "currency": "USD",
                 "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                            "url": "https://payouts.example/r/E-1"}},
                {"id": "E-2", "distribution_method": {"type": "PAYOUT_LINK"},
                 "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "25.5",
                 "price": "24.99", "currency": "USD",
                 "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                            "url": "https://payouts.example/r/E-2"}}
            ]
        })
    }

    fn diff(change: impl FnOnce(&mut serde_json::Value)) -> Vec<String> {
        let mut a = answer();
        change(&mut a);
        let order: Order = serde_json::from_value(a).expect("an order");
        check(BODY.as_bytes(), &rows(), &order)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn the_order_that_was_sent_passes_whatever_the_scale_of_its_amounts() {
        assert!(diff(|_| {}).is_empty(), "{:?}", diff(|_| {}));
    }

    /// The service need not answer the items in the order sent: they are paired by what each
    /// asks for, and each row gets its own item.
    #[test]
    fn items_answered_in_another_order_are_paired_with_what_was_sent() {
        let mut a = answer();
        if let Some(items) = a["items"].as_array_mut() {
            items.reverse();
        }
        let order: Order = serde_json::from_value(a).expect("an order");
        assert_eq!(check(BODY.as_bytes(), &rows(), &order), Ok(vec![1, 0]));
        let order: Order = serde_json::from_value(answer()).expect("an order");
        assert_eq!(check(BODY.as_bytes(), &rows(), &order), Ok(vec![0, 1]));
    }

    /// A completed item's link may come in the older version's shape; a failed order's items
    /// carry none.
    #[test]
    fn links_as_the_service_answers_them_pass() {
        let older = diff(|a| {
            for item in a["items"].as_array_mut().into_iter().flatten() {
                let url = item["payout"]["url"].clone();
                item.as_object_mut().map(|i| i.remove("payout"));
                item["redemption_url"] = url;
            }
        });
        assert!(older.is_empty(), "{older:?}");
        let failed = diff(|a| {
            a["status"] = "FAILED".into();
            for item in a["items"].as_array_mut().into_iter().flatten() {
                item.as_object_mut().map(|i| i.remove("payout"));
            }
        });
        assert!(failed.is_empty(), "{failed:?}");
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        type Change = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "face value 11",
                Box::new(|a| a["items"][0]["face_value"] = "11".into()),
            ),
            (
                "currency EUR, sent USD",
                Box::new(|a| a["items"][1]["currency"] = "EUR".into()),
            ),
            (
                "order currency EUR",
                Box::new(|a| a["currency"] = "EUR".into()),
            ),
            (
                "payment currency GBP",
                Box::new(|a| a["payment_method"]["currency"] = "GBP".into()),
            ),
            (
                "paid by CARD",
                Box::new(|a| a["payment_method"]["type"] = "CARD".into()),
            ),
            (
                "negative price",
                Box::new(|a| a["items"][1]["price"] = "-1".into()),
            ),
            (
                "negative total price",
                Box::new(|a| a["total_price"] = "-34.79".into()),
            ),
            (
                "above its face value",
                Box::new(|a| a["items"][0]["price"] = "10.01".into()),
            ),
            (
                "0 items answered, 2 sent",
                Box::new(|a| a["items"] = serde_json::json!([])),
            ),
            (
                "products STEAM-US",
                Box::new(|a| a["items"][1]["products"]["value"] = "STEAM-US".into()),
            ),
            (
                "delivered by PAYOUT_LINK",
                Box::new(|a| {
                    a["items"][0]["distribution_method"] =
                        serde_json::json!({"type": "PAYOUT_LINK"})
                }),
            ),
            (
                "another address",
                Box::new(|a| {
                    a["items"][0]["distribution_method"]["email_address"] = "x@y.example".into()
                }),
            ),
            (
                "item 1 (row A): completed without a payout link",
                Box::new(|a| {
                    a["items"][0].as_object_mut().map(|o| o.remove("payout"));
                }),
            ),
            (
                "item 2 (row B): completed without a payout link",
                Box::new(|a| a["items"][1]["payout"]["url"] = "".into()),
            ),
            (
                "completed without a payout link",
                Box::new(|a| {
                    a["items"][1]["payout"]
                        .as_object_mut()
                        .map(|o| o.remove("url"));
                }),
            ),
            (
                "failed, but its items carry payout links (item 2 (row B))",
                Box::new(|a| {
                    a["status"] = "FAILED".into();
                    a["items"][0].as_object_mut().map(|o| o.remove("payout"));
                }),
            ),
            (
                "no face value",
                Box::new(|a| {
                    a["items"][0]
                        .as_object_mut()
                        .map(|o| o.remove("face_value"));
                }),
            ),
        ];
        for (needle, change) in cases {
            let found = diff(change);
            assert!(
                found.iter().any(|d| d.contains(needle)),
                "{needle}: {found:?}"
            );
        }
    }
}
