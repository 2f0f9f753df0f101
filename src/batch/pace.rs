//! Pacing of order creation: evenly spaced sends at a fixed rate (no bursts, so that the
//! service's sliding one-minute window never sees more than its limit), and when a 429 still
//! comes back, a pause for everyone and a slower pace from then on.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How much slower the pace gets after each 429.
const SLOWDOWN: f64 = 1.1;

#[derive(Debug)]
pub struct Pacer {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    period: Duration,
    next: Instant,
    paused_until: Instant,
}

impl Pacer {
    /// `per_minute` sends a minute, evenly spaced.
    pub fn new(per_minute: f64) -> Self {
        let per_minute = per_minute.max(0.01);
        let now = Instant::now();
        Pacer {
            inner: Mutex::new(Inner {
                period: Duration::from_secs_f64(60.0 / per_minute),
                next: now,
                paused_until: now,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for this caller's turn to send.
    pub async fn ready(&self) {
        loop {
            let slot = {
                let mut inner = self.lock();
                let slot = inner.next.max(Instant::now()).max(inner.paused_until);
                inner.next = slot + inner.period;
                slot
            };
            tokio::time::sleep_until(slot).await;
            // A 429 may have paused everyone while this caller waited for its slot.
            if Instant::now() >= self.lock().paused_until {
                return;
            }
        }
    }

    /// The service answered 429: nobody sends for `wait`, and the pace slows down.
    pub fn throttled(&self, wait: Duration) {
        let mut inner = self.lock();
        let until = Instant::now() + wait;
        if until > inner.paused_until {
            inner.paused_until = until;
        }
        inner.period = inner.period.mul_f64(SLOWDOWN);
    }

    /// The current spacing between two sends.
    pub fn period(&self) -> Duration {
        self.lock().period
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sends_are_evenly_spaced() {
        let pacer = Pacer::new(120.0);
        let t0 = Instant::now();
        for _ in 0..5 {
            pacer.ready().await;
        }
        // Five sends at 0, 0.5, 1.0, 1.5, 2.0 s.
        assert_eq!(Instant::now() - t0, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_pauses_and_slows_down() {
        let pacer = Pacer::new(60.0);
        pacer.ready().await;
        let t0 = Instant::now();
        pacer.throttled(Duration::from_secs(5));
        pacer.ready().await;
        assert!(Instant::now() - t0 >= Duration::from_secs(5));
        assert!(pacer.period() > Duration::from_secs(1));
    }
}
