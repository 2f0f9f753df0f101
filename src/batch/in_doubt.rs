//! The one rule for an order in doubt too long: an intent sent without an answer recorded, first
//! sent longer ago than the in-doubt window (`--in-doubt-hours` of `run`, `reconcile` and
//! `status`, [`DEFAULT_IN_DOUBT_HOURS`] by default). A run does not send such an intent again
//! blindly (reconciliation looks it up), reconciliation may give its key up
//! (`reconcile::policy::key_is_spent`), and `status` sends it to reconciliation.

use std::time::Duration;

use crate::ledger::{self, OrderRecord, OrderState};

/// Hours an order may be in doubt before it is looked up at the service (`--in-doubt-hours`).
pub const DEFAULT_IN_DOUBT_HOURS: f64 = 24.0;

/// The window of `hours` (a number `--in-doubt-hours` accepts: finite, not negative).
pub fn window_of_hours(hours: f64) -> Duration {
    Duration::from_secs_f64(hours * 3600.0)
}

/// The window when none is given: [`DEFAULT_IN_DOUBT_HOURS`].
pub fn default_window() -> Duration {
    window_of_hours(DEFAULT_IN_DOUBT_HOURS)
}

/// Whether an intent sent `sends` times, first at `first_sent_at`, has been in doubt for longer
/// than `window`. A time the ledger cannot read is not taken as old.
pub fn too_long(sends: i64, first_sent_at: Option<&str>, window: Duration) -> bool {
    sends > 0 && ledger::older_than(first_sent_at, window)
}

/// [`too_long`] for an order of the ledger: an intent (no answer recorded) only.
pub fn order_too_long(order: &OrderRecord, window: Duration) -> bool {
    order.state == OrderState::Intent
        && too_long(order.sends, order.first_sent_at.as_deref(), window)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours_ago(hours: i64) -> Option<String> {
        Some(
            (chrono::Utc::now() - chrono::Duration::hours(hours))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
    }

    #[test]
    fn an_intent_is_in_doubt_too_long_once_sent_longer_ago_than_the_window() {
        let day = default_window();
        assert_eq!(day, Duration::from_secs(24 * 3600));
        assert!(too_long(1, hours_ago(25).as_deref(), day));
        assert!(!too_long(1, hours_ago(23).as_deref(), day));
        assert!(too_long(1, hours_ago(2).as_deref(), window_of_hours(1.0)));
        assert!(too_long(3, hours_ago(1).as_deref(), window_of_hours(0.5)));
        // Never sent, or sent at a time the ledger cannot read: not in doubt too long.
        assert!(!too_long(0, hours_ago(48).as_deref(), day));
        assert!(!too_long(1, None, day));
        assert!(!too_long(1, Some("yesterday"), day));
    }
}
