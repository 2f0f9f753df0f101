//! Orders: validation and pricing of a `POST /order` body, and the answers built from a stored
//! order (full, partial and summary shapes, in either dated version).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Months};
use rust_decimal::Decimal;

use super::ApiVersion;
use super::catalog::{Catalog, PAYMENT_CURRENCIES, fx_rate, minor_units, to_minor};
use super::store::OrderRow;
use crate::api::models::{
    DistributionMethod, DistributionType, ExecutionMode, NewOrder, Order, OrderItem, OrderStatus,
    OrderSummary, PartialOrder, PaymentMethod, PaymentMethodType, Payout, PayoutType, Product,
    ProductSelection, SelectionType, TransactionDetail,
};

/// Most items one order may hold.
pub const MAX_ITEMS: usize = 200;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION: usize = 128;

/// Field path -> message: the `details` of a 422 answer.
pub(crate) type Details = BTreeMap<String, String>;

/// A validated, priced order.
#[derive(Debug)]
pub(crate) struct Priced {
    pub payment_method: PaymentMethod,
    /// The payment currency.
    pub currency: String,
    pub total_price: Decimal,
    pub total_discount: Decimal,
    pub fx: serde_json::Value,
    pub items: Vec<PricedItem>,
}

#[derive(Debug)]
pub(crate) struct PricedItem {
    pub distribution_method: DistributionMethod,
    pub products: ProductSelection,
    pub face_value: Decimal,
    pub price: Decimal,
    pub currency: String,
    pub discount_multiplier: Decimal,
    pub expiry_months: i64,
}

fn valid_email(address: &str) -> bool {
    if address.len() > 254 || address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && domain.split('.').all(|part| !part.is_empty())
}

