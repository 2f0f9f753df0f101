//! How long a phase has left (`about 40 s left` in the progress lines a cron log gets): the
//! steps left at the pace the phase achieved over the last minute, no faster than the service
//! allows, and smoothed so that it does not jump back.
//!
//! The rule, step by step ([`TimeLeft::estimate`]):
//! 1. **The pace** is the steps done over the last [`PACE_WINDOW`] (since the phase started,
//!    when that is less), capped at the limit the phase is held to when it has one (the
//!    service's order creations a minute, for the sending). A burst that the rate limit allowed
//!    at once is thus not taken for the pace of what follows. While nothing got done in the
//!    window (the sending waits on the rate limit), the pace is the limit itself: the estimate
//!    goes on.
//! 2. **The raw estimate** is the steps left at that pace.
//! 3. **Smoothing**: the last estimate made from the pace counts down with the time that passed.
//!    A raw estimate at or below that count-down is shown (and counts down from then on): a
//!    phase that goes faster says so at once. A raw estimate above it is not shown, and the
//!    count-down is, unless the pace truly fell (below [`FELL`] of the pace the count-down was
//!    made with) or the count-down ran out with steps still left: then the estimate is made
//!    again from the pace, and says honestly that it will take longer.
//!
//! So a constant pace gives a steady count-down, a burst then a wait on the rate limit counts
//! down through the wait, and only a pace that truly fell makes an estimate go up.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The window the pace is measured over: the service's own (a sliding minute), over which a
/// burst and the wait after it average to what the service allows.
pub const PACE_WINDOW: Duration = Duration::from_secs(60);

/// The estimate goes up only once the pace fell below this share of the pace its count-down was
/// made with.
pub const FELL: f64 = 0.8;

/// The estimate of how long a phase has left (see the module's rule).
#[derive(Debug, Clone)]
pub struct TimeLeft {
    started: Instant,
    /// How many steps were done when, oldest first: the latest at or before the start of the
    /// window, then every change since.
    samples: VecDeque<(Instant, u64)>,
    /// The most steps a second the phase may go, if it is held to a limit.
    limit: Option<f64>,
    /// The estimate the count-down runs from.
    anchor: Option<Anchor>,
}

/// An estimate made from the pace: when, how many seconds it said, at which pace.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    at: Instant,
    left: f64,
    pace: f64,
}

impl TimeLeft {
    /// A phase that started at `started` with nothing done.
    pub fn new(started: Instant) -> Self {
        TimeLeft {
            started,
            samples: VecDeque::from([(started, 0)]),
            limit: None,
            anchor: None,
        }
    }

    /// The phase goes at most `per_minute` steps a minute (the service's rate limit).
    pub fn limit_per_minute(&mut self, per_minute: u32) {
        self.limit = (per_minute > 0).then(|| f64::from(per_minute) / 60.0);
    }

    /// `done` steps are done at `now`.
    pub fn observe(&mut self, now: Instant, done: u64) {
        if self.samples.back().is_none_or(|(_, d)| *d != done) {
            self.samples.push_back((now, done));
        }
    }

    /// How long the phase has left at `now`, with `done` of `len` steps done; `None` while
    /// there is no pace to go by (nothing done yet and no limit).
    pub fn estimate(&mut self, now: Instant, done: u64, len: u64) -> Option<Duration> {
        self.observe(now, done);
        let steps_left = len.saturating_sub(done);
        if steps_left == 0 {
            return Some(Duration::ZERO);
        }
        let countdown = self
            .anchor
            .map(|a| a.left - now.saturating_duration_since(a.at).as_secs_f64());
        let Some(pace) = self.pace(now, done) else {
            // No pace to go by: the count-down goes on while it lasts.
            return countdown.filter(|c| *c > 0.0).map(Duration::from_secs_f64);
        };
        let raw = steps_left as f64 / pace;
        let shown = match (countdown, self.anchor) {
            (Some(c), Some(a)) if raw > c && c > 0.0 && pace >= a.pace * FELL => c,
            _ => {
                self.anchor = Some(Anchor {
                    at: now,
                    left: raw,
                    pace,
                });
                raw
            }
        };
        Some(Duration::from_secs_f64(shown))
    }

