//! The prices of a checked order: each item's price after its discount (in its product's
//! currency), the totals in the payment currency, and the `transaction_detail` with the
//! embedded FX of a one-item order paid in another currency.

use rust_decimal::Decimal;
use serde_json::{Map, Value, json};

use super::rules::{Chosen, bad};
use super::{Priced, PricedItem, Problem, Refused, Request, Selection, at};
use crate::catalog::{fx_rate, to_minor};
use paybatch_api::models::{PaymentMethod, PaymentMethodType, ProductSelection};

/// Prices a checked request whose items hold the `chosen` products.
pub(super) fn price(request: &Request, chosen: &Chosen<'_>) -> Result<Priced, Refused> {
    let pm = &request.payment_method;
    let currency = pm.currency.clone().unwrap_or_default();
    let items = priced_items(request, chosen)?;
    let totals = totals(&items, &currency)?;
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
        total_price: totals.price,
        total_discount: totals.discount,
        currency,
        transaction_detail: Value::Object(totals.transaction_detail),
        items,
    })
}

/// Each item priced. With several products the recipient chooses; the item is priced with the
/// smallest discount among them, so the account is never charged less than the payout it buys.
fn priced_items(request: &Request, chosen: &Chosen<'_>) -> Result<Vec<PricedItem>, Refused> {
    let mut items = Vec::with_capacity(request.items.len());
    for (item, products) in request.items.iter().zip(chosen) {
        let Some(first) = products.first() else {
            continue;
        };
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
        let fv = item.face_value;
        let price = fv
            .checked_mul(Decimal::ONE - discount)
            .ok_or_else(|| too_large(&item.face_value))?;
        items.push(PricedItem {
            distribution_method: item.distribution_method.clone(),
            products: selection(&item.products),
            face_value: to_minor(fv, &first.currency),
            price: to_minor(price, &first.currency),
            currency: first.currency.clone(),
            discount_multiplier: discount,
            expiry_months,
        });
    }
    Ok(items)
}

/// The totals of an order in its payment currency, and its `transaction_detail`.
struct Totals {
    price: Decimal,
    discount: Decimal,
    transaction_detail: Map<String, Value>,
}

fn totals(items: &[PricedItem], currency: &str) -> Result<Totals, Refused> {
    let mut total_price = Decimal::ZERO;
    let mut total_discount = Decimal::ZERO;
    let mut transaction_detail = Map::new();
    for item in items {
        let discount = item.face_value - item.price;
        if item.currency == currency {
            total_price = total_price
                .checked_add(item.price)
                .ok_or_else(|| too_large(&item.face_value))?;
            total_discount = total_discount
                .checked_add(discount)
                .ok_or_else(|| too_large(&item.face_value))?;
            continue;
        }
        let (price, discount, detail) = embedded_fx(item, discount, currency)?;
        total_price = price;
        total_discount = discount;
        transaction_detail.insert(item.currency.clone(), detail);
    }
    let total_price = to_minor(total_price, currency);
    let total_discount = to_minor(total_discount, currency);
    if transaction_detail.is_empty() {
        transaction_detail.insert(
            currency.to_string(),
            json!({"value": total_price.to_string()}),
        );
    }
    Ok(Totals {
        price: total_price,
        discount: total_discount,
        transaction_detail,
    })
}

/// Embedded FX (one item): its price and discount in the payment currency, and its entry of
/// `transaction_detail`. The rate is how many units of the product's currency one unit of the
/// payment currency buys (`rate_symbol` PAYPROD); no fee in the playground.
fn embedded_fx(
    item: &PricedItem,
    discount: Decimal,
    currency: &str,
) -> Result<(Decimal, Decimal, Value), Refused> {
    let Some(rate) = fx_rate(currency, &item.currency).filter(|r| !r.is_zero()) else {
        return Err(bad(
            "currency_mismatch",
            format!(
                "No exchange rate from {currency} to {}: pay in {}.",
                item.currency, item.currency
            ),
        ));
    };
    let (Some(price), Some(discount)) = (item.price.checked_div(rate), discount.checked_div(rate))
    else {
        return Err(too_large(&item.face_value));
    };
    let detail = json!({
        "value": item.price.to_string(),
        "fx": {
            "rate": rate.normalize().to_string(),
            "rate_symbol": format!("{currency}{}", item.currency),
            "fee": {"value": "0.00", "currency": currency},
        }
    });
    Ok((
        to_minor(price, currency),
        to_minor(discount, currency),
        detail,
    ))
}

fn too_large(fv: &Decimal) -> Refused {
    Refused::Invalid(vec![Problem {
        kind: "value_error",
        message: format!("{fv}: the order total is too large"),
        location: at(&["items"]),
    }])
}

/// The product selection as stored and answered.
fn selection(s: &Selection) -> ProductSelection {
    match s {
        Selection::Single { code, .. } => ProductSelection::of(std::slice::from_ref(code)),
        Selection::Multiple(codes) => ProductSelection::of(codes),
        // Refused before anything is stored.
        Selection::Template(_) => ProductSelection::of(&[]),
    }
}
