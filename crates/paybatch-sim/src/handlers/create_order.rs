//! `POST /order` up to and around the idempotency layer: admission (authentication, version,
//! rate limit, 429 bursts, injected 5xx, the creation headers), the answers to a key already
//! in use (in progress, other body, replay), the work run on its own task while the key is
//! reserved, and the faults applied to its answer (dropped connection, 504).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::Shared;
use super::answers::{
    Answered, Refusal, bad_request, error, injected_server_error, internal, raw, too_many_requests,
};
use super::context::{Ctx, begin, header_text, pause};
use super::place_order::{Outcome, place_order};
use crate::Sim;
use crate::server::DropConnection;
use crate::store::Reservation;
use paybatch_api::models::ExecutionMode;

/// Longest idempotency key accepted.
const MAX_IDEMPOTENCY_KEY: usize = 255;

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

pub(super) async fn create_order(
    State(sim): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let delay = sim.chance.latency(&sim.config.faults);
    let admitted = match admit(&sim, &headers, body) {
        Ok(admitted) => admitted,
        Err(early) => {
            pause(delay).await;
            return early.into_response();
        }
    };
    let reservation = sim.now_ms().and_then(|now| {
        sim.store
            .reserve(&admitted.ctx.fp, &admitted.key, &admitted.sha, now)
    });
    match reservation {
        Err(e) => {
            pause(delay).await;
            internal(e).into_response()
        }
        Ok(Reservation::Reserved) => run_reserved(sim, admitted, delay).await,
        Ok(taken) => {
            let answer = key_taken(&sim, taken);
            pause(delay).await;
            answer
        }
    }
}

/// The answer to a request whose idempotency key could not be reserved: still in progress,
/// used with another body, or finished (its stored answer replayed).
fn key_taken(sim: &Sim, reservation: Reservation) -> Response {
    match reservation {
        Reservation::InProgress => {
            sim.stat(|s| s.in_progress += 1);
            // 400 as in the published error table (the guide's 102 is not a final answer in
            // HTTP/1.1).
            error(
                400,
                "idempotency_in_progress",
                "A request with this idempotency key is still being processed.",
            )
            .retry_after(1)
            .into_response()
        }
        Reservation::Mismatch => error(
            400,
            "idempotency_validation_error",
            "This idempotency key was already used with a different request body.",
        )
        .into_response(),
        Reservation::Replay { status, body } => {
            sim.stat(|s| s.replayed += 1);
            raw(status, body)
        }
        Reservation::Reserved => internal("an idempotency key reserved twice").into_response(),
    }
}

/// Runs the order's work while its key is reserved, then answers.
///
/// The work runs on its own task: a client that goes away (killed, timed out) does not cancel
/// it, as it would not at a real service. The order is placed on a thread of the blocking pool
/// ([`crate::PLACING_AT_ONCE`] at once), never on the runtime's workers. The order is created and its answer kept under the
/// key for the client's next attempt.
async fn run_reserved(sim: Shared, admitted: Admitted, delay: Duration) -> Response {
    let Admitted {
        ctx,
        key,
        mode,
        body,
        sha,
    } = admitted;
    let guard = Reserved {
        sim: sim.clone(),
        fp: ctx.fp.clone(),
        key: key.clone(),
    };
    let work = {
        let sim = sim.clone();
        tokio::spawn(async move {
            pause(delay + sim.config.faults.in_progress_delay).await;
            // The semaphore is never closed: a permit always comes.
            let permit = sim.placing.acquire().await;
            let placing = sim.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                place_order(&placing, &ctx, &key, mode, &body, &sha)
            })
            .await;
            drop(permit);
            drop(guard);
            outcome
        })
    };
    match work.await {
        Err(e) | Ok(Err(e)) => internal(e).into_response(),
        Ok(Ok(Err(e))) => internal(e).into_response(),
        Ok(Ok(Ok(outcome))) => deliver(&sim, outcome),
    }
}

/// The answer of finished work, unless a fault is injected on the way back: the connection
/// dropped (after creating an order) or a 504 although the work is done.
fn deliver(sim: &Sim, outcome: Outcome) -> Response {
    let faults = &sim.config.faults;
    if outcome.created && sim.chance.roll(faults.drop_rate) {
        sim.stat(|s| s.dropped += 1);
        let mut response = raw(outcome.status, outcome.body);
        response.extensions_mut().insert(DropConnection);
        response
    } else if sim.chance.roll(faults.timeout_rate) {
        // The work is done and its answer kept under the key; this request only sees the
        // gateway give up.
        sim.stat(|s| s.timeouts += 1);
        error(504, "timeout", "The request timed out.").into_response()
    } else {
        raw(outcome.status, outcome.body)
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
    let key = idempotency_key(headers)?;
    let mode = execution_mode(headers)?;
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

/// `X-Idempotency-Key`: required, readable, not blank, at most [`MAX_IDEMPOTENCY_KEY`] long.
fn idempotency_key(headers: &HeaderMap) -> Result<String, Refusal> {
    match header_text(headers, "x-idempotency-key") {
        None => Err(bad_request(
            "The X-Idempotency-Key header is required to create an order.",
        )),
        Some(Err(())) => Err(bad_request(
            "The X-Idempotency-Key header is not readable text.",
        )),
        Some(Ok(k)) if k.trim().is_empty() => {
            Err(bad_request("The X-Idempotency-Key header is empty."))
        }
        Some(Ok(k)) if k.len() > MAX_IDEMPOTENCY_KEY => Err(bad_request(format!(
            "The X-Idempotency-Key header is longer than {MAX_IDEMPOTENCY_KEY} characters."
        ))),
        Some(Ok(k)) => Ok(k.to_string()),
    }
}

/// `X-Execution-Mode`: `async` (also when absent) or `sync`.
fn execution_mode(headers: &HeaderMap) -> Result<ExecutionMode, Refusal> {
    match header_text(headers, "x-execution-mode") {
        None => Ok(ExecutionMode::Async),
        Some(Ok("async")) => Ok(ExecutionMode::Async),
        Some(Ok("sync")) => Ok(ExecutionMode::Sync),
        Some(Ok(other)) => Err(error(
            400,
            "invalid_execution_mode",
            format!("Invalid execution mode `{other}`: X-Execution-Mode is sync or async."),
        )),
        Some(Err(())) => Err(error(
            400,
            "invalid_execution_mode",
            "Invalid execution mode: X-Execution-Mode is sync or async.",
        )),
    }
}
