//! The pipeline: read, validate, plan, submit, poll, write results.

pub mod html;
pub mod lock;
pub mod output;
pub mod pace;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod reconcile;
pub mod record;
pub mod report;
pub mod verify;
