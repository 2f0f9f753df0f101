//! Events: the history of every move of a batch, an order or a row.

use rusqlite::{Transaction, params};

use super::{Ledger, Result, now};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub at: String,
    pub subject: String,
    pub subject_id: i64,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    pub cause: String,
}

impl Ledger {
    /// The most recent events of a batch, newest first.
    pub fn events(&self, batch_id: i64, limit: i64) -> Result<Vec<EventRecord>> {
        self.select_all(
            "SELECT at, subject, subject_id, from_state, to_state, cause FROM events
             WHERE batch_id = ?1 ORDER BY id DESC LIMIT ?2",
            params![batch_id, limit],
            |r| {
                Ok(EventRecord {
                    at: r.get("at")?,
                    subject: r.get("subject")?,
                    subject_id: r.get("subject_id")?,
                    from_state: r.get("from_state")?,
                    to_state: r.get("to_state")?,
                    cause: r.get("cause")?,
                })
            },
        )
    }
}

pub(super) fn event(
    tx: &Transaction<'_>,
    batch_id: i64,
    subject: &str,
    subject_id: i64,
    from: Option<&str>,
    to: Option<&str>,
    cause: &str,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(
        "INSERT INTO events (batch_id, at, subject, subject_id, from_state, to_state, cause)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![
            batch_id,
            now(),
            subject,
            subject_id,
            from,
            to,
            cause
        ])
    })
}
