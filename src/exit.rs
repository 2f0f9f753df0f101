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
