//! paybatch: pays out digital rewards in batches from CSV files through the payout ordering
//! service, each row exactly once, with every step recorded in a local SQLite ledger.

pub mod api;
pub mod batch;
pub mod catalog;
pub mod cli;
pub mod environment;
pub mod exit;
pub mod failpoint;
pub mod file_format;
pub mod files;
pub mod input;
pub mod ledger;
pub mod money;
pub mod ops;
pub mod reference;
pub mod report;
pub mod row;
pub mod settings;
pub mod sim;
pub mod text;
