//! The catalog endpoints: `GET /product` (filtered, paginated), `GET /product/{product_code}`
//! (with its content resources as links, markdown or HTML), `GET /product/countries` and `GET
//! /product/categories`.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::Shared;
use super::answers::{bad_request, done, internal, json, not_found};
use super::context::enter;
use super::query::{Position, Query, cursor, paginate, pagination, valid_code};
use crate::ApiVersion;
use paybatch_api::models::{Product, ProductList};

/// Page size of the product list when `limit` is absent.
const DEFAULT_PRODUCT_PAGE: u32 = 500;
/// Prefix of the product list's cursors.
pub(super) const PRODUCT_CURSOR: &str = "pc_";

fn render_product(p: &Product, version: ApiVersion) -> Product {
    let mut p = p.clone();
    if version == ApiVersion::V2023 {
        p.categories = None;
    }
    p
}

pub(super) async fn list_products(
    State(sim): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    done(async {
        let ctx = enter(&sim, &headers, "GET /product").await?;
        // `code` is not a parameter of the published list (one product is GET
        // /product/{product_code}): like every parameter the list does not declare, it is ignored.
        let q = Query::parse(
            raw.as_deref(),
            &["is_orderable", "countries_redeemable_in", "categories", "limit", "after", "before"],
        );
        let orderable_only = match q.one("is_orderable")? {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(bad_request(format!("`is_orderable` must be true or false, found `{other}`.")));
            }
        };
        let countries = q.all("countries_redeemable_in");
        if let Some(bad) = countries.iter().find(|c| !valid_code(c, 2)) {
            return Err(bad_request(format!(
                "`countries_redeemable_in` must be an ISO 3166 alpha-2 code (two capital letters), found `{bad}`."
            )));
        }
        let categories = q.all("categories");
        let limit = q.limit(DEFAULT_PRODUCT_PAGE)?;
        let position = q.position(PRODUCT_CURSOR)?;
        let matching: Vec<&Product> = sim
            .catalog
            .products()
            .iter()
            .filter(|p| !orderable_only || p.is_orderable)
            .filter(|p| countries.is_empty() || p.countries_redeemable_in.iter().any(|c| countries.contains(&c.as_str())))
            .filter(|p| {
                categories.is_empty()
                    || p.categories.iter().flatten().any(|c| categories.contains(&c.as_str()))
            })
            .collect();
        let (backwards, at) = match position {
            Position::Start => (false, None),
            Position::After(k) => (false, Some(k)),
            Position::Before(k) => (true, Some(k)),
        };
        let (page, before, after) = paginate(matching, |p| p.code.clone(), at, backwards, limit as usize, |a, b| a < b);
        Ok(json(
            200,
            &ProductList {
                catalog: page.into_iter().map(|p| render_product(p, ctx.version)).collect(),
                pagination: pagination(
                    limit,
                    before.map(|k| cursor(PRODUCT_CURSOR, &k)),
                    after.map(|k| cursor(PRODUCT_CURSOR, &k)),
                ),
            },
        ))
    }
    .await)
}

/// The content resources of a product in the form `content` asks for: `url` (links to markdown,
/// as listed), `md` (the markdown itself) or `html` (rendered).
fn content_in(product: &Product, form: &str) -> Option<Value> {
    let base = format!(
        "https://playground.example/catalog/{}",
        product.code.to_ascii_lowercase()
    );
    let locale = [
        product
            .gift_card
            .as_ref()
            .and_then(|g| g.content_resources.as_ref()),
        product
            .subscription
            .as_ref()
            .and_then(|g| g.content_resources.as_ref()),
        product
            .payment
            .as_ref()
            .and_then(|g| g.content_resources.as_ref()),
    ]
    .into_iter()
    .flatten()
    .find_map(|c| c.locale.clone())
    .unwrap_or_else(|| "en_US".into());
    let parts = [
        (
            "description",
            format!("{} gift card from the simulated catalog.", product.name),
        ),
        (
            "disclaimer",
            "Simulated product: nothing is real.".to_string(),
        ),
        ("refund_policy", "No refunds once issued.".to_string()),
        (
            "reissuance_policy",
            "Reissued on request to support.".to_string(),
        ),
        ("terms_buyer", "Terms for the buyer.".to_string()),
        ("terms_consumer", "Terms for the recipient.".to_string()),
        (
            "redemption_instructions",
            format!("Open the link and spend it at {}.", product.name),
        ),
    ];
    let mut out = serde_json::Map::new();
    for (name, text) in parts {
        let (key, value) = match form {
            "url" => (
                format!("{name}_markdown_url"),
                format!("{base}/{}.md", name.replace('_', "-")),
            ),
            "md" => (format!("{name}_md"), text),
            "html" => (format!("{name}_html"), format!("<p>{text}</p>")),
            _ => return None,
        };
        out.insert(key, Value::String(value));
    }
    out.insert("locale".into(), Value::String(locale));
    Some(Value::Object(out))
}

pub(super) async fn get_product(
    State(sim): State<Shared>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> Response {
    done(
        async {
            let ctx = enter(&sim, &headers, "GET /product/{product_code}").await?;
            let q = Query::parse(raw.as_deref(), &["content"]);
            let form = q.one("content")?.unwrap_or("url");
            if !matches!(form, "url" | "md" | "html") {
                return Err(bad_request(format!(
                    "`content` must be url, md or html, found `{form}`."
                )));
            }
            let Ok(Path(code)) = path else {
                return Err(not_found("The product was not found."));
            };
            let Some(product) = sim.catalog.get(&code) else {
                return Err(not_found(format!("The product `{code}` was not found.")));
            };
            let product = render_product(product, ctx.version);
            let mut value = serde_json::to_value(&product).map_err(internal)?;
            if form != "url"
                && let Some(content) = content_in(&product, form)
                && let Some(details) = value.get_mut(product.payout_type.as_str())
                && details.get("content_resources").is_some()
            {
                details["content_resources"] = content;
            }
            Ok(json(200, &value))
        }
        .await,
    )
}

pub(super) async fn list_countries(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(async {
        let ctx = enter(&sim, &headers, "GET /product/countries").await?;
        if ctx.version == ApiVersion::V2023 {
            return Err(not_found("GET /product/countries does not exist in version 2023-07-27 (added in 2024-02-05)."));
        }
        Ok(json(200, &json!({"countries": sim.catalog.countries()})))
    }
    .await)
}

pub(super) async fn list_categories(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(
        async {
            enter(&sim, &headers, "GET /product/categories").await?;
            let categories: Vec<Value> = sim
                .catalog
                .categories()
                .into_iter()
                .map(|code| json!({ "code": code }))
                .collect();
            Ok(json(200, &json!({ "categories": categories })))
        }
        .await,
    )
}
