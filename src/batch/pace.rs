//! Pacing of order creation by the service's own rule: at most `limit` creations in any sliding
//! minute, each counted when it reaches the service. Up to `limit` sends may go at once when the
//! last minute had none; after that a send waits until a send of the window has left it. A send
//! reaches the service no later than its answer comes back (or than it fails here: a request
//! given up no longer travels), so a send of this run leaves the window a minute after it
//! ended here, plus [`CLOCK_MARGIN`]; a send still in flight has not left it. Sends made before
//! this run (another run on the same ledger, a resumed run) count against the window until a
//! minute and [`MARGIN`] after they went, as their ends are not known. When a 429 still comes
//! back, nobody sends for the wait it asks for, and the limit drops below what the window held
//! when the 429 came: an account whose limit is lower than the published one is found by its
//! first 429s, and the run keeps under it from then on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The service's window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Added to the window for a send whose end is not known (an earlier run's): a send leaves here
/// before it reaches the service, and the network can make two sends a minute apart here arrive
/// less than a minute apart there.
pub const MARGIN: Duration = Duration::from_secs(1);
/// Added to the window for a send of this run, counted from its end here: the service's clock
/// and this one may run at slightly different rates (a minute at 100 parts a million apart is
/// 6 ms; 25 ms allows 400). The service counts a send before it answers it, and the next send
/// reaches it after it leaves here: nothing else needs a margin.
pub const CLOCK_MARGIN: Duration = Duration::from_millis(25);
/// After a 429, the limit becomes this share of the sends the window held.
const AFTER_429: f64 = 0.9;
/// No 429 lowers the limit below this: a window holding fewer sends than any limit the service
/// has published (60 a minute, in its oldest documentation) was not refused for its rate.
const LOWEST_LIMIT: usize = 60;

#[derive(Debug)]
pub struct Pacer {
    inner: Mutex<Inner>,
    /// Told when a send ends: a send waiting for one in flight to leave the window looks again.
    ended: Notify,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    /// The sends of the window, in the order they went: when each leaves the window, `None`
    /// while it is in flight.
    sent: VecDeque<Send>,
    /// The number given to the next send.
    next: u64,
    paused_until: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Send {
    number: u64,
    leaves: Option<Instant>,
}

impl Inner {
    fn forget_old(&mut self, now: Instant) {
        self.sent.retain(|s| s.leaves.is_none_or(|t| t > now));
    }

