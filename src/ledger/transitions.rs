//! Transitions of orders and their rows, each written with its events in one transaction;
//! the allowed moves are listed in [`super::state`].

use std::path::Path;

use rusqlite::{OptionalExtension, Transaction, params};
use rust_decimal::Decimal;

use super::{
    Amount, Ledger, LedgerError, OrderRecord, OrderState, Result, RowRecord, RowState, begin,
    commit, event, exec, now, repeats, row_state_for, sqlerr,
};

/// What the service said about one item of a terminal order.
#[derive(Debug, Clone, Default)]
pub struct ItemOutcome {
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    pub price: Option<Decimal>,
    pub discount: Option<Decimal>,
    /// What the paying balance (or card) was charged for the item, and in which currency.
    pub debited: Option<(Decimal, String)>,
    /// The life of the item's payout link as the answer gave it (`payout.status`, since when,
    /// expiry), kept for a COMPLETED row.
    pub payout: Option<super::PayoutLife>,
}

/// A transition of an order, and of its rows, for [`Ledger::transition_order`]: the state it
/// goes to and what the service said with it.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    pub to: OrderState,
    /// The service's order id, when the answer gave one.
    pub service_order_id: Option<&'a str>,
    pub http_status: Option<u16>,
    /// The answer's body, kept on the order.
    pub response: Option<&'a str>,
    /// (type, message) of a refusal or a failure.
    pub error: Option<(&'a str, &'a str)>,
    /// What the answer says of each item, by item index.
    pub items: &'a [ItemOutcome],
    pub completed_at: Option<&'a str>,
    /// Why, for the event log.
    pub cause: &'a str,
}

impl<'a> Transition<'a> {
    /// To `to`, for `cause`, with nothing more from the service.
    pub fn to(to: OrderState, cause: &'a str) -> Self {
        Transition {
            to,
            service_order_id: None,
            http_status: None,
            response: None,
            error: None,
            items: &[],
            completed_at: None,
            cause,
        }
    }
}

