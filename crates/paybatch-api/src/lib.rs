//! The typed client of the payout ordering service and its wire models, and the files only
//! their owner may read (`files`), which the tool and the simulator both write.

pub mod client;
#[cfg(feature = "rusqlite")]
pub mod column;
pub mod decimal;
pub mod error;
pub mod files;
pub mod key;
pub mod models;
pub mod retry;
pub mod rules;

pub use client::{Client, ClientConfig, CreateOutcome};
pub use error::{ApiError, ErrorClass};
pub use key::{ApiKey, KeyKind};
pub use models::*;
