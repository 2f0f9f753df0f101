//! Reading orders: `GET /order` (newest first, paginated), `GET /order/{id}` (partial while
//! processing, full once finished), the price of an order not placed (`POST /order/estimate`,
//! or its `404` as in the playground), and the answer of an endpoint removed
//! (`GET /order/{id}/links`).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;

use super::Shared;
use super::answers::{
    Refusal, done, injected_server_error, internal, json, not_found, pagination_error,
    validation_error,
};
use super::context::enter;
use super::query::{Position, Query, cursor, pagination};
use crate::store::Towards;
use crate::{OddList, orders};
use paybatch_api::models::{OrderStatus, Pagination};

/// A page of the order list.
#[derive(Serialize)]
struct OrderListPage<'a> {
    items: Vec<orders::ListEntry<'a>>,
    pagination: Pagination,
}

/// Page size of the order list when `limit` is absent.
const DEFAULT_ORDER_PAGE: u32 = 100;
/// Prefix of the order list's cursors.
const ORDER_CURSOR: &str = "oc_";

pub(super) async fn list_orders(
    State(sim): State<Shared>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    done(
        async {
            let ctx = enter(&sim, &headers, "GET /order").await?;
            let q = Query::parse(raw.as_deref(), &["limit", "after", "before"]);
            let limit = q.limit(DEFAULT_ORDER_PAGE)?;
            let (towards, at) = match q.position(ORDER_CURSOR)? {
                Position::Start => (Towards::Older, None),
                Position::After(k) => (Towards::Older, Some(k)),
                Position::Before(k) => (Towards::Newer, Some(k)),
            };
            let at = match at {
                None => None,
                Some(k) => Some(k.parse::<i64>().map_err(|_| {
                    pagination_error("The cursor is not a cursor of this listing.")
                })?),
            };
            // Newest first: a larger sequence number comes first. Read page by page, so that a
            // page costs the same however many orders the account holds.
            let page = sim
                .store
                .orders_page(&ctx.fp, at, towards, limit as usize)
                .map_err(internal)?;
            let before = page
                .newer
                .then(|| page.orders.first().map(|o| o.seq))
                .flatten();
            let after = page
                .older
                .then(|| page.orders.last().map(|o| o.seq))
                .flatten();
            let first_page = at.is_none() && towards == Towards::Older;
            let odd = sim.config.odd_list.filter(|_| first_page);
            let oldest = match odd {
                Some(OddList::OldFirst) => sim
                    .store
                    .orders_page(&ctx.fp, None, Towards::Newer, 1)
                    .map_err(internal)?
                    .orders
                    .into_iter()
                    .next(),
                _ => None,
            };
            if odd == Some(OddList::Empty)
                && let Some(newest) = page.orders.first()
            {
                // Nothing on the page, and a cursor from which the next page starts at the
                // newest order.
                let pagination = pagination(
                    limit,
                    None,
                    Some(cursor(ORDER_CURSOR, &(newest.seq + 1).to_string())),
                );
                let items = Vec::new();
                return Ok(json(200, &OrderListPage { items, pagination }));
            }
            let items: Vec<orders::ListEntry<'_>> = oldest
                .iter()
                .chain(page.orders.iter())
                .map(|o| orders::list_entry(o, sim.config.list_metadata))
                .collect();
            let pagination = pagination(
                limit,
                before.map(|k| cursor(ORDER_CURSOR, &k.to_string())),
                after.map(|k| cursor(ORDER_CURSOR, &k.to_string())),
            );
            Ok(json(200, &OrderListPage { items, pagination }))
        }
        .await,
    )
}

pub(super) async fn get_order(
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
                Some(o) => {
                    let clock = sim.payout_clock().map_err(internal)?;
                    Ok(json(
                        200,
                        &disguised_full_order(&sim, &o, ctx.version, &clock),
                    ))
                }
            }
        }
        .await,
    )
}

/// The full answer of a finished order, disguised where a hostile rate chooses it.
pub(super) fn disguised_full_order(
    sim: &crate::Sim,
    o: &crate::store::OrderRow,
    version: crate::ApiVersion,
    clock: &crate::life::PayoutClock,
) -> serde_json::Value {
    let mut answer = orders::full_order(o, version, clock);
    let hostile = &sim.config.faults.hostile;
    let flips = &sim.config.faults.flips;
    let flipped = crate::flip::payout_answers(
        flips,
        sim.config.seed,
        &sim.first_expired,
        clock,
        o,
        &mut answer,
    );
    if crate::disguise::full_answer(hostile, sim.config.seed, o, &mut answer) || flipped {
        sim.stat(|s| s.disguised += 1);
    }
    answer
}

pub(super) async fn order_links(State(sim): State<Shared>, headers: HeaderMap) -> Response {
    done(async {
        enter(&sim, &headers, "GET /order/{id}/links").await?;
        Err(not_found(
            "GET /order/{id}/links was removed in 2023-07-27: the payout links are on the items of GET /order/{id}.",
        ))
    }
    .await)
}

/// `POST /order/estimate`: the order priced as `POST /order` would charge it, without placing it
/// or touching the balance ([`orders::estimate_order`]); `404 not_found`, as in the playground,
/// when the simulator is started without estimates.
pub(super) async fn estimate(
    State(sim): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    done(
        async {
            enter(&sim, &headers, "POST /order/estimate").await?;
            if !sim.config.estimates {
                return Err(not_found(
                    "POST /order/estimate is not available in the playground: estimate in production, or price the order from the catalog.",
                ));
            }
            // The published estimate refuses a body only with a 422.
            let unreadable = |message: String| {
                invalid(vec![orders::Problem {
                    kind: "json_invalid",
                    message,
                    location: Vec::new(),
                }])
            };
            let body =
                body.map_err(|e| unreadable(format!("The body cannot be read: {}", e.body_text())))?;
            let value: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| unreadable(format!("The body is not JSON: {e}")))?;
            let priced = orders::estimate_order(&value, &sim.catalog, &sim.config.cards)
                .map_err(invalid)?;
            Ok(json(200, &orders::estimate_answer(&priced)))
        }
        .await,
    )
}

/// A `422 validation_error` with these problems as its `details`.
fn invalid(problems: Vec<orders::Problem>) -> Refusal {
    validation_error(serde_json::to_value(&problems).unwrap_or(serde_json::Value::Null))
}
