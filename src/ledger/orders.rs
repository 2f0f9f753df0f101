//! Orders: their records and intents, and the reads of a batch's orders.

use std::collections::BTreeSet;

use rusqlite::{OptionalExtension, params};

use crate::api::models::PaymentMethodType;

use super::{Ledger, OrderMode, OrderState, Result, RowState, sqlerr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub id: i64,
    pub batch_id: i64,
    pub idempotency_key: String,
    pub body: Vec<u8>,
    pub mode: OrderMode,
    pub payment_currency: String,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: PaymentMethodType,
    pub card_id: Option<String>,
    pub state: OrderState,
    pub service_order_id: Option<String>,
    pub sends: i64,
    pub polls: i64,
    pub created_at: String,
    pub first_sent_at: Option<String>,
    pub last_sent_at: Option<String>,
    /// The HTTP status of the last answer (none when the last send got no answer).
    pub last_http_status: Option<u16>,
    pub accepted_at: Option<String>,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
}

/// What deciding whether to send an intent needs (its body stays in the ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentHead {
    pub id: i64,
    pub idempotency_key: String,
    pub sends: i64,
    pub first_sent_at: Option<String>,
}

/// The batch's orders that hold a row an input file does not have, by what the next merge of
/// that file does with them ([`Ledger::orders_outside_file`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutsideFile {
    /// Intents never sent: the merge cancels them ([`super::merge::Merge::cancelling`]).
    pub to_cancel: BTreeSet<i64>,
    /// Every other order (sent, in doubt, or answered): followed whatever the file says.
    pub followed: BTreeSet<i64>,
    /// The rows the file does not have in intents to cancel (to be REMOVED): how many, and the
    /// first [`OutsideFile::NAMED`] references.
    pub unsent_rows: (usize, Vec<String>),
    /// The rows the file does not have in orders followed (already sent): how many, and the
    /// first [`OutsideFile::NAMED`] references.
    pub sent_rows: (usize, Vec<String>),
}

impl OutsideFile {
    /// Rows named at most in each list.
    pub const NAMED: usize = 5;

    fn name(list: &mut (usize, Vec<String>), reference: String) {
        list.0 += 1;
        if list.1.len() < Self::NAMED {
            list.1.push(reference);
        }
    }
}

/// One order to plan: its key and exact body (its rows: [`super::merge::Merge::plan`]).
#[derive(Debug, Clone)]
pub struct PlannedOrder {
    pub idempotency_key: String,
    pub body: Vec<u8>,
    pub mode: OrderMode,
    pub payment_currency: String,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: PaymentMethodType,
    pub card_id: Option<String>,
}

impl Ledger {
    /// Up to `limit` of the batch's INTENT orders with an id above `after`, in id order, without
    /// their bodies: a batch can hold a million, so they are read a chunk at a time.
    pub fn intent_heads(&self, batch_id: i64, after: i64, limit: i64) -> Result<Vec<IntentHead>> {
        self.select_all(
            "SELECT id, idempotency_key, sends, first_sent_at FROM orders
             WHERE batch_id = ?1 AND state = 'INTENT' AND id > ?2 ORDER BY id LIMIT ?3",
            params![batch_id, after, limit],
            |r| {
                Ok(IntentHead {
                    id: r.get("id")?,
                    idempotency_key: r.get("idempotency_key")?,
                    sends: r.get("sends")?,
                    first_sent_at: r.get("first_sent_at")?,
                })
            },
        )
    }

    pub fn order(&self, order_id: i64) -> Result<Option<OrderRecord>> {
        Ok(self
            .query_orders("WHERE id = ?1", params![order_id])?
            .into_iter()
            .next())
    }

    /// When the ledger's orders (of every batch) were last sent, for those sent since `since`
    /// (an RFC 3339 time as [`super::now`] writes it): what the service's rate window may
    /// still hold.
    pub fn sends_since(&self, since: &str) -> Result<Vec<String>> {
        self.select_all(
            "SELECT last_sent_at FROM orders WHERE last_sent_at >= ?1",
            [since],
            |r| r.get("last_sent_at"),
        )
    }

