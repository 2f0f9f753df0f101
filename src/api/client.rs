//! The typed client (being written).
pub struct Client;
pub struct ClientConfig;
pub enum CreateOutcome {}
