//! The command line's [`Progress`]: milestone and warning lines on stderr; on a terminal, a bar
//! per phase with elapsed time, rate and time left, the lines printed above the bars; without
//! one (cron, a pipe, a log file), a line at most every [`QUIET_TICK`] while a phase goes on,
//! so a long phase is never silent.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::batch::progress::{Progress, Reporter};
use crate::batch::time_left::TimeLeft;
use crate::text::shown_message as escape_message;

/// How often a phase says how far it got without a terminal, when it got further.
pub const QUIET_TICK: Duration = Duration::from_secs(10);

/// Without a terminal, a phase that got no further says so at most this often (a cron log
/// gets one line a minute while the run waits, not the same line every ten seconds).
pub const STILL_TICK: Duration = Duration::from_secs(60);

/// A phase under way.
struct Running {
    len: u64,
    done: u64,
    started: Instant,
    last_line: Instant,
    /// How far the phase had got at its last line (none yet: `None`).
    said: Option<u64>,
    /// How long it has left, as its lines say it.
    time_left: TimeLeft,
    bar: Option<ProgressBar>,
}

impl Running {
    /// Whether a line is due at `now` without a terminal: [`QUIET_TICK`] after the last one when
    /// the phase got further since, [`STILL_TICK`] when it did not.
    fn line_due(&self, now: Instant) -> bool {
        let since = now.duration_since(self.last_line);
        if self.said == Some(self.done) {
            since >= STILL_TICK
        } else {
            since >= QUIET_TICK
        }
    }
}

struct State {
    quiet: bool,
    /// Bars are drawn (stderr is a terminal that can draw them, and not quiet).
    bars: Option<MultiProgress>,
    /// Warnings held back when quiet (see [`Console::take_held_back`]).
    held_back: Vec<String>,
    phases: BTreeMap<&'static str, Running>,
}

/// Lines and progress on stderr, as the person or the cron job running paybatch sees them.
#[derive(Clone)]
pub struct Console {
    state: Arc<Mutex<State>>,
}

impl Console {
    /// Bars only when stderr is a terminal that draws (not `TERM=dumb`) and not quiet; lines
    /// every [`QUIET_TICK`] otherwise, unless quiet.
    pub fn new(quiet: bool) -> Self {
        let bars = (!quiet && std::io::stderr().is_terminal() && !super::dumb_terminal())
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        let console = Console {
            state: Arc::new(Mutex::new(State {
                quiet,
                bars,
                held_back: Vec::new(),
                phases: BTreeMap::new(),
            })),
        };
        if !quiet {
            console.tick_every(QUIET_TICK);
        }
        console
    }

    /// A [`Reporter`] that speaks through this console.
    pub fn reporter(&self) -> Reporter {
        Reporter::new(Arc::new(self.clone()))
    }

    /// The warnings held back so far (none unless quiet), oldest first.
    pub fn take_held_back(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().held_back)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prints a line above the bars (or plainly when there are none).
    fn print(state: &State, line: &str) {
        match &state.bars {
            Some(multi) if !state.phases.is_empty() => {
                let _ = multi.println(line);
            }
            _ => eprintln!("{line}"),
        }
    }

    /// Without bars, a thread that says every `tick` how far each phase got; it ends with the
    /// last clone of the console.
    fn tick_every(&self, tick: Duration) {
        if self.lock().bars.is_some() {
            return;
        }
        let weak: Weak<Mutex<State>> = Arc::downgrade(&self.state);
        let spawned = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(500));
                    let Some(state) = weak.upgrade() else { return };
                    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
                    let now = Instant::now();
                    let sending = state.phases.contains_key("submit");
                    for (what, phase) in state.phases.iter_mut() {
                        if now.duration_since(phase.last_line) >= tick && phase.line_due(now) {
                            phase.last_line = now;
                            phase.said = Some(phase.done);
                            let more_to_come = sending && *what == "poll";
                            eprintln!("{}", progress_line(what, phase, now, more_to_come));
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no progress lines: {e}");
        }
    }
}

/// `submit: 120/300 orders sent, 45 s, 2.7/s, about 67 s left`: the rate since the phase
/// started, the time left as [`TimeLeft`] estimates it (while the sending waits on the rate
/// limit too, and without jumping back). `more_to_come`: the phase's length is only what was
/// started so far (the polling while orders are still being sent): it has no time left to say.
fn progress_line(what: &str, phase: &mut Running, now: Instant, more_to_come: bool) -> String {
    let elapsed = now.duration_since(phase.started).as_secs_f64();
    let unit = match what {
        "submit" => "orders sent",
        "poll" if more_to_come => "orders finished of those sent so far",
        "poll" => "orders finished",
        _ => "done",
    };
    let mut line = format!(
        "{what}: {}/{} {unit}, {:.0} s",
        phase.done, phase.len, elapsed
    );
    if phase.done > 0 && elapsed > 0.0 {
        let rate = phase.done as f64 / elapsed;
        line.push_str(&format!(", {rate:.1}/s"));
    }
    let estimate = (!more_to_come)
        .then(|| phase.time_left.estimate(now, phase.done, phase.len))
        .flatten();
    if let Some(left) = estimate {
        line.push_str(&format!(", about {:.0} s left", left.as_secs_f64()));
    }
    line
}

impl Progress for Console {
    fn line(&self, msg: &str) {
        let state = self.lock();
        if !state.quiet {
            Console::print(&state, &escape_message(msg));
        }
    }

