//! The HTTP endpoints of the simulator: the service's interface under `/v2` and the ground-truth
//! endpoints under `/_sim`.
//!
//! Every `/v2` request passes, in order: latency, settling of due orders, authentication
//! (`X-Api-Key`), version (`X-Api-Version`). `POST /order` then passes the rate limit, the
//! injected faults (429 bursts, 5xx), the idempotency layer, and only then validation and
//! creation. Answers are JSON; errors are `{type, message, help}` (`help` left out where the
//! published error table has none, `details` added for 422), except the 429 answer, which is
//! `{"error": "rate exceeded"}` as published.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::orders::{self, Refused, Rules};
use super::server::DropConnection;
use super::store::{Answer, BalanceUse, Created, ItemRow, OrderRow, Reservation, iso_from_ms};
use super::{ApiVersion, Sim, fingerprint, now_ms};
use crate::api::models::{
    AcceptedOrder, Balance, Cursors, ExecutionMode, OrderStatus, Page, Pagination,
    PaymentMethodType, Ping, Product, ProductList,
};

type Shared = Arc<Sim>;
/// An early (error) answer: handlers use `?` on it.
type Answered<T> = Result<T, Refusal>;

/// Longest idempotency key accepted.
const MAX_IDEMPOTENCY_KEY: usize = 255;
/// Page size of the order list when `limit` is absent.
pub(crate) const DEFAULT_ORDER_PAGE: u32 = 100;
/// Page size of the product list when `limit` is absent.
pub(crate) const DEFAULT_PRODUCT_PAGE: u32 = 500;
const MAX_PAGE_SIZE: u32 = 500;
const PRODUCT_CURSOR: &str = "pc_";
const ORDER_CURSOR: &str = "oc_";

pub(crate) fn router(sim: Shared) -> Router {
    Router::new()
        .route("/v2/ping", get(ping))
        .route("/v2/product", get(list_products))
        .route("/v2/product/countries", get(list_countries))
        .route("/v2/product/categories", get(list_categories))
        .route("/v2/product/{product_code}", get(get_product))
        .route("/v2/order", get(list_orders).post(create_order))
        .route("/v2/order/estimate", get(get_order).post(estimate))
        .route("/v2/order/{id}", get(get_order))
        .route("/v2/order/{id}/links", get(order_links))
        .route("/v2/balance", get(balance))
        .route("/_sim/orders", get(sim_orders))
        .route("/_sim/stats", get(sim_stats))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(sim)
}

// ---------------------------------------------------------------------------------------------
// Answers

fn json_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    // Our own plain data always serialises; the fallback only keeps this total.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

fn raw(status: u16, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn json<T: Serialize>(status: u16, value: &T) -> Response {
    raw(status, json_bytes(value))
}

/// The `help` of an error type; `None` where the published error table gives none (the field is
/// then left out).
fn help_for(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "unauthorized" => "Send the API key in the X-Api-Key header.",
        "invalid_api_key" => {
            "Check that the key was copied completely, that it belongs to this environment \
             (playground keys start with xx, production keys with wg) and that it was not revoked. \
             GET /ping checks a key."
        }
        "invalid_version" => "Send X-Api-Version 2024-02-05, or leave the header out.",
        "version_removed" => {
            "The requested API version has been removed: send X-Api-Version 2024-02-05."
        }
        "not_found" => "Check the resource identifier and try again.",
        "pagination_error" => {
            "Use a limit from 1 to 500 and at most one of after and before, with a cursor taken \
             from a previous answer."
        }
        "idempotency_validation_error" => {
            "An idempotency key stands for one request body: send the original body again with \
             this key, or use a new key for a new order."
        }
        "idempotency_in_progress" => {
            "Wait a few seconds, then send the same request again with the same idempotency key."
        }
        "insufficient_funds" => {
            "Add funds to the balance of this currency, then send the order again with a new \
             idempotency key."
        }
        "currency_mismatch" => {
            "When the payment_method type is ACCOUNT_BALANCE, the currency must be the currency \
             of every product of the order."
        }
        "ordering_restricted" => {
            "The account has reached its spending limit; ordering resumes once the limit is \
             lifted."
        }
        "internal_server_error" | "service_unavailable" | "timeout" => {
            "Retry the same request with the same idempotency key and the same body."
        }
        "method_not_allowed" => "Check the HTTP method of the endpoint.",
        "validation_error"
        | "product_validation_error"
        | "payment_method_unavailable"
        | "invalid_execution_mode" => return None,
        _ => "Correct the request and send it again.",
    })
}

