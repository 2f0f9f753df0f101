//! paybatch: pays out digital rewards in batches from CSV files through the payout ordering
//! service, each row exactly once, with every step recorded in a local SQLite ledger.
//!
//! The wire client and its models (with the files only their owner may read) and the simulator
//! are crates of their own, `paybatch-api` and `paybatch-sim`, seen here as `api`, `files` and
//! `sim`.

pub use paybatch_api as api;
pub use paybatch_api::files;
pub use paybatch_sim as sim;

pub mod batch;
pub mod catalog;
pub mod cli;
pub mod environment;
pub mod exit;
pub mod failpoint;
pub mod file_format;
pub mod input;
pub mod ledger;
pub mod money;
pub mod ops;
pub mod reference;
pub mod report;
pub mod row;
pub mod settings;
pub mod text;
