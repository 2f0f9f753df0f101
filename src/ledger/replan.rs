//! An order the service refused for some of its items, its other rows planned again: in one
//! transaction, the order REJECTED, the rows of the items the service named REJECTED with its
//! reason, and the other rows moved, still PLANNED, into a new intent (a new key and body),
//! each with its event. The intent of the new order is durable before it is sent; until this
//! commits, the refused order is an intent in doubt, sent again with its key, and the service
//! answers the same refusal.

use rusqlite::{OptionalExtension, params};

use super::transitions::{write_order_transition, write_row_transition};
use super::{
    Ledger, LedgerError, OrderState, PlannedOrder, Result, RowState, Transition, begin, commit,
    event, exec, now, sqlerr,
};

/// The cause of the event of each row planned again (counted by [`Ledger::replanned_rows`]).
pub const REPLANNED: &str = "re-planned";

/// What the service refused of an order, for [`Ledger::replan_refused`].
#[derive(Debug, Clone, Copy)]
pub struct ItemRefusal<'a> {
    pub http_status: Option<u16>,
    /// The refusal's type.
    pub kind: &'a str,
    /// The whole refusal, kept on the order.
    pub message: &'a str,
    /// The items the service named (by index in the order), each with its reason.
    pub items: &'a [(i64, String)],
}

impl Ledger {
    /// Records the refusal of some items of INTENT order `order_id` (see the module): those
    /// rows REJECTED with the service's reason, and, when `new_order` is given, the others in
    /// it, in their order. Returns the new order's id. Refused when the order is not an intent
    /// or when `new_order`'s key is already the ledger's (nothing is written then).
    pub fn replan_refused(
        &mut self,
        order_id: i64,
        refusal: ItemRefusal<'_>,
        new_order: Option<&PlannedOrder>,
    ) -> Result<Option<i64>> {
        let current = self
            .order(order_id)?
            .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
        if current.state != OrderState::Intent {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order_id,
                from: current.state.to_string(),
                to: OrderState::Rejected.to_string(),
            });
        }
        let rows = self.rows_of_order(order_id)?;
        let booked_at = self.books_now();
        let path = self.path.clone();
        let tx = begin(&mut self.conn, &path)?;
        let cause = format!(
            "service refused {} of the order's {} items: {}",
            refusal.items.len(),
            rows.len(),
            refusal.kind
        );
        let order_move = Transition {
            http_status: refusal.http_status,
            error: Some((refusal.kind, refusal.message)),
            ..Transition::to(OrderState::Rejected, &cause)
        };
        write_order_transition(&tx, &path, &current, &order_move, &booked_at)?;
        let new_id = match new_order {
            Some(order) => Some(insert_intent(&tx, &path, current.batch_id, order)?),
            None => None,
        };
        settle_rows(
            &tx,
            &path,
            (&current, &rows),
            &refusal,
            (&order_move, new_id),
        )?;
        commit(tx, &path)?;
        Ok(new_id)
    }

    /// Whether an order of the ledger has idempotency key `key` (a key is never used twice).
    pub fn has_key(&self, key: &str) -> bool {
        self.conn
            .query_row(
                "SELECT 1 FROM orders WHERE idempotency_key = ?1",
                params![key],
                |_| Ok(()),
            )
            .optional()
            .map_or(true, |found| found.is_some())
    }

    /// How many times row `row_id` was planned again after a refusal of other items.
    pub fn replans_of_row(&self, row_id: i64) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) AS replans FROM events WHERE subject = 'row' AND subject_id = ?1
                   AND cause LIKE ?2",
                params![row_id, format!("{REPLANNED}%")],
                |r| r.get("replans"),
            )
            .map_err(sqlerr(&self.path))
    }

    /// The first REJECTED and FAILED rows of the batch, in input order, each with the service's
    /// reason: `line 5 (W-4): validation_error: items.3....: 'x' is not a valid email address`.
    pub fn first_refused_rows(&self, batch_id: i64, limit: i64) -> Result<Vec<String>> {
        self.select_all(
            "SELECT line, reference, state, error_type, error_message FROM rows
             WHERE batch_id = ?1 AND state IN ('REJECTED', 'FAILED')
             ORDER BY position, id LIMIT ?2",
            params![batch_id, limit],
            |r| {
                let (line, reference, state): (i64, String, String) =
                    (r.get("line")?, r.get("reference")?, r.get("state")?);
                let (kind, message): (Option<String>, Option<String>) =
                    (r.get("error_type")?, r.get("error_message")?);
                let why = match (kind, message) {
                    (Some(k), Some(m)) => format!(": {k}: {m}"),
                    (Some(k), None) => format!(": {k}"),
                    (None, Some(m)) => format!(": {m}"),
                    (None, None) => String::new(),
                };
                Ok(format!("line {line} ({reference}) {state}{why}"))
            },
        )
    }

    /// The rows of the batch planned again after a refusal of other items of their order,
    /// each counted once, by the refusal's type.
    pub fn replanned_rows(&self, batch_id: i64) -> Result<Vec<(String, i64)>> {
        self.select_all(
            "SELECT substr(cause, ?2) AS refusal, COUNT(DISTINCT subject_id) AS replanned
              FROM events
              WHERE batch_id = ?1 AND subject = 'row' AND cause LIKE ?3
              GROUP BY substr(cause, ?2) ORDER BY replanned DESC, refusal",
            params![
                batch_id,
                (REPLANNED.len() + " after ".len() + 1) as i64,
                format!("{REPLANNED} after %")
            ],
            |r| Ok((r.get("refusal")?, r.get("replanned")?)),
        )
    }
}