impl Ledger {
    /// Runs `step`, whose writes record what already happened (a service's answer, a finished
    /// order, a poll), with `synchronous=NORMAL` on a ledger kept with a write-ahead log: its
    /// commits are in the log, safe from a killed process, without waiting for an fsync each.
    /// They are on disk with the next commit that records an intent (the log is one file,
    /// written in order, and that commit waits for it, `synchronous=FULL`), at the latest when
    /// the log is checkpointed. Lost to a power cut, such a record is what a resume finds out
    /// again from the service (an order left INTENT and sent is looked up by its idempotency
    /// key; one left ACCEPTED is read again). A write recording an intent never runs here.
    /// `synchronous=FULL` is set again before this returns, or the error says it could not be.
    pub fn relaxed<T, E: From<LedgerError>>(
        &mut self,
        step: impl FnOnce(&mut Ledger) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let in_log = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| {
                r.get::<_, String>("journal_mode")
            })
            .map_err(sqlerr(&self.path))?
            .eq_ignore_ascii_case("wal");
        if !in_log {
            return step(self);
        }
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlerr(&self.path))?;
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(self)));
        let full = self.conn.pragma_update(None, "synchronous", "FULL");
        match done {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(out) => {
                full.map_err(sqlerr(&self.path))?;
                out
            }
        }
    }

    /// Records, durably, that the order is about to be sent (once more). What the last send got
    /// back is cleared: until this send is answered, nothing is known of it.
    pub fn mark_sending(&mut self, order_id: i64) -> Result<()> {
        let at = now();
        let tx = begin(&mut self.conn, &self.path)?;
        let n = tx
            .execute(
                "UPDATE orders SET sends = sends + 1, last_sent_at = ?2,
                        first_sent_at = COALESCE(first_sent_at, ?2),
                        last_http_status = NULL, error_type = NULL, error_message = NULL
                 WHERE id = ?1 AND state = 'INTENT'",
                params![order_id, at],
            )
            .map_err(sqlerr(&self.path))?;
        if n != 1 {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order_id,
                from: "not INTENT".into(),
                to: "sending".into(),
            });
        }
        commit(tx, &self.path)
    }

    /// A transient failure of a send: the order stays an INTENT (in doubt), the error is kept.
    pub fn record_send_error(
        &mut self,
        order_id: i64,
        status: Option<u16>,
        error_type: &str,
        message: &str,
    ) -> Result<()> {
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE orders SET last_http_status = ?2, error_type = ?3, error_message = ?4
             WHERE id = ?1",
            params![order_id, status, error_type, message],
        )?;
        commit(tx, &self.path)
    }

    /// Moves an order (and its rows) to a new state, with what the service said.
    pub fn transition_order(&mut self, order_id: i64, t: Transition<'_>) -> Result<()> {
        let current = self
            .order(order_id)?
            .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
        if current.state == t.to {
            return Ok(());
        }
        check_order_transition(&current, &t)?;
        let row_to = row_state_for(t.to);
        // A move that says nothing of single items and completes no row (an order accepted,
        // refused or failed as a whole) moves the rows together, statement by statement.
        if t.items.is_empty() && row_to != RowState::Completed {
            return self.move_rows_together(&current, &t, row_to);
        }
        let rows = self.rows_of_order(order_id)?;
        let booked_at = self.books_now();
        let tx = begin(&mut self.conn, &self.path)?;
        write_order_transition(&tx, &self.path, &current, &t, &booked_at)?;
        for row in &rows {
            if row.state != row_to {
                write_row_transition(&tx, &self.path, current.batch_id, row, row_to, &t)?;
            }
        }
        commit(tx, &self.path)
    }

    /// [`Self::transition_order`] of an order whose rows all take the same values: each of its
    /// rows not yet in `row_to` moves there (refused as a whole when one of them cannot), with
    /// an event each, in item order, as [`write_row_transition`] writes them one by one.
    fn move_rows_together(
        &mut self,
        current: &OrderRecord,
        t: &Transition<'_>,
        row_to: RowState,
    ) -> Result<()> {
        let path = self.path.clone();
        let booked_at = self.books_now();
        let tx = begin(&mut self.conn, &path)?;
        let moving: Vec<(i64, RowState)> = tx
            .prepare_cached(
                "SELECT id, state FROM rows WHERE order_id = ?1 AND state != ?2
                 ORDER BY item_index, id",
            )
            .and_then(|mut st| {
                st.query_map(params![current.id, row_to], |r| {
                    Ok((r.get("id")?, r.get("state")?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(sqlerr(&path))?;
        if let Some((id, from)) = moving.iter().find(|(_, from)| !from.can_become(row_to)) {
            return Err(LedgerError::Transition {
                subject: "row",
                id: *id,
                from: from.to_string(),
                to: row_to.to_string(),
            });
        }
        write_order_transition(&tx, &path, current, t, &booked_at)?;
        exec(
            &tx,
            &path,
            "INSERT INTO events (batch_id, at, subject, subject_id, from_state, to_state, cause)
             SELECT ?1, ?2, 'row', id, state, ?3, ?4 FROM rows
              WHERE order_id = ?5 AND state != ?3 ORDER BY item_index, id",
            params![current.batch_id, now(), row_to, t.cause, current.id],
        )?;
        exec(
            &tx,
            &path,
            "UPDATE rows SET state = ?2, error_type = ?3, error_message = ?4,
                    completed_at = COALESCE(?5, completed_at)
              WHERE order_id = ?1 AND state != ?2",
            params![
                current.id,
                row_to,
                t.error.map(|e| e.0),
                t.error.map(|e| e.1),
                t.completed_at
            ],
        )?;
        commit(tx, &path)
    }

    /// An intent that is never to be sent: REJECTED (its rows too) with the error `kind` and
    /// `message`, for `paybatch retry` to give its rows a new attempt.
    pub fn close_intent(
        &mut self,
        order_id: i64,
        kind: &str,
        message: &str,
        cause: &str,
    ) -> Result<()> {
        self.transition_order(
            order_id,
            Transition {
                error: Some((kind, message)),
                ..Transition::to(OrderState::Rejected, cause)
            },
        )
    }

    /// Cancels an intent whose rows another ledger's orders pay, and which the service never
    /// turned into an order (reconciliation tells): in one transaction, the order CANCELLED
    /// (never to be sent again) and its rows back to PENDING (no longer in an order), with
    /// their events. Refused for any order that is not an intent.
    pub fn release_intent(&mut self, order_id: i64, cause: &str) -> Result<()> {
        let path = self.path.clone();
        let tx = begin(&mut self.conn, &path)?;
        let batch_id: Option<i64> = tx
            .prepare_cached("SELECT batch_id FROM orders WHERE id = ?1 AND state = 'INTENT'")
            .and_then(|mut st| {
                st.query_row(params![order_id], |r| r.get("batch_id"))
                    .optional()
            })
            .map_err(sqlerr(&path))?;
        let Some(batch_id) = batch_id else {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order_id,
                from: "not an intent".into(),
                to: "CANCELLED".into(),
            });
        };
        exec(
            &tx,
            &path,
            "UPDATE orders SET state = 'CANCELLED', finished_at = ?2 WHERE id = ?1",
            params![order_id, super::now()],
        )?;
        event(
            &tx,
            batch_id,
            "order",
            order_id,
            Some("INTENT"),
            Some("CANCELLED"),
            cause,
        )
        .map_err(sqlerr(&path))?;
        let rows: Vec<i64> = tx
            .prepare_cached("SELECT id FROM rows WHERE order_id = ?1 AND state = 'PLANNED'")
            .and_then(|mut st| {
                st.query_map(params![order_id], |r| r.get("id"))?
                    .collect::<rusqlite::Result<Vec<i64>>>()
            })
            .map_err(sqlerr(&path))?;
        for row in rows {
            exec(
                &tx,
                &path,
                "UPDATE rows SET state = 'PENDING', order_id = NULL, item_index = NULL
                  WHERE id = ?1",
                params![row],
            )?;
            event(
                &tx,
                batch_id,
                "row",
                row,
                Some("PLANNED"),
                Some("PENDING"),
                cause,
            )
            .map_err(sqlerr(&path))?;
        }
        commit(tx, &path)
    }

    /// Reconciliation found no order at the service for an in-doubt intent: it was never
    /// created, so it may be sent again (with its recorded key and body).
    pub fn clear_in_doubt(&mut self, order_id: i64, cause: &str) -> Result<()> {
        let current = self
            .order(order_id)?
            .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE orders SET sends = 0, first_sent_at = NULL WHERE id = ?1 AND state = 'INTENT'",
            params![order_id],
        )?;
        event(
            &tx,
            current.batch_id,
            "order",
            order_id,
            Some("INTENT"),
            Some("INTENT"),
            cause,
        )
        .map_err(sqlerr(&self.path))?;
        commit(tx, &self.path)
    }

    /// Reconciliation found a service order for rows the ledger had not planned (a lost or
    /// restored ledger): records it, in one transaction, as an order the service accepted, with
    /// the key the rows would have used. Its body is not known and it is never sent.
    ///
    /// `rows` are (row id, attempt of the order at the service). A row is PENDING, or FAILED or
    /// REJECTED at an earlier attempt (the ledger missed a retry that the service has an order
    /// for): it moves to that attempt, as `paybatch retry` would have moved it, and then to
    /// SUBMITTED. Any other row refuses the whole adoption.
    pub fn adopt_order(
        &mut self,
        batch_id: i64,
        idempotency_key: &str,
        payment_currency: &str,
        rows: &[(i64, i64)],
        service_order_id: &str,
    ) -> Result<i64> {
        let at = now();
        let current: Vec<(i64, RowRecord)> = rows
            .iter()
            .map(|(id, attempt)| {
                self.query_rows("WHERE id = ?1", params![id])?
                    .into_iter()
                    .next()
                    .map(|r| (*attempt, r))
                    .ok_or_else(|| LedgerError::Corrupt(format!("row {id} not found")))
            })
            .collect::<Result<_>>()?;
        let tx = begin(&mut self.conn, &self.path)?;
        tx.execute(
            "INSERT INTO orders (batch_id, idempotency_key, body, mode, payment_currency, state,
                                 service_order_id, created_at, accepted_at)
             VALUES (?1, ?2, ?3, 'adopted', ?4, 'ACCEPTED', ?5, ?6, ?6)",
            params![
                batch_id,
                idempotency_key,
                Vec::<u8>::new(),
                payment_currency,
                service_order_id,
                at
            ],
        )
        .map_err(sqlerr(&self.path))?;
        let order_id = tx.last_insert_rowid();
        event(
            &tx,
            batch_id,
            "order",
            order_id,
            None,
            Some("ACCEPTED"),
            "reconcile: order found at the service",
        )
        .map_err(sqlerr(&self.path))?;
        for (index, (attempt, row)) in current.iter().enumerate() {
            let steps = adoption_steps(row, *attempt)?;
            adopt_row(
                &tx,
                &self.path,
                batch_id,
                row,
                *attempt,
                (order_id, index),
                steps,
            )?;
        }
        commit(tx, &self.path)?;
        Ok(order_id)
    }

    /// Counts one more status request for an order.
    pub fn count_poll(&mut self, order_id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE orders SET polls = polls + 1 WHERE id = ?1",
                params![order_id],
            )
            .map_err(sqlerr(&self.path))?;
        Ok(())
    }

    /// `paybatch retry`: FAILED and REJECTED rows become PENDING with the next attempt number
    /// (hence a new idempotency key). Returns the references made eligible.
    pub fn retry_rows(
        &mut self,
        batch_id: i64,
        references: Option<&[String]>,
    ) -> Result<Vec<String>> {
        // Only the failed and refused rows are read (a batch can hold a million).
        let candidates: Vec<(i64, String, String, i64)> = self
            .select_all(
                "SELECT id, reference, state, attempt FROM rows
                 WHERE batch_id = ?1 AND state IN ('FAILED', 'REJECTED')
                 ORDER BY position, id",
                [batch_id],
                |r| {
                    Ok((
                        r.get("id")?,
                        r.get("reference")?,
                        r.get("state")?,
                        r.get("attempt")?,
                    ))
                },
            )?
            .into_iter()
            .filter(|(_, reference, _, _)| references.is_none_or(|refs| refs.contains(reference)))
            .collect();
        let tx = begin(&mut self.conn, &self.path)?;
        let mut out = Vec::new();
        for (id, reference, state, attempt) in candidates {
            exec(
                &tx,
                &self.path,
                "UPDATE rows SET state = 'PENDING', attempt = attempt + 1, order_id = NULL,
                        item_index = NULL, item_id = NULL, payout_url = NULL, price = NULL,
                        discount = NULL, error_type = NULL, error_message = NULL,
                        completed_at = NULL
                 WHERE id = ?1",
                params![id],
            )?;
            event(
                &tx,
                batch_id,
                "row",
                id,
                Some(state.as_str()),
                Some("PENDING"),
                &format!("retry requested: attempt {}", attempt + 1),
            )
            .map_err(sqlerr(&self.path))?;
            out.push(reference);
        }
        commit(tx, &self.path)?;
        Ok(out)
    }
}

