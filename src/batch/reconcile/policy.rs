//! When reconciliation may give up an in-doubt intent's key: the service keeps a server error
//! under its key, and no request of it can still be at work there ([`key_is_spent`], after the
//! settling time, [`settle_time`]).

use std::time::Duration;

use crate::api::client::is_loopback_host;
use crate::batch::in_doubt;
use crate::ledger::{self, BatchRecord, OrderRecord};

/// How long after its last send an intent's key may be given up (see [`key_is_spent`]): far
/// longer than the service needs to finish a request it is still working on (a gateway may
/// answer 502 or 504 while the service goes on and creates the order). Not shortened by a short
/// in-doubt window; only rehearsals and tests on the simulator shorten it, with
/// `PAYBATCH_SETTLE_SECONDS`.
pub const SETTLE: Duration = Duration::from_secs(10 * 60);

/// [`SETTLE`], or `shorter` (the seconds `PAYBATCH_SETTLE_SECONDS` gives,
/// [`crate::settings::settle_override`]) when `batch` runs on a simulator (the embedded one, or
/// a service on this machine's loopback address); never for a service elsewhere, whatever the
/// variable says.
pub fn settle_time(batch: &BatchRecord, shorter: Option<Duration>) -> Duration {
    let local = batch.environment == "sim"
        || url::Url::parse(&batch.base_url).is_ok_and(|u| is_loopback_host(&u));
    if !local {
        return SETTLE;
    }
    shorter.unwrap_or(SETTLE)
}

/// Whether an in-doubt intent that the service holds no order for has a key that can never
/// create one. The service keeps every answer under its key, server errors too, and replays it
/// for the same key and body: an intent whose last answer was a server error and that has been
/// in doubt for longer than `window` keeps getting that answer. Its last send must also be older
/// than `settle` ([`settle_time`]), so that no request of it can still be at work at the service.
/// Such a key is given up: its rows are REJECTED, and `paybatch retry` sends them under a new
/// key. Any other intent the service never created is sent again with its key.
pub fn key_is_spent(order: &OrderRecord, window: Duration, settle: Duration) -> bool {
    in_doubt::order_too_long(order, window)
        && order
            .last_http_status
            .is_some_and(|s| (500..=599).contains(&s))
        && ledger::older_than(order.last_sent_at.as_deref(), settle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::OrderState;

    fn ago(minutes: i64) -> Option<String> {
        Some(
            (chrono::Utc::now() - chrono::Duration::minutes(minutes))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
    }

    /// In doubt for two hours, last sent 20 minutes ago, last answered 500.
    fn in_doubt() -> OrderRecord {
        OrderRecord {
            id: 1,
            batch_id: 1,
            idempotency_key: "k".into(),
            body: Vec::new(),
            mode: ledger::OrderMode::Async,
            payment_currency: "USD".into(),
            payment_method: crate::api::models::PaymentMethodType::AccountBalance,
            card_id: None,
            state: OrderState::Intent,
            service_order_id: None,
            sends: 9,
            polls: 0,
            created_at: ledger::now(),
            first_sent_at: ago(120),
            last_sent_at: ago(20),
            last_http_status: Some(500),
            accepted_at: None,
            error_type: None,
            error_message: None,
        }
    }

    #[test]
    fn the_settling_time_is_shortened_only_for_a_simulator() {
        let settle_from = |batch: &BatchRecord, seconds: Option<&str>| {
            settle_time(batch, crate::settings::settle_seconds(seconds))
        };
        let batch = |environment: &str, base_url: &str| BatchRecord {
            id: 1,
            name: "b".into(),
            input_path: "b.csv".into(),
            input_hash: "h".into(),
            headers: Vec::new(),
            environment: environment.into(),
            base_url: base_url.into(),
            key_fingerprint: "sha256:0".into(),
            created_at: ledger::now(),
            input_format: None,
            result_format: None,
        };
        let one = Some("1");
        let second = Duration::from_secs(1);
        assert_eq!(
            settle_from(&batch("sim", "embedded-simulator"), one),
            second
        );
        for local in [
            "http://127.0.0.1:9/v2",
            "http://localhost:9/v2",
            "http://[::1]:9/v2",
        ] {
            assert_eq!(settle_from(&batch("custom", local), one), second, "{local}");
        }
        for remote in ["https://api.example.com/v2", "not a url"] {
            assert_eq!(
                settle_from(&batch("custom", remote), one),
                SETTLE,
                "{remote}"
            );
        }
        assert_eq!(
            settle_from(&batch("production", "https://x/v2"), one),
            SETTLE
        );
        let local = batch("sim", "embedded-simulator");
        for bad in ["1e20", "-1", "NaN", "soon"] {
            assert_eq!(settle_from(&local, Some(bad)), SETTLE, "{bad}");
        }
        assert_eq!(settle_from(&local, None), SETTLE);
    }

    #[test]
    fn a_key_is_spent_only_after_a_kept_server_error_past_the_window_and_the_settling_time() {
        let hour = Duration::from_secs(3600);
        assert!(key_is_spent(&in_doubt(), hour, SETTLE));
        let changed = |f: fn(&mut OrderRecord)| {
            let mut o = in_doubt();
            f(&mut o);
            key_is_spent(&o, hour, SETTLE)
        };
        assert!(changed(|o| o.last_http_status = Some(503)));
        assert!(!changed(|o| o.last_http_status = None), "no answer: resend");
        assert!(!changed(|o| o.last_http_status = Some(429)));
        assert!(!changed(|o| o.last_http_status = Some(400)));
        assert!(!changed(|o| o.first_sent_at = ago(30)), "inside the window");
        assert!(
            !changed(|o| o.last_sent_at = ago(5)),
            "may still be at work"
        );
        assert!(!changed(|o| o.last_sent_at = None));
        assert!(!changed(|o| o.sends = 0));
        assert!(!changed(|o| o.state = OrderState::Accepted));
        // A short window does not shorten the settling time.
        let mut o = in_doubt();
        o.first_sent_at = ago(3);
        o.last_sent_at = ago(2);
        let minute = Duration::from_secs(60);
        assert!(!key_is_spent(&o, minute, SETTLE));
        assert!(key_is_spent(&o, minute, minute));
    }
}