fn error_bytes(kind: &str, message: impl Into<String>, details: Option<Value>) -> Vec<u8> {
    let mut body = serde_json::Map::new();
    body.insert("type".into(), Value::String(kind.to_string()));
    body.insert("message".into(), Value::String(message.into()));
    if let Some(help) = help_for(kind) {
        body.insert("help".into(), Value::String(help.to_string()));
    }
    if let Some(details) = details {
        body.insert("details".into(), details);
    }
    json_bytes(&Value::Object(body))
}

/// An error answer, built before it becomes a response (small, so handlers can use `?`).
#[derive(Debug)]
struct Refusal {
    status: u16,
    body: Vec<u8>,
    retry_after: Option<u32>,
}

impl Refusal {
    fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    fn into_response(self) -> Response {
        let mut response = raw(self.status, self.body);
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn error(status: u16, kind: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        body: error_bytes(kind, message, None),
        retry_after: None,
    }
}

fn internal(e: impl std::fmt::Display) -> Refusal {
    tracing::error!("simulator state: {e}");
    error(
        500,
        "internal_server_error",
        "The simulator could not read or write its state.",
    )
}

fn bad_request(message: impl Into<String>) -> Refusal {
    error(400, "bad_request", message)
}

fn not_found(message: impl Into<String>) -> Refusal {
    error(404, "not_found", message)
}

fn pagination_error(message: impl Into<String>) -> Refusal {
    error(400, "pagination_error", message)
}

/// The 429 answer: the published `RateExceededResponse`, not the error shape.
fn too_many_requests(sim: &Sim) -> Refusal {
    sim.stat(|s| s.answered_429 += 1);
    Refusal {
        status: 429,
        body: json_bytes(&json!({"error": "rate exceeded"})),
        retry_after: Some(5),
    }
}

fn injected_server_error(sim: &Sim) -> Refusal {
    sim.stat(|s| s.injected_5xx += 1);
    if sim.chance.server_error_status() == 500 {
        error(
            500,
            "internal_server_error",
            "The service failed to handle the request (simulated fault).",
        )
    } else {
        error(
            503,
            "service_unavailable",
            "The service is unavailable (simulated fault).",
        )
        .retry_after(1)
    }
}

fn done(result: Answered<Response>) -> Response {
    result.unwrap_or_else(Refusal::into_response)
}

// ---------------------------------------------------------------------------------------------
// Request context: authentication and version

struct Ctx {
    fp: String,
    version: ApiVersion,
}

async fn pause(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<Result<&'a str, ()>> {
    headers.get(name).map(|v| v.to_str().map_err(|_| ()))
}

/// Counts the request, settles due orders, authenticates and reads the version.
fn begin(sim: &Sim, headers: &HeaderMap, endpoint: &str) -> Answered<Ctx> {
    sim.stat(|s| *s.requests.entry(endpoint.to_string()).or_default() += 1);
    sim.settle().map_err(internal)?;
    let key = match header_text(headers, "x-api-key") {
        None => {
            return Err(error(
                401,
                "unauthorized",
                "The X-Api-Key header is missing.",
            ));
        }
        Some(Err(())) => {
            return Err(error(
                401,
                "invalid_api_key",
                "The API key holds characters that are not valid in a key.",
            ));
        }
        Some(Ok(k)) if k.trim().is_empty() => {
            return Err(error(401, "unauthorized", "The X-Api-Key header is empty."));
        }
        Some(Ok(k)) => k,
    };
    if key.starts_with("wg") {
        return Err(error(
            401,
            "invalid_api_key",
            "A production API key (prefix wg) was used against the playground; use a playground key (prefix xx).",
        ));
    }
    if !sim.config.keys.iter().any(|k| k == key) {
        return Err(error(
            401,
            "invalid_api_key",
            "The API key is not valid (unknown or revoked).",
        ));
    }
    let version = match header_text(headers, "x-api-version") {
        None => ApiVersion::V2024,
        Some(Ok("2024-02-05")) => ApiVersion::V2024,
        Some(Ok("2023-07-27")) if sim.config.version_2023 => ApiVersion::V2023,
        Some(Ok("2023-07-27")) => {
            return Err(error(
                410,
                "version_removed",
                "API version 2023-07-27 is no longer supported and has been removed (since 2025-11-14).",
            ));
        }
        Some(Ok(other)) => {
            return Err(error(
                400,
                "invalid_version",
                format!("`{other}` is not an API version: use 2024-02-05."),
            ));
        }
        Some(Err(())) => {
            return Err(error(
                400,
                "invalid_version",
                "The X-Api-Version header is not readable text.",
            ));
        }
    };
    Ok(Ctx {
        fp: fingerprint(key),
        version,
    })
}

/// Latency, then [`begin`].
async fn enter(sim: &Sim, headers: &HeaderMap, endpoint: &str) -> Answered<Ctx> {
    pause(sim.chance.latency(&sim.config.faults)).await;
    begin(sim, headers, endpoint)
}

// ---------------------------------------------------------------------------------------------
// Query strings and pagination

struct Query(Vec<(String, String)>);

impl Query {
    /// The parameters of a query string that the endpoint knows (`allowed`); others are
    /// ignored, as parameters the published contract does not declare.
    fn parse(raw: Option<&str>, allowed: &[&str]) -> Query {
        Query(
            url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .filter(|(k, _)| allowed.contains(&k.as_ref()))
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn one(&self, name: &str) -> Answered<Option<&str>> {
        match self.all(name).as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(bad_request(format!(
                "The query parameter `{name}` may be given once."
            ))),
        }
    }

    fn limit(&self, default: u32) -> Answered<u32> {
        match self.all("limit").as_slice() {
            [] => Ok(default),
            [text] => match text.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE_SIZE).contains(&n) => Ok(n),
                _ => Err(pagination_error(format!(
                    "`limit` must be an integer from 1 to {MAX_PAGE_SIZE}, found `{text}`."
                ))),
            },
            _ => Err(pagination_error(
                "The query parameter `limit` may be given once.",
            )),
        }
    }

