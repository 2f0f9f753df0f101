//! Minimal answers: a share of the simulator's answers (`sim serve --minimal-answers SHARE`)
//! holds only what the published contract (OpenAPI 2024-02-05) requires. Every optional field of
//! the published schemas is left out, or sent `null` where the schema allows it (`description`
//! and `metadata` of an order, a product's customer service phone number and web site), as a
//! service keeping to the contract and no further may answer. The answer stays valid against
//! the published OpenAPI; only what it says beyond the contract is gone.
//!
//! What is left out, per answer:
//! - a finished order (`GET /order/{id}`, the 200 of a sync `POST /order`): `completed_at`,
//!   `transaction_detail`, `message`, `payment_method.currency`; `description` and `metadata`
//!   (null or left out); of each item `currency`, `discount_multiplier`, `payout.expiry_date`,
//!   `distribution_method.template_id` and `products.usage_config`;
//! - an entry of the order list: `completed_at`, `metadata`; `description` (null or left out);
//! - an estimate (`POST /order/estimate`): `transaction_detail`, `payment_method.currency`;
//! - a product (the list's `catalog` and `GET /product/{code}`): everything but the required
//!   `name`, `code`, `currency`, `state`, `is_orderable`, `payout_type`, `categories`,
//!   `countries_redeemable_in`, `customer_service` (whose fields are null or left out) and
//!   `discount_multiplier`: its `availability` and its `gift_card`, `subscription` or `payment`
//!   details (denominations, plans) are gone;
//! - an error: `help` (a validation error keeps its required `details`).
//!
//! Kept although the schemas leave them optional, because leaving them out would say something
//! else: the page cursors (`after` and `before` absent mean "no other page"), and the lists and
//! balances themselves (`catalog`, `countries`, `categories`, `balance`), which are what those
//! answers are for. A processing order (`{id, status, message}`) and an accepted one (`{id,
//! status}`) hold only required fields already. Answers of version 2023-07-27 are left as
//! they are.
//!
//! Which answers are minimal is drawn from a random source of its own, seeded with the run's
//! seed: switching minimal answers on does not change the other draws of a seed.

use serde_json::{Map, Value};

/// Which published answer a body is, as far as minimal answers change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A finished order in the full shape (or a processing one, which has no optional field).
    Order,
    /// The order list.
    OrderList,
    /// The answer of `POST /order/estimate`.
    Estimate,
    /// The product list.
    ProductList,
    /// One product.
    Product,
    /// An error `{type, message, help}` (with `details` for a validation error).
    Error,
}

/// The shape of the answer `status` to `method` `path`, when minimal answers change it.
pub(crate) fn shape_of(method: &str, path: &str, status: u16) -> Option<Shape> {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    if status >= 400 {
        return parts
            .first()
            .is_some_and(|p| *p == "v2")
            .then_some(Shape::Error);
    }
    if status != 200 {
        return None;
    }
    match (method, parts.as_slice()) {
        ("POST", ["v2", "order"]) => Some(Shape::Order),
        ("GET", ["v2", "order"]) => Some(Shape::OrderList),
        ("POST", ["v2", "order", "estimate"]) => Some(Shape::Estimate),
        ("GET", ["v2", "order", _]) => Some(Shape::Order),
        ("GET", ["v2", "product"]) => Some(Shape::ProductList),
        ("GET", ["v2", "product", "countries" | "categories"]) => None,
        ("GET", ["v2", "product", _]) => Some(Shape::Product),
        _ => None,
    }
}

/// The required fields of a product.
const PRODUCT_REQUIRED: [&str; 10] = [
    "name",
    "code",
    "currency",
    "state",
    "is_orderable",
    "payout_type",
    "categories",
    "countries_redeemable_in",
    "customer_service",
    "discount_multiplier",
];

/// Leaves out of `answer` (of `shape`) every optional field; `nulls`: the optional fields the
/// schema lets be null are sent `null` rather than left out.
pub(crate) fn strip(shape: Shape, answer: &mut Value, nulls: bool) {
    let Some(m) = answer.as_object_mut() else {
        return;
    };
    match shape {
        Shape::Order => order(m, nulls),
        Shape::OrderList => {
            for entry in list_mut(m, "items") {
                // A processing order's entry holds only required fields.
                if entry.contains_key("created_at") {
                    remove(entry, &["completed_at", "metadata"]);
                    nullable(entry, "description", nulls);
                }
            }
        }
        Shape::Estimate => {
            remove(m, &["transaction_detail"]);
            payment_method(m);
        }
        Shape::ProductList => {
            for p in list_mut(m, "catalog") {
                product(p, nulls);
            }
        }
        Shape::Product => product(m, nulls),
        Shape::Error => remove(m, &["help"]),
    }
}

/// A finished order: see the module's documentation.
fn order(m: &mut Map<String, Value>, nulls: bool) {
    if !m.contains_key("items") {
        return;
    }
    remove(m, &["completed_at", "transaction_detail", "message"]);
    nullable(m, "description", nulls);
    nullable(m, "metadata", nulls);
    payment_method(m);
    for item in list_mut(m, "items") {
        remove(item, &["currency", "discount_multiplier"]);
        for (field, optional) in [
            ("payout", "expiry_date"),
            ("distribution_method", "template_id"),
            ("products", "usage_config"),
        ] {
            if let Some(inner) = item.get_mut(field).and_then(Value::as_object_mut) {
                inner.remove(optional);
            }
        }
    }
}

