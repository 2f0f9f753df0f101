//! How the stages of a run tell what they do: milestone lines, warnings, and the counts of a
//! long phase (sending, polling). The stages speak to a [`Reporter`]; what it shows is up to
//! the [`Progress`] behind it: the command line's prints lines on stderr, bars on a terminal and
//! a line every few seconds without one; [`Silent`] shows nothing (library use, tests).

use std::sync::Arc;

/// What a person (or a log) is told of a run. Every message may quote the file, the ledger or
/// the service: an implementation that prints escapes its control characters.
pub trait Progress: Send + Sync {
    /// A milestone.
    fn line(&self, msg: &str);
    /// A warning: an implementation may hold it back until the run ends badly.
    fn warn(&self, msg: &str);
    /// A warning about what the batch pays (rows taken out of the file, keys given up): always
    /// shown.
    fn alert(&self, msg: &str);
    /// A phase of `len` steps starts (`submit`, `poll`).
    fn phase(&self, what: &'static str, len: u64);
    /// `n` more steps of the phase `what` are done.
    fn advance(&self, what: &'static str, n: u64);
    /// The phase `what` has `n` steps more than it started with (orders joining the polling).
    fn grow(&self, what: &'static str, n: u64);
    /// The phase `what` goes at most `per_minute` steps in any sliding minute (the sending: the
    /// service's rate limit), `earlier` steps made before it counting against the window (an
    /// earlier run's sends), which its estimate of the time left goes by
    /// ([`crate::batch::time_left`]). Nothing by default.
    fn limit(&self, what: &'static str, per_minute: u32, earlier: &[std::time::Instant]) {
        let _ = (what, per_minute, earlier);
    }
    /// The phase `what` ended.
    fn phase_end(&self, what: &'static str);
}

/// Shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn line(&self, _: &str) {}
    fn warn(&self, _: &str) {}
    fn alert(&self, _: &str) {}
    fn phase(&self, _: &'static str, _: u64) {}
    fn advance(&self, _: &'static str, _: u64) {}
    fn grow(&self, _: &'static str, _: u64) {}
    fn phase_end(&self, _: &'static str) {}
}

/// What the stages hold: a shared [`Progress`], cheap to clone into tasks.
#[derive(Clone)]
pub struct Reporter(Arc<dyn Progress>);

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reporter")
    }
}

impl Reporter {
    pub fn new(progress: Arc<dyn Progress>) -> Self {
        Reporter(progress)
    }

    /// A reporter that shows nothing.
    pub fn silent() -> Self {
        Reporter(Arc::new(Silent))
    }

    pub fn line(&self, msg: impl AsRef<str>) {
        self.0.line(msg.as_ref());
    }

    pub fn warn(&self, msg: impl AsRef<str>) {
        self.0.warn(msg.as_ref());
    }

    pub fn alert(&self, msg: impl AsRef<str>) {
        self.0.alert(msg.as_ref());
    }

    /// A phase of `len` steps: count them with [`Phase::inc`]; it ends when dropped or
    /// [`Phase::finish`]ed.
    pub fn phase(&self, len: u64, what: &'static str) -> Phase {
        self.0.phase(what, len);
        Phase {
            progress: self.0.clone(),
            what,
            ended: false,
        }
    }
}

/// A phase under way (see [`Reporter::phase`]).
pub struct Phase {
    progress: Arc<dyn Progress>,
    what: &'static str,
    ended: bool,
}

impl Phase {
    pub fn inc(&self, n: u64) {
        self.progress.advance(self.what, n);
    }

    pub fn grow(&self, n: u64) {
        self.progress.grow(self.what, n);
    }

    /// The phase goes at most `per_minute` steps in any sliding minute, `earlier` steps
    /// counting against it ([`Progress::limit`]).
    pub fn limit(&self, per_minute: u32, earlier: &[std::time::Instant]) {
        self.progress.limit(self.what, per_minute, earlier);
    }

    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.progress.phase_end(self.what);
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        self.end();
    }
}