    /// `after` / `before`, decoded with the cursor prefix of the listing.
    fn position(&self, prefix: &str) -> Answered<Position> {
        let after = self.all("after");
        let before = self.all("before");
        if !after.is_empty() && !before.is_empty() {
            return Err(pagination_error(
                "`after` and `before` cannot be used in the same request.",
            ));
        }
        if after.len() > 1 || before.len() > 1 {
            return Err(pagination_error("A cursor may be given once."));
        }
        let decode = |cursor: &str| -> Answered<String> {
            cursor
                .strip_prefix(prefix)
                .and_then(|h| hex::decode(h).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    pagination_error(format!("`{cursor}` is not a cursor of this listing."))
                })
        };
        match (after.first(), before.first()) {
            (Some(a), _) => Ok(Position::After(decode(a)?)),
            (_, Some(b)) => Ok(Position::Before(decode(b)?)),
            _ => Ok(Position::Start),
        }
    }
}

fn cursor(prefix: &str, key: &str) -> String {
    format!("{prefix}{}", hex::encode(key.as_bytes()))
}

enum Position {
    Start,
    After(String),
    Before(String),
}

/// One page of `all` (in display order, where `precedes(a, b)` says that key `a` comes before
/// key `b`): the items, and the keys for the `before` and `after` cursors when there is more.
fn paginate<T, K>(
    all: Vec<T>,
    key: impl Fn(&T) -> K,
    position: Option<K>,
    backwards: bool,
    limit: usize,
    precedes: impl Fn(&K, &K) -> bool,
) -> (Vec<T>, Option<K>, Option<K>) {
    let len = all.len();
    let (start, end) = match (position, backwards) {
        (None, _) => (0, limit.min(len)),
        (Some(k), false) => {
            let s = all
                .iter()
                .position(|t| precedes(&k, &key(t)))
                .unwrap_or(len);
            (s, (s + limit).min(len))
        }
        (Some(k), true) => {
            let e = all
                .iter()
                .position(|t| !precedes(&key(t), &k))
                .unwrap_or(len);
            (e.saturating_sub(limit), e)
        }
    };
    let before = (start > 0 && start < end).then(|| key(&all[start]));
    let after = (end < len && start < end).then(|| key(&all[end - 1]));
    let items = all.into_iter().skip(start).take(end - start).collect();
    (items, before, after)
}