/// A product: its required fields only, its customer service's fields null or left out.
fn product(p: &mut Map<String, Value>, nulls: bool) {
    p.retain(|k, _| PRODUCT_REQUIRED.contains(&k.as_str()));
    if let Some(service) = p.get_mut("customer_service").and_then(Value::as_object_mut) {
        nullable(service, "phone_number", nulls);
        nullable(service, "website_url", nulls);
    }
}

/// The optional `currency` of an answer's `payment_method`.
fn payment_method(m: &mut Map<String, Value>) {
    if let Some(pm) = m.get_mut("payment_method").and_then(Value::as_object_mut) {
        pm.remove("currency");
    }
}

fn remove(m: &mut Map<String, Value>, fields: &[&str]) {
    for f in fields {
        m.remove(*f);
    }
}

/// A field the schema lets be null: `null` with `nulls`, else left out.
fn nullable(m: &mut Map<String, Value>, field: &str, nulls: bool) {
    if nulls {
        m.insert(field.to_string(), Value::Null);
    } else {
        m.remove(field);
    }
}

/// The objects of the list `field` of `m`.
fn list_mut<'a>(
    m: &'a mut Map<String, Value>,
    field: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_told_apart_by_method_path_and_status() {
        assert_eq!(shape_of("GET", "/v2/order/O-1", 200), Some(Shape::Order));
        assert_eq!(shape_of("POST", "/v2/order", 200), Some(Shape::Order));
        assert_eq!(shape_of("POST", "/v2/order", 202), None);
        assert_eq!(shape_of("GET", "/v2/order", 200), Some(Shape::OrderList));
        assert_eq!(
            shape_of("POST", "/v2/order/estimate", 200),
            Some(Shape::Estimate)
        );
        assert_eq!(
            shape_of("GET", "/v2/product", 200),
            Some(Shape::ProductList)
        );
        assert_eq!(
            shape_of("GET", "/v2/product/AMZ-US", 200),
            Some(Shape::Product)
        );
        assert_eq!(shape_of("GET", "/v2/product/countries", 200), None);
        assert_eq!(shape_of("GET", "/v2/order/O-1", 404), Some(Shape::Error));
        assert_eq!(shape_of("GET", "/_sim/orders", 200), None);
        assert_eq!(shape_of("GET", "/_sim/orders", 500), None);
    }

    /// A finished order keeps its required fields only, with `description` and `metadata`
    /// null or left out.
    #[test]
    fn a_minimal_order_holds_what_is_required() {
        let full = json!({
            "id": "O-1", "status": "COMPLETED", "created_at": "t", "completed_at": "t",
            "description": "d", "metadata": {"k": "v"},
            "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
            "currency": "USD", "total_price": "9.80", "total_discount": "0.20",
            "transaction_detail": {"USD": {"value": "9.80"}},
            "items": [{"id": "E-1", "distribution_method": {"type": "PAYOUT_LINK"},
                "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "10",
                "price": "9.80", "currency": "USD", "discount_multiplier": "0.02",
                "payout": {"status": "ACTIVE", "status_updated_at": "t", "url": "u",
                           "expiry_date": "t"}}]
        });
        let mut left_out = full.clone();
        strip(Shape::Order, &mut left_out, false);
        assert_eq!(
            left_out,
            json!({
                "id": "O-1", "status": "COMPLETED", "created_at": "t",
                "payment_method": {"type": "ACCOUNT_BALANCE"},
                "currency": "USD", "total_price": "9.80", "total_discount": "0.20",
                "items": [{"id": "E-1", "distribution_method": {"type": "PAYOUT_LINK"},
                    "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "10",
                    "price": "9.80",
                    "payout": {"status": "ACTIVE", "status_updated_at": "t", "url": "u"}}]
            })
        );
        let mut nulls = full;
        strip(Shape::Order, &mut nulls, true);
        assert_eq!(nulls["description"], Value::Null);
        assert_eq!(nulls["metadata"], Value::Null);
        assert!(nulls.get("transaction_detail").is_none());
    }

    #[test]
    fn products_and_errors_keep_their_required_fields() {
        let mut p = json!({"name": "n", "code": "AMZ-US", "currency": "USD", "state": "LIVE",
            "is_orderable": true, "payout_type": "gift_card", "categories": [],
            "countries_redeemable_in": ["US"], "discount_multiplier": "0.02",
            "customer_service": {"phone_number": "1", "website_url": "w"},
            "availability": "stocked", "gift_card": {"denominations": {"type": "open"}}});
        strip(Shape::Product, &mut p, false);
        assert!(p.get("gift_card").is_none() && p.get("availability").is_none());
        assert_eq!(p["customer_service"], json!({}));
        assert_eq!(p.as_object().map(Map::len), Some(10));
        let mut e = json!({"type": "validation_error", "message": "m", "help": "h",
            "details": []});
        strip(Shape::Error, &mut e, true);
        assert_eq!(
            e,
            json!({"type": "validation_error", "message": "m", "details": []})
        );
    }
}
