//! The account's endpoints: `GET /ping` (checks a key) and `GET /balance` (one currency or
//! every funded one).

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::Shared;
use super::answers::{bad_request, done, internal, json};
use super::context::enter;
use super::query::{Query, valid_code};
use paybatch_api::models::{Balance, Ping};

pub(super) async fn ping(State(sim): State<Shared>, headers: HeaderMap) -> Response {
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

pub(super) async fn balance(
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