fn list(values: &[Decimal]) -> String {
    values
        .iter()
        .map(Decimal::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `face_value` cannot be ordered from `product`, if it cannot.
fn face_value_problem(fv: Decimal, p: &Product) -> Option<String> {
    let dp = minor_units(&p.currency);
    if fv.normalize().scale() > dp {
        return Some(format!(
            "{fv} has more decimal places than {} allows ({dp})",
            p.currency
        ));
    }
    if p.payout_type == PayoutType::Subscription {
        let prices: Vec<Decimal> = p.subscription_plans().iter().map(|s| s.price).collect();
        if prices.contains(&fv) {
            return None;
        }
        return Some(format!(
            "{fv} is not the price of a subscription plan of {}: one of {}",
            p.code,
            list(&prices)
        ));
    }
    let d = p.denominations()?;
    if let Some(allowed) = &d.available_list {
        let values: Vec<Decimal> = allowed.iter().map(|v| v.0).collect();
        if values.contains(&fv) {
            return None;
        }
        return Some(format!(
            "{fv} is not a denomination of {}: one of {}",
            p.code,
            list(&values)
        ));
    }
    match (d.minimum_value, d.maximum_value) {
        (Some(min), _) if fv < min => Some(format!(
            "{fv} is below the minimum of {} ({min} {})",
            p.code, p.currency
        )),
        (_, Some(max)) if fv > max => Some(format!(
            "{fv} is above the maximum of {} ({max} {})",
            p.code, p.currency
        )),
        _ => None,
    }
}

/// Validates and prices a new order; on failure, every problem found, by field path.
pub(crate) fn validate(
    order: &NewOrder,
    mode: ExecutionMode,
    catalog: &Catalog,
    cards: &[String],
) -> Result<Priced, Details> {
    let mut details = Details::new();
    let pm = &order.payment_method;
    let currency = match pm.currency.as_deref() {
        Some(c) if PAYMENT_CURRENCIES.contains(&c) => Some(c.to_string()),
        Some(c) => {
            details.insert(
                "payment_method.currency".into(),
                format!("`{c}` is not a payment currency: one of EUR, GBP, USD, CAD"),
            );
            None
        }
        None => {
            details.insert(
                "payment_method.currency".into(),
                "required: one of EUR, GBP, USD, CAD".into(),
            );
            None
        }
    };
    if pm.kind == PaymentMethodType::Other {
        details.insert(
            "payment_method.type".into(),
            "one of ACCOUNT_BALANCE, CARD".into(),
        );
    }
    if pm.kind == PaymentMethodType::Card {
        match pm.card_id.as_deref() {
            Some(id) if cards.iter().any(|c| c == id) => {}
            Some(id) => {
                details.insert(
                    "payment_method.card_id".into(),
                    format!("unknown card `{id}`"),
                );
            }
            None => {
                details.insert(
                    "payment_method.card_id".into(),
                    "required when payment_method.type is CARD".into(),
                );
            }
        }
    }
    if let Some(d) = &order.description {
        let n = d.chars().count();
        if n > MAX_DESCRIPTION {
            details.insert(
                "description".into(),
                format!("at most {MAX_DESCRIPTION} characters, found {n}"),
            );
        }
    }
    let n = order.items.len();
    if n == 0 {
        details.insert("items".into(), "an order holds at least one item".into());
    } else if n > MAX_ITEMS {
        details.insert(
            "items".into(),
            format!("an order holds at most {MAX_ITEMS} items, found {n}"),
        );
    } else if mode == ExecutionMode::Sync && n > 1 {
        details.insert(
            "items".into(),
            format!("a sync order (X-Execution-Mode: sync) holds exactly one item, found {n}"),
        );
    }

    let mut items = Vec::with_capacity(n.min(MAX_ITEMS));
    for (i, item) in order.items.iter().enumerate().take(MAX_ITEMS) {
        let at = |field: &str| format!("items[{i}].{field}");
        // Product selection.
        let (codes, field): (Vec<(String, String)>, String) = match item.products.kind {
            SelectionType::Single => match item.products.value.as_deref() {
                Some(v) if !v.is_empty() => (
                    vec![(v.to_string(), at("products.value"))],
                    at("products.value"),
                ),
                _ => {
                    details.insert(
                        at("products.value"),
                        "required with products.type SINGLE".into(),
                    );
                    (vec![], at("products.value"))
                }
            },
            SelectionType::Multiple => match item.products.values.as_deref() {
                Some(vs) if !vs.is_empty() => (
                    vs.iter()
                        .enumerate()
                        .map(|(j, v)| (v.clone(), at(&format!("products.values[{j}]"))))
                        .collect(),
                    at("products.values"),
                ),
                _ => {
                    details.insert(
                        at("products.values"),
                        "required with products.type MULTIPLE: a non-empty list of product codes"
                            .into(),
                    );
                    (vec![], at("products.values"))
                }
            },
            SelectionType::Other => {
                details.insert(at("products.type"), "one of SINGLE, MULTIPLE".into());
                (vec![], at("products.type"))
            }
        };
        let mut products: Vec<&Product> = Vec::new();
        for (code, path) in &codes {
            match catalog.get(code) {
                None => {
                    details.insert(path.clone(), format!("unknown product `{code}`"));
                }
                Some(p) if !p.is_orderable => {
                    details.insert(
                        path.clone(),
                        format!("product `{code}` cannot be ordered now (is_orderable is false)"),
                    );
                }
                Some(p) => products.push(p),
            }
        }
        let currencies: BTreeSet<&str> = products.iter().map(|p| p.currency.as_str()).collect();
        if currencies.len() > 1 {
            details.insert(
                field.clone(),
                format!(
                    "the products of one item must share a currency, found {}",
                    currencies.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        // Face value.
        let fv = item.face_value;
        if fv <= Decimal::ZERO {
            details.insert(at("face_value"), format!("{fv} must be greater than 0"));
        } else if let Some(problem) = products.iter().find_map(|p| face_value_problem(fv, p)) {
            details.insert(at("face_value"), problem);
        }
        // Distribution.
        if item.distribution_method.kind == DistributionType::Other {
            details.insert(
                at("distribution_method.type"),
                "one of EMAIL, PAYOUT_LINK".into(),
            );
        }
        if item.distribution_method.kind == DistributionType::Email {
            match item.distribution_method.email_address.as_deref() {
                Some(a) if valid_email(a) => {}
                Some(a) => {
                    details.insert(
                        at("distribution_method.email_address"),
                        format!("`{a}` is not a valid email address"),
                    );
                }
                None => {
                    details.insert(
                        at("distribution_method.email_address"),
                        "required with distribution_method.type EMAIL".into(),
                    );
                }
            }
        }
        if details.is_empty()
            && let Some(first) = products.first()
        {
            // Priced only while the order is valid so far (then the face value is within the
            // product's bounds). With several products the recipient chooses; the price is the highest of them
            // (the smallest discount), so the account is never charged less than the payout.
            let discount = products
                .iter()
                .map(|p| p.discount())
                .min()
                .unwrap_or(Decimal::ZERO);
            let expiry_months = first
                .gift_card
                .as_ref()
                .and_then(|g| g.expiry.as_ref())
                .or(first.subscription.as_ref().and_then(|s| s.expiry.as_ref()))
                .and_then(|e| e.in_months)
                .unwrap_or(12);
            items.push(PricedItem {
                distribution_method: item.distribution_method.clone(),
                products: item.products.clone(),
                face_value: to_minor(fv, &first.currency),
                price: to_minor(fv * (Decimal::ONE - discount), &first.currency),
                currency: first.currency.clone(),
                discount_multiplier: discount,
                expiry_months,
            });
        }
    }

    let Some(currency) = currency else {
        return Err(details);
    };
    if !details.is_empty() {
        return Err(details);
    }

    // Totals in the payment currency.
    let mut total_price = Decimal::ZERO;
    let mut total_discount = Decimal::ZERO;
    let mut rates: BTreeMap<String, Decimal> = BTreeMap::new();
    for item in &items {
        let Some(rate) = fx_rate(&item.currency, &currency) else {
            details.insert(
                "payment_method.currency".into(),
                format!("no exchange rate from {} to {currency}", item.currency),
            );
            return Err(details);
        };
        if item.currency != currency {
            rates.insert(item.currency.clone(), rate);
        }
        let sums = item
            .price
            .checked_mul(rate)
            .and_then(|p| total_price.checked_add(p))
            .zip(
                (item.face_value - item.price)
                    .checked_mul(rate)
                    .and_then(|d| total_discount.checked_add(d)),
            );
        let Some((price, discount)) = sums else {
            details.insert("items".into(), "the order total is too large".into());
            return Err(details);
        };
        total_price = price;
        total_discount = discount;
    }
    let fx = match rates.len() {
        0 => serde_json::Value::Null,
        1 => rates
            .values()
            .next()
            .map(|r| serde_json::Value::String(r.normalize().to_string()))
            .unwrap_or(serde_json::Value::Null),
        _ => serde_json::Value::Object(
            rates
                .into_iter()
                .map(|(c, r)| (c, serde_json::Value::String(r.normalize().to_string())))
                .collect(),
        ),
    };
    Ok(Priced {
        payment_method: PaymentMethod {
            kind: pm.kind,
            card_id: if pm.kind == PaymentMethodType::Card {
                pm.card_id.clone()
            } else {
                None
            },
            currency: Some(currency.clone()),
        },
        total_price: to_minor(total_price, "USD"),
        total_discount: to_minor(total_discount, "USD"),
        currency,
        fx,
        items,
    })
}

fn expiry_date(completed_at: &str, months: i64) -> Option<String> {
    if months <= 0 {
        return None;
    }
    let at = DateTime::parse_from_rfc3339(completed_at).ok()?;
    let until = at.checked_add_months(Months::new(u32::try_from(months).ok()?))?;
    Some(until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The full shape of a `COMPLETED` or `FAILED` order (also the 200 answer of a sync creation).
pub(crate) fn full_order(o: &OrderRow, version: ApiVersion) -> Order {
    let completed = o.status == OrderStatus::Completed;
    let items = o
        .items
        .iter()
        .map(|it| {
            let done_at = o
                .completed_at
                .clone()
                .unwrap_or_else(|| o.created_at.clone());
            let (payout, redemption_url) = match (completed, version) {
                (false, _) => (None, None),
                (true, ApiVersion::V2023) => (None, Some(it.payout_url.clone())),
                (true, ApiVersion::V2024) => (
                    Some(Payout {
                        status: Some("ACTIVE".into()),
                        expiry_date: expiry_date(&done_at, it.expiry_months),
                        status_updated_at: Some(done_at),
                        url: Some(it.payout_url.clone()),
                    }),
                    None,
                ),
            };
            OrderItem {
                id: Some(it.id.clone()),
                distribution_method: it.distribution_method.clone(),
                products: it.products.clone(),
                face_value: Some(it.face_value),
                price: Some(it.price),
                currency: Some(it.currency.clone()),
                discount_multiplier: Some(it.discount_multiplier),
                payout,
                redemption_url,
            }
        })
        .collect();
    let mut detail = BTreeMap::new();
    detail.insert(
        o.currency.clone(),
        TransactionDetail {
            value: o.total_price,
            fx: Some(o.fx.clone()),
        },
    );
    Order {
        id: o.id.clone(),
        status: o.status,
        created_at: Some(o.created_at.clone()),
        completed_at: o.completed_at.clone(),
        description: o.description.clone(),
        payment_method: Some(o.payment_method.clone()),
        currency: Some(o.currency.clone()),
        total_price: Some(o.total_price),
        total_discount: Some(o.total_discount),
        items,
        transaction_detail: Some(detail),
        metadata: Some(o.metadata.clone()),
        message: if o.status == OrderStatus::Failed {
            o.message.clone()
        } else {
            None
        },
    }
}

/// The partial shape of a `PROCESSING` order.
pub(crate) fn partial_order(o: &OrderRow) -> PartialOrder {
    PartialOrder {
        id: o.id.clone(),
        status: o.status,
        message: Some("The order is being processed; read it again in a few seconds.".into()),
    }
}

/// An element of the order list.
pub(crate) fn summary(o: &OrderRow) -> OrderSummary {
    OrderSummary {
        id: o.id.clone(),
        status: o.status,
        created_at: Some(o.created_at.clone()),
        completed_at: o.completed_at.clone(),
        description: o.description.clone(),
        payment_method: Some(o.payment_method.clone()),
        currency: Some(o.currency.clone()),
        total_price: Some(o.total_price),
        total_discount: Some(o.total_discount),
        metadata: Some(o.metadata.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::models::NewOrderItem;
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn item(code: &str, fv: &str) -> NewOrderItem {
        NewOrderItem {
            face_value: dec(fv),
            distribution_method: DistributionMethod {
                kind: DistributionType::PayoutLink,
                email_address: None,
                template_id: None,
            },
            products: ProductSelection::of(&[code.to_string()]),
        }
    }

    fn order(items: Vec<NewOrderItem>, currency: &str) -> NewOrder {
        NewOrder {
            payment_method: PaymentMethod {
                kind: PaymentMethodType::AccountBalance,
                card_id: None,
                currency: Some(currency.into()),
            },
            items,
            description: None,
            metadata: None,
        }
    }

    #[test]
    fn prices_with_discount_and_fx() {
        let c = Catalog::new();
        let p = validate(
            &order(vec![item("AMZ-US", "10")], "USD"),
            ExecutionMode::Async,
            &c,
            &[],
        )
        .unwrap();
        assert_eq!(p.items[0].price.to_string(), "9.80");
        assert_eq!(p.items[0].face_value.to_string(), "10.00");
        assert_eq!(p.total_price.to_string(), "9.80");
        assert_eq!(p.total_discount.to_string(), "0.20");
        assert!(p.fx.is_null());

        let p = validate(
            &order(vec![item("UBER-JP", "3000")], "USD"),
            ExecutionMode::Async,
            &c,
            &[],
        )
        .unwrap();
        assert_eq!(p.items[0].price.to_string(), "2910");
        assert_eq!(p.items[0].currency, "JPY");
        assert_eq!(p.total_price.to_string(), "19.50"); // 2910 * 0.0067 = 19.497
        assert_eq!(p.fx, serde_json::json!("0.0067"));
    }

    #[test]
    fn rules_and_their_paths() {
        let c = Catalog::new();
        let cases: Vec<(NewOrder, &str)> = vec![
            (
                order(vec![item("NOPE", "10")], "USD"),
                "items[0].products.value",
            ),
            (
                order(vec![item("RETIRED-US", "10")], "USD"),
                "items[0].products.value",
            ),
            (
                order(vec![item("TESCO-GB", "15")], "GBP"),
                "items[0].face_value",
            ),
            (
                order(vec![item("AMZ-US", "2000.01")], "USD"),
                "items[0].face_value",
            ),
            (
                order(vec![item("AMZ-US", "0.5")], "USD"),
                "items[0].face_value",
            ),
            (
                order(vec![item("AMZ-US", "10.001")], "USD"),
                "items[0].face_value",
            ),
            (
                order(vec![item("UBER-JP", "1000.5")], "USD"),
                "items[0].face_value",
            ),
            (
                order(vec![item("SPOTIFY-US", "11")], "USD"),
                "items[0].face_value",
            ),
            (
                order(vec![item("AMZ-US", "10")], "JPY"),
                "payment_method.currency",
            ),
            (order(vec![], "USD"), "items"),
        ];
        for (o, path) in cases {
            let details = validate(&o, ExecutionMode::Async, &c, &[]).unwrap_err();
            assert!(details.contains_key(path), "{path}: {details:?}");
        }
        let two = order(vec![item("AMZ-US", "10"), item("AMZ-US", "10")], "USD");
        assert!(
            validate(&two, ExecutionMode::Sync, &c, &[])
                .unwrap_err()
                .contains_key("items")
        );
        assert!(validate(&two, ExecutionMode::Async, &c, &[]).is_ok());
    }

    #[test]
    fn email_addresses() {
        assert!(valid_email("a@b.example"));
        assert!(!valid_email("a@b"));
        assert!(!valid_email("@b.example"));
        assert!(!valid_email("a b@c.example"));
        assert!(!valid_email("a@@c.example"));
        assert!(!valid_email("a@c..example"));
    }
}