/// Why an order cannot move from its `current` state as `t` says: a transition the table does
/// not allow, or a paid (or in-flight) state without the service's order id.
fn check_order_transition(current: &OrderRecord, t: &Transition<'_>) -> Result<()> {
    let (order_id, to) = (current.id, t.to);
    // An intent is cancelled only by the merge of a file that no longer has one of its rows,
    // which takes its rows out of it (`merge::Merge::close`).
    if !current.state.can_become(to) || to == OrderState::Cancelled {
        return Err(LedgerError::Transition {
            subject: "order",
            id: order_id,
            from: current.state.to_string(),
            to: to.to_string(),
        });
    }
    if matches!(
        to,
        OrderState::Accepted | OrderState::Completed | OrderState::Failed
    ) && t
        .service_order_id
        .or(current.service_order_id.as_deref())
        .is_none()
    {
        // Never mark a row paid (or in flight) without the service's order id.
        return Err(LedgerError::Corrupt(format!(
            "order {order_id}: {to} without a service order id"
        )));
    }
    Ok(())
}

/// Writes an order's move from its `current` state as `t` says, and its event.
pub(super) fn write_order_transition(
    tx: &Transaction<'_>,
    path: &Path,
    current: &OrderRecord,
    t: &Transition<'_>,
    booked_at: &str,
) -> Result<()> {
    let at = now();
    // The books' one clock: an order made final is booked once, at `booked_at`, on the date
    // its month allows (a closed month's lines never change).
    let booked = (t.to.is_terminal() && t.to != OrderState::Cancelled)
        .then(|| super::books::booking_date(tx, booked_at).map(|on| (booked_at, on)))
        .transpose()
        .map_err(sqlerr(path))?;
    exec(
        tx,
        path,
        "UPDATE orders SET state = ?2,
                service_order_id = COALESCE(?3, service_order_id),
                last_http_status = COALESCE(?4, last_http_status),
                last_response = COALESCE(?5, last_response),
                error_type = ?6, error_message = ?7,
                accepted_at = CASE WHEN ?3 IS NOT NULL THEN COALESCE(accepted_at, ?8)
                                   ELSE accepted_at END,
                finished_at = CASE WHEN ?9 THEN ?8 ELSE finished_at END,
                booked_at = COALESCE(booked_at, ?10), booked_on = COALESCE(booked_on, ?11)
         WHERE id = ?1",
        params![
            current.id,
            t.to,
            t.service_order_id,
            t.http_status,
            t.response,
            t.error.map(|e| e.0),
            t.error.map(|e| e.1),
            at,
            t.to.is_terminal(),
            booked.as_ref().map(|b| b.0),
            booked.as_ref().map(|b| b.1.as_str())
        ],
    )?;
    event(
        tx,
        current.batch_id,
        "order",
        current.id,
        Some(current.state.as_str()),
        Some(t.to.as_str()),
        t.cause,
    )
    .map_err(sqlerr(path))?;
    Ok(())
}

