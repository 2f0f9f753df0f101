//! The typed client of the payout ordering service and its wire models.

pub mod client;
pub mod decimal;
pub mod error;
pub mod key;
pub mod models;
pub mod retry;
pub mod rules;

pub use client::{Client, ClientConfig, CreateOutcome};
pub use error::{ApiError, ErrorClass};
pub use key::{ApiKey, KeyKind};
pub use models::*;
