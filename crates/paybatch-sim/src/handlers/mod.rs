//! The HTTP endpoints of the simulator: the service's interface under `/v2` and the ground-truth
//! endpoints under `/_sim`.
//!
//! Every `/v2` request passes, in order: latency, settling of due orders, authentication
//! (`X-Api-Key`), version (`X-Api-Version`). `POST /order` then passes the rate limit, the
//! injected faults (429 bursts, 5xx), the idempotency layer, and only then validation and
//! creation. Answers are JSON; errors are `{type, message, help}` (`help` left out where the
//! published error table has none, `details` added for 422), except the 429 answer, which is
//! `{"error": "rate exceeded"}` as published.

//!
//! The endpoints are split by resource: [`account`] (ping, balance), [`products`] (the
//! catalog), [`orders`] (reading orders), [`create_order`] and [`place_order`] (creating one).
//! [`context`] authenticates, [`query`] reads query strings and pages, [`answers`] builds the
//! bodies. The ground-truth endpoints and the fallbacks are here, with the router.

mod account;
mod answers;
mod context;
mod create_order;
mod orders;
mod place_order;
mod products;
mod query;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;

use super::Sim;
use answers::{done, error, json, not_found};
use context::enter;

type Shared = Arc<Sim>;

pub(crate) fn router(sim: Shared) -> Router {
    let echo = sim.config.faults.hostile.echo_key.is_some();
    let share = sim.config.minimal_answers;
    let minimal = Arc::new(Minimal {
        chance: super::faults::Chance::new(sim.config.seed ^ MINIMAL_SALT),
        sim: sim.clone(),
    });
    let router = routes(Arc::clone(&sim));
    // The key is echoed into an answer before it is made minimal: a minimal answer keeps its
    // message.
    let router = if echo {
        router.layer(axum::middleware::from_fn_with_state(sim, echo_key))
    } else {
        router
    };
    if share > 0.0 {
        router.layer(axum::middleware::from_fn_with_state(
            minimal,
            minimal_answer,
        ))
    } else {
        router
    }
}

fn routes(sim: Shared) -> Router {
    Router::new()
        .route("/v2/ping", get(account::ping))
        .route("/v2/product", get(products::list_products))
        .route("/v2/product/countries", get(products::list_countries))
        .route("/v2/product/categories", get(products::list_categories))
        .route("/v2/product/{product_code}", get(products::get_product))
        .route(
            "/v2/order",
            get(orders::list_orders).post(create_order::create_order),
        )
        .route(
            "/v2/order/estimate",
            get(orders::get_order).post(orders::estimate),
        )
        .route("/v2/order/{id}", get(orders::get_order))
        .route("/v2/order/{id}/links", get(orders::order_links))
        .route("/v2/balance", get(account::balance))
        .route("/_sim/orders", get(sim_orders))
        .route("/_sim/stats", get(sim_stats))
        .route("/_sim/payouts", get(sim_payouts))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(sim)
}

// ---------------------------------------------------------------------------------------------
// Minimal answers

/// Mixed into the seed of the minimal answers' own random source.
const MINIMAL_SALT: u64 = 0x6d69_6e69_6d61_6c00;

/// What the minimal answers draw from: a random source of their own, so that switching them on
/// leaves the other draws of a seed as they were.
struct Minimal {
    sim: Shared,
    chance: super::faults::Chance,
}

/// Makes a share of the answers minimal ([`super::minimal`]): only what the published contract
/// requires. Answers of the older version, and those minimal answers do not change, pass as
/// they are; so does the marker that drops a connection (the response's parts are kept).
async fn minimal_answer(
    State(minimal): State<Arc<Minimal>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let older = request
        .headers()
        .get("x-api-version")
        .is_some_and(|v| v.as_bytes() == b"2023-07-27");
    let response = next.run(request).await;
    let sim = &minimal.sim;
    let Some(shape) = super::minimal::shape_of(&method, &path, response.status().as_u16()) else {
        return response;
    };
    if older || !minimal.chance.roll(sim.config.minimal_answers) {
        return response;
    }
    let nulls = minimal.chance.roll(0.5);
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => return answers::internal(e).into_response(),
    };
    let Ok(mut answer) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    super::minimal::strip(shape, &mut answer, nulls);
    sim.stat(|s| s.minimal_answers += 1);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(answers::json_bytes(&answer)))
}

/// A careless service (`--echo-key`): its answers quote the request's API key, spelt as
/// configured ([`crate::disguise::echo_key`]).
async fn echo_key(
    State(sim): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let key = context::header_text(request.headers(), "x-api-key")
        .and_then(Result::ok)
        .map(str::to_string);
    let response = next.run(request).await;
    let (Some(spelling), Some(key)) = (sim.config.faults.hostile.echo_key, key) else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let mut value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Response::from_parts(parts, axum::body::Body::from(bytes)),
    };
    let refusal = parts.status.as_u16() >= 400;
    if !crate::disguise::echo_key(&mut value, &spelling.spell(&key), refusal) {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let body = answers::json_bytes(&value);
    Response::from_parts(parts, axum::body::Body::from(body))
}

// ---------------------------------------------------------------------------------------------
// Ground truth and fallbacks

async fn sim_orders(State(sim): State<Shared>) -> Response {
    json(200, &sim.records())
}

async fn sim_stats(State(sim): State<Shared>) -> Response {
    json(200, &sim.stats_snapshot())
}

async fn sim_payouts(State(sim): State<Shared>) -> Response {
    done(
        sim.census()
            .map(|census| json(200, &census))
            .map_err(answers::internal),
    )
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
