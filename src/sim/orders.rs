//! Orders: reading, validating and pricing a `POST /order` body, and the answers built from a
//! stored order (full, partial and list shapes, in either dated version).
//!
//! A body is checked in the order the service's answers suggest: its shape first (`422
//! validation_error`, every problem with its location), then the payment method (`400
//! payment_method_unavailable`), the products (`400 product_validation_error`), the currencies
//! (`400 currency_mismatch`), and the face values against the products (`422` again). The
//! balance is checked when the order is stored (`400 insufficient_funds`).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Months};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::ApiVersion;
use super::catalog::{Catalog, PAYMENT_CURRENCIES, fx_rate, minor_units, to_minor};
use super::store::OrderRow;
use crate::api::decimal::parse_decimal_text;
use crate::api::models::{
    ExecutionMode, OrderStatus, PaymentMethod, PaymentMethodType, PayoutType, Product,
    ProductSelection,
};

/// Most items one order may hold.
pub const MAX_ITEMS: usize = 200;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION: usize = 128;
/// Most `metadata` pairs.
pub const MAX_METADATA_PAIRS: usize = 20;
/// Longest `metadata` key, in characters.
pub const MAX_METADATA_KEY: usize = 40;
/// Longest `metadata` value, in characters.
pub const MAX_METADATA_VALUE: usize = 200;
/// Longest `recipient_reference`.
const MAX_RECIPIENT_REFERENCE: usize = 255;

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

/// A plain address `local@domain.tld`: ASCII, no quoting, no IP literal. Stricter than the
/// e-mail format of JSON Schema, so an address the simulator accepts is one every reader accepts.
pub(crate) fn valid_email(address: &str) -> bool {
    if address.len() > 254 {
        return false;
    }
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c);
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(atext));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.chars().all(|c| c.is_ascii_alphabetic()));
    local_ok && domain_ok
}

fn capitals(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_uppercase())
}

/// Collects the problems of one body.
struct Checker {
    problems: Vec<Problem>,
}