/// Writes the move of one row of an order to `to`, with what `t` says of its item, and its
/// event; refused when the table does not allow it.
pub(super) fn write_row_transition(
    tx: &Transaction<'_>,
    path: &Path,
    batch_id: i64,
    row: &RowRecord,
    to: RowState,
    t: &Transition<'_>,
) -> Result<()> {
    if !row.state.can_become(to) {
        return Err(LedgerError::Transition {
            subject: "row",
            id: row.id,
            from: row.state.to_string(),
            to: to.to_string(),
        });
    }
    let item = row
        .item_index
        .and_then(|i| t.items.get(i as usize))
        .cloned()
        .unwrap_or_default();
    // A paid row is compared with the rows of later batches (`repeats`).
    let likeness = (to == RowState::Completed)
        .then(|| row.spec.as_ref().and_then(repeats::likeness_of))
        .flatten();
    exec(
        tx,
        path,
        "UPDATE rows SET state = ?2,
                item_id = COALESCE(?3, item_id), payout_url = COALESCE(?4, payout_url),
                price = COALESCE(?5, price), discount = COALESCE(?6, discount),
                error_type = ?7, error_message = ?8,
                completed_at = COALESCE(?9, completed_at),
                debited_amount = COALESCE(?10, debited_amount),
                debited_currency = COALESCE(?11, debited_currency),
                likeness = COALESCE(?12, likeness)
         WHERE id = ?1",
        params![
            row.id,
            to,
            item.item_id,
            item.payout_url,
            item.price.map(Amount),
            item.discount.map(Amount),
            t.error.map(|e| e.0),
            t.error.map(|e| e.1),
            t.completed_at,
            item.debited.as_ref().map(|d| Amount(d.0)),
            item.debited.as_ref().map(|d| d.1.as_str()),
            likeness
        ],
    )?;
    event(
        tx,
        batch_id,
        "row",
        row.id,
        Some(row.state.as_str()),
        Some(to.as_str()),
        t.cause,
    )
    .map_err(sqlerr(path))?;
    if let (RowState::Completed, Some(order_id), Some(life)) = (to, row.order_id, &item.payout) {
        super::payouts::record_at_completion(tx, batch_id, row.id, row.attempt, order_id, life)
            .map_err(sqlerr(path))?;
    }
    Ok(())
}

