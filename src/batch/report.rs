//! What a run tells the person (or cron job) watching it: one line per milestone on stderr,
//! progress bars only on a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    pub quiet: bool,
    pub bars: bool,
}

impl Reporter {
    /// Bars only when stderr is a terminal and not quiet.
    pub fn new(quiet: bool) -> Self {
        Reporter {
            quiet,
            bars: !quiet && std::io::stderr().is_terminal(),
        }
    }

    /// A reporter that prints nothing (library use, tests).
    pub fn silent() -> Self {
        Reporter {
            quiet: true,
            bars: false,
        }
    }

    /// A milestone line.
    pub fn line(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("{}", msg.as_ref());
        }
    }

    /// A warning: shown even when quiet.
    pub fn warn(&self, msg: impl AsRef<str>) {
        eprintln!("warning: {}", msg.as_ref());
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
