//! The rows of a batch at a later attempt than their first: made payable again by `paybatch
//! retry` (a FAILED or REJECTED row) or `paybatch retry --expired` (a row whose payout link
//! expired), or taken out of an intent that was cancelled. The plan digest covers each row of the
//! file at its attempt, so that a plan approved before a retry is not the plan after it.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::columns::stored_row;
use super::{Ledger, Result};

/// A row at a later attempt than its first, with what it pays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaterAttempt {
    pub reference: String,
    pub attempt: i64,
    /// Made payable again by `retry --expired` (its previous attempt's link expired); else by
    /// `retry` (or a cancelled intent).
    pub reissued: bool,
    /// The product currency and face value the row pays (none for a row never valid).
    pub currency: Option<String>,
    pub face_value: Option<Decimal>,
}

impl Ledger {
    /// The rows of batch `batch_id` at a later attempt than their first, in input order.
    pub fn later_attempts(&self, batch_id: i64) -> Result<Vec<LaterAttempt>> {
        self.select_all(
            "SELECT r.reference, r.attempt, r.batch_id, r.line, r.spec,
                    EXISTS (SELECT 1 FROM payouts p WHERE p.row_id = r.id
                            AND p.attempt = r.attempt - 1 AND p.reissued_at IS NOT NULL)
                        AS reissued
             FROM rows r INDEXED BY rows_later_attempts
             WHERE r.batch_id = ?1 AND r.attempt > 1
             ORDER BY r.position, r.id",
            [batch_id],
            |r| {
                let spec = stored_row(r, "spec")?;
                Ok(LaterAttempt {
                    reference: r.get("reference")?,
                    attempt: r.get("attempt")?,
                    reissued: r.get("reissued")?,
                    currency: spec.as_ref().map(|s| s.currency.clone()),
                    face_value: spec.map(|s| s.face_value),
                })
            },
        )
    }
}