/// The rows of a refused order: those of the items the service named REJECTED with its reason,
/// the others moved into the new order `new_id` (or, without one, REJECTED by `order_move`).
fn settle_rows(
    tx: &rusqlite::Transaction<'_>,
    path: &std::path::Path,
    (current, rows): (&super::OrderRecord, &[super::RowRecord]),
    refusal: &ItemRefusal<'_>,
    (order_move, new_id): (&Transition<'_>, Option<i64>),
) -> Result<()> {
    let mut next_index = 0;
    for row in rows {
        let named = refusal
            .items
            .iter()
            .find(|(i, _)| Some(*i) == row.item_index);
        match (named, new_id) {
            (Some((_, reason)), _) => {
                let t = Transition {
                    error: Some((refusal.kind, reason)),
                    ..Transition::to(OrderState::Rejected, "service refused its item")
                };
                write_row_transition(tx, path, current.batch_id, row, RowState::Rejected, &t)?;
            }
            (None, Some(new_id)) => {
                move_row(
                    tx,
                    path,
                    (current.batch_id, row.id),
                    (new_id, next_index),
                    refusal.kind,
                )?;
                next_index += 1;
            }
            (None, None) => {
                let t = Transition {
                    error: Some((refusal.kind, refusal.message)),
                    ..*order_move
                };
                write_row_transition(tx, path, current.batch_id, row, RowState::Rejected, &t)?;
            }
        }
    }
    Ok(())
}

fn insert_intent(
    tx: &rusqlite::Transaction<'_>,
    path: &std::path::Path,
    batch_id: i64,
    order: &PlannedOrder,
) -> Result<i64> {
    let taken: Option<i64> = tx
        .query_row(
            "SELECT id FROM orders WHERE idempotency_key = ?1",
            params![order.idempotency_key],
            |r| r.get("id"),
        )
        .optional()
        .map_err(sqlerr(path))?;
    if let Some(id) = taken {
        return Err(LedgerError::Corrupt(format!(
            "key {} of a re-planned order is already order {id}'s",
            order.idempotency_key
        )));
    }
    exec(
        tx,
        path,
        "INSERT INTO orders (batch_id, idempotency_key, body, mode, payment_currency,
                             state, created_at, payment_method, card_id)
         VALUES (?1, ?2, ?3, ?4, ?5, 'INTENT', ?6, ?7, ?8)",
        params![
            batch_id,
            order.idempotency_key,
            order.body,
            order.mode,
            order.payment_currency,
            now(),
            order.payment_method,
            order.card_id
        ],
    )?;
    let id = tx.last_insert_rowid();
    event(
        tx,
        batch_id,
        "order",
        id,
        None,
        Some("INTENT"),
        "intent committed: the rows of a refused order planned again",
    )
    .map_err(sqlerr(path))?;
    Ok(id)
}

