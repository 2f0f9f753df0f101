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
/// Interrupted by SIGINT (Ctrl-C): what was sent is recorded or safely in doubt; the same
/// command resumes (128 + 2, the shell's convention).
pub const INTERRUPTED: i32 = 130;
/// Stopped by SIGTERM: as [`INTERRUPTED`] (128 + 15).
pub const TERMINATED: i32 = 143;