    /// The steps a second over the last [`PACE_WINDOW`], at most the limit; the limit when
    /// nothing was done in the window.
    fn pace(&mut self, now: Instant, done: u64) -> Option<f64> {
        let window_start = now
            .checked_sub(PACE_WINDOW)
            .map_or(self.started, |t| t.max(self.started));
        while self.samples.len() >= 2 && self.samples[1].0 <= window_start {
            self.samples.pop_front();
        }
        let (at, done_then) = self.samples.front().copied()?;
        let from = at.max(window_start);
        let span = now.saturating_duration_since(from).as_secs_f64();
        let achieved = (done > done_then && span > 0.0).then(|| (done - done_then) as f64 / span);
        match (achieved, self.limit) {
            (Some(a), Some(limit)) => Some(a.min(limit)),
            (Some(a), None) => Some(a),
            (None, limit) => limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// The estimates of a phase of `len` steps at `times` (seconds from its start), its steps
    /// done by then given by `done_at`, observed every half second in between.
    fn estimates(
        len: u64,
        limit: Option<u32>,
        done_at: impl Fn(f64) -> u64,
        times: &[f64],
    ) -> Vec<Option<f64>> {
        let start = Instant::now();
        let mut left = TimeLeft::new(start);
        if let Some(l) = limit {
            left.limit_per_minute(l);
        }
        let mut t = 0.0;
        times
            .iter()
            .map(|at| {
                while t + 0.5 < *at {
                    t += 0.5;
                    left.observe(start + secs(t), done_at(t));
                }
                left.estimate(start + secs(*at), done_at(*at), len)
                    .map(|d| d.as_secs_f64())
            })
            .collect()
    }

    #[test]
    fn a_constant_pace_counts_down_steadily() {
        // Two steps a second, 300 steps: 150 s in all.
        let times: Vec<f64> = (1..=14).map(|i| f64::from(i) * 10.0).collect();
        let shown = estimates(300, None, |t| (t * 2.0) as u64, &times);
        for (at, left) in times.iter().zip(&shown) {
            let left = left.expect("an estimate");
            assert!(
                (left - (150.0 - at)).abs() < 0.6,
                "at {at} s: {left} s left"
            );
        }
    }

    #[test]
    fn waiting_on_the_rate_limit_still_gives_an_estimate() {
        // The window is full of an earlier run's sends: nothing goes for 40 s. 600 orders at
        // 300 a minute: two minutes.
        let shown = estimates(600, Some(300), |_| 0, &[0.0, 10.0, 20.0, 40.0]);
        assert_eq!(shown[0], Some(120.0));
        for (left, at) in shown.iter().zip([0.0, 10.0, 20.0, 40.0]) {
            let left = left.expect("an estimate while waiting");
            assert!(left > 0.0 && left <= 120.0 - at + 1e-9, "at {at}: {left}");
        }
        // Without a limit and with nothing done, there is nothing to go by.
        assert_eq!(estimates(600, None, |_| 0, &[10.0]), vec![None]);
    }

    #[test]
    fn a_burst_then_a_wait_on_the_rate_limit_does_not_jump_back() {
        // 300 sends allowed at once, done within a second; the next 300 a minute later.
        let done = |t: f64| {
            if t < 1.0 {
                0
            } else if t < 61.0 {
                300
            } else {
                600
            }
        };
        let times: Vec<f64> = [0.0, 1.0, 2.0, 5.0]
            .into_iter()
            .chain((1..=6).map(|i| f64::from(i) * 10.0))
            .collect();
        let shown = estimates(600, Some(300), done, &times);
        let shown: Vec<f64> = shown.into_iter().map(|s| s.expect("an estimate")).collect();
        for pair in shown.windows(2) {
            assert!(pair[1] <= pair[0], "jumped back: {shown:?}");
        }
        // And it counts down to the next burst: a minute after the first.
        assert!((shown[1] - 60.0).abs() < 1e-6, "{shown:?}");
        assert!(shown.last().is_some_and(|l| *l < 1.0 + 1e-6), "{shown:?}");
        // Without the limit's cap, the burst's pace alone would have said about a second.
    }

    #[test]
    fn only_a_pace_that_truly_fell_makes_the_estimate_go_up() {
        // Five steps a second for a minute, then one a second: 900 steps.
        let done = |t: f64| {
            if t <= 60.0 {
                (t * 5.0) as u64
            } else {
                300 + ((t - 60.0) as u64)
            }
        };
        let shown = estimates(900, None, done, &[60.0, 65.0, 120.0]);
        let shown: Vec<f64> = shown.into_iter().map(|s| s.expect("an estimate")).collect();
        assert!((shown[0] - 120.0).abs() < 0.5, "{shown:?}");
        // Five seconds later the pace over the minute fell by less than a fifth: counting down.
        assert!((shown[1] - 115.0).abs() < 0.5, "{shown:?}");
        // A minute at one a second: the pace truly fell, and the estimate says so.
        assert!(shown[2] > 500.0, "{shown:?}");
    }
}