    /// When the next send may go; `None` when that depends on sends still in flight.
    fn next_slot(&self, now: Instant) -> Option<Instant> {
        let by_window = if self.sent.len() < self.limit {
            Some(now)
        } else {
            // Enough sends must leave the window to bring it under the limit: the latest of
            // the first of them to leave.
            let must_leave = self.sent.len() - self.limit + 1;
            let mut leaving: Vec<Option<Instant>> = self.sent.iter().map(|s| s.leaves).collect();
            leaving.sort_by_key(|t| (t.is_none(), *t));
            leaving[must_leave - 1]
        };
        by_window.map(|t| t.max(now).max(self.paused_until))
    }
}

/// One send counted by the [`Pacer`]: it leaves the window a minute after it ends, which is
/// when this is dropped (or [`Slot::ended`] is called).
#[derive(Debug)]
pub struct Slot {
    pacer: Arc<Pacer>,
    number: u64,
}

impl Slot {
    /// The send ended: its answer came back, or it failed here.
    pub fn ended(self) {}
}

impl Drop for Slot {
    fn drop(&mut self) {
        let now = Instant::now();
        {
            let mut inner = self.pacer.lock();
            if let Some(s) = inner.sent.iter_mut().find(|s| s.number == self.number) {
                s.leaves = Some(now + WINDOW + CLOCK_MARGIN);
            }
        }
        self.pacer.ended.notify_waiters();
    }
}

impl Pacer {
    /// At most `per_minute` sends in any sliding minute; `earlier` are the times of sends
    /// already made (by this ledger, before this run) that may still be in the window.
    pub fn new(per_minute: u32, earlier: &[Instant]) -> Arc<Self> {
        let now = Instant::now();
        let mut sent: Vec<Instant> = earlier.iter().copied().filter(|t| *t <= now).collect();
        sent.sort();
        let sent = sent.into_iter().enumerate().map(|(i, t)| Send {
            number: i as u64,
            leaves: Some(t + WINDOW + MARGIN),
        });
        let mut inner = Inner {
            limit: per_minute.max(1) as usize,
            sent: sent.collect(),
            next: earlier.len() as u64,
            paused_until: now,
        };
        inner.forget_old(now);
        Arc::new(Pacer {
            inner: Mutex::new(inner),
            ended: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for this caller's turn to send, and counts the send until the [`Slot`] is dropped
    /// (then a minute more).
    pub async fn ready(self: &Arc<Self>) -> Slot {
        loop {
            // Asked for before the look, so that a send ending meanwhile is not missed.
            let ended = self.ended.notified();
            let slot = {
                let mut inner = self.lock();
                let now = Instant::now();
                inner.forget_old(now);
                match inner.next_slot(now) {
                    Some(slot) if slot <= now => {
                        let number = inner.next;
                        inner.next += 1;
                        inner.sent.push_back(Send {
                            number,
                            leaves: None,
                        });
                        return Slot {
                            pacer: Arc::clone(self),
                            number,
                        };
                    }
                    slot => slot,
                }
            };
            match slot {
                Some(slot) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(slot) => {}
                        () = ended => {}
                    }
                }
                None => ended.await,
            }
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

    /// When the next send may go, when it must wait for the window (or a pause after a 429);
    /// `None` when one may go now, or when that depends on sends still in flight.
    pub fn free_at(&self) -> Option<Instant> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.forget_old(now);
        inner.next_slot(now).filter(|slot| *slot > now)
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
        let mut burst = Vec::new();
        for _ in 0..300 {
            burst.push(pacer.ready().await);
        }
        assert_eq!(Instant::now(), t0, "300 sends at once");
        // Their answers come back 100 ms later.
        tokio::time::advance(Duration::from_millis(100)).await;
        drop(burst);
        pacer.ready().await.ended();
        assert_eq!(
            Instant::now() - t0,
            Duration::from_millis(100) + WINDOW + CLOCK_MARGIN,
            "the 301st waits until the first answered is a minute old"
        );
    }

    /// `free_at` tells when the window lets the next send go: never while a slot is free or
    /// while the wait depends on sends in flight.
    #[tokio::test(start_paused = true)]
    async fn the_window_tells_when_the_next_send_may_go() {
        let pacer = Pacer::new(2, &[]);
        assert_eq!(pacer.free_at(), None, "a slot is free");
        let first = pacer.ready().await;
        let second = pacer.ready().await;
        assert_eq!(
            pacer.free_at(),
            None,
            "both in flight: it depends on their ends"
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        let ended = Instant::now();
        first.ended();
        assert_eq!(pacer.free_at(), Some(ended + WINDOW + CLOCK_MARGIN));
        second.ended();
        tokio::time::advance(WINDOW + CLOCK_MARGIN).await;
        assert_eq!(pacer.free_at(), None, "the first left the window");
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_in_flight_stays_in_the_window_until_it_ends() {
        let pacer = Pacer::new(2, &[]);
        let t0 = Instant::now();
        let slow = pacer.ready().await;
        pacer.ready().await.ended();
        let third = pacer.ready().await;
        assert_eq!(
            Instant::now() - t0,
            WINDOW + CLOCK_MARGIN,
            "after the ended one"
        );
        // Two sends without an answer: either may reach the service at any time, so the
        // window stays full however long they take.
        let blocked = tokio::time::timeout(10 * WINDOW, pacer.ready()).await;
        assert!(
            blocked.is_err(),
            "no send while the window holds two in flight"
        );
        let next = tokio::spawn({
            let pacer = Arc::clone(&pacer);
            async move {
                pacer.ready().await.ended();
                Instant::now()
            }
        });
        tokio::time::advance(Duration::from_secs(5)).await;
        let ended = Instant::now();
        slow.ended();
        let went = next.await.expect("the waiting send");
        assert_eq!(went, ended + WINDOW + CLOCK_MARGIN);
        third.ended();
    }

    #[tokio::test(start_paused = true)]
    async fn sends_of_an_earlier_run_count_against_the_window() {
        let t0 = Instant::now();
        let earlier: Vec<Instant> = (0..300).map(|_| t0).collect();
        tokio::time::advance(Duration::from_secs(20)).await;
        let pacer = Pacer::new(300, &earlier);
        assert_eq!(pacer.in_window(), 300);
        pacer.ready().await.ended();
        assert_eq!(Instant::now() - t0, WINDOW + MARGIN);
        // Sends older than the window do not count.
        let later = Pacer::new(300, &earlier);
        assert_eq!(later.in_window(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn no_sliding_minute_ever_holds_more_than_the_limit_where_the_sends_arrive() {
        let pacer = Pacer::new(7, &[]);
        // Each send reaches the service at some time between its start and its end here.
        let mut arrived = Vec::new();
        for i in 0u64..60 {
            let slot = pacer.ready().await;
            let latency = Duration::from_millis(50 + 400 * (i % 4));
            let ahead = Duration::from_millis(300 * (i % 5));
            // A send that goes and one that takes its whole latency to arrive.
            let arrival = if i % 2 == 0 {
                Instant::now()
            } else {
                Instant::now() + latency
            };
            arrived.push(arrival);
            tokio::time::advance(latency).await;
            slot.ended();
            tokio::time::advance(ahead).await;
        }
        arrived.sort();
        for (i, t) in arrived.iter().enumerate() {
            let within = arrived[i..].iter().filter(|u| **u - *t < WINDOW).count();
            assert!(
                within <= 7,
                "{within} sends arrived within a minute from send {i}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_in_a_quiet_window_pauses_but_does_not_lower_the_limit_below_the_lowest_published()
     {
        let pacer = Pacer::new(300, &[]);
        for _ in 0..3 {
            pacer.ready().await.ended();
        }
        pacer.throttled(Duration::from_secs(5));
        assert_eq!(pacer.limit(), LOWEST_LIMIT);
        let slow = Pacer::new(10, &[]);
        slow.ready().await.ended();
        slow.throttled(Duration::from_secs(5));
        assert_eq!(slow.limit(), 10, "never above what was asked for");
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_pauses_and_keeps_the_run_under_the_observed_limit() {
        let pacer = Pacer::new(300, &[]);
        for _ in 0..200 {
            pacer.ready().await.ended();
        }
        let t0 = Instant::now();
        pacer.throttled(Duration::from_secs(5));
        assert_eq!(pacer.limit(), 180, "below what the window held at the 429");
        pacer.ready().await.ended();
        assert!(Instant::now() - t0 >= WINDOW, "the window holds 200 > 180");
    }
}
