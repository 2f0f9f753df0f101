//! A catalog for the tests, written as the service's `GET /product` answer would carry it.

#![allow(dead_code)]

use paybatch::api::{Product, ProductList};
use paybatch::input::rules::CatalogIndex;

fn gift_card_open(code: &str, currency: &str, min: &str, max: &str, countries: &[&str]) -> String {
    product(
        code,
        currency,
        "gift_card",
        countries,
        &format!(
            r#""gift_card": {{"denominations": {{"type": "open", "minimum_value": "{min}", "maximum_value": "{max}"}}}}"#
        ),
    )
}

fn gift_card_fixed(code: &str, currency: &str, values: &[&str], countries: &[&str]) -> String {
    let list = values
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ");
    product(
        code,
        currency,
        "gift_card",
        countries,
        &format!(
            r#""gift_card": {{"denominations": {{"type": "fixed", "available_list": [{list}]}}}}"#
        ),
    )
}

fn payment_open(code: &str, currency: &str, min: &str, max: &str, countries: &[&str]) -> String {
    product(
        code,
        currency,
        "payment",
        countries,
        &format!(
            r#""payment": {{"denominations": {{"minimum_value": "{min}", "maximum_value": "{max}"}}}}"#
        ),
    )
}

fn subscription(code: &str, currency: &str, prices: &[(&str, u32)], countries: &[&str]) -> String {
    let plans = prices
        .iter()
        .map(|(price, months)| {
            format!(
                r#"{{"length_unit": "MONTH", "length": {months}, "name": "{months} months", "price": "{price}", "subscription_plan_code": "{code}-{months}M"}}"#
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    product(
        code,
        currency,
        "subscription",
        countries,
        &format!(r#""subscription": {{"subscription_plans": [{plans}]}}"#),
    )
}

fn product(code: &str, currency: &str, kind: &str, countries: &[&str], details: &str) -> String {
    let countries = countries
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"{{"name": "{code}", "code": "{code}", "currency": "{currency}", "state": "LIVE",
            "is_orderable": true, "payout_type": "{kind}", "countries_redeemable_in": [{countries}],
            "discount_multiplier": "0", {details}}}"#
    )
}

/// The products the playground simulator's catalog holds at least.
pub fn products() -> Vec<Product> {
    let items = [
        gift_card_open("AMZ-US", "USD", "1", "2000", &["US"]),
        gift_card_open("AMZ-DE", "EUR", "5", "500", &["DE", "AT"]),
        gift_card_fixed("TESCO-GB", "GBP", &["10", "20", "25", "50", "100"], &["GB"]),
        gift_card_fixed(
            "STEAM-US",
            "USD",
            &["5", "10", "20", "50", "100"],
            &["US", "CA"],
        ),
        subscription(
            "SPOTIFY-US",
            "USD",
            &[("10.99", 1), ("32.97", 3), ("119.88", 12)],
            &["US"],
        ),
        subscription("NETFLIX-GB", "GBP", &[("10.99", 1), ("17.99", 1)], &["GB"]),
        payment_open("VISA-PREPAID-US", "USD", "10", "1000", &["US"]),
        payment_open("PAYPAL-CA", "CAD", "5", "500", &["CA"]),
        gift_card_fixed("UBER-JP", "JPY", &["1000", "3000", "5000"], &["JP"]),
        gift_card_fixed("ZALANDO-FR", "EUR", &["25", "50", "100"], &["FR", "DE"]),
        gift_card_open("RETIRED-US", "USD", "1", "100", &["US"]),
    ];
    let json = format!(r#"{{"catalog": [{}]}}"#, items.join(","));
    let list: ProductList = match serde_json::from_str(&json) {
        Ok(l) => l,
        Err(e) => panic!("test catalog does not parse: {e}\n{json}"),
    };
    let mut products = list.catalog;
    for p in &mut products {
        match p.code.as_str() {
            "AMZ-US" => p.discount_multiplier = "0.02".parse().ok(),
            "RETIRED-US" => p.is_orderable = false,
            _ => {}
        }
    }
    products
}

pub fn catalog() -> CatalogIndex {
    CatalogIndex::new(products())
}
