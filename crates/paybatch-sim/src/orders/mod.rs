//! Orders: reading, validating and pricing a `POST /order` body, and the answers built from a
//! stored order (full, partial and list shapes, in either dated version).
//!
//! A body is checked in the order the service's answers suggest: its shape first (`422
//! validation_error`, every problem with its location), then the payment method (`400
//! payment_method_unavailable`), the products (`400 product_validation_error`), the currencies
//! (`400 currency_mismatch`), and the face values against the products (`422` again). The
//! balance is checked when the order is stored (`400 insufficient_funds`).
//!
//! [`shape`] and [`item_shape`] read the body's shape, [`rules`] checks it against the account
//! and the catalog, [`pricing`] prices it, [`answers`] builds the order shapes answered later.

mod answers;
mod item_shape;
mod pricing;
mod rules;
mod shape;

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;

use super::catalog::Catalog;
use paybatch_api::models::{ExecutionMode, PaymentMethod, ProductSelection};

pub(crate) use answers::{ListEntry, estimate_answer, full_order, list_entry, partial_order};

pub use paybatch_api::rules::{
    MAX_DESCRIPTION, MAX_ESTIMATE_ITEMS, MAX_ITEMS, MAX_METADATA_KEY, MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
};

/// One problem of a 422 answer, as the published `ValidationErrorItem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Problem {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
    /// Path parts of the field, e.g. `["items", "0", "face_value"]`.
    pub location: Vec<String>,
}

fn at(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_string()).collect()
}

/// Whose items are read: an order's (sent in this mode) or an estimate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemsOf {
    Order(ExecutionMode),
    Estimate,
}

/// Why an order is refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// `422 validation_error` with these details.
    Invalid(Vec<Problem>),
    /// A `400` of this type.
    BadRequest { kind: &'static str, message: String },
}

/// The product selection of one item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Selection {
    Single {
        code: String,
        /// A spend-rules template named in `usage_config`.
        spend_rules: Option<String>,
    },
    Multiple(Vec<String>),
    /// A payout selection template.
    Template(String),
}

/// One item of a request whose shape is valid.
#[derive(Debug, Clone)]
pub(crate) struct RequestItem {
    pub face_value: Decimal,
    /// The distribution method as it will be answered (only its known fields).
    pub distribution_method: Value,
    pub products: Selection,
}

/// A `POST /order` body whose shape is valid.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub payment_method: PaymentMethod,
    pub items: Vec<RequestItem>,
    pub description: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A validated, priced order.
#[derive(Debug)]
pub(crate) struct Priced {
    pub payment_method: PaymentMethod,
    /// The payment currency.
    pub currency: String,
    pub total_price: Decimal,
    pub total_discount: Decimal,
    /// `transaction_detail`, as answered.
    pub transaction_detail: Value,
    pub items: Vec<PricedItem>,
}

#[derive(Debug)]
pub(crate) struct PricedItem {
    pub distribution_method: Value,
    pub products: ProductSelection,
    pub face_value: Decimal,
    pub price: Decimal,
    pub currency: String,
    pub discount_multiplier: Decimal,
    pub expiry_months: i64,
}

/// What the account accepts beyond the published contract.
pub(crate) struct Rules<'a> {
    pub mode: ExecutionMode,
    pub catalog: &'a Catalog,
    pub cards_accepted: bool,
    pub cards: &'a [String],
}

/// The problems of a `POST /order` body's shape (async), as `(location, message)`: the rules of
/// the fields alone, without the account or the catalog. For the tests of the validator's
/// parity with the simulator.
pub fn shape_problems(body: &Value) -> Vec<(String, String)> {
    match shape::read_request(body, ExecutionMode::Async) {
        Ok(_) => Vec::new(),
        Err(problems) => problems
            .into_iter()
            .map(|p| (p.location.join("."), p.message))
            .collect(),
    }
}

/// Reads a `POST /order` body and checks it: its shape, then against the account and the
/// catalog. The request and its prices, or why it is refused.
pub(crate) fn check_order(body: &Value, rules: &Rules<'_>) -> Result<(Request, Priced), Refused> {
    let request = shape::read_request(body, rules.mode).map_err(Refused::Invalid)?;
    let chosen = rules::check_request(&request, rules)?;
    let priced = pricing::price(&request, &chosen)?;
    Ok((request, priced))
}

