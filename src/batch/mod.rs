//! The stages of a batch, in the order a row meets them: the options of a run, planning
//! (grouping rows into orders), order bodies (their keys and exact bodies), funds (prices, the balance pre-flight),
//! sending at the service's pace, polling, checking and recording the answers, reconciling with
//! the service, and the result file. The operations that string them together are in
//! [`crate::ops`]; the HTML report made from the ledger afterwards is in [`crate::report`].

pub mod approved;
pub mod funds;
pub mod in_doubt;
pub mod ledger_thread;
pub mod options;
pub mod order_body;
pub mod outcome;
pub mod output;
pub mod pace;
pub mod plan;
pub mod poll;
pub mod progress;
pub mod reconcile;
pub mod record;
pub mod repeats;
pub mod replan;
pub mod results;
pub mod send_context;
pub mod submit;
pub mod time_left;
pub mod verify;
pub mod watch;
pub mod window;
pub mod workbook;

/// The ledger's lock, at the path its callers have used since it lived here.
pub use crate::ledger::lock;
