//! How long to wait before asking the service again: one policy for the reads the client
//! repeats ([`READS`]), the sending of an order that failed for a moment ([`SENDS`]) and the
//! polling of accepted orders ([`POLLING`], [`POLLING_YOUNG`]). Each caller keeps its own
//! numbers, side by side here; what the service asks for (its `Retry-After`, and
//! [`RATE_LIMITED_FLOOR`] after a 429) is the same [`floor`] for all.

use std::time::Duration;

use rand::Rng;

use super::error::ApiError;

/// The longest `Retry-After` honoured: a longer one (a broken or hostile answer) is read as
/// this, so that no answer can make paybatch wait for hours while it holds the ledger.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The least wait after a 429 (too many requests), whatever the service's `Retry-After` says.
pub const RATE_LIMITED_FLOOR: Duration = Duration::from_secs(5);

/// Whether a wait is the grown one, or drawn at random between nothing and it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    None,
    /// Uniform between zero and the grown wait ("full jitter"): tries that failed together
    /// do not come back together.
    Full,
}

/// Waits that grow: `first`, then each `factor` times the one before, never more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub first: Duration,
    pub factor: f64,
    pub cap: Duration,
    pub jitter: Jitter,
}

/// A read that is safe to repeat ([`super::client::read_retrying`]): 0.5, 1, 2, 4 s, ...
pub const READS: Backoff = Backoff {
    first: Duration::from_millis(500),
    factor: 2.0,
    cap: MAX_RETRY_AFTER,
    jitter: Jitter::None,
};

/// An order sent again after a server error, a 429 or no answer: 0.25, 0.5, 1, ... s up to
/// 30 s, drawn at random below that.
pub const SENDS: Backoff = Backoff {
    first: Duration::from_millis(250),
    factor: 2.0,
    cap: Duration::from_secs(30),
    jitter: Jitter::Full,
};

/// The looks at accepted orders: 0.5 s, then 1.5 times longer each round, up to 10 s.
pub const POLLING: Backoff = Backoff {
    first: Duration::from_millis(500),
    factor: 1.5,
    cap: Duration::from_secs(10),
    jitter: Jitter::None,
};

/// [`POLLING`] while the newest order is young (most orders finish within seconds: each is
/// seen within half a second of it): every 0.5 s.
pub const POLLING_YOUNG: Backoff = Backoff {
    cap: Duration::from_millis(500),
    ..POLLING
};

impl Backoff {
    /// The wait that follows `wait`: `factor` times longer, at most `cap`.
    pub fn after(&self, wait: Duration) -> Duration {
        wait.mul_f64(self.factor).min(self.cap)
    }

    /// The wait before try `retry + 2` once `retry + 1` tries failed (0: the first wait),
    /// before any jitter.
    pub fn grown(&self, retry: u32) -> Duration {
        let mut wait = self.first.min(self.cap);
        for _ in 0..retry {
            let next = self.after(wait);
            if next == wait {
                break; // at the cap (or nothing): it stays there
            }
            wait = next;
        }
        wait
    }

    /// The wait before trying again after `e` ended try `retry + 1`: the grown wait (drawn
    /// below it with [`Jitter::Full`]), never less than what the service asks for
    /// ([`floor`]), never more than [`MAX_RETRY_AFTER`].
    pub fn wait(&self, retry: u32, e: &ApiError) -> Duration {
        let grown = self.grown(retry);
        let drawn = match self.jitter {
            Jitter::None => grown,
            Jitter::Full => {
                Duration::from_millis(rand::thread_rng().gen_range(0..=grown.as_millis() as u64))
            }
        };
        drawn.max(floor(e)).min(MAX_RETRY_AFTER)
    }
}

/// The least wait `e` asks for: the service's `Retry-After` (the client reads it as at most
/// [`MAX_RETRY_AFTER`]), and after a 429 at least [`RATE_LIMITED_FLOOR`].
pub fn floor(e: &ApiError) -> Duration {
    let asked = e.retry_after().unwrap_or_default();
    if e.is_rate_limited() {
        asked.max(RATE_LIMITED_FLOOR)
    } else {
        asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ErrorBody;

    fn answer(status: u16, retry_after: Option<u64>) -> ApiError {
        let kind = if status == 429 {
            "too_many_requests"
        } else {
            "internal_server_error"
        };
        let body = ErrorBody {
            kind: kind.into(),
            message: "try again".into(),
            help: None,
            details: None,
        };
        ApiError::service(status, body, retry_after.map(Duration::from_secs))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn waits_grow_by_their_factor_up_to_their_cap() {
        let reads: Vec<Duration> = (0..4).map(|n| READS.grown(n)).collect();
        assert_eq!(reads, [ms(500), ms(1000), ms(2000), ms(4000)]);
        let sends: Vec<Duration> = (0..9).map(|n| SENDS.grown(n)).collect();
        assert_eq!(
            sends,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000].map(ms)
        );
        assert_eq!(SENDS.grown(u32::MAX), ms(30000));
        assert_eq!(POLLING.after(ms(500)), ms(750));
        assert_eq!(POLLING.after(ms(8000)), ms(10000));
        assert_eq!(POLLING_YOUNG.after(ms(500)), ms(500));
        assert_eq!(POLLING.grown(100), ms(10000));
    }

    #[test]
    fn a_429_waits_at_least_the_floor_and_the_retry_after_it_carries() {
        assert_eq!(floor(&answer(429, None)), RATE_LIMITED_FLOOR);
        assert_eq!(floor(&answer(429, Some(2))), RATE_LIMITED_FLOOR);
        assert_eq!(floor(&answer(429, Some(12))), Duration::from_secs(12));
        assert_eq!(floor(&answer(503, None)), Duration::ZERO);
        assert_eq!(floor(&answer(503, Some(3))), Duration::from_secs(3));
        assert_eq!(READS.wait(0, &answer(429, None)), RATE_LIMITED_FLOOR);
        assert_eq!(READS.wait(3, &answer(429, None)), RATE_LIMITED_FLOOR);
        assert_eq!(READS.wait(1, &answer(503, Some(3))), Duration::from_secs(3));
        assert_eq!(READS.wait(3, &answer(503, Some(3))), ms(4000));
        assert_eq!(READS.wait(1, &answer(503, None)), ms(1000));
        for retry in 0..12 {
            assert!(SENDS.wait(retry, &answer(429, Some(7))) >= Duration::from_secs(7));
        }
    }

    #[test]
    fn a_jittered_wait_stays_between_the_floor_and_its_grown_value() {
        let mut below_grown = false;
        for _ in 0..200 {
            let wait = SENDS.wait(7, &answer(503, None));
            assert!(wait <= ms(30000), "{wait:?}");
            below_grown |= wait < ms(30000);
            assert!(SENDS.wait(0, &answer(503, None)) <= ms(250));
            assert!(SENDS.wait(0, &answer(503, Some(2))) >= Duration::from_secs(2));
        }
        assert!(below_grown, "200 draws all equal to the grown wait");
    }

    #[test]
    fn no_wait_is_longer_than_the_longest_retry_after() {
        assert_eq!(
            READS.wait(30, &answer(503, None)),
            MAX_RETRY_AFTER,
            "the reads' waits stop growing at the longest Retry-After"
        );
        assert_eq!(READS.wait(0, &answer(429, Some(600))), MAX_RETRY_AFTER);
    }
}
