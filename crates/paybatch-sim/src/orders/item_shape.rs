//! The shape of each item of a `POST /order` body: its face value, distribution method (payout
//! link, e-mail, recipient) and product selection (`SINGLE`, `MULTIPLE`, `TEMPLATE`), and the
//! size of the item list; the items of a `POST /order/estimate` body (face value and products,
//! no distribution method).

use std::collections::BTreeSet;

use rust_decimal::Decimal;
use serde_json::{Map, Value};

use super::shape::Checker;
use super::{ItemsOf, MAX_ESTIMATE_ITEMS, MAX_ITEMS, RequestItem, Selection, at};
use paybatch_api::decimal::parse_decimal_text;
use paybatch_api::models::ExecutionMode;
use paybatch_api::rules::{self, MAX_RECIPIENT_REFERENCE};

impl Checker {
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
        if rules::face_value_problem(fv).is_some() {
            self.add(
                "greater_than_equal",
                at(&loc),
                format!(
                    "Input should be greater than or equal to {}, found {fv}",
                    rules::MIN_FACE_VALUE
                ),
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
            Some(a) if rules::is_valid_email(a) => {
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
                self.recipient_reference(dm, &mut out, i);
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

    fn recipient_reference(
        &mut self,
        from: &Map<String, Value>,
        out: &mut Map<String, Value>,
        i: &str,
    ) {
        let loc = ["items", i, "distribution_method", "recipient_reference"];
        let Some(r) = self.string(from, "recipient_reference", &loc) else {
            return;
        };
        if rules::is_recipient_reference(r) {
            out.insert("recipient_reference".into(), Value::String(r.to_string()));
        } else {
            self.add(
                "string_pattern_mismatch",
                at(&loc),
                format!("At most {MAX_RECIPIENT_REFERENCE} letters, digits and - _ @ ."),
            );
        }
    }

    fn products(&mut self, item: &Map<String, Value>, i: &str) -> Option<Selection> {
        let p = self.object(item, "products", &["items", i, "products"])?;
        let kind = self.string(p, "type", &["items", i, "products", "type"])?;
        match kind {
            "SINGLE" => self.single(p, i),
            "MULTIPLE" => self.multiple(p, i),
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

    /// A `SINGLE` selection: one product code, maybe with a spend-rules template.
    fn single(&mut self, p: &Map<String, Value>, i: &str) -> Option<Selection> {
        let loc = ["items", i, "products", "value"];
        let code = self.string(p, "value", &loc)?;
        if rules::products_problem(&[code]).is_some() {
            self.add(
                "string_too_short",
                at(&loc),
                "String should have at least 1 character",
            );
            return None;
        }
        let spend_rules = match p.get("usage_config") {
            None | Some(Value::Null) => None,
            Some(Value::Object(u)) => Some(self.spend_rules(u, i)?),
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

    /// `usage_config.spend_rules_template_id`: `PSR-` and 26 characters of Crockford's base 32.
    fn spend_rules(&mut self, usage: &Map<String, Value>, i: &str) -> Option<String> {
        let loc = [
            "items",
            i,
            "products",
            "usage_config",
            "spend_rules_template_id",
        ];
        let id = self.optional_string(usage, "spend_rules_template_id", &loc)?;
        if !rules::is_spend_rules_id(&id) {
            self.add(
                "string_pattern_mismatch",
                at(&loc),
                "Expected PSR- and 26 characters of Crockford's base 32",
            );
            return None;
        }
        Some(id)
    }

    /// A `MULTIPLE` selection: at least two distinct product codes.
    fn multiple(&mut self, p: &Map<String, Value>, i: &str) -> Option<Selection> {
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
        let names: Vec<&str> = codes.iter().map(String::as_str).collect();
        if let Some(why) = rules::products_problem(&names) {
            self.add("string_too_short", at(&loc), format!("The selection {why}"));
            return None;
        }
        Some(Selection::Multiple(codes))
    }

    fn item(&mut self, item: &Value, i: usize, of: ItemsOf) -> Option<RequestItem> {
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
        // An estimate's items have no distribution method (`OrderItemPriceRequest`).
        let distribution_method = match of {
            ItemsOf::Order(_) => self.distribution(item, &i),
            ItemsOf::Estimate => Some(Value::Null),
        };
        let products = self.products(item, &i);
        Some(RequestItem {
            face_value: face_value?,
            distribution_method: distribution_method?,
            products: products?,
        })
    }

    pub(super) fn items(&mut self, body: &Map<String, Value>, of: ItemsOf) -> Vec<RequestItem> {
        let max = match of {
            ItemsOf::Order(_) => MAX_ITEMS,
            ItemsOf::Estimate => MAX_ESTIMATE_ITEMS,
        };
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
        } else if n > max {
            self.add(
                "too_long",
                at(&["items"]),
                format!("An order holds at most {max} items, found {n}"),
            );
        } else if of == ItemsOf::Order(ExecutionMode::Sync) && n > 1 {
            self.add(
                "sync_order_size",
                at(&["items"]),
                format!("A sync order (X-Execution-Mode: sync) holds exactly one item, found {n}"),
            );
        }
        items
            .iter()
            .take(max)
            .enumerate()
            .filter_map(|(i, item)| self.item(item, i, of))
            .collect()
    }
}
