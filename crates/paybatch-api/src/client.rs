//! The typed client of the payout ordering service.
//!
//! Every answer is read by its status code first, then by its body: a 2xx body must be the shape
//! the endpoint promises (a `200` carrying an error body, truncated JSON or an HTML page is a
//! transient protocol error, never a success); a 4xx/5xx body is the error shape.

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use url::Url;

use super::error::ApiError;
use super::key::ApiKey;
use super::models::*;
use super::retry;

/// Bodies larger than this are refused (a hostile or broken answer), never buffered whole.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The longest `Retry-After` honoured (kept with the waits in [`retry`]).
pub use super::retry::MAX_RETRY_AFTER;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Ends with the version segment, e.g. `https://playground.runa.io/v2`.
    pub base_url: String,
    pub api_key: ApiKey,
    /// `X-Api-Version`; paybatch pins [`API_VERSION`].
    pub api_version: String,
    /// Time allowed for one request, connection included.
    pub timeout: Duration,
}

impl ClientConfig {
    pub fn new(base_url: impl Into<String>, api_key: ApiKey) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            api_key,
            api_version: API_VERSION.to_string(),
            timeout: Duration::from_secs(30),
        }
    }
}

/// The answer to `POST /order`.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// `200`: the whole order (sync mode).
    Order(Box<Order>),
    /// `202`: only the id and the status (async mode).
    Accepted(AcceptedOrder),
}

impl CreateOutcome {
    pub fn id(&self) -> &str {
        match self {
            CreateOutcome::Order(o) => &o.id,
            CreateOutcome::Accepted(a) => &a.id,
        }
    }

    pub fn status(&self) -> OrderStatus {
        match self {
            CreateOutcome::Order(o) => o.status,
            CreateOutcome::Accepted(a) => a.status,
        }
    }
}

/// Filters of `GET /product`.
#[derive(Debug, Clone, Default)]
pub struct ProductQuery {
    pub is_orderable: Option<bool>,
    pub countries: Vec<String>,
    pub categories: Vec<String>,
    pub code: Option<String>,
    pub limit: Option<u32>,
    pub after: Option<String>,
    pub before: Option<String>,
}

/// Which page of a cursor-paged list to read.
#[derive(Debug, Clone, Default)]
pub struct PageQuery {
    pub limit: Option<u32>,
    pub after: Option<String>,
    pub before: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    key: ApiKey,
    version: String,
    /// When set, a read tried again ([`read_retrying_until`]) does not wait past it.
    deadline: Option<Instant>,
}