/// Reads a `POST /order/estimate` body and prices it as `POST /order` would the same items: the
/// same checks against the account and the catalog, the same prices, rates and rounding. One
/// item is priced as a sync order (embedded FX allowed), several as an async order (every
/// product in the payment currency). Every refusal is a `422` (the only refusal of a body the
/// published estimate answers), with where the problem is.
pub(crate) fn estimate_order(
    body: &Value,
    catalog: &Catalog,
    cards: &[String],
) -> Result<Priced, Vec<Problem>> {
    let request = shape::read_estimate(body)?;
    let rules = Rules {
        mode: if request.items.len() == 1 {
            ExecutionMode::Sync
        } else {
            ExecutionMode::Async
        },
        catalog,
        cards_accepted: false,
        cards,
    };
    let refused = |r: Refused| match r {
        Refused::Invalid(problems) => problems,
        Refused::BadRequest { kind, message } => {
            let location = match kind {
                "currency_mismatch" => at(&["payment_method", "currency"]),
                _ => at(&["items"]),
            };
            vec![Problem {
                kind,
                message,
                location,
            }]
        }
    };
    let chosen = rules::check_request(&request, &rules).map_err(refused)?;
    pricing::price(&request, &chosen).map_err(refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn item(code: &str, fv: &str) -> Value {
        json!({
            "face_value": Value::Number(serde_json::Number::from_str(fv).unwrap()),
            "distribution_method": {"type": "PAYOUT_LINK"},
            "products": {"type": "SINGLE", "value": code},
        })
    }

    fn order(items: Vec<Value>, currency: &str) -> Value {
        json!({
            "payment_method": {"type": "ACCOUNT_BALANCE", "currency": currency},
            "items": items,
        })
    }

    fn rules(catalog: &Catalog, mode: ExecutionMode) -> Rules<'_> {
        Rules {
            mode,
            catalog,
            cards_accepted: false,
            cards: &[],
        }
    }

    fn run(body: &Value, mode: ExecutionMode) -> Result<Priced, Refused> {
        let c = Catalog::new();
        check_order(body, &rules(&c, mode)).map(|(_, priced)| priced)
    }

    fn locations(r: Result<Priced, Refused>) -> Vec<Vec<String>> {
        match r {
            Err(Refused::Invalid(problems)) => problems.into_iter().map(|p| p.location).collect(),
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    fn refused_kind(r: Result<Priced, Refused>) -> &'static str {
        match r {
            Err(Refused::BadRequest { kind, .. }) => kind,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn prices_with_discount_and_embedded_fx() {
        let p = run(
            &order(vec![item("AMZ-US", "10")], "USD"),
            ExecutionMode::Async,
        )
        .unwrap();
        assert_eq!(p.items[0].price.to_string(), "9.80");
        assert_eq!(p.items[0].face_value.to_string(), "10.00");
        assert_eq!(p.total_price.to_string(), "9.80");
        assert_eq!(p.total_discount.to_string(), "0.20");
        assert_eq!(p.transaction_detail, json!({"USD": {"value": "9.80"}}));

        let p = run(
            &order(vec![item("UBER-JP", "3000")], "USD"),
            ExecutionMode::Sync,
        )
        .unwrap();
        assert_eq!(p.items[0].price.to_string(), "2910");
        assert_eq!(p.items[0].currency, "JPY");
        assert_eq!(p.total_price.to_string(), "19.50"); // 2910 / 149.253731 = 19.497
        assert_eq!(p.transaction_detail["JPY"]["value"], "2910");
        assert_eq!(p.transaction_detail["JPY"]["fx"]["rate_symbol"], "USDJPY");
        assert_eq!(p.transaction_detail["JPY"]["fx"]["rate"], "149.253731");
        assert_eq!(p.transaction_detail["JPY"]["fx"]["fee"]["currency"], "USD");
    }

    #[test]
    fn other_currencies_only_in_a_one_item_sync_order() {
        let jpy = order(vec![item("UBER-JP", "3000")], "USD");
        assert_eq!(
            refused_kind(run(&jpy, ExecutionMode::Async)),
            "currency_mismatch"
        );
        let two = order(vec![item("AMZ-US", "10"), item("AMZ-DE", "10")], "USD");
        assert_eq!(
            refused_kind(run(&two, ExecutionMode::Async)),
            "currency_mismatch"
        );
        let mixed = order(
            vec![
                json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                        "products": {"type": "MULTIPLE", "values": ["AMZ-US", "AMZ-DE"]}}),
            ],
            "USD",
        );
        assert_eq!(
            refused_kind(run(&mixed, ExecutionMode::Sync)),
            "currency_mismatch"
        );
    }

    #[test]
    fn shape_rules_and_their_locations() {
        let loc = |parts: &[&str]| at(parts);
        let cases: Vec<(Value, ExecutionMode, Vec<String>)> = vec![
            (order(vec![], "USD"), ExecutionMode::Async, loc(&["items"])),
            (
                order(vec![item("AMZ-US", "10"), item("AMZ-US", "10")], "USD"),
                ExecutionMode::Sync,
                loc(&["items"]),
            ),
            (
                order(vec![item("AMZ-US", "0")], "USD"),
                ExecutionMode::Async,
                loc(&["items", "0", "face_value"]),
            ),
            (
                order(vec![item("AMZ-US", "10")], "JPY"),
                ExecutionMode::Async,
                loc(&["payment_method", "currency"]),
            ),
            (
                {
                    let mut o = order(vec![item("AMZ-US", "10")], "USD");
                    o["metadata"] = json!({"k": 1});
                    o
                },
                ExecutionMode::Async,
                loc(&["metadata", "k"]),
            ),
            (
                {
                    let mut o = order(vec![item("AMZ-US", "10")], "USD");
                    o["metadata"] = json!({"k": "v".repeat(201)});
                    o
                },
                ExecutionMode::Async,
                loc(&["metadata", "k"]),
            ),
            (
                {
                    let mut o = order(vec![item("AMZ-US", "10")], "USD");
                    o["metadata"] = json!({"k".repeat(41): "v"});
                    o
                },
                ExecutionMode::Async,
                loc(&["metadata", &"k".repeat(41)]),
            ),
            (
                {
                    let mut o = order(vec![item("AMZ-US", "10")], "USD");
                    let pairs: Map<String, Value> =
                        (0..21).map(|i| (format!("k{i}"), json!("v"))).collect();
                    o["metadata"] = Value::Object(pairs);
                    o
                },
                ExecutionMode::Async,
                loc(&["metadata"]),
            ),
            (
                order(
                    vec![
                        json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                                "products": {"type": "MULTIPLE", "values": ["AMZ-US"]}}),
                    ],
                    "USD",
                ),
                ExecutionMode::Async,
                loc(&["items", "0", "products", "values"]),
            ),
            (
                order(
                    vec![
                        json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                                "products": {"type": "MULTIPLE", "values": ["AMZ-US", "AMZ-US"]}}),
                    ],
                    "USD",
                ),
                ExecutionMode::Async,
                loc(&["items", "0", "products", "values"]),
            ),
            (
                order(
                    vec![
                        json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                                "products": {"type": "MULTIPLE", "values": ["AMZ-US", "TARGET-US"]}}),
                        json!({"face_value": "10.50", "distribution_method": {"type": "PAYOUT_LINK"},
                                "products": {"type": "MULTIPLE", "values": ["AMZ-US", "TARGET-US"]}}),
                    ],
                    "USD",
                ),
                ExecutionMode::Async,
                loc(&["items", "1", "face_value"]),
            ),
            (
                order(vec![item("TESCO-GB", "15")], "GBP"),
                ExecutionMode::Async,
                loc(&["items", "0", "face_value"]),
            ),
            (
                order(vec![item("AMZ-US", "10.001")], "USD"),
                ExecutionMode::Async,
                loc(&["items", "0", "face_value"]),
            ),
            (
                order(vec![item("SPOTIFY-US", "11")], "USD"),
                ExecutionMode::Async,
                loc(&["items", "0", "face_value"]),
            ),
        ];
        for (body, mode, expected) in cases {
            let got = locations(run(&body, mode));
            assert!(
                got.contains(&expected),
                "{expected:?} in {got:?} for {body}"
            );
        }
    }

    #[test]
    fn product_and_payment_refusals() {
        let unknown = order(vec![item("NOPE", "10")], "USD");
        assert_eq!(
            refused_kind(run(&unknown, ExecutionMode::Async)),
            "product_validation_error"
        );
        let retired = order(vec![item("RETIRED-US", "10")], "USD");
        assert_eq!(
            refused_kind(run(&retired, ExecutionMode::Async)),
            "product_validation_error"
        );
        let template = order(
            vec![
                json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                        "products": {"type": "TEMPLATE", "template_id": "T-1"}}),
            ],
            "USD",
        );
        assert_eq!(
            refused_kind(run(&template, ExecutionMode::Async)),
            "product_validation_error"
        );
        let card = json!({"payment_method": {"type": "CARD", "card_id": "c", "currency": "USD"},
                          "items": [item("AMZ-US", "10")]});
        assert_eq!(
            refused_kind(run(&card, ExecutionMode::Async)),
            "payment_method_unavailable"
        );
        // A degraded product can still be ordered.
        let degraded = order(vec![item("IKEA-FR", "20")], "EUR");
        assert!(run(&degraded, ExecutionMode::Async).is_ok());
        // A recipient is a distribution method of the published contract.
        let recipient = order(
            vec![json!({"face_value": 10,
                        "distribution_method": {"type": "RECIPIENT", "recipient_reference": "emp-7",
                                                "email_address": "ann@example.com"},
                        "products": {"type": "SINGLE", "value": "AMZ-US"}})],
            "USD",
        );
        let p = run(&recipient, ExecutionMode::Async).unwrap();
        assert_eq!(
            p.items[0].distribution_method["recipient_reference"],
            "emp-7"
        );
        assert_eq!(p.items[0].discount_multiplier, dec("0.02"));
    }

    /// The largest amounts are refused or priced, never a panic (a MULTIPLE selection has no
    /// maximum; embedded FX divides by the rate).
    #[test]
    fn huge_amounts_never_panic() {
        let huge = "79228162514264337593543950335";
        for (currency, mode) in [("USD", ExecutionMode::Async), ("CAD", ExecutionMode::Sync)] {
            let body = order(
                vec![
                    json!({"face_value": Value::Number(serde_json::Number::from_str(huge).unwrap()),
                            "distribution_method": {"type": "PAYOUT_LINK"},
                            "products": {"type": "MULTIPLE", "values": ["AMZ-US", "TARGET-US"]}}),
                ],
                currency,
            );
            let _ = run(&body, mode);
        }
    }
}
