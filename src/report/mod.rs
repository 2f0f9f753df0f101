//! What a batch leaves behind for people: its one-page HTML report, made from a tally of the
//! ledger's rows ([`tally`]: counts and totals as plain data) by a template ([`page`]: the
//! markup, every value escaped by the engine's one formatter).

pub mod costs;
pub mod double_entry;
pub mod journal;
pub mod journal_format;
pub mod page;
pub mod period;
pub mod tally;
pub mod unclaimed;

pub use page::{PageError, escape, render_tally, write_private};
pub use tally::Tally;