impl Checker {
    fn add(&mut self, kind: &'static str, location: Vec<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            kind,
            message: message.into(),
            location,
        });
    }

    /// A required object field: `None` (and a problem) when missing or not an object.
    fn object<'v>(
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
    fn string<'v>(
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
    fn optional_string(
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
            Some(c) if !capitals(c, 3) => {
                self.add(
                    "string_pattern_mismatch",
                    at(&loc),
                    format!("`{c}` is not an ISO 4217 currency code (three capital letters)"),
                );
                None
            }
            Some(c) if !PAYMENT_CURRENCIES.contains(&c) => {
                self.add(
                    "currency_not_supported",
                    at(&loc),
                    format!("`{c}` is not a balance currency: one of EUR, GBP, USD, CAD"),
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

    fn face_value(&mut self, item: &Map<String, Value>, i: &str) -> Option<Decimal> {
        let loc = ["items", i, "face_value"];
        let text = match item.get("face_value") {
            None | Some(Value::Null) => {
                self.add("missing", at(&loc), "Field required");
                return None;
            }
            Some(Value::Number(n)) => n.to_string(),
            // Read exactly too, as older clients sent it.
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                self.add("invalid_type", at(&loc), "Input should be a number");
                return None;
            }
        };
        let Some(fv) = parse_decimal_text(&text) else {
            self.add(
                "invalid_type",
                at(&loc),
                format!("`{text}` is not a number the service can read"),
            );
            return None;
        };
        if fv < Decimal::new(1, 2) {
            self.add(
                "greater_than_equal",
                at(&loc),
                format!("Input should be greater than or equal to 0.01, found {fv}"),
            );
            return None;
        }
        Some(fv)
    }

    fn template_id(&mut self, from: &Map<String, Value>, out: &mut Map<String, Value>, i: &str) {
        if let Some(t) = self.optional_string(
            from,
            "template_id",
            &["items", i, "distribution_method", "template_id"],
        ) {
            out.insert("template_id".into(), Value::String(t));
        }
    }

    fn email(&mut self, from: &Map<String, Value>, out: &mut Map<String, Value>, i: &str) {
        let loc = ["items", i, "distribution_method", "email_address"];
        match self.string(from, "email_address", &loc) {
            Some(a) if valid_email(a) => {
                out.insert("email_address".into(), Value::String(a.to_string()));
            }
            Some(a) => self.add(
                "value_error",
                at(&loc),
                format!("`{a}` is not a valid email address"),
            ),
            None => {}
        }
    }

    fn distribution(&mut self, item: &Map<String, Value>, i: &str) -> Option<Value> {
        let dm = self.object(
            item,
            "distribution_method",
            &["items", i, "distribution_method"],
        )?;
        let kind = self.string(dm, "type", &["items", i, "distribution_method", "type"])?;
        let before = self.problems.len();
        let mut out = Map::new();
        out.insert("type".into(), Value::String(kind.to_string()));
        match kind {
            // A payout link ignores an address given with it.
            "PAYOUT_LINK" => {}
            "EMAIL" => self.email(dm, &mut out, i),
            "RECIPIENT" => {
                let loc = ["items", i, "distribution_method", "recipient_reference"];
                if let Some(r) = self.string(dm, "recipient_reference", &loc) {
                    let ok = !r.is_empty()
                        && r.len() <= MAX_RECIPIENT_REFERENCE
                        && r.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_@.".contains(c));
                    if ok {
                        out.insert("recipient_reference".into(), Value::String(r.to_string()));
                    } else {
                        self.add(
                            "string_pattern_mismatch",
                            at(&loc),
                            format!(
                                "At most {MAX_RECIPIENT_REFERENCE} letters, digits and - _ @ ."
                            ),
                        );
                    }
                }
                self.email(dm, &mut out, i);
            }
            other => {
                self.add(
                    "enum",
                    at(&["items", i, "distribution_method", "type"]),
                    format!(
                        "Input should be 'EMAIL', 'PAYOUT_LINK' or 'RECIPIENT', found `{other}`"
                    ),
                );
                return None;
            }
        }
        self.template_id(dm, &mut out, i);
        (self.problems.len() == before).then_some(Value::Object(out))
    }

    fn products(&mut self, item: &Map<String, Value>, i: &str) -> Option<Selection> {
        let p = self.object(item, "products", &["items", i, "products"])?;
        let kind = self.string(p, "type", &["items", i, "products", "type"])?;
        match kind {
            "SINGLE" => {
                let loc = ["items", i, "products", "value"];
                let code = self.string(p, "value", &loc)?;
                if code.is_empty() {
                    self.add(
                        "string_too_short",
                        at(&loc),
                        "String should have at least 1 character",
                    );
                    return None;
                }
                let spend_rules = match p.get("usage_config") {
                    None | Some(Value::Null) => None,
                    Some(Value::Object(u)) => {
                        let loc = [
                            "items",
                            i,
                            "products",
                            "usage_config",
                            "spend_rules_template_id",
                        ];
                        let id = self.optional_string(u, "spend_rules_template_id", &loc)?;
                        let ok = id.len() == 30
                            && id.starts_with("PSR-")
                            && id[4..].chars().all(|c| {
                                c.is_ascii_digit() || "ABCDEFGHJKMNPQRSTVWXYZ".contains(c)
                            });
                        if !ok {
                            self.add(
                                "string_pattern_mismatch",
                                at(&loc),
                                "Expected PSR- and 26 characters of Crockford's base 32",
                            );
                            return None;
                        }
                        Some(id)
                    }
                    Some(_) => {
                        self.add(
                            "invalid_type",
                            at(&["items", i, "products", "usage_config"]),
                            "Input should be an object",
                        );
                        return None;
                    }
                };
                Some(Selection::Single {
                    code: code.to_string(),
                    spend_rules,
                })
            }
            "MULTIPLE" => {
                let loc = ["items", i, "products", "values"];
                let values = match p.get("values") {
                    None | Some(Value::Null) => {
                        self.add("missing", at(&loc), "Field required");
                        return None;
                    }
                    Some(Value::Array(vs)) => vs,
                    Some(_) => {
                        self.add(
                            "invalid_type",
                            at(&loc),
                            "Input should be a list of product codes",
                        );
                        return None;
                    }
                };
                let mut codes = Vec::new();
                for (j, v) in values.iter().enumerate() {
                    match v.as_str() {
                        Some(c) => codes.push(c.to_string()),
                        None => {
                            let j = j.to_string();
                            self.add(
                                "invalid_type",
                                at(&["items", i, "products", "values", &j]),
                                "Input should be a string",
                            );
                            return None;
                        }
                    }
                }
                let distinct: BTreeSet<&String> = codes.iter().collect();
                if distinct.len() != codes.len() {
                    self.add("unique_items", at(&loc), "Product codes should be distinct");
                    return None;
                }
                if codes.len() < 2 {
                    self.add(
                        "too_short",
                        at(&loc),
                        format!(
                            "MULTIPLE needs at least 2 distinct products, found {}",
                            codes.len()
                        ),
                    );
                    return None;
                }
                Some(Selection::Multiple(codes))
            }
            "TEMPLATE" => {
                let id = self.string(p, "template_id", &["items", i, "products", "template_id"])?;
                Some(Selection::Template(id.to_string()))
            }
            other => {
                self.add(
                    "enum",
                    at(&["items", i, "products", "type"]),
                    format!("Input should be 'SINGLE', 'MULTIPLE' or 'TEMPLATE', found `{other}`"),
                );
                None
            }
        }
    }

    fn item(&mut self, item: &Value, i: usize) -> Option<RequestItem> {
        let i = i.to_string();
        let Value::Object(item) = item else {
            self.add(
                "invalid_type",
                at(&["items", &i]),
                "Input should be an object",
            );
            return None;
        };
        let face_value = self.face_value(item, &i);
        let distribution_method = self.distribution(item, &i);
        let products = self.products(item, &i);
        Some(RequestItem {
            face_value: face_value?,
            distribution_method: distribution_method?,
            products: products?,
        })
    }

    fn items(&mut self, body: &Map<String, Value>, mode: ExecutionMode) -> Vec<RequestItem> {
        let items = match body.get("items") {
            None | Some(Value::Null) => {
                self.add("missing", at(&["items"]), "Field required");
                return Vec::new();
            }
            Some(Value::Array(items)) => items,
            Some(_) => {
                self.add("invalid_type", at(&["items"]), "Input should be a list");
                return Vec::new();
            }
        };
        let n = items.len();
        if n == 0 {
            self.add(
                "too_short",
                at(&["items"]),
                "An order holds at least one item",
            );
        } else if n > MAX_ITEMS {
            self.add(
                "too_long",
                at(&["items"]),
                format!("An order holds at most {MAX_ITEMS} items, found {n}"),
            );
        } else if mode == ExecutionMode::Sync && n > 1 {
            self.add(
                "sync_order_size",
                at(&["items"]),
                format!("A sync order (X-Execution-Mode: sync) holds exactly one item, found {n}"),
            );
        }
        items
            .iter()
            .take(MAX_ITEMS)
            .enumerate()
            .filter_map(|(i, item)| self.item(item, i))
            .collect()
    }
}

/// Reads a `POST /order` body and checks its shape: every problem, with its location.
pub(crate) fn read(body: &Value, mode: ExecutionMode) -> Result<Request, Vec<Problem>> {
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
    let items = c.items(body, mode);
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

/// The product selection as stored and answered.
fn selection(s: &Selection) -> ProductSelection {
    match s {
        Selection::Single { code, .. } => ProductSelection::of(std::slice::from_ref(code)),
        Selection::Multiple(codes) => ProductSelection::of(codes),
        // Refused before anything is stored.
        Selection::Template(_) => ProductSelection::of(&[]),
    }
}

fn bad(kind: &'static str, message: impl Into<String>) -> Refused {
    Refused::BadRequest {
        kind,
        message: message.into(),
    }
}

/// Checks a request whose shape is valid against the account and the catalog, and prices it.
pub(crate) fn decide(request: &Request, rules: &Rules<'_>) -> Result<Priced, Refused> {
    let pm = &request.payment_method;
    let currency = pm.currency.clone().unwrap_or_default();
    // Payment method.
    if pm.kind == PaymentMethodType::Card {
        if !rules.cards_accepted {
            return Err(bad(
                "payment_method_unavailable",
                "The requested payment method is not available.",
            ));
        }
        let loc = at(&["payment_method", "card_id"]);
        match pm.card_id.as_deref() {
            Some(id) if rules.cards.iter().any(|c| c == id) => {}
            Some(id) => {
                return Err(Refused::Invalid(vec![Problem {
                    kind: "value_error",
                    message: format!("unknown card `{id}`"),
                    location: loc,
                }]));
            }
            None => {
                return Err(Refused::Invalid(vec![Problem {
                    kind: "missing",
                    message: "required when payment_method.type is CARD".into(),
                    location: loc,
                }]));
            }
        }
    }

    // Products: known and orderable now.
    let mut refused: Vec<String> = Vec::new();
    let mut chosen: Vec<Vec<&Product>> = Vec::with_capacity(request.items.len());
    for item in &request.items {
        let codes: Vec<&String> = match &item.products {
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
        };
        let mut products = Vec::new();
        for code in codes {
            match rules.catalog.get(code) {
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

    // Currencies: every product in the payment currency, except embedded FX (one item, sync).
    let fx_allowed = rules.mode == ExecutionMode::Sync && request.items.len() == 1;
    for products in &chosen {
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

    // Face values.
    let mut problems = Vec::new();
    for (i, (item, products)) in request.items.iter().zip(&chosen).enumerate() {
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
    if !problems.is_empty() {
        return Err(Refused::Invalid(problems));
    }

    // Prices. With several products the recipient chooses; the item is priced with the smallest
    // discount among them, so the account is never charged less than the payout it buys.
    let mut items = Vec::with_capacity(request.items.len());
    for (item, products) in request.items.iter().zip(&chosen) {
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

    let mut total_price = Decimal::ZERO;
    let mut total_discount = Decimal::ZERO;
    let mut transaction_detail = Map::new();
    for item in &items {
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
        // Embedded FX: one item. The rate is how many units of the product's currency one unit
        // of the payment currency buys (`rate_symbol` PAYPROD); no fee in the playground.
        let Some(rate) = fx_rate(&currency, &item.currency).filter(|r| !r.is_zero()) else {
            return Err(bad(
                "currency_mismatch",
                format!(
                    "No exchange rate from {currency} to {}: pay in {}.",
                    item.currency, item.currency
                ),
            ));
        };
        let (Some(price), Some(discount)) =
            (item.price.checked_div(rate), discount.checked_div(rate))
        else {
            return Err(too_large(&item.face_value));
        };
        total_price = to_minor(price, &currency);
        total_discount = to_minor(discount, &currency);
        transaction_detail.insert(
            item.currency.clone(),
            json!({
                "value": item.price.to_string(),
                "fx": {
                    "rate": rate.normalize().to_string(),
                    "rate_symbol": format!("{currency}{}", item.currency),
                    "fee": {"value": "0.00", "currency": currency},
                }
            }),
        );
    }
    let total_price = to_minor(total_price, &currency);
    let total_discount = to_minor(total_discount, &currency);
    if transaction_detail.is_empty() {
        transaction_detail.insert(currency.clone(), json!({"value": total_price.to_string()}));
    }
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
        total_price,
        total_discount,
        currency,
        transaction_detail: Value::Object(transaction_detail),
        items,
    })
}

fn too_large(fv: &Decimal) -> Refused {
    Refused::Invalid(vec![Problem {
        kind: "value_error",
        message: format!("{fv}: the order total is too large"),
        location: at(&["items"]),
    }])
}

fn expiry_date(completed_at: &str, months: i64) -> Option<String> {
    if months <= 0 {
        return None;
    }
    let at = DateTime::parse_from_rfc3339(completed_at).ok()?;
    let until = at.checked_add_months(Months::new(u32::try_from(months).ok()?))?;
    Some(until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

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
/// A failed order's items carry no payout, and the order a `message`.
pub(crate) fn full_order(o: &OrderRow, version: ApiVersion) -> Value {
    let completed = o.status == OrderStatus::Completed;
    let done_at = o
        .completed_at
        .clone()
        .unwrap_or_else(|| o.created_at.clone());
    let items: Vec<Value> = o
        .items
        .iter()
        .map(|it| {
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
                    let mut payout = Map::new();
                    payout.insert("status".into(), Value::String("ACTIVE".into()));
                    payout.insert("status_updated_at".into(), Value::String(done_at.clone()));
                    payout.insert("url".into(), Value::String(it.payout_url.clone()));
                    if let Some(until) = expiry_date(&done_at, it.expiry_months) {
                        payout.insert("expiry_date".into(), Value::String(until));
                    }
                    m.insert("payout".into(), Value::Object(payout));
                }
            }
            Value::Object(m)
        })
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
/// basic details and its `metadata` (`{}` when it has none).
pub(crate) fn list_entry(o: &OrderRow, with_metadata: bool) -> Value {
    if !with_metadata {
        if o.status == OrderStatus::Processing {
            return partial_order(o);
        }
        return Value::Object(basic(o));
    }
    let mut m = basic(o);
    m.insert(
        "metadata".into(),
        serde_json::to_value(o.metadata.clone().unwrap_or_default()).unwrap_or(Value::Null),
    );
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let request = read(body, mode).map_err(Refused::Invalid)?;
        decide(&request, &rules(&c, mode))
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

    #[test]
    fn email_addresses() {
        assert!(valid_email("a@b.example"));
        assert!(valid_email("first.last+tag@sub.example.com"));
        assert!(!valid_email("a@b"));
        assert!(!valid_email("@b.example"));
        assert!(!valid_email("a b@c.example"));
        assert!(!valid_email("a@@c.example"));
        assert!(!valid_email("a@c..example"));
        assert!(!valid_email("a.@c.example"));
        assert!(!valid_email("a@-c.example"));
        assert!(!valid_email("é@c.example"));
    }
}
