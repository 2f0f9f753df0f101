//! Exit codes: part of the public interface (cron jobs depend on them). Documented in README.md.

/// Every row completed (or nothing was left to do).
pub const OK: i32 = 0;
/// Anything unexpected.
pub const UNEXPECTED: i32 = 1;
/// Usage or configuration error.
pub const USAGE: i32 = 2;
/// Validation failed; nothing was submitted.
pub const INVALID: i32 = 3;
/// Finished, with failed or rejected rows.
pub const FAILURES: i32 = 4;
/// Incomplete: run the same command again to resume.
pub const INCOMPLETE: i32 = 5;
/// The batch is being run by another process.
pub const LOCKED: i32 = 6;
/// `paybatch payouts`: payout links expire within the window (`--expiring-within`), for a cron
/// job to alert on.
pub const EXPIRING: i32 = 7;
/// Interrupted by SIGINT (Ctrl-C): what was sent is recorded or safely in doubt; the same
/// command resumes (128 + 2, the shell's convention).
pub const INTERRUPTED: i32 = 130;
/// Stopped by SIGTERM: as [`INTERRUPTED`] (128 + 15).
pub const TERMINATED: i32 = 143;

/// How the process ends: each exit code above, named. `cli` maps a command's outcome to one of
/// these; `main` turns it into the process's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    Unexpected,
    Usage,
    Invalid,
    Failures,
    Incomplete,
    Locked,
    Expiring,
    Interrupted,
    Terminated,
}

impl Exit {
    /// The number the process exits with (documented in README.md).
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => OK,
            Exit::Unexpected => UNEXPECTED,
            Exit::Usage => USAGE,
            Exit::Invalid => INVALID,
            Exit::Failures => FAILURES,
            Exit::Incomplete => INCOMPLETE,
            Exit::Locked => LOCKED,
            Exit::Expiring => EXPIRING,
            Exit::Interrupted => INTERRUPTED,
            Exit::Terminated => TERMINATED,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        // Every code is below 256.
        std::process::ExitCode::from(u8::try_from(exit.code()).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn every_exit_keeps_its_documented_number() {
        let numbers: Vec<i32> = [
            Exit::Ok,
            Exit::Unexpected,
            Exit::Usage,
            Exit::Invalid,
            Exit::Failures,
            Exit::Incomplete,
            Exit::Locked,
            Exit::Expiring,
            Exit::Interrupted,
            Exit::Terminated,
        ]
        .into_iter()
        .map(Exit::code)
        .collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4, 5, 6, 7, 130, 143]);
    }
}
