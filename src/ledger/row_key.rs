//! A row of a batch at one attempt: what an order pays for each of its items, what its key and
//! `metadata` are made of, and what the service's orders are matched by.

/// A row (its reference in the batch) at one attempt (0: an attempt not known, from an order
/// written before orders named their attempts).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub reference: String,
    pub attempt: i64,
}

impl RowKey {
    pub fn new(reference: impl Into<String>, attempt: i64) -> Self {
        RowKey {
            reference: reference.into(),
            attempt,
        }
    }

    /// As an order's key and `metadata` take it ([`crate::batch::order_body::order_key`]).
    pub fn named(&self) -> (&str, i64) {
        (self.reference.as_str(), self.attempt)
    }
}
