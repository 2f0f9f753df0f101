//! The answers of the simulator's endpoints: JSON bodies, the published error shape `{type,
//! message, help}` (with `details` for 422) and its `help` texts, and the early error answers
//! handlers return with `?` ([`Refusal`]), including the 429 and the injected 5xx answers.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};

use crate::Sim;

/// An early (error) answer: handlers use `?` on it.
pub(super) type Answered<T> = Result<T, Refusal>;

pub(super) fn json_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    // Our own plain data always serialises; the fallback only keeps this total.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

pub(super) fn raw(status: u16, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn json<T: Serialize>(status: u16, value: &T) -> Response {
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

pub(super) fn error_bytes(
    kind: &str,
    message: impl Into<String>,
    details: Option<Value>,
) -> Vec<u8> {
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
pub(super) struct Refusal {
    status: u16,
    body: Vec<u8>,
    retry_after: Option<u32>,
}

impl Refusal {
    pub(super) fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub(super) fn into_response(self) -> Response {
        let mut response = raw(self.status, self.body);
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

pub(super) fn error(status: u16, kind: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        body: error_bytes(kind, message, None),
        retry_after: None,
    }
}

/// A `422 validation_error` with these `details` (a list of `{type, message, location}`).
pub(super) fn validation_error(details: Value) -> Refusal {
    Refusal {
        status: 422,
        body: error_bytes(
            "validation_error",
            "There was an issue with the request payload: see details.",
            Some(details),
        ),
        retry_after: None,
    }
}

pub(super) fn internal(e: impl std::fmt::Display) -> Refusal {
    tracing::error!("simulator state: {e}");
    error(
        500,
        "internal_server_error",
        "The simulator could not read or write its state.",
    )
}

pub(super) fn bad_request(message: impl Into<String>) -> Refusal {
    error(400, "bad_request", message)
}

pub(super) fn not_found(message: impl Into<String>) -> Refusal {
    error(404, "not_found", message)
}

pub(super) fn pagination_error(message: impl Into<String>) -> Refusal {
    error(400, "pagination_error", message)
}

/// The 429 answer: the published `RateExceededResponse`, not the error shape.
pub(super) fn too_many_requests(sim: &Sim) -> Refusal {
    sim.stat(|s| s.answered_429 += 1);
    Refusal {
        status: 429,
        body: json_bytes(&json!({"error": "rate exceeded"})),
        retry_after: Some(5),
    }
}

pub(super) fn injected_server_error(sim: &Sim) -> Refusal {
    sim.stat(|s| s.injected_5xx += 1);
    let escape = sim.chance.roll(sim.config.faults.hostile.escape_rate);
    if escape {
        sim.stat(|s| s.escaped_errors += 1);
    }
    let said = |message: &str| {
        if escape {
            crate::disguise::escaped(message)
        } else {
            message.to_string()
        }
    };
    if sim.chance.server_error_status() == 500 {
        error(
            500,
            "internal_server_error",
            said("The service failed to handle the request (simulated fault)."),
        )
    } else {
        error(
            503,
            "service_unavailable",
            said("The service is unavailable (simulated fault)."),
        )
        .retry_after(1)
    }
}

pub(super) fn done(result: Answered<Response>) -> Response {
    result.unwrap_or_else(Refusal::into_response)
}