/// Moves a PLANNED row (batch id, row id) to item `index` of order `to`, after a refusal of
/// type `kind` of other items of its order.
fn move_row(
    tx: &rusqlite::Transaction<'_>,
    path: &std::path::Path,
    (batch_id, row_id): (i64, i64),
    (to, index): (i64, i64),
    kind: &str,
) -> Result<()> {
    let changed = exec(
        tx,
        path,
        "UPDATE rows SET order_id = ?2, item_index = ?3 WHERE id = ?1 AND state = 'PLANNED'",
        params![row_id, to, index],
    )?;
    if changed != 1 {
        return Err(LedgerError::Transition {
            subject: "row",
            id: row_id,
            from: "not PLANNED".into(),
            to: "PLANNED in a new order".into(),
        });
    }
    event(
        tx,
        batch_id,
        "row",
        row_id,
        Some("PLANNED"),
        Some("PLANNED"),
        &format!("{REPLANNED} after {kind}"),
    )
    .map_err(sqlerr(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::merge::Planning;
    use super::super::{IncomingRow, OrderMode};
    use super::*;
    use crate::api::models::PaymentMethodType;

    fn incoming(n: i64) -> IncomingRow {
        super::super::sample_row(n)
    }

    fn order(key: &str) -> PlannedOrder {
        PlannedOrder {
            idempotency_key: key.into(),
            body: b"{}".to_vec(),
            mode: OrderMode::Async,
            payment_currency: "USD".into(),
            payment_method: PaymentMethodType::AccountBalance,
            card_id: None,
        }
    }

    /// A ledger with one batch of four rows in one intent, `k1`.
    fn planned() -> (tempfile::TempDir, Ledger, i64, i64) {
        let (dir, mut ledger, batch_id) = crate::ledger::with_a_batch();
        let rows: Vec<IncomingRow> = (0..4).map(incoming).collect();
        let mut merge = ledger.merge(batch_id, Planning::Plan).expect("merge");
        let mut to_plan = Vec::new();
        for row in &rows {
            let t = merge.row(row).expect("row").expect("to plan");
            to_plan.push((row, t));
        }
        let id = merge.plan(&order("k1"), &to_plan).expect("plan");
        merge.close().expect("close");
        merge.commit().expect("commit");
        (dir, ledger, batch_id, id)
    }

    fn refusal(items: &[(i64, String)]) -> ItemRefusal<'_> {
        ItemRefusal {
            http_status: Some(422),
            kind: "validation_error",
            message: "see details",
            items,
        }
    }

    #[test]
    fn the_named_rows_are_rejected_and_the_others_move_to_the_new_intent() {
        let (_dir, mut ledger, batch, k1) = planned();
        let named = [(
            1,
            "items.1.distribution_method.email_address: 'x' bad".to_string(),
        )];
        let k2 = ledger
            .replan_refused(k1, refusal(&named), Some(&order("k2")))
            .expect("recorded")
            .expect("a new order");
        assert_eq!(
            ledger.order(k1).expect("read").expect("k1").state,
            OrderState::Rejected
        );
        let refused = ledger.rows_of_order(k1).expect("rows");
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].reference, "R1");
        assert_eq!(refused[0].state, RowState::Rejected);
        assert_eq!(
            refused[0].error_message.as_deref(),
            Some(named[0].1.as_str())
        );
        let moved = ledger.rows_of_order(k2).expect("rows");
        let moved: Vec<(&str, RowState, Option<i64>)> = moved
            .iter()
            .map(|r| (r.reference.as_str(), r.state, r.item_index))
            .collect();
        assert_eq!(
            moved,
            [
                ("R0", RowState::Planned, Some(0)),
                ("R2", RowState::Planned, Some(1)),
                ("R3", RowState::Planned, Some(2))
            ]
        );
        assert_eq!(
            ledger.order(k2).expect("read").expect("k2").state,
            OrderState::Intent
        );
        let r0 = ledger.rows_of_order(k2).expect("rows")[0].id;
        assert_eq!(ledger.replans_of_row(r0).expect("count"), 1);
        assert_eq!(
            ledger.replanned_rows(batch).expect("count"),
            [("validation_error".to_string(), 3)]
        );
        let named_rows = ledger.first_refused_rows(batch, 10).expect("named");
        assert_eq!(named_rows.len(), 1);
        assert!(named_rows[0].starts_with("line 3 (R1) REJECTED: validation_error: items.1"));
        assert!(ledger.has_key("k2") && !ledger.has_key("k3"));
    }

    #[test]
    fn a_key_already_held_or_an_order_not_an_intent_writes_nothing() {
        let (_dir, mut ledger, _batch, k1) = planned();
        let named = [(0, "bad".to_string())];
        assert!(
            ledger
                .replan_refused(k1, refusal(&named), Some(&order("k1")))
                .is_err()
        );
        assert_eq!(
            ledger.order(k1).expect("read").expect("k1").state,
            OrderState::Intent
        );
        assert!(
            ledger
                .rows_of_order(k1)
                .expect("rows")
                .iter()
                .all(|r| r.state == RowState::Planned)
        );
        // Without a new order, every row is REJECTED: the named with its reason.
        assert_eq!(
            ledger
                .replan_refused(k1, refusal(&named), None)
                .expect("ok"),
            None
        );
        let rows = ledger.rows_of_order(k1).expect("rows");
        assert!(rows.iter().all(|r| r.state == RowState::Rejected));
        assert_eq!(rows[0].error_message.as_deref(), Some("bad"));
        assert_eq!(rows[1].error_message.as_deref(), Some("see details"));
        assert!(ledger.replan_refused(k1, refusal(&named), None).is_err());
    }
}