    /// The batch's orders that hold a row an input file does not have (`in_file` says which
    /// references the file has; see [`OutsideFile`]). Cheap for a batch of a million rows: the
    /// references are read from their index alone, and only the rows the file lacks are looked
    /// up, with their orders.
    pub fn orders_outside_file(
        &self,
        batch_id: i64,
        mut in_file: impl FnMut(&str) -> bool,
    ) -> Result<OutsideFile> {
        let mut references = self
            .conn
            .prepare_cached("SELECT reference FROM rows WHERE batch_id = ?1")
            .map_err(sqlerr(&self.path))?;
        let mut lookup = self
            .conn
            .prepare_cached(
                "SELECT r.state AS row_state, o.id AS order_id, o.state AS order_state,
                        o.sends = 0 AND o.last_sent_at IS NULL AS never_sent
                 FROM rows r JOIN orders o ON o.id = r.order_id
                 WHERE r.batch_id = ?1 AND r.reference = ?2",
            )
            .map_err(sqlerr(&self.path))?;
        let mut cursor = references.query([batch_id]).map_err(sqlerr(&self.path))?;
        let mut out = OutsideFile::default();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let reference: String = r.get("reference").map_err(sqlerr(&self.path))?;
            if in_file(&reference) {
                continue;
            }
            let found = lookup
                .query_row(params![batch_id, reference], |r| {
                    Ok((
                        r.get::<_, RowState>("row_state")?,
                        r.get::<_, i64>("order_id")?,
                        r.get::<_, OrderState>("order_state")?,
                        r.get::<_, bool>("never_sent")?,
                    ))
                })
                .optional()
                .map_err(sqlerr(&self.path))?;
            let Some((row_state, order, order_state, never_sent)) = found else {
                continue;
            };
            match (row_state, order_state) {
                (RowState::Removed, _) | (_, OrderState::Cancelled) => {}
                (RowState::Planned, OrderState::Intent) if never_sent => {
                    out.to_cancel.insert(order);
                    OutsideFile::name(&mut out.unsent_rows, reference);
                }
                _ => {
                    out.followed.insert(order);
                    OutsideFile::name(&mut out.sent_rows, reference);
                }
            }
        }
        Ok(out)
    }

    /// The idempotency key and exact body of order `order_id`, read one at a time.
    pub fn order_key_and_body(&self, order_id: i64) -> Result<Option<(String, Vec<u8>)>> {
        self.conn
            .prepare_cached("SELECT idempotency_key, body FROM orders WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([order_id], |r| {
                    Ok((r.get("idempotency_key")?, r.get("body")?))
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// The ledger's order (of any batch) that holds service order `service_order_id`.
    pub fn order_by_service_id(&self, service_order_id: &str) -> Result<Option<OrderRecord>> {
        Ok(self
            .select_orders(
                "X''",
                "WHERE service_order_id = ?1",
                params![service_order_id],
            )?
            .into_iter()
            .next())
    }

    pub fn orders(&self, batch_id: i64) -> Result<Vec<OrderRecord>> {
        self.query_orders("WHERE batch_id = ?1 ORDER BY id", params![batch_id])
    }

    /// The batch's orders in `state`, without their bodies (`body` is empty).
    pub fn order_heads_in_state(
        &self,
        batch_id: i64,
        state: OrderState,
    ) -> Result<Vec<OrderRecord>> {
        self.select_orders(
            "X''",
            "WHERE batch_id = ?1 AND state = ?2 ORDER BY id",
            params![batch_id, state.as_str()],
        )
    }

    /// The batch's orders without their bodies (`body` is empty): what a summary needs, at a
    /// fraction of the memory for a large batch.
    pub fn order_heads(&self, batch_id: i64) -> Result<Vec<OrderRecord>> {
        self.select_orders("X''", "WHERE batch_id = ?1 ORDER BY id", params![batch_id])
    }

    fn query_orders(&self, tail: &str, args: impl rusqlite::Params) -> Result<Vec<OrderRecord>> {
        self.select_orders("body", tail, args)
    }

    fn select_orders(
        &self,
        body: &str,
        tail: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<OrderRecord>> {
        let sql = format!(
            "SELECT id, batch_id, idempotency_key, {body} AS body, mode, payment_currency, state,
                    service_order_id, sends, polls, created_at, first_sent_at, accepted_at,
                    error_type, error_message, payment_method, card_id, last_sent_at,
                    last_http_status FROM orders {tail}"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mapped = stmt
            .query_map(args, |r| {
                Ok(OrderRecord {
                    id: r.get("id")?,
                    batch_id: r.get("batch_id")?,
                    idempotency_key: r.get("idempotency_key")?,
                    body: r.get("body")?,
                    mode: r.get("mode")?,
                    payment_currency: r.get("payment_currency")?,
                    payment_method: r.get("payment_method")?,
                    card_id: r.get("card_id")?,
                    state: r.get("state")?,
                    service_order_id: r.get("service_order_id")?,
                    sends: r.get("sends")?,
                    polls: r.get("polls")?,
                    created_at: r.get("created_at")?,
                    first_sent_at: r.get("first_sent_at")?,
                    last_sent_at: r.get("last_sent_at")?,
                    last_http_status: r.get("last_http_status")?,
                    accepted_at: r.get("accepted_at")?,
                    error_type: r.get("error_type")?,
                    error_message: r.get("error_message")?,
                })
            })
            .map_err(sqlerr(&self.path))?;
        mapped
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sqlerr(&self.path))
    }
}