/// The moves (from, to, cause) that bring `row` into an adopted order at `attempt`: PENDING
/// (after FAILED or REJECTED at an earlier attempt), PLANNED, SUBMITTED. Any other row refuses
/// the adoption.
fn adoption_steps(row: &RowRecord, attempt: i64) -> Result<Vec<(RowState, RowState, String)>> {
    let mut steps: Vec<(RowState, RowState, String)> = Vec::new();
    match row.state {
        RowState::Pending if attempt >= row.attempt => {}
        RowState::Failed | RowState::Rejected if attempt > row.attempt => steps.push((
            row.state,
            RowState::Pending,
            format!("reconcile: the service has attempt {attempt} of this row"),
        )),
        other => {
            return Err(LedgerError::Transition {
                subject: "row",
                id: row.id,
                from: other.to_string(),
                to: format!("an adopted order at attempt {attempt}"),
            });
        }
    }
    steps.push((RowState::Pending, RowState::Planned, "in an order".into()));
    steps.push((
        RowState::Planned,
        RowState::Submitted,
        "reconcile: order found at the service".into(),
    ));
    // The same table as every other transition (docs/ledger.md).
    if let Some((from, to, _)) = steps.iter().find(|(from, to, _)| !from.can_become(*to)) {
        return Err(LedgerError::Transition {
            subject: "row",
            id: row.id,
            from: from.to_string(),
            to: to.to_string(),
        });
    }
    Ok(steps)
}

