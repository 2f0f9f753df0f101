//! Errors of the client, classified for the caller: transient (retry with the same key and
//! body) or final (a person must change something).

use std::time::Duration;

use super::models::{ErrorBody, normalize_error_type};

/// What the caller should do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retry later with the same idempotency key and the same body.
    Transient,
    /// The service refused the request; retrying the same request cannot help.
    Final,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The service answered with an error body (4xx, 5xx, or the in-progress answer).
    #[error("the service answered {status}: {kind}: {}", body.message)]
    Service {
        status: u16,
        /// Normalised (snake_case) error type.
        kind: String,
        body: Box<ErrorBody>,
        /// `Retry-After`, when the service sent one.
        retry_after: Option<Duration>,
    },
    /// No answer: connection refused, reset or dropped, or a timeout.
    #[error("no answer from the service: {0}")]
    Transport(String),
    /// An answer that cannot be read as the shape its status announces (truncated JSON, an HTML
    /// error page, a 200 with an error body, an unexpected status).
    #[error("unreadable answer from the service (HTTP {status}): {reason}")]
    Protocol { status: u16, reason: String },
    /// A configuration problem found before any request (bad base URL, bad key).
    #[error("{0}")]
    Config(String),
}

impl ApiError {
    /// Builds a service error from a status and an error body.
    pub fn service(status: u16, body: ErrorBody, retry_after: Option<Duration>) -> Self {
        ApiError::Service {
            status,
            kind: normalize_error_type(&body.kind),
            body: Box::new(body),
            retry_after,
        }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            ApiError::Service { status, kind, .. } => {
                if kind == "idempotency_in_progress"
                    || kind == "timeout"
                    || kind == "internal_server_error"
                    || *status == 102
                    || *status == 408
                    || *status == 429
                    || *status >= 500
                {
                    ErrorClass::Transient
                } else {
                    ErrorClass::Final
                }
            }
            ApiError::Transport(_) | ApiError::Protocol { .. } => ErrorClass::Transient,
            ApiError::Config(_) => ErrorClass::Final,
        }
    }

    pub fn is_transient(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// The normalised error type, or a paybatch-made one for errors without a body.
    pub fn kind(&self) -> &str {
        match self {
            ApiError::Service { kind, .. } => kind,
            ApiError::Transport(_) => "connection_error",
            ApiError::Protocol { .. } => "protocol_error",
            ApiError::Config(_) => "configuration_error",
        }
    }

    /// HTTP status, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Service { status, .. } | ApiError::Protocol { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The service does not offer this endpoint here (404, 405 or 501).
    pub fn is_not_offered(&self) -> bool {
        matches!(self.status(), Some(404 | 405 | 501))
    }

    pub fn is_rate_limited(&self) -> bool {
        self.status() == Some(429)
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Service { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The service's message, the problems its `details` list (each with its location), and its
    /// help, for a person.
    pub fn message(&self) -> String {
        match self {
            ApiError::Service { body, .. } => body.describe(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &str) -> ErrorBody {
        ErrorBody {
            kind: kind.into(),
            message: "m".into(),
            help: Some("h".into()),
            details: None,
        }
    }

    #[test]
    fn both_spellings_of_not_found_are_final_and_normalised() {
        for spelling in ["not-found", "not_found", "Not-Found"] {
            let e = ApiError::service(404, body(spelling), None);
            assert_eq!(e.kind(), "not_found");
            assert_eq!(e.class(), ErrorClass::Final);
        }
    }

    #[test]
    fn the_message_shows_each_problem_with_its_location() {
        let body: ErrorBody = serde_json::from_str(
            r#"{"type":"validation_error","message":"Invalid order","help":null,
                "details":[{"type":"value_error","message":"below the minimum","location":["items","0","face_value"]},
                           {"type":"missing","message":"Field required","location":["payment_method","currency"]}]}"#,
        )
        .expect("a null help is read as none");
        assert_eq!(body.help, None);
        let e = ApiError::service(422, body, None);
        assert_eq!(
            e.message(),
            "Invalid order [items.0.face_value: below the minimum; payment_method.currency: Field required]"
        );
        // The older object form, and a body without help.
        let old: ErrorBody = serde_json::from_str(
            r#"{"type":"validation_error","message":"m","details":{"items[0].face_value":"too big"}}"#,
        )
        .unwrap();
        assert_eq!(old.detail_lines(), ["items[0].face_value: too big"]);
        assert_eq!(
            ApiError::service(422, old, None).message(),
            "m [items[0].face_value: too big]"
        );
    }

    #[test]
    fn transient_and_final_classes() {
        assert!(ApiError::service(500, body("internal_server_error"), None).is_transient());
        assert!(ApiError::service(504, body("timeout"), None).is_transient());
        assert!(ApiError::service(429, body("too_many_requests"), None).is_transient());
        assert!(ApiError::service(409, body("idempotency-in-progress"), None).is_transient());
        assert!(!ApiError::service(422, body("validation_error"), None).is_transient());
        assert!(!ApiError::service(400, body("idempotency_validation_error"), None).is_transient());
        assert!(!ApiError::service(401, body("unauthorized"), None).is_transient());
        assert!(ApiError::Transport("reset".into()).is_transient());
    }
}