fn pagination(limit: u32, before: Option<String>, after: Option<String>) -> Pagination {
    Pagination {
        cursors: Cursors { after, before },
        page: Page { limit },
    }
}

// ---------------------------------------------------------------------------------------------
// Ping, catalog, balance

async fn ping(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(
        async {
            enter(&sim, &headers, "GET /ping").await?;
            Ok(json(
                200,
                &Ping {
                    message: "pong".into(),
                },
            ))
        }
        .await,
    )
}

fn render_product(p: &Product, version: ApiVersion) -> Product {
    let mut p = p.clone();
    if version == ApiVersion::V2023 {
        p.categories = None;
    }
    p
}

fn valid_code(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_uppercase())
}

async fn list_products(
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

async fn get_product(
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

async fn list_countries(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(async {
        let ctx = enter(&sim, &headers, "GET /product/countries").await?;
        if ctx.version == ApiVersion::V2023 {
            return Err(not_found("GET /product/countries does not exist in version 2023-07-27 (added in 2024-02-05)."));
        }
        Ok(json(200, &json!({"countries": sim.catalog.countries()})))
    }
    .await)
}

async fn list_categories(State(sim): State<Shared>, headers: HeaderMap) -> Response {
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

async fn balance(
    State(sim): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    done(async {
        enter(&sim, &headers, "GET /balance").await?;
        let q = Query::parse(raw.as_deref(), &["currency"]);
        match q.one("currency")? {
            Some(currency) => {
                if !valid_code(currency, 3) {
                    return Err(bad_request(format!(
                        "`currency` must be an ISO 4217 code (three capital letters), found `{currency}`."
                    )));
                }
                let amount = sim.store.balance(currency).map_err(internal)?;
                Ok(json(200, &Balance { balance: amount, currency: currency.to_string() }))
            }
            None => {
                let all: Vec<Balance> = sim
                    .store
                    .balances()
                    .map_err(internal)?
                    .into_iter()
                    .filter(|(_, amount)| *amount > rust_decimal::Decimal::ZERO)
                    .map(|(currency, balance)| Balance { balance, currency })
                    .collect();
                Ok(json(200, &all))
            }
        }
    }
    .await)
}

// ---------------------------------------------------------------------------------------------
// Reading orders

async fn list_orders(
    State(sim): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    done(
        async {
            let ctx = enter(&sim, &headers, "GET /order").await?;
            let q = Query::parse(raw.as_deref(), &["limit", "after", "before"]);
            let limit = q.limit(DEFAULT_ORDER_PAGE)?;
            let (backwards, at) = match q.position(ORDER_CURSOR)? {
                Position::Start => (false, None),
                Position::After(k) => (false, Some(k)),
                Position::Before(k) => (true, Some(k)),
            };
            let at = match at {
                None => None,
                Some(k) => Some(k.parse::<i64>().map_err(|_| {
                    pagination_error("The cursor is not a cursor of this listing.")
                })?),
            };
            let all = sim.store.orders_of(&ctx.fp).map_err(internal)?;
            // Newest first: a larger sequence number comes first.
            let (page, before, after) =
                paginate(all, |o| o.seq, at, backwards, limit as usize, |a, b| a > b);
            let items: Vec<Value> = page
                .iter()
                .map(|o| orders::list_entry(o, sim.config.list_metadata))
                .collect();
            let pagination = pagination(
                limit,
                before.map(|k| cursor(ORDER_CURSOR, &k.to_string())),
                after.map(|k| cursor(ORDER_CURSOR, &k.to_string())),
            );
            Ok(json(
                200,
                &json!({"items": items, "pagination": pagination}),
            ))
        }
        .await,
    )
}

async fn get_order(
    State(sim): State<Shared>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    done(
        async {
            let ctx = enter(&sim, &headers, "GET /order/{id}").await?;
            if sim.chance.roll(sim.config.faults.error_rate) {
                return Err(injected_server_error(&sim));
            }
            let Ok(Path(id)) = path else {
                return Err(not_found("The order was not found."));
            };
            match sim.store.order(&ctx.fp, &id).map_err(internal)? {
                None => Err(not_found(format!("The order `{id}` was not found."))),
                Some(o) if o.status == OrderStatus::Processing => {
                    Ok(json(200, &orders::partial_order(&o)))
                }
                Some(o) => Ok(json(200, &orders::full_order(&o, ctx.version))),
            }
        }
        .await,
    )
}

async fn order_links(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(async {
        enter(&sim, &headers, "GET /order/{id}/links").await?;
        Err(not_found(
            "GET /order/{id}/links was removed in 2023-07-27: the payout links are on the items of GET /order/{id}.",
        ))
    }
    .await)
}

/// `POST /order/estimate` is not offered by the playground the simulator stands for.
async fn estimate(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(
        async {
            enter(&sim, &headers, "POST /order/estimate").await?;
            Err(not_found(
                "POST /order/estimate is not available in the playground: estimate in production, or price the order from the catalog.",
            ))
        }
        .await,
    )
}

// ---------------------------------------------------------------------------------------------
// Creating orders

/// Frees a reserved idempotency key however the handler ends (answer, error or cancellation).
struct Reserved {
    sim: Shared,
    fp: String,
    key: String,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.sim.store.release(&self.fp, &self.key);
    }
}

async fn create_order(
    State(sim): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let delay = sim.chance.latency(&sim.config.faults);
    match admit(&sim, &headers, body) {
        Err(early) => {
            pause(delay).await;
            early.into_response()
        }
        Ok(admitted) => {
            let Admitted {
                ctx,
                key,
                mode,
                body,
                sha,
            } = admitted;
            match sim.store.reserve(&ctx.fp, &key, &sha, now_ms()) {
                Err(e) => {
                    pause(delay).await;
                    internal(e).into_response()
                }
                Ok(Reservation::InProgress) => {
                    sim.stat(|s| s.in_progress += 1);
                    pause(delay).await;
                    // 400 as in the published error table (the guide's 102 is not a final
                    // answer in HTTP/1.1).
                    error(
                        400,
                        "idempotency_in_progress",
                        "A request with this idempotency key is still being processed.",
                    )
                    .retry_after(1)
                    .into_response()
                }
                Ok(Reservation::Mismatch) => {
                    pause(delay).await;
                    error(
                        400,
                        "idempotency_validation_error",
                        "This idempotency key was already used with a different request body.",
                    )
                    .into_response()
                }
                Ok(Reservation::Replay { status, body }) => {
                    sim.stat(|s| s.replayed += 1);
                    pause(delay).await;
                    raw(status, body)
                }
                Ok(Reservation::Reserved) => {
                    let guard = Reserved {
                        sim: sim.clone(),
                        fp: ctx.fp.clone(),
                        key: key.clone(),
                    };
                    // The work runs on its own task: a client that goes away (killed, timed
                    // out) does not cancel it, as it would not at a real service. The order is
                    // created and its answer kept under the key for the client's next attempt.
                    let work = {
                        let sim = sim.clone();
                        tokio::spawn(async move {
                            pause(delay + sim.config.faults.in_progress_delay).await;
                            let outcome = process(&sim, &ctx, &key, mode, &body, &sha);
                            drop(guard);
                            outcome
                        })
                    };
                    let outcome = match work.await {
                        Ok(outcome) => outcome,
                        Err(e) => return internal(e).into_response(),
                    };
                    match outcome {
                        Err(e) => internal(e).into_response(),
                        Ok((status, bytes, created)) => {
                            let faults = &sim.config.faults;
                            if created && sim.chance.roll(faults.drop_rate) {
                                sim.stat(|s| s.dropped += 1);
                                let mut response = raw(status, bytes);
                                response.extensions_mut().insert(DropConnection);
                                response
                            } else if sim.chance.roll(faults.timeout_rate) {
                                // The work is done and its answer kept under the key; this
                                // request only sees the gateway give up.
                                sim.stat(|s| s.timeouts += 1);
                                error(504, "timeout", "The request timed out.").into_response()
                            } else {
                                raw(status, bytes)
                            }
                        }
                    }
                }
            }
        }
    }
}

struct Admitted {
    ctx: Ctx,
    key: String,
    mode: ExecutionMode,
    body: Bytes,
    sha: String,
}

/// Everything before the idempotency layer: authentication, version, rate limit, injected
/// faults, and the headers of order creation.
fn admit(
    sim: &Shared,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answered<Admitted> {
    let ctx = begin(sim, headers, "POST /order")?;
    if !sim.limiter.admit(&ctx.fp, Instant::now()) {
        return Err(too_many_requests(sim));
    }
    let faults = &sim.config.faults;
    if sim
        .burst
        .hit(&sim.chance, faults.burst_429_rate, faults.burst_429_len)
    {
        return Err(too_many_requests(sim));
    }
    if sim.chance.roll(faults.error_rate) {
        return Err(injected_server_error(sim));
    }
    let key = match header_text(headers, "x-idempotency-key") {
        None => {
            return Err(bad_request(
                "The X-Idempotency-Key header is required to create an order.",
            ));
        }
        Some(Err(())) => {
            return Err(bad_request(
                "The X-Idempotency-Key header is not readable text.",
            ));
        }
        Some(Ok(k)) if k.trim().is_empty() => {
            return Err(bad_request("The X-Idempotency-Key header is empty."));
        }
        Some(Ok(k)) if k.len() > MAX_IDEMPOTENCY_KEY => {
            return Err(bad_request(format!(
                "The X-Idempotency-Key header is longer than {MAX_IDEMPOTENCY_KEY} characters."
            )));
        }
        Some(Ok(k)) => k.to_string(),
    };
    let mode = match header_text(headers, "x-execution-mode") {
        None => ExecutionMode::Async,
        Some(Ok("async")) => ExecutionMode::Async,
        Some(Ok("sync")) => ExecutionMode::Sync,
        Some(Ok(other)) => {
            return Err(error(
                400,
                "invalid_execution_mode",
                format!("Invalid execution mode `{other}`: X-Execution-Mode is sync or async."),
            ));
        }
        Some(Err(())) => {
            return Err(error(
                400,
                "invalid_execution_mode",
                "Invalid execution mode: X-Execution-Mode is sync or async.",
            ));
        }
    };
    let body = body.map_err(|e| {
        bad_request(format!(
            "The request body cannot be read: {}",
            e.body_text()
        ))
    })?;
    let sha = hex::encode(Sha256::digest(&body));
    Ok(Admitted {
        ctx,
        key,
        mode,
        body,
        sha,
    })
}

/// Parses, validates, prices and creates an order while its key is reserved. Returns the
/// status, the body (also stored under the key) and whether an order was created.
fn process(
    sim: &Sim,
    ctx: &Ctx,
    key: &str,
    mode: ExecutionMode,
    body: &[u8],
    sha: &str,
) -> Result<(u16, Vec<u8>, bool), rusqlite::Error> {
    let now = now_ms();
    let refuse = |status: u16, bytes: Vec<u8>| -> Result<(u16, Vec<u8>, bool), rusqlite::Error> {
        sim.store.record_answer(
            &ctx.fp,
            key,
            &Answer {
                body_sha256: sha,
                status,
                body: &bytes,
            },
            now,
        )?;
        Ok((status, bytes, false))
    };
    if sim.chance.roll(sim.config.faults.stored_error_rate) {
        sim.stat(|s| s.stored_errors += 1);
        return refuse(
            500,
            error_bytes(
                "internal_server_error",
                "The service failed to handle the request (simulated fault, kept under the idempotency key).",
                None,
            ),
        );
    }
    if sim.config.ordering_restricted {
        return refuse(
            403,
            error_bytes(
                "ordering_restricted",
                "You cannot complete this order as you have reached your spending limit.",
                None,
            ),
        );
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return refuse(
                400,
                error_bytes(
                    "bad_request",
                    format!("There is a problem with your request payload or JSON format: {e}."),
                    None,
                ),
            );
        }
    };
    let rules = Rules {
        mode,
        catalog: &sim.catalog,
        cards_accepted: sim.config.cards_accepted,
        cards: &sim.config.cards,
    };
    let request = orders::read(&value, mode).map_err(Refused::Invalid);
    let (order, priced) = match request.and_then(|r| orders::decide(&r, &rules).map(|p| (r, p))) {
        Ok(pair) => pair,
        Err(Refused::Invalid(problems)) => {
            let details = serde_json::to_value(&problems).unwrap_or(Value::Null);
            return refuse(
                422,
                error_bytes(
                    "validation_error",
                    "There was an issue with the request payload: see details.",
                    Some(details),
                ),
            );
        }
        Err(Refused::BadRequest { kind, message }) => {
            return refuse(400, error_bytes(kind, message, None));
        }
    };

    let id = format!(
        "O-{}",
        ulid::Ulid::from_parts(now.max(0) as u64, sim.ids.ulid_random())
    );
    let items: Vec<ItemRow> = priced
        .items
        .into_iter()
        .map(|it| ItemRow {
            id: format!("E-{}", sim.ids.token(9)),
            payout_url: format!(
                "https://playground.example/redeem/{}",
                sim.ids.token(24).to_ascii_lowercase()
            ),
            distribution_method: it.distribution_method,
            products: it.products,
            face_value: it.face_value,
            price: it.price,
            currency: it.currency,
            discount_multiplier: it.discount_multiplier,
            expiry_months: it.expiry_months,
        })
        .collect();
    let outcome = if sim.chance.roll(sim.config.failure_rate) {
        OrderStatus::Failed
    } else {
        OrderStatus::Completed
    };
    let created_at = iso_from_ms(now);
    let (status, due_ms, completed_at) = match mode {
        ExecutionMode::Sync => (outcome, now, Some(created_at.clone())),
        ExecutionMode::Async => {
            let wait = sim
                .chance
                .between(sim.config.processing_min, sim.config.processing_max);
            (OrderStatus::Processing, now + wait.as_millis() as i64, None)
        }
    };
    let mut row = OrderRow {
        seq: 0,
        id: id.clone(),
        key_fingerprint: ctx.fp.clone(),
        idempotency_key: key.to_string(),
        status,
        outcome,
        created_at,
        created_ms: now,
        due_ms,
        completed_at,
        description: order.description.clone(),
        metadata: order.metadata.clone(),
        payment_method: priced.payment_method.clone(),
        currency: priced.currency.clone(),
        total_price: priced.total_price,
        total_discount: priced.total_discount,
        fx: priced.transaction_detail.clone(),
        message: None,
        items,
    };
    if status == OrderStatus::Failed {
        row.message = Some(super::store::failure_message(&row));
    }
    let (answer_status, answer) = match mode {
        ExecutionMode::Sync => (200, json_bytes(&orders::full_order(&row, ctx.version))),
        ExecutionMode::Async => (
            202,
            json_bytes(&AcceptedOrder {
                id: id.clone(),
                status: OrderStatus::Processing,
            }),
        ),
    };
    let balance =
        (row.payment_method.kind == PaymentMethodType::AccountBalance).then(|| BalanceUse {
            currency: &priced.currency,
            amount: priced.total_price,
            // A sync order that fails at once is checked against the balance but not charged.
            debit: status != OrderStatus::Failed,
        });
    let stored = sim.store.create_order(
        &row,
        balance,
        &Answer {
            body_sha256: sha,
            status: answer_status,
            body: &answer,
        },
    )?;
    match stored {
        Created::Ok => {
            sim.stat(|s| s.orders_created += 1);
            Ok((answer_status, answer, true))
        }
        Created::InsufficientBalance { available } => refuse(
            400,
            error_bytes(
                "insufficient_funds",
                format!(
                    "Insufficient funds in {cur} balance to create order: it costs {need} {cur}, the balance is {available} {cur}.",
                    cur = priced.currency,
                    need = priced.total_price,
                ),
                None,
            ),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Ground truth and fallbacks

async fn sim_orders(State(sim): State<Shared>) -> Response {
    json(200, &sim.records())
}

async fn sim_stats(State(sim): State<Shared>) -> Response {
    json(200, &sim.stats_snapshot())
}

async fn fallback(State(sim): State<Shared>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    done(
        async {
            if uri.path().starts_with("/v2/") || uri.path() == "/v2" {
                enter(&sim, &headers, "other").await?;
            }
            Err(not_found(format!("No resource at {}.", uri.path())))
        }
        .await,
    )
}

async fn method_not_allowed() -> Response {
    error(
        405,
        "method_not_allowed",
        "This endpoint does not accept this HTTP method.",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_forward_and_back() {
        let all: Vec<i32> = (1..=7).collect();
        let asc = |a: &i32, b: &i32| a < b;
        let (p, before, after) = paginate(all.clone(), |x| *x, None, false, 3, asc);
        assert_eq!((p, before, after), (vec![1, 2, 3], None, Some(3)));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(3), false, 3, asc);
        assert_eq!((p, before, after), (vec![4, 5, 6], Some(4), Some(6)));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(6), false, 3, asc);
        assert_eq!((p, before, after), (vec![7], Some(7), None));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(4), true, 3, asc);
        assert_eq!((p, before, after), (vec![1, 2, 3], None, Some(3)));
        let desc = |a: &i32, b: &i32| a > b;
        let rev: Vec<i32> = (1..=7).rev().collect();
        let (p, _, after) = paginate(rev.clone(), |x| *x, None, false, 2, desc);
        assert_eq!((p, after), (vec![7, 6], Some(6)));
        let (p, before, _) = paginate(rev, |x| *x, Some(6), false, 2, desc);
        assert_eq!((p, before), (vec![5, 4], Some(5)));
    }

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let q = Query::parse(
            Some(&format!("after={}", cursor(PRODUCT_CURSOR, "AMZ-US"))),
            &["after", "before"],
        );
        assert!(matches!(q.position(PRODUCT_CURSOR), Ok(Position::After(k)) if k == "AMZ-US"));
        let q = Query::parse(Some("after=zzz"), &["after", "before"]);
        assert!(q.position(PRODUCT_CURSOR).is_err());
        let q = Query::parse(Some("after=pc_41&before=pc_41"), &["after", "before"]);
        assert!(q.position(PRODUCT_CURSOR).is_err());
        // Parameters the endpoint does not declare are ignored.
        let q = Query::parse(Some("nope=1&after=pc_41"), &["after"]);
        assert!(q.all("nope").is_empty());
        assert!(matches!(q.position(PRODUCT_CURSOR), Ok(Position::After(k)) if k == "A"));
    }
}
