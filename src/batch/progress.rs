//! What a run tells the person (or cron job) watching it: one line per milestone on stderr,
//! progress bars only on a terminal.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::text::escape_message;

#[derive(Debug, Clone)]
pub struct Reporter {
    pub quiet: bool,
    pub bars: bool,
    /// Warnings held back when quiet (see [`Reporter::warn`]).
    held: Arc<Mutex<Vec<String>>>,
}

impl Reporter {
    /// Bars only when stderr is a terminal and not quiet.
    pub fn new(quiet: bool) -> Self {
        Reporter {
            quiet,
            bars: !quiet && std::io::stderr().is_terminal(),
            held: Arc::default(),
        }
    }

    /// A reporter that prints nothing (library use, tests).
    pub fn silent() -> Self {
        Reporter {
            quiet: true,
            bars: false,
            held: Arc::default(),
        }
    }

    /// A milestone line. Every line a reporter prints has its control characters escaped
    /// ([`crate::text::escape_message`]): it may quote the file, the ledger or the service.
    pub fn line(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("{}", escape_message(msg.as_ref()));
        }
    }

    /// A warning. When quiet it is held back: a quiet run that ends well prints nothing, one
    /// that does not prints its held warnings with its summary ([`Reporter::take_held`]).
    pub fn warn(&self, msg: impl AsRef<str>) {
        let line = format!("warning: {}", escape_message(msg.as_ref()));
        if self.quiet {
            self.held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// A warning about what the batch pays (rows taken out of the file, keys given up): shown
    /// even when quiet, even when the run ends well.
    pub fn alert(&self, msg: impl AsRef<str>) {
        eprintln!("warning: {}", escape_message(msg.as_ref()));
    }

    /// The warnings held back so far (none unless quiet), oldest first.
    pub fn take_held(&self) -> Vec<String> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A progress bar of `len` steps, hidden when bars are off.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.bars {
            return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        }
        let bar = ProgressBar::new(len);
        if let Ok(style) = ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(what.to_string());
        bar
    }
}