/// True for `127.0.0.0/8`, `::1` and `localhost`.
pub fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// Checks a base URL: `https`, or plain `http` to a loopback address only.
pub fn check_base_url(base_url: &str) -> Result<Url, ApiError> {
    let mut url = Url::parse(base_url.trim())
        .map_err(|e| ApiError::Config(format!("base URL `{base_url}` is not a URL: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_host(&url) => {}
        "http" => {
            return Err(ApiError::Config(format!(
                "refusing plain http:// to `{}`: the API key and payout links would cross the network unencrypted; use https:// (plain http is allowed for loopback addresses only)",
                url.host_str().unwrap_or("?")
            )));
        }
        other => {
            return Err(ApiError::Config(format!(
                "base URL `{base_url}` has scheme `{other}`; expected https://"
            )));
        }
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Self, ApiError> {
        let base = check_base_url(&config.base_url)?;
        let mut builder = reqwest::Client::builder();
        if base.scheme() == "http" {
            // Plain http goes to this machine only ([`check_base_url`]): never through a proxy,
            // which would carry the key across the network unencrypted.
            builder = builder.no_proxy();
        }
        let http = builder
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            // A redirect could carry the key to another host: never follow one.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("paybatch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Config(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Client {
            http,
            base,
            key: config.api_key,
            version: config.api_version,
            deadline: None,
        })
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The same client, whose reads that are tried again never wait past `deadline` (they
    /// give up with their last error instead).
    pub fn with_deadline(&self, deadline: Option<Instant>) -> Client {
        Client {
            deadline,
            ..self.clone()
        }
    }

    /// See [`Client::with_deadline`].
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn url(&self, path: &str) -> Result<Url, ApiError> {
        self.base
            .join(path.trim_start_matches('/'))
            .map_err(|e| ApiError::Config(format!("bad path {path}: {e}")))
    }

    fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        self.http
            .request(method, url)
            .header("X-Api-Key", self.key.expose())
            .header("X-Api-Version", &self.version)
            .header("Accept", "application/json")
    }

    /// Sends a request and returns the status, headers and the (bounded) body.
    async fn exchange(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, HeaderMap, Vec<u8>), ApiError> {
        let mut resp = builder.send().await.map_err(transport_error)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(ApiError::Protocol {
                            status: status.as_u16(),
                            reason: format!("answer body larger than {MAX_BODY_BYTES} bytes"),
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(ApiError::Transport(format!(
                        "the answer was cut off: {}",
                        error_chain(&e)
                    )));
                }
            }
        }
        // Nothing the service says reaches the ledger or an output with the key in it.
        let body = match super::key::conceal_answer(&body) {
            std::borrow::Cow::Owned(concealed) => concealed,
            std::borrow::Cow::Borrowed(_) => body,
        };
        Ok((status, headers, body))
    }

    /// Reads a 2xx answer as `T`; anything else as an error.
    fn decode<T: DeserializeOwned>(
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<T, ApiError> {
        if status.is_success() {
            if let Some(e) = error_shaped(status, body) {
                return Err(e);
            }
            return serde_json::from_slice::<T>(body)
                .map_err(|e| success_body_error(status, body, e));
        }
        Err(error_from(status, headers, body))
    }

    async fn get<T: DeserializeOwned>(&self, url: Url) -> Result<T, ApiError> {
        let (status, headers, body) = self.exchange(self.request(Method::GET, url)).await?;
        Self::decode(status, &headers, &body)
    }

    /// `GET /ping`.
    pub async fn ping(&self) -> Result<Ping, ApiError> {
        self.get(self.url("ping")?).await
    }

    /// `GET /product`: one page.
    pub async fn products(&self, q: &ProductQuery) -> Result<ProductList, ApiError> {
        let mut url = self.url("product")?;
        {
            let mut pairs = url.query_pairs_mut();
            if let Some(o) = q.is_orderable {
                pairs.append_pair("is_orderable", if o { "true" } else { "false" });
            }
            for c in &q.countries {
                pairs.append_pair("countries_redeemable_in", c);
            }
            for c in &q.categories {
                pairs.append_pair("categories", c);
            }
            if let Some(code) = &q.code {
                pairs.append_pair("code", code);
            }
            append_page(&mut pairs, q.limit, &q.after, &q.before);
        }
        strip_empty_query(&mut url);
        self.get(url).await
    }

    /// Every product matching the filters, walking all pages (bounded, in case a broken service
    /// keeps answering with a cursor).
    pub async fn all_products(&self, q: &ProductQuery) -> Result<Vec<Product>, ApiError> {
        const MAX_PAGES: usize = 10_000;
        let mut q = q.clone();
        q.before = None;
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let page = read_retrying_until(self.deadline, || self.products(&q)).await?;
            let done = page.catalog.is_empty();
            out.extend(page.catalog);
            match page.pagination.cursors.after {
                Some(after) if !done && Some(&after) != q.after.as_ref() => q.after = Some(after),
                _ => return Ok(out),
            }
        }
        Err(ApiError::Protocol {
            status: 200,
            reason: format!("the product listing did not end after {MAX_PAGES} pages"),
        })
    }

    /// `GET /product/{product_code}`: one product's details (the `code` filter of the list
    /// was removed from the published contract).
    pub async fn product(&self, code: &str) -> Result<Option<Product>, ApiError> {
        let mut url = self.url("product")?;
        url.path_segments_mut()
            .map_err(|_| ApiError::Config("base URL cannot hold a path".into()))?
            .push(code);
        match self.get::<Product>(url).await {
            Ok(p) if p.code == code => Ok(Some(p)),
            Ok(p) => Err(ApiError::Protocol {
                status: 200,
                reason: format!("asked for product {code}, got product {}", p.code),
            }),
            Err(e) if e.kind() == "not_found" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /product/countries` (shape not shown by the interface: the records are kept open).
    pub async fn countries(&self) -> Result<Vec<Country>, ApiError> {
        let value: serde_json::Value = self.get(self.url("product/countries")?).await?;
        Ok(list_in(value, "countries"))
    }

    /// The category listing, at `GET /product/categories` (path not shown by the interface).
    pub async fn categories(&self) -> Result<Vec<Category>, ApiError> {
        let value: serde_json::Value = self.get(self.url("product/categories")?).await?;
        Ok(list_in(value, "categories"))
    }

    /// `GET /order`: one page, newest first.
    pub async fn orders(&self, q: &PageQuery) -> Result<OrderList, ApiError> {
        let mut url = self.url("order")?;
        {
            let mut pairs = url.query_pairs_mut();
            append_page(&mut pairs, q.limit, &q.after, &q.before);
        }
        strip_empty_query(&mut url);
        self.get(url).await
    }

    /// `GET /order/{id}`: the partial shape while processing, the full one when terminal.
    pub async fn order(&self, id: &str) -> Result<OrderView, ApiError> {
        let mut url = self.url("order")?;
        url.path_segments_mut()
            .map_err(|_| ApiError::Config("base URL cannot hold a path".into()))?
            .push(id);
        let (status, headers, body) = self.exchange(self.request(Method::GET, url)).await?;
        if !status.is_success() {
            return Err(error_from(status, &headers, &body));
        }
        if let Some(e) = error_shaped(status, &body) {
            return Err(e);
        }
        let view = OrderView::from_json(&body).map_err(|e| success_body_error(status, &body, e))?;
        if view.id() != id {
            return Err(ApiError::Protocol {
                status: status.as_u16(),
                reason: format!("asked for order {id}, got order {}", view.id()),
            });
        }
        Ok(view)
    }

    /// `POST /order` with the exact body bytes recorded in the ledger and its idempotency key.
    pub async fn create_order(
        &self,
        idempotency_key: &str,
        body: &[u8],
        mode: ExecutionMode,
    ) -> Result<CreateOutcome, ApiError> {
        let request = self
            .request(Method::POST, self.url("order")?)
            .header("X-Idempotency-Key", idempotency_key)
            .header("X-Execution-Mode", mode.as_str())
            .header("Content-Type", "application/json")
            .body(body.to_vec());
        let (status, headers, body) = self.exchange(request).await?;
        if status.is_success()
            && let Some(e) = error_shaped(status, &body)
        {
            return Err(e);
        }
        match status.as_u16() {
            200 => {
                let view = OrderView::from_json(&body)
                    .map_err(|e| success_body_error(status, &body, e))?;
                match view {
                    OrderView::Done(order) => Ok(CreateOutcome::Order(order)),
                    OrderView::Processing(p) => Ok(CreateOutcome::Accepted(AcceptedOrder {
                        id: p.id,
                        status: p.status,
                    })),
                }
            }
            202 => {
                let accepted: AcceptedOrder = serde_json::from_slice(&body)
                    .map_err(|e| success_body_error(status, &body, e))?;
                Ok(CreateOutcome::Accepted(accepted))
            }
            s if (200..300).contains(&s) => Err(ApiError::Protocol {
                status: s,
                reason: "unexpected success status for order creation".into(),
            }),
            _ => Err(error_from(status, &headers, &body)),
        }
    }

    /// `POST /order/estimate`: what an order of `items` (product selection, face value) would
    /// cost from the balance in `payment_currency`, conversions and fees included: the
    /// order's total price, in the payment currency. The service documents that its
    /// playground does not offer it: an answer 404, 405 or 501 means "not offered here"
    /// ([`ApiError::is_not_offered`]).
    pub async fn estimate(
        &self,
        payment_currency: &str,
        items: &[(ProductSelection, rust_decimal::Decimal)],
    ) -> Result<rust_decimal::Decimal, ApiError> {
        #[derive(serde::Serialize)]
        struct Item<'a> {
            products: &'a ProductSelection,
            #[serde(with = "super::decimal::exact_number")]
            face_value: rust_decimal::Decimal,
        }
        #[derive(serde::Deserialize)]
        struct Estimate {
            #[serde(with = "super::decimal::flexible")]
            total_price: rust_decimal::Decimal,
            #[serde(default)]
            currency: Option<String>,
        }
        let body = serde_json::json!({
            "payment_method": {"type": "ACCOUNT_BALANCE", "currency": payment_currency},
            "items": items
                .iter()
                .map(|(products, face_value)| Item { products, face_value: *face_value })
                .collect::<Vec<_>>(),
        });
        let request = self
            .request(Method::POST, self.url("order/estimate")?)
            .header("Content-Type", "application/json")
            .body(body.to_string());
        let (status, headers, body) = self.exchange(request).await?;
        let estimate: Estimate = Self::decode(status, &headers, &body)?;
        // An estimate in another currency, or of nothing or less, prices nothing: a batch must
        // never look affordable because of it.
        if let Some(other) = estimate
            .currency
            .as_deref()
            .filter(|c| !c.eq_ignore_ascii_case(payment_currency))
        {
            return Err(ApiError::Protocol {
                status: status.as_u16(),
                reason: format!(
                    "the estimate is in {other}, not in the paying balance's {payment_currency}"
                ),
            });
        }
        if estimate.total_price <= rust_decimal::Decimal::ZERO {
            return Err(ApiError::Protocol {
                status: status.as_u16(),
                reason: format!("the estimate {} is not a price", estimate.total_price),
            });
        }
        Ok(estimate.total_price)
    }

    /// `GET /balance?currency=XXX`.
    pub async fn balance(&self, currency: &str) -> Result<Balance, ApiError> {
        let mut url = self.url("balance")?;
        url.query_pairs_mut().append_pair("currency", currency);
        self.get(url).await
    }

    /// `GET /balance`: every currency whose balance is above zero.
    pub async fn balances(&self) -> Result<Vec<Balance>, ApiError> {
        self.get(self.url("balance")?).await
    }
}

fn append_page(
    pairs: &mut url::form_urlencoded::Serializer<'_, url::UrlQuery<'_>>,
    limit: Option<u32>,
    after: &Option<String>,
    before: &Option<String>,
) {
    if let Some(l) = limit {
        pairs.append_pair("limit", &l.to_string());
    }
    if let Some(a) = after {
        pairs.append_pair("after", a);
    }
    if let Some(b) = before {
        pairs.append_pair("before", b);
    }
}

fn strip_empty_query(url: &mut Url) {
    if url.query() == Some("") {
        url.set_query(None);
    }
}

/// A listing whose shape is not shown: an array, or an object holding one under `key`.
fn list_in(value: serde_json::Value, key: &str) -> Vec<serde_json::Value> {
    match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(mut map) => match map.remove(key) {
            Some(serde_json::Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn transport_error(e: reqwest::Error) -> ApiError {
    ApiError::Transport(error_chain(&e))
}

/// The error and its causes on one line (reqwest's top-level message alone is vague).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    // What the connection said may quote the service.
    concealed_text(text.as_bytes())
}

/// What the service said outside an answer's body (a header, what the connection reported),
/// as text with every spelling of the key hidden ([`super::key::conceal_answer`]).
fn concealed_text(said: &[u8]) -> String {
    String::from_utf8_lossy(&super::key::conceal_answer(said)).into_owned()
}

/// A 2xx answer that carries the error shape (`type` and `message` at the top level): no
/// success shape of the interface has a top-level `type`, so it is never read as a success.
fn error_shaped(status: StatusCode, body: &[u8]) -> Option<ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let obj = value.as_object()?;
    if obj.get("type").is_some_and(|t| t.is_string()) && obj.contains_key("message") {
        let err: ErrorBody = serde_json::from_value(value.clone()).ok()?;
        return Some(ApiError::Protocol {
            status: status.as_u16(),
            reason: format!(
                "a {} answer carried an error body ({}: {})",
                status.as_u16(),
                err.kind,
                err.message
            ),
        });
    }
    None
}

/// A 2xx answer whose body is not the promised shape.
fn success_body_error(status: StatusCode, body: &[u8], e: serde_json::Error) -> ApiError {
    let reason = if let Ok(err) = serde_json::from_slice::<ErrorBody>(body) {
        format!(
            "a {} answer carried an error body ({}: {})",
            status.as_u16(),
            err.kind,
            err.message
        )
    } else {
        format!(
            "the body is not the expected JSON: {e}; starts with {}",
            preview(body)
        )
    };
    ApiError::Protocol {
        status: status.as_u16(),
        reason,
    }
}

fn error_from(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ApiError {
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|seconds| Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    if status.is_redirection() {
        return ApiError::Protocol {
            status: status.as_u16(),
            reason: format!(
                "redirect to {} refused (paybatch never follows redirects: the key must not reach another host)",
                headers
                    .get(reqwest::header::LOCATION)
                    .map_or_else(|| "?".into(), |v| concealed_text(v.as_bytes()))
            ),
        };
    }
    /// The published 429 body: `{"error": "rate exceeded"}`, not the error shape.
    #[derive(serde::Deserialize)]
    struct RateExceeded {
        error: String,
    }
    if let Ok(err) = serde_json::from_slice::<ErrorBody>(body) {
        return ApiError::service(status.as_u16(), err, retry_after);
    }
    if let Ok(rate) = serde_json::from_slice::<RateExceeded>(body) {
        let kind = if status.as_u16() == 429 {
            "too_many_requests"
        } else {
            "error"
        };
        let body = ErrorBody {
            kind: kind.into(),
            message: rate.error,
            help: None,
            details: None,
        };
        return ApiError::service(status.as_u16(), body, retry_after);
    }
    // No error body: keep the status, which still decides the class.
    let reason = status.canonical_reason().unwrap_or("error").to_string();
    let kind = reason.to_ascii_lowercase().replace(' ', "_");
    ApiError::service(
        status.as_u16(),
        ErrorBody {
            kind,
            message: format!(
                "HTTP {} without an error body; starts with {}",
                status.as_u16(),
                preview(body)
            ),
            help: None,
            details: None,
        },
        retry_after,
    )
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(80)]);
    format!("{:?}", text)
}

/// Tries of a read that fails transiently, in [`read_retrying`].
pub const READ_TRIES: u32 = 5;

/// A read that is safe to repeat (a `GET`), tried up to [`READ_TRIES`] times while it fails
/// transiently (5xx, timeouts, dropped connections, 429): 0.5, 1, 2 and 4 s apart
/// ([`retry::READS`]), at least [`retry::RATE_LIMITED_FLOOR`] after a 429, and never sooner
/// than the service's `Retry-After` (itself at most [`MAX_RETRY_AFTER`]). Any other answer is
/// returned at once.
pub async fn read_retrying<T, Fut>(read: impl FnMut() -> Fut) -> Result<T, ApiError>
where
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    read_retrying_until(None, read).await
}

/// [`read_retrying`] that never waits past `deadline`: a wait that would end after it is not
/// taken, and the last error is returned (a transient one: the caller's "run again").
pub async fn read_retrying_until<T, Fut>(
    deadline: Option<Instant>,
    mut read: impl FnMut() -> Fut,
) -> Result<T, ApiError>
where
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let mut tries = 1;
    loop {
        match read().await {
            Err(e) if e.is_transient() && tries < READ_TRIES => {
                let pause = retry::READS.wait(tries - 1, &e);
                let past_deadline = deadline.is_some_and(|d| {
                    Instant::now()
                        .checked_add(pause)
                        .is_none_or(|until| until > d)
                });
                if past_deadline {
                    return Err(e);
                }
                tokio::time::sleep(pause).await;
                tries += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_are_tried_again_only_while_they_fail_transiently() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let calls = AtomicU32::new(0);
        // A dropped connection, then an answer.
        let got = read_retrying(|| async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ApiError::Transport("reset".into())),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(got.ok(), Some(1));
        // A final error is returned at once.
        calls.store(0, Ordering::SeqCst);
        let got: Result<u32, ApiError> = read_retrying(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ApiError::Config("no".into()))
        })
        .await;
        assert!(got.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    fn rate_limited(retry_after: &str) -> ApiError {
        let mut headers = HeaderMap::new();
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_str(retry_after).expect("header"),
        );
        error_from(
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            br#"{"type":"too_many_requests","message":"slow down","help":""}"#,
        )
    }

    #[test]
    fn a_retry_after_is_honoured_up_to_a_minute() {
        assert_eq!(
            rate_limited("7").retry_after(),
            Some(Duration::from_secs(7))
        );
        for huge in ["100000000", "18446744073709551615"] {
            assert_eq!(rate_limited(huge).retry_after(), Some(MAX_RETRY_AFTER));
        }
        // Not a number of seconds (too large for one, or a date): the default pauses apply.
        assert_eq!(rate_limited("99999999999999999999999").retry_after(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn reads_tried_again_wait_a_bounded_time_and_never_past_the_deadline() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let calls = AtomicU32::new(0);
        let always_429 = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(rate_limited("100000000"))
        };
        // Without a deadline: every try, each pause at most a minute (virtual time).
        let t0 = Instant::now();
        assert!(read_retrying(always_429).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), READ_TRIES);
        assert_eq!(Instant::now() - t0, MAX_RETRY_AFTER * (READ_TRIES - 1));
        // With a deadline 5 s away: the minute is not waited, the error comes back at once.
        calls.store(0, Ordering::SeqCst);
        let t0 = Instant::now();
        let got = read_retrying_until(Some(t0 + Duration::from_secs(5)), always_429).await;
        assert!(got.is_err_and(|e| e.is_rate_limited()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(Instant::now(), t0);
        // A deadline far enough away lets the pauses happen.
        calls.store(0, Ordering::SeqCst);
        let got =
            read_retrying_until(Some(Instant::now() + Duration::from_secs(3600)), always_429).await;
        assert!(got.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), READ_TRIES);
    }

    #[test]
    fn plain_http_only_for_loopback() {
        assert!(check_base_url("http://127.0.0.1:8080/v2").is_ok());
        assert!(check_base_url("http://localhost:1/v2").is_ok());
        assert!(check_base_url("http://[::1]:1/v2").is_ok());
        assert!(check_base_url("https://api.runa.io/v2").is_ok());
        let e = check_base_url("http://api.runa.io/v2").unwrap_err();
        assert!(e.to_string().contains("refusing plain http"));
        assert!(check_base_url("ftp://x/v2").is_err());
    }

    #[test]
    fn base_url_gets_a_trailing_slash_so_paths_join_under_v2() {
        let u = check_base_url("http://127.0.0.1:9/v2").unwrap();
        assert_eq!(u.join("order").unwrap().path(), "/v2/order");
    }

    #[test]
    fn a_200_with_an_error_body_is_a_protocol_error() {
        let body = br#"{"type":"internal_server_error","message":"boom","help":""}"#;
        let r: Result<Ping, _> = Client::decode(StatusCode::OK, &HeaderMap::new(), body);
        let e = r.unwrap_err();
        assert!(matches!(e, ApiError::Protocol { .. }));
        assert!(e.is_transient());
    }

    #[test]
    fn html_error_pages_keep_their_status_class() {
        let e = error_from(
            StatusCode::BAD_GATEWAY,
            &HeaderMap::new(),
            b"<html>bad</html>",
        );
        assert!(e.is_transient());
        let e = error_from(
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            b"<html>nope</html>",
        );
        assert!(!e.is_transient());
    }
}
