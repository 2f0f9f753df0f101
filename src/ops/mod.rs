//! The operations of paybatch, callable without the command line: each takes its options and a
//! [`crate::batch::progress::Reporter`], and returns a typed outcome that the command line
//! turns into output and an exit code.
//!
//! - [`run::run`]: pay a batch (validate, plan, send, poll, write the result file);
//! - [`preview::preview`]: every check of a run, its totals and plan digest, paying nothing;
//! - [`approve::approve`]: a person's approval of a plan, recorded with who, when and what;
//! - [`reconcile::reconcile_batch`]: the ledger against the service's orders, and
//!   [`reconcile::rebuild`] of a lost ledger from the service and the input file;
//! - [`retry::retry`]: failed and rejected rows made payable again under new keys;
//! - [`report`]: the result file (to a file or any writer) and the HTML report of a batch;
//! - [`period`]: the batches completed in a period: one result file, totals, a journal;
//! - [`close::close`]: a month of the books closed, with who, when and its journal's digest;
//! - [`history::history`]: every payout to one recipient or reference, across all batches;
//! - [`status`]: what the ledger says of every batch, or of one in detail.

pub mod approve;
pub mod close;
pub mod error;
pub mod history;
pub mod payouts;
pub mod period;
pub mod preview;
pub mod reconcile;
pub mod report;
pub mod retry;
pub mod run;
pub mod start;
pub mod status;
