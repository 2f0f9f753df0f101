//! paybatch: pays out digital rewards in batches from CSV files through the payout ordering
//! service, each row exactly once, with every step recorded in a local SQLite ledger.

pub mod api;
pub mod batch;
pub mod money;
pub mod sim;
