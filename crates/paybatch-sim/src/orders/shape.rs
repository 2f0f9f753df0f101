//! The shape of a `POST /order` body (its `422 validation_error` problems, each with its
//! location): the [`Checker`] that collects them with its field readers, the payment method,
//! `description` and `metadata`; the items are read in [`super::item_shape`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    ItemsOf, MAX_DESCRIPTION, MAX_METADATA_KEY, MAX_METADATA_PAIRS, MAX_METADATA_VALUE, Problem,
    Request, at,
};
use paybatch_api::models::{ExecutionMode, PaymentMethod, PaymentMethodType};
use paybatch_api::rules::{PAYMENT_CURRENCIES, is_currency_code, is_payment_currency};

/// Collects the problems of one body.
pub(super) struct Checker {
    pub(super) problems: Vec<Problem>,
}

impl Checker {
    pub(super) fn add(
        &mut self,
        kind: &'static str,
        location: Vec<String>,
        message: impl Into<String>,
    ) {
        self.problems.push(Problem {
            kind,
            message: message.into(),
            location,
        });
    }

    /// A required object field: `None` (and a problem) when missing or not an object.
    pub(super) fn object<'v>(
        &mut self,
        parent: &'v Map<String, Value>,
        name: &str,
        loc: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        match parent.get(name) {
            None | Some(Value::Null) => {
                self.add("missing", at(loc), "Field required");
                None
            }
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                self.add("invalid_type", at(loc), "Input should be an object");
                None
            }
        }
    }

    /// A required string field.
    pub(super) fn string<'v>(
        &mut self,
        parent: &'v Map<String, Value>,
        name: &str,
        loc: &[&str],
    ) -> Option<&'v str> {
        match parent.get(name) {
            None | Some(Value::Null) => {
                self.add("missing", at(loc), "Field required");
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.add("invalid_type", at(loc), "Input should be a string");
                None
            }
        }
    }

    /// An optional string field (absent or null is `None`).
    pub(super) fn optional_string(
        &mut self,
        parent: &Map<String, Value>,
        name: &str,
        loc: &[&str],
    ) -> Option<String> {
        match parent.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.add("invalid_type", at(loc), "Input should be a string");
                None
            }
        }
    }

    fn payment_method(&mut self, body: &Map<String, Value>) -> Option<PaymentMethod> {
        let pm = self.object(body, "payment_method", &["payment_method"])?;
        let kind = match self.string(pm, "type", &["payment_method", "type"]) {
            Some("ACCOUNT_BALANCE") => Some(PaymentMethodType::AccountBalance),
            Some("CARD") => Some(PaymentMethodType::Card),
            Some(other) => {
                self.add(
                    "enum",
                    at(&["payment_method", "type"]),
                    format!("Input should be 'ACCOUNT_BALANCE', found `{other}`"),
                );
                None
            }
            None => None,
        };
        let loc = ["payment_method", "currency"];
        let currency = match self.string(pm, "currency", &loc) {
            Some(c) if !is_currency_code(c) => {
                self.add(
                    "string_pattern_mismatch",
                    at(&loc),
                    format!("`{c}` is not an ISO 4217 currency code (three capital letters)"),
                );
                None
            }
            Some(c) if !is_payment_currency(c) => {
                self.add(
                    "currency_not_supported",
                    at(&loc),
                    format!(
                        "`{c}` is not a balance currency: one of {}",
                        PAYMENT_CURRENCIES.join(", ")
                    ),
                );
                None
            }
            Some(c) => Some(c.to_string()),
            None => None,
        };
        let card_id = self.optional_string(pm, "card_id", &["payment_method", "card_id"]);
        Some(PaymentMethod {
            kind: kind?,
            card_id,
            currency: Some(currency?),
        })
    }

    fn description(&mut self, body: &Map<String, Value>) -> Option<String> {
        let d = self.optional_string(body, "description", &["description"])?;
        let n = d.chars().count();
        if n > MAX_DESCRIPTION {
            self.add(
                "string_too_long",
                at(&["description"]),
                format!("String should have at most {MAX_DESCRIPTION} characters, found {n}"),
            );
        }
        Some(d)
    }

    fn metadata(&mut self, body: &Map<String, Value>) -> Option<BTreeMap<String, String>> {
        let map = match body.get("metadata") {
            None | Some(Value::Null) => return None,
            Some(Value::Object(m)) => m,
            Some(_) => {
                self.add(
                    "invalid_type",
                    at(&["metadata"]),
                    "Input should be an object of strings",
                );
                return None;
            }
        };
        if map.len() > MAX_METADATA_PAIRS {
            self.add(
                "too_many_properties",
                at(&["metadata"]),
                format!(
                    "At most {MAX_METADATA_PAIRS} key/value pairs, found {}",
                    map.len()
                ),
            );
        }
        let mut out = BTreeMap::new();
        for (key, value) in map {
            let loc = at(&["metadata", key]);
            let n = key.chars().count();
            if n > MAX_METADATA_KEY {
                self.add(
                    "key_too_long",
                    loc.clone(),
                    format!("Keys have at most {MAX_METADATA_KEY} characters, found {n}"),
                );
            }
            match value {
                Value::String(v) => {
                    let n = v.chars().count();
                    if n > MAX_METADATA_VALUE {
                        self.add(
                            "string_too_long",
                            loc,
                            format!(
                                "Values have at most {MAX_METADATA_VALUE} characters, found {n}"
                            ),
                        );
                    }
                    out.insert(key.clone(), v.clone());
                }
                _ => self.add("invalid_type", loc, "Input should be a string"),
            }
        }
        Some(out)
    }
}

/// Reads a `POST /order` body and checks its shape: every problem, with its location.
pub(super) fn read_request(body: &Value, mode: ExecutionMode) -> Result<Request, Vec<Problem>> {
    let mut c = Checker {
        problems: Vec::new(),
    };
    let Value::Object(body) = body else {
        c.add(
            "invalid_type",
            Vec::new(),
            "The order should be a JSON object",
        );
        return Err(c.problems);
    };
    let payment_method = c.payment_method(body);
    let description = c.description(body);
    let metadata = c.metadata(body);
    let items = c.items(body, ItemsOf::Order(mode));
    match payment_method {
        Some(payment_method) if c.problems.is_empty() => Ok(Request {
            payment_method,
            items,
            description,
            metadata,
        }),
        _ => Err(c.problems),
    }
}

/// Reads a `POST /order/estimate` body (`OrderPriceRequest`) and checks its shape: an
/// `ACCOUNT_BALANCE` payment method with its currency, and 1 to
/// [`super::MAX_ESTIMATE_ITEMS`] items of a face value and products. Every problem, with its
/// location.
pub(super) fn read_estimate(body: &Value) -> Result<Request, Vec<Problem>> {
    let mut c = Checker {
        problems: Vec::new(),
    };
    let Value::Object(body) = body else {
        c.add(
            "invalid_type",
            Vec::new(),
            "The estimate request should be a JSON object",
        );
        return Err(c.problems);
    };
    let payment_method = c.payment_method(body);
    if let Some(pm) = &payment_method
        && pm.kind != PaymentMethodType::AccountBalance
    {
        c.add(
            "enum",
            at(&["payment_method", "type"]),
            "Input should be 'ACCOUNT_BALANCE': an estimate prices an order paid from a balance",
        );
    }
    let items = c.items(body, ItemsOf::Estimate);
    match payment_method {
        Some(payment_method) if c.problems.is_empty() => Ok(Request {
            payment_method,
            items,
            description: None,
            metadata: None,
        }),
        _ => Err(c.problems),
    }
}
