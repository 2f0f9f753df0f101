//! How long a phase has left (`about 40 s left` in the progress lines a cron log gets), smoothed
//! so that it does not jump back.
//!
//! The rule, step by step ([`TimeLeft::estimate`]):
//! 1. **The pace** is the better of the steps done a second over the last [`PACE_WINDOW`] and
//!    over the whole phase. A minute that happens to hold only part of the bursts a rate limit
//!    allows (one ends just inside it, the next has only begun) is thus not taken for a pace
//!    that fell while the phase as a whole keeps up.
//! 2. **The raw estimate** is the steps left at that pace. A phase held to a limit (the
//!    sending: the service's order creations in any sliding minute, [`crate::batch::pace`])
//!    cannot go faster than the limit's schedule: its remaining steps go as the window frees,
//!    counting the steps of the last minute (an earlier run's sends too), a burst at once and
//!    the next a minute after. The raw estimate is the later of the two, so a burst is not
//!    taken for the pace of what follows, and while the sending waits on the rate limit with
//!    nothing done, the schedule still gives an estimate.
//! 3. **Smoothing**: the last estimate counts down with the time that passed. A raw estimate at
//!    or below that count-down is shown (and counts down from then on): a phase that goes
//!    faster says so at once. A raw estimate above it is not shown, and the count-down is,
//!    unless the pace truly fell (below [`FELL`] of the pace the count-down was made with, the
//!    pace capped at the limit) or the count-down ran out with steps still left: then the
//!    estimate is made again, and says honestly that it will take longer.
//!
//! So a constant pace gives a steady count-down, a burst then a wait on the rate limit counts
//! down through the wait to the next burst, and only a pace that truly fell makes an estimate go
//! up.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::pace;

/// The window the pace is measured over: the service's own (a sliding minute), over which a
/// burst and the wait after it average to what the service allows.
pub const PACE_WINDOW: Duration = pace::WINDOW;

/// The estimate goes up only once the pace fell below this share of the pace its count-down was
/// made with.
pub const FELL: f64 = 0.8;

/// The estimate of how long a phase has left (see the module's rule).
#[derive(Debug, Clone)]
pub struct TimeLeft {
    started: Instant,
    /// How many steps were done when, oldest first: the latest before the window the rule
    /// looks at, then every change since.
    samples: VecDeque<(Instant, u64)>,
    limit: Option<Limit>,
    /// The estimate the count-down runs from.
    anchor: Option<Anchor>,
}

/// The limit a phase is held to: at most `per_window` steps in any sliding `window`.
#[derive(Debug, Clone)]
struct Limit {
    per_window: usize,
    window: Duration,
    /// Steps made before the phase that count against the window (an earlier run's sends),
    /// oldest first.
    earlier: Vec<Instant>,
}