    fn warn(&self, msg: &str) {
        let line = format!("warning: {}", escape_message(msg));
        let mut state = self.lock();
        if state.quiet {
            state.held_back.push(line);
        } else {
            Console::print(&state, &line);
        }
    }

    fn alert(&self, msg: &str) {
        let state = self.lock();
        Console::print(&state, &format!("warning: {}", escape_message(msg)));
    }

    fn phase(&self, what: &'static str, len: u64) {
        let mut state = self.lock();
        if state.quiet {
            return;
        }
        let bar = state.bars.as_ref().map(|multi| {
            let bar = multi.add(ProgressBar::new(len));
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>7} [{bar:30}] {pos}/{len} {rate:>8} {elapsed:>4} elapsed, ETA {eta}",
            ) {
                let style = style.with_key(
                    "rate",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.1}/s", state.per_sec());
                    },
                );
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(what);
            bar
        });
        let now = Instant::now();
        state.phases.insert(
            what,
            Running {
                len,
                done: 0,
                started: now,
                last_line: now,
                said: None,
                time_left: TimeLeft::new(now),
                bar,
            },
        );
    }

    fn limit(&self, what: &'static str, per_minute: u32, earlier: &[Instant]) {
        if let Some(phase) = self.lock().phases.get_mut(what) {
            phase.time_left.limit_per_minute(per_minute, earlier);
        }
    }

    fn advance(&self, what: &'static str, n: u64) {
        let mut state = self.lock();
        if let Some(phase) = state.phases.get_mut(what) {
            phase.done += n;
            phase.time_left.observe(Instant::now(), phase.done);
            if let Some(bar) = &phase.bar {
                bar.inc(n);
            }
        }
    }

    fn grow(&self, what: &'static str, n: u64) {
        let mut state = self.lock();
        if let Some(phase) = state.phases.get_mut(what) {
            phase.len += n;
            if let Some(bar) = &phase.bar {
                bar.inc_length(n);
            }
        }
    }

    fn phase_end(&self, what: &'static str) {
        let mut state = self.lock();
        if let Some(Running { bar: Some(bar), .. }) = state.phases.remove(what) {
            bar.finish_and_clear();
            if let Some(multi) = &state.bars {
                multi.remove(&bar);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_says_how_far_and_how_long() {
        let start = Instant::now();
        let mut phase = Running {
            len: 300,
            done: 120,
            started: start,
            last_line: start,
            said: None,
            time_left: TimeLeft::new(start),
            bar: None,
        };
        let line = progress_line("submit", &mut phase, start + Duration::from_secs(40), false);
        assert_eq!(
            line,
            "submit: 120/300 orders sent, 40 s, 3.0/s, about 60 s left"
        );
        let mut idle = Running {
            done: 0,
            time_left: TimeLeft::new(start),
            ..phase
        };
        assert_eq!(
            progress_line("poll", &mut idle, start + Duration::from_secs(12), false),
            "poll: 0/300 orders finished, 12 s"
        );
        // The sending waits on the rate limit (an earlier run filled the window as the phase
        // began): the line still says how long is left, as the window frees (300 at 61 s, the
        // other 300 at 122 s).
        let mut waiting = Running {
            len: 600,
            done: 0,
            time_left: TimeLeft::new(start),
            ..idle
        };
        waiting.time_left.limit_per_minute(300, &[start; 300]);
        assert_eq!(
            progress_line(
                "submit",
                &mut waiting,
                start + Duration::from_secs(20),
                false
            ),
            "submit: 0/600 orders sent, 20 s, about 102 s left"
        );
    }

    /// While orders are still being sent, the polling has finished all it was given so far but
    /// not the batch: it says so, and gives no time left (not `60/60 ... about 0 s left`).
    #[test]
    fn the_polling_while_sending_goes_on_has_no_time_left() {
        let start = Instant::now();
        let mut polled = Running {
            len: 60,
            done: 60,
            started: start,
            last_line: start,
            said: None,
            time_left: TimeLeft::new(start),
            bar: None,
        };
        polled
            .time_left
            .observe(start + Duration::from_secs(30), 60);
        assert_eq!(
            progress_line("poll", &mut polled, start + Duration::from_secs(60), true),
            "poll: 60/60 orders finished of those sent so far, 60 s, 1.0/s"
        );
    }

    /// Without a terminal a line comes every ten seconds while the phase gets further, and once
    /// a minute while it does not (`poll: 3/3 orders finished` is not said five times).
    #[test]
    fn a_line_is_due_when_the_phase_got_further_or_a_minute_passed() {
        let start = Instant::now();
        let mut phase = Running {
            len: 3,
            done: 3,
            started: start,
            last_line: start,
            said: None,
            time_left: TimeLeft::new(start),
            bar: None,
        };
        assert!(phase.line_due(start + QUIET_TICK), "the first line");
        phase.said = Some(3);
        assert!(!phase.line_due(start + QUIET_TICK), "nothing changed");
        assert!(!phase.line_due(start + Duration::from_secs(50)));
        assert!(
            phase.line_due(start + STILL_TICK),
            "still waiting, once a minute"
        );
        phase.said = Some(2);
        assert!(phase.line_due(start + QUIET_TICK), "it got further");
        assert!(!phase.line_due(start + Duration::from_secs(9)));
    }
}
