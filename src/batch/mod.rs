//! The run: plan orders, pace and send them, poll them, check and record the answers,
//! reconcile with the service, write the result file and the report.

pub mod html;
pub mod lock;
pub mod output;
pub mod pace;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod progress;
pub mod reconcile;
pub mod record;
pub mod verify;