/// An estimate: when, how many seconds it said, at which pace.
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

    /// The phase goes at most `per_minute` steps in any sliding minute, as the sending is paced
    /// ([`crate::batch::pace`], its margin included); `earlier` are the steps made before it
    /// that count against the window.
    pub fn limit_per_minute(&mut self, per_minute: u32, earlier: &[Instant]) {
        let mut earlier = earlier.to_vec();
        earlier.sort();
        self.limit = (per_minute > 0).then(|| Limit {
            per_window: per_minute as usize,
            window: pace::WINDOW + pace::MARGIN,
            earlier,
        });
    }

    /// `done` steps are done at `now`.
    pub fn observe(&mut self, now: Instant, done: u64) {
        if self.samples.back().is_none_or(|(_, d)| *d != done) {
            self.samples.push_back((now, done));
        }
    }

    /// How long the phase has left at `now`, with `done` of `len` steps done; `None` while
    /// there is nothing to go by (nothing done yet and no limit).
    pub fn estimate(&mut self, now: Instant, done: u64, len: u64) -> Option<Duration> {
        self.observe(now, done);
        self.forget_old(now);
        let steps_left = len.saturating_sub(done);
        if steps_left == 0 {
            return Some(Duration::ZERO);
        }
        let countdown = self
            .anchor
            .map(|a| a.left - now.saturating_duration_since(a.at).as_secs_f64());
        let achieved = self.achieved(now, done);
        let by_pace = achieved.map(|p| steps_left as f64 / p);
        let by_schedule = self.schedule(now, steps_left);
        let raw = match (by_pace, by_schedule) {
            (Some(p), Some(s)) => p.max(s),
            (p, s) => match p.or(s) {
                Some(raw) => raw,
                // Nothing to go by: the count-down goes on while it lasts.
                None => return countdown.filter(|c| *c > 0.0).map(Duration::from_secs_f64),
            },
        };
        let cap = self.limit.as_ref().map(|l| l.per_window as f64 / 60.0);
        let pace = match (achieved, cap) {
            (Some(a), Some(c)) => a.min(c),
            (a, c) => a.or(c).unwrap_or(0.0),
        };
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

    /// How far back the rule looks: the pace's window, or the limit's when longer.
    fn horizon(&self) -> Duration {
        self.limit
            .as_ref()
            .map_or(PACE_WINDOW, |l| l.window.max(PACE_WINDOW))
    }

    /// Keeps the samples the rule looks at: the latest before the horizon, and those since.
    fn forget_old(&mut self, now: Instant) {
        let Some(from) = now.checked_sub(self.horizon()) else {
            return;
        };
        while self.samples.len() >= 2 && self.samples[1].0 <= from {
            self.samples.pop_front();
        }
    }

    /// The better of the steps a second over the last [`PACE_WINDOW`] and over the whole
    /// phase; `None` when nothing was done.
    fn achieved(&self, now: Instant, done: u64) -> Option<f64> {
        let window_start = now
            .checked_sub(PACE_WINDOW)
            .map_or(self.started, |t| t.max(self.started));
        // Steps done by the start of the window: those of the latest sample at or before it.
        let done_then = self
            .samples
            .iter()
            .take_while(|(t, _)| *t <= window_start)
            .last()
            .map_or(0, |(_, d)| *d);
        let span = now.saturating_duration_since(window_start).as_secs_f64();
        let in_window = (done > done_then && span > 0.0).then(|| (done - done_then) as f64 / span);
        let whole = now.saturating_duration_since(self.started).as_secs_f64();
        let in_phase = (done > 0 && whole > 0.0).then(|| done as f64 / whole);
        match (in_window, in_phase) {
            (Some(w), Some(p)) => Some(w.max(p)),
            (w, p) => w.or(p),
        }
    }

    /// Seconds until the last of `steps_left` steps can go under the limit, if there is one:
    /// each step goes once the window holds fewer than the limit, as the pacer lets it.
    fn schedule(&self, now: Instant, steps_left: u64) -> Option<f64> {
        let limit = self.limit.as_ref()?;
        let (per_window, window) = (limit.per_window, limit.window);
        let inside = |t: &Instant| now.saturating_duration_since(*t) < window;
        // When the steps of the window went, oldest first (at most the limit's newest count).
        let mut went: Vec<Instant> = limit.earlier.iter().copied().filter(inside).collect();
        let mut before = None;
        for (t, d) in &self.samples {
            if let Some(b) = before
                && inside(t)
            {
                let n = (*d).saturating_sub(b).min(per_window as u64) as usize;
                went.extend(std::iter::repeat_n(*t, n));
            }
            before = Some(*d);
        }
        let went = &went[went.len().saturating_sub(per_window)..];
        let free = per_window - went.len();
        // The last step is the j-th of its window, `windows` windows after the first.
        let last = usize::try_from(steps_left).unwrap_or(usize::MAX);
        let windows = (last - 1) / per_window;
        let j = last - windows * per_window;
        let first_at = if j <= free {
            now
        } else {
            went[j - free - 1] + window
        };
        let at = first_at + window * u32::try_from(windows).unwrap_or(u32::MAX);
        Some(at.saturating_duration_since(now).as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// The estimates of a phase of `len` steps at `times` (seconds from its start), its steps
    /// done by then given by `done_at`, observed every half second in between; `limit`: a
    /// limit a minute and the steps before the phase (seconds before its start).
    fn estimates(
        len: u64,
        limit: Option<(u32, &[f64])>,
        done_at: impl Fn(f64) -> u64,
        times: &[f64],
    ) -> Vec<Option<f64>> {
        // Far enough from the clock's origin to go back in time.
        let start = Instant::now() + secs(3600.0);
        let mut left = TimeLeft::new(start);
        if let Some((per_minute, before)) = limit {
            let earlier: Vec<Instant> = before.iter().map(|b| start - secs(*b)).collect();
            left.limit_per_minute(per_minute, &earlier);
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

    fn all(shown: Vec<Option<f64>>) -> Vec<f64> {
        shown.into_iter().map(|s| s.expect("an estimate")).collect()
    }

    fn never_up(shown: &[f64]) {
        for pair in shown.windows(2) {
            assert!(pair[1] <= pair[0] + 1e-6, "jumped back: {shown:?}");
        }
    }

    #[test]
    fn a_constant_pace_counts_down_steadily() {
        // Two steps a second, 300 steps: 150 s in all.
        let times: Vec<f64> = (1..=14).map(|i| f64::from(i) * 10.0).collect();
        let shown = all(estimates(300, None, |t| (t * 2.0) as u64, &times));
        for (at, left) in times.iter().zip(&shown) {
            assert!(
                (left - (150.0 - at)).abs() < 0.6,
                "at {at} s: {left} s left"
            );
        }
    }

    #[test]
    fn waiting_on_the_rate_limit_still_gives_an_estimate() {
        // An earlier run sent 300 orders 20 s before: nothing goes for 41 s. 600 orders at 300
        // a minute: 300 when the window frees, the other 300 a window later.
        let earlier = [20.0; 300];
        let times = [0.0, 10.0, 20.0, 40.0];
        let shown = all(estimates(600, Some((300, &earlier)), |_| 0, &times));
        for (left, at) in shown.iter().zip(times) {
            assert!((left - (102.0 - at)).abs() < 1e-6, "at {at}: {shown:?}");
        }
        // Without a limit and with nothing done, there is nothing to go by.
        assert_eq!(estimates(600, None, |_| 0, &[10.0]), vec![None]);
    }

    #[test]
    fn a_burst_then_a_wait_on_the_rate_limit_does_not_jump_back() {
        // 300 sends allowed at once, done within a second; the next 300 a window later.
        let done = |t: f64| {
            if t < 1.0 {
                0
            } else if t < 62.0 {
                300
            } else {
                600
            }
        };
        let times: Vec<f64> = [0.0, 1.0, 2.0, 5.0]
            .into_iter()
            .chain((1..=6).map(|i| f64::from(i) * 10.0))
            .collect();
        let shown = all(estimates(600, Some((300, &[])), done, &times));
        never_up(&shown);
        // It counts down to the next burst, a window after the first.
        assert!((shown[0] - 61.0).abs() < 1e-6, "{shown:?}");
        assert!(
            (shown.last().expect("estimates") - 1.0).abs() < 1e-6,
            "{shown:?}"
        );
    }

    /// Bursts of 60 a window (the limit), each answered over two seconds: the last orders wait
    /// for the window to free, and no minute that holds parts of two bursts makes it jump back.
    #[test]
    fn bursts_the_limit_allows_count_down_to_the_last_one() {
        let done = |t: f64| {
            let burst = (t / 61.0).floor();
            let into = t - burst * 61.0;
            ((burst * 60.0 + (into * 30.0).min(60.0)) as u64).min(200)
        };
        let times: Vec<f64> = (1..=18).map(|i| f64::from(i) * 10.0 + 1.0).collect();
        let shown = all(estimates(200, Some((60, &[])), done, &times));
        never_up(&shown);
        // The fourth burst goes three windows after the first (the 20 left at 183 s).
        for (left, at) in shown.iter().zip(&times) {
            assert!((left - (183.5 - at)).abs() < 1.0, "at {at}: {shown:?}");
        }
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
        let shown = all(estimates(900, None, done, &[60.0, 65.0, 120.0, 300.0]));
        assert!((shown[0] - 120.0).abs() < 0.5, "{shown:?}");
        // Five seconds later the pace fell by less than a fifth: counting down.
        assert!((shown[1] - 115.0).abs() < 0.5, "{shown:?}");
        // A minute at one a second: the pace truly fell (over the minute and over the whole
        // phase: 360 in 120 s), and the estimate goes up.
        assert!((shown[2] - 180.0).abs() < 0.5, "{shown:?}");
        // It goes on at one a second: the estimate keeps up with it (360 s left at 300 s).
        assert!(shown[3] > 150.0, "{shown:?}");
    }
}
