//! The checks of an order whose shape is valid, against the account and the catalog, in the
//! order the service answers them: the payment method, the products (known and orderable now),
//! the currencies (embedded FX only for a one-item sync order), and the face values against
//! the products.

use std::collections::BTreeSet;

use rust_decimal::Decimal;

use super::{Problem, Refused, Request, Rules, Selection, at};
use crate::catalog::{Catalog, minor_units};
use paybatch_api::models::{ExecutionMode, PaymentMethod, PaymentMethodType, PayoutType, Product};

/// The products of each item, once every check has passed.
pub(super) type Chosen<'c> = Vec<Vec<&'c Product>>;

/// Checks a request whose shape is valid against the account and the catalog: the products
/// of each item, or why the order is refused.
pub(super) fn check_request<'c>(
    request: &Request,
    rules: &Rules<'c>,
) -> Result<Chosen<'c>, Refused> {
    check_payment_method(&request.payment_method, rules)?;
    let chosen = choose_products(request, rules.catalog)?;
    check_currencies(request, &chosen, rules.mode)?;
    check_face_values(request, &chosen)?;
    Ok(chosen)
}

/// A `CARD` payment: taken by this account, with a card it knows.
fn check_payment_method(pm: &PaymentMethod, rules: &Rules<'_>) -> Result<(), Refused> {
    if pm.kind != PaymentMethodType::Card {
        return Ok(());
    }
    if !rules.cards_accepted {
        return Err(bad(
            "payment_method_unavailable",
            "The requested payment method is not available.",
        ));
    }
    let loc = at(&["payment_method", "card_id"]);
    match pm.card_id.as_deref() {
        Some(id) if rules.cards.iter().any(|c| c == id) => Ok(()),
        Some(id) => Err(Refused::Invalid(vec![Problem {
            kind: "value_error",
            message: format!("unknown card `{id}`"),
            location: loc,
        }])),
        None => Err(Refused::Invalid(vec![Problem {
            kind: "missing",
            message: "required when payment_method.type is CARD".into(),
            location: loc,
        }])),
    }
}

/// The product codes an item names; a template (of spend rules or of a payout selection) is
/// refused, as this account holds none.
fn codes_of<'r>(selection: &'r Selection, refused: &mut Vec<String>) -> Vec<&'r String> {
    match selection {
        Selection::Single {
            spend_rules: Some(id),
            ..
        } => {
            refused.push(format!("spend rules template `{id}` (not in this account)"));
            Vec::new()
        }
        Selection::Single { code, .. } => vec![code],
        Selection::Multiple(codes) => codes.iter().collect(),
        Selection::Template(id) => {
            refused.push(format!(
                "payout selection template `{id}` (not in this account)"
            ));
            Vec::new()
        }
    }
}

/// The products of every item, known and orderable now (`400 product_validation_error`
/// naming every one that is not).
fn choose_products<'c>(request: &Request, catalog: &'c Catalog) -> Result<Chosen<'c>, Refused> {
    let mut refused: Vec<String> = Vec::new();
    let mut chosen: Chosen<'c> = Vec::with_capacity(request.items.len());
    for item in &request.items {
        let mut products = Vec::new();
        for code in codes_of(&item.products, &mut refused) {
            match catalog.get(code) {
                None => refused.push(format!("`{code}` (unknown product)")),
                Some(p) if !p.is_orderable => refused.push(format!(
                    "`{code}` (is_orderable is false, state {})",
                    p.state
                )),
                Some(p) => products.push(p),
            }
        }
        chosen.push(products);
    }
    if !refused.is_empty() {
        refused.dedup();
        return Err(bad(
            "product_validation_error",
            format!("Not allowed to order products: {}", refused.join(", ")),
        ));
    }
    Ok(chosen)
}

/// Every product in the payment currency, except embedded FX (one item, sync, its products in
/// one currency).
fn check_currencies(
    request: &Request,
    chosen: &Chosen<'_>,
    mode: ExecutionMode,
) -> Result<(), Refused> {
    let currency = request.payment_method.currency.clone().unwrap_or_default();
    let fx_allowed = mode == ExecutionMode::Sync && request.items.len() == 1;
    for products in chosen {
        let currencies: BTreeSet<&str> = products.iter().map(|p| p.currency.as_str()).collect();
        let foreign: Vec<&str> = currencies
            .iter()
            .copied()
            .filter(|c| *c != currency)
            .collect();
        if foreign.is_empty() || (fx_allowed && currencies.len() == 1) {
            continue;
        }
        let mut message = format!(
            "The currency requested in the payment_method, '{currency}', does not match the currency of the selected products, '{}'.",
            foreign.join("', '")
        );
        if fx_allowed {
            message.push_str(" The products of one item must share one currency.");
        } else {
            message.push_str(
                " Paying in another currency (embedded FX) works only for a sync order of one item.",
            );
        }
        return Err(bad("currency_mismatch", message));
    }
    Ok(())
}

/// Every face value one its products take (`422`, one problem per item).
fn check_face_values(request: &Request, chosen: &Chosen<'_>) -> Result<(), Refused> {
    let mut problems = Vec::new();
    for (i, (item, products)) in request.items.iter().zip(chosen).enumerate() {
        let fv = item.face_value;
        let problem = match &item.products {
            Selection::Multiple(_) => multiple_face_value_problem(fv, products),
            _ => products.iter().find_map(|p| face_value_problem(fv, p)),
        };
        if let Some(message) = problem {
            problems.push(Problem {
                kind: "value_error",
                message,
                location: at(&["items", &i.to_string(), "face_value"]),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Refused::Invalid(problems))
    }
}

fn list(values: &[Decimal]) -> String {
    values
        .iter()
        .map(Decimal::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The smallest face value a product takes.
fn minimum(p: &Product) -> Option<Decimal> {
    if p.payout_type == PayoutType::Subscription {
        return p.subscription_plans().iter().map(|s| s.price).min();
    }
    let d = p.denominations()?;
    d.minimum_value
        .or_else(|| d.available_list.as_ref()?.iter().map(|v| v.0).min())
}

/// Why `face_value` cannot be ordered as a `SINGLE` product, if it cannot.
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

/// Why `face_value` cannot be ordered as a `MULTIPLE` selection of `products`, if it cannot: it
/// must be a whole number at or above every product's minimum.
fn multiple_face_value_problem(fv: Decimal, products: &[&Product]) -> Option<String> {
    if fv.fract() != Decimal::ZERO {
        return Some(format!(
            "{fv}: a MULTIPLE selection takes a whole-number face value"
        ));
    }
    products.iter().find_map(|p| {
        let min = minimum(p)?;
        (fv < min).then(|| {
            format!(
                "{fv} is below the minimum of {} ({min} {})",
                p.code, p.currency
            )
        })
    })
}

pub(super) fn bad(kind: &'static str, message: impl Into<String>) -> Refused {
    Refused::BadRequest {
        kind,
        message: message.into(),
    }
}