/// Writes `row` as item `index` of the adopted order `order_id` at `attempt`, SUBMITTED, with
/// an event for each of its `steps`.
fn adopt_row(
    tx: &Transaction<'_>,
    path: &Path,
    batch_id: i64,
    row: &RowRecord,
    attempt: i64,
    (order_id, index): (i64, usize),
    steps: Vec<(RowState, RowState, String)>,
) -> Result<()> {
    tx.execute(
        "UPDATE rows SET state = 'SUBMITTED', attempt = ?2, order_id = ?3,
                item_index = ?4, item_id = NULL, payout_url = NULL, price = NULL,
                discount = NULL, error_type = NULL, error_message = NULL,
                completed_at = NULL
         WHERE id = ?1",
        params![row.id, attempt, order_id, index as i64],
    )
    .map_err(sqlerr(path))?;
    for (from, to, cause) in steps {
        event(
            tx,
            batch_id,
            "row",
            row.id,
            Some(from.as_str()),
            Some(to.as_str()),
            &cause,
        )
        .map_err(sqlerr(path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synchronous(ledger: &Ledger) -> i64 {
        ledger
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get("synchronous"))
            .expect("synchronous")
    }

    #[test]
    fn records_of_what_happened_wait_for_no_fsync_and_full_is_set_again() {
        let (_dir, mut ledger, _batch) = crate::ledger::with_a_batch();
        assert_eq!(synchronous(&ledger), 2, "FULL outside");
        let inside = ledger
            .relaxed(|l| Ok::<_, LedgerError>(synchronous(l)))
            .expect("relaxed");
        assert_eq!(inside, 1, "NORMAL inside");
        assert_eq!(synchronous(&ledger), 2, "FULL again");
        let failed = ledger.relaxed(|_| Err::<(), _>(LedgerError::Corrupt("x".into())));
        assert!(failed.is_err());
        assert_eq!(synchronous(&ledger), 2, "FULL again after an error");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ledger.relaxed(|_| -> std::result::Result<(), LedgerError> { panic!("step") })
        }));
        assert!(caught.is_err());
        assert_eq!(synchronous(&ledger), 2, "FULL again after a panic");
    }

    /// An order of five rows planned in reverse file order, its ledger and batch.
    fn an_order_of_five() -> (tempfile::TempDir, Ledger, i64, i64) {
        let (dir, mut ledger, batch) = crate::ledger::with_a_batch();
        let rows: Vec<crate::ledger::IncomingRow> = (0..5).map(crate::ledger::sample_row).collect();
        let mut merge = ledger
            .merge(batch, crate::ledger::merge::Planning::Plan)
            .expect("merge");
        let mut to_plan = Vec::new();
        for row in &rows {
            to_plan.push((row, merge.row(row).expect("row").expect("to plan")));
        }
        to_plan.reverse();
        let planned = crate::ledger::PlannedOrder {
            idempotency_key: "k1".into(),
            body: b"{}".to_vec(),
            mode: crate::ledger::OrderMode::Async,
            payment_currency: "USD".into(),
            payment_method: crate::api::models::PaymentMethodType::AccountBalance,
            card_id: None,
        };
        let order = merge.plan(&planned, &to_plan).expect("plan");
        merge.close().expect("close");
        merge.commit().expect("commit");
        (dir, ledger, batch, order)
    }

    fn row_events(ledger: &Ledger) -> Vec<(i64, String, String, String)> {
        ledger
            .select_all(
                "SELECT subject_id, from_state, to_state, cause FROM events
                 WHERE subject = 'row' ORDER BY id",
                [],
                |r| {
                    Ok((
                        r.get("subject_id")?,
                        r.get("from_state")?,
                        r.get("to_state")?,
                        r.get("cause")?,
                    ))
                },
            )
            .expect("events")
    }

    /// An order accepted moves its rows together: each PLANNED row SUBMITTED, an event each in
    /// item order, as the rows moved one by one were; a row already there is left alone.
    #[test]
    fn an_order_moved_as_a_whole_moves_each_row_with_an_event_in_item_order() {
        let (_dir, mut ledger, _batch, order) = an_order_of_five();
        let first = ledger.rows_of_order(order).expect("rows")[0].id;
        ledger
            .conn
            .execute("UPDATE rows SET state = 'SUBMITTED' WHERE id = ?1", [first])
            .expect("one row ahead");
        let before = row_events(&ledger).len();
        ledger
            .transition_order(
                order,
                Transition {
                    service_order_id: Some("O-1"),
                    http_status: Some(202),
                    ..Transition::to(OrderState::Accepted, "accepted")
                },
            )
            .expect("accepted");
        let rows = ledger.rows_of_order(order).expect("rows");
        assert!(rows.iter().all(|r| r.state == RowState::Submitted));
        let moved: Vec<(i64, String, String, String)> = rows[1..]
            .iter()
            .map(|r| {
                (
                    r.id,
                    "PLANNED".into(),
                    "SUBMITTED".into(),
                    "accepted".into(),
                )
            })
            .collect();
        assert_eq!(row_events(&ledger)[before..], moved[..]);
        assert_eq!(
            ledger.order(order).expect("order").expect("there").state,
            OrderState::Accepted
        );
    }

    /// A row that cannot take the move refuses the whole move, named, and nothing is written.
    #[test]
    fn a_row_that_cannot_move_refuses_the_move_of_its_order_and_nothing_is_written() {
        let (_dir, mut ledger, _batch, order) = an_order_of_five();
        let third = ledger.rows_of_order(order).expect("rows")[2].id;
        ledger
            .conn
            .execute("UPDATE rows SET state = 'COMPLETED' WHERE id = ?1", [third])
            .expect("one row paid");
        let before = row_events(&ledger);
        let refused = ledger.transition_order(
            order,
            Transition {
                error: Some(("bad_request", "refused")),
                ..Transition::to(OrderState::Rejected, "refused")
            },
        );
        match refused {
            Err(LedgerError::Transition { subject, id, .. }) => {
                assert_eq!((subject, id), ("row", third));
            }
            other => panic!("expected the row named, got {other:?}"),
        }
        assert_eq!(row_events(&ledger), before);
        let rows = ledger.rows_of_order(order).expect("rows");
        let planned = rows.iter().filter(|r| r.state == RowState::Planned).count();
        assert_eq!(planned, 4);
        assert_eq!(
            ledger.order(order).expect("order").expect("there").state,
            OrderState::Intent
        );
    }

    #[test]
    fn a_ledger_without_a_write_ahead_log_stays_full() {
        let (_dir, mut ledger, _batch) = crate::ledger::with_a_batch();
        ledger
            .conn
            .pragma_update(None, "journal_mode", "DELETE")
            .expect("journal mode");
        let inside = ledger
            .relaxed(|l| Ok::<_, LedgerError>(synchronous(l)))
            .expect("relaxed");
        assert_eq!(inside, 2);
    }
}
