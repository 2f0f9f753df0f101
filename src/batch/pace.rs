//! Pacing of order creation by the service's own rule: at most `limit` creations in any sliding
//! minute. Up to `limit` sends may go at once when the last minute had none; after that each
//! send waits until the oldest send of the window is a minute old. Sends made before this run
//! (another run on the same ledger, a resumed run) count against the window. When a 429 still
//! comes back, nobody sends for the wait it asks for, and the limit drops below what the window
//! held when the 429 came: an account whose limit is lower than the published one is found by
//! its first 429s, and the run keeps under it from then on.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The service's window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Added to the window: a send leaves here before it reaches the service, and the network can
/// make two sends a minute apart here arrive less than a minute apart there.
pub const MARGIN: Duration = Duration::from_secs(1);
/// After a 429, the limit becomes this share of the sends the window held.
const AFTER_429: f64 = 0.9;
/// No 429 lowers the limit below this: a window holding fewer sends than any limit the service
/// has published (60 a minute, in its oldest documentation) was not refused for its rate.
const LOWEST_LIMIT: usize = 60;

#[derive(Debug)]
pub struct Pacer {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    /// When the sends of the last window went, oldest first.
    sent: VecDeque<Instant>,
    paused_until: Instant,
}

impl Inner {
    fn forget_old(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW + MARGIN)
        {
            self.sent.pop_front();
        }
    }

    /// When the next send may go.
    fn next_slot(&self, now: Instant) -> Instant {
        let by_window = if self.sent.len() < self.limit {
            now
        } else {
            // The send that must leave the window first.
            let k = self.sent.len() - self.limit;
            self.sent[k] + WINDOW + MARGIN
        };
        by_window.max(now).max(self.paused_until)
    }
}

impl Pacer {
    /// At most `per_minute` sends in any sliding minute; `earlier` are the times of sends
    /// already made (by this ledger, before this run) that may still be in the window.
    pub fn new(per_minute: u32, earlier: &[Instant]) -> Self {
        let now = Instant::now();
        let mut sent: Vec<Instant> = earlier.iter().copied().filter(|t| *t <= now).collect();
        sent.sort();
        let mut inner = Inner {
            limit: per_minute.max(1) as usize,
            sent: sent.into(),
            paused_until: now,
        };
        inner.forget_old(now);
        Pacer {
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for this caller's turn to send, and counts the send.
    pub async fn ready(&self) {
        loop {
            let slot = {
                let mut inner = self.lock();
                let now = Instant::now();
                inner.forget_old(now);
                let slot = inner.next_slot(now);
                if slot <= now {
                    inner.sent.push_back(now);
                    return;
                }
                slot
            };
            tokio::time::sleep_until(slot).await;
        }
    }

    /// The service answered 429: nobody sends for `wait`, and the limit drops below what the
    /// window held.
    pub fn throttled(&self, wait: Duration) {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.forget_old(now);
        let until = now + wait;
        if until > inner.paused_until {
            inner.paused_until = until;
        }
        let held = inner.sent.len();
        let lower = (((held as f64) * AFTER_429).floor() as usize).max(LOWEST_LIMIT);
        inner.limit = inner.limit.min(lower).max(1);
    }

    /// Sends allowed in a sliding minute now.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Sends of the current window.
    pub fn in_window(&self) -> usize {
        let mut inner = self.lock();
        inner.forget_old(Instant::now());
        inner.sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_quiet_minute_allows_a_burst_then_the_window_decides() {
        let pacer = Pacer::new(300, &[]);
        let t0 = Instant::now();
        for _ in 0..300 {
            pacer.ready().await;
        }
        assert_eq!(Instant::now(), t0, "300 sends at once");
        pacer.ready().await;
        assert_eq!(
            Instant::now() - t0,
            WINDOW + MARGIN,
            "the 301st waits a minute"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sends_of_an_earlier_run_count_against_the_window() {
        let t0 = Instant::now();
        let earlier: Vec<Instant> = (0..300).map(|_| t0).collect();
        tokio::time::advance(Duration::from_secs(20)).await;
        let pacer = Pacer::new(300, &earlier);
        assert_eq!(pacer.in_window(), 300);
        pacer.ready().await;
        assert_eq!(Instant::now() - t0, WINDOW + MARGIN);
        // Sends older than the window do not count.
        let later = Pacer::new(300, &earlier);
        assert_eq!(later.in_window(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn no_sliding_minute_ever_holds_more_than_the_limit() {
        let pacer = Pacer::new(7, &[]);
        let mut times = Vec::new();
        for i in 0..40 {
            pacer.ready().await;
            times.push(Instant::now());
            tokio::time::advance(Duration::from_millis(300 * (i % 5))).await;
        }
        for (i, t) in times.iter().enumerate() {
            let within = times[i..].iter().filter(|u| **u - *t < WINDOW).count();
            assert!(within <= 7, "{within} sends within a minute from send {i}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_in_a_quiet_window_pauses_but_does_not_lower_the_limit_below_the_lowest_published()
     {
        let pacer = Pacer::new(300, &[]);
        for _ in 0..3 {
            pacer.ready().await;
        }
        pacer.throttled(Duration::from_secs(5));
        assert_eq!(pacer.limit(), LOWEST_LIMIT);
        let slow = Pacer::new(10, &[]);
        slow.ready().await;
        slow.throttled(Duration::from_secs(5));
        assert_eq!(slow.limit(), 10, "never above what was asked for");
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_pauses_and_keeps_the_run_under_the_observed_limit() {
        let pacer = Pacer::new(300, &[]);
        for _ in 0..200 {
            pacer.ready().await;
        }
        let t0 = Instant::now();
        pacer.throttled(Duration::from_secs(5));
        assert_eq!(pacer.limit(), 180, "below what the window held at the 429");
        pacer.ready().await;
        assert!(Instant::now() - t0 >= WINDOW, "the window holds 200 > 180");
    }
}
