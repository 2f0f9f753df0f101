//! Closing a merge: the rows the file no longer has, and the intents never sent that held them.

use rusqlite::params;

use super::{LedgerError, Merge, MergeReport, OrderState, Result, RowState, exec, sqlerr};

/// A row of the batch that a merge did not see: (id, reference, state, order).
type MissingRow = (i64, String, RowState, Option<i64>);

impl Merge<'_> {
    /// The rows of the batch this merge has not seen (and not REMOVED yet).
    fn missing_rows(&self) -> Result<Vec<MissingRow>> {
        let mut st = self
            .tx
            .prepare(
                "SELECT id, reference, state, order_id FROM rows
                 WHERE batch_id = ?1 AND merged != ?2 AND state != 'REMOVED'",
            )
            .map_err(sqlerr(self.path))?;
        let at = |name| st.column_index(name).map_err(sqlerr(self.path));
        let (id, reference, state, order_id) =
            (at("id")?, at("reference")?, at("state")?, at("order_id")?);
        let rows = st
            .query_map(params![self.batch_id, self.stamp], |r| {
                Ok((
                    r.get(id)?,
                    r.get(reference)?,
                    r.get(state)?,
                    r.get(order_id)?,
                ))
            })
            .map_err(sqlerr(self.path))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(sqlerr(self.path))
    }

    /// Ends the file: rows of the batch the file no longer has are marked REMOVED when nothing
    /// was sent for them (an intent never sent that held one is cancelled), and reported when
    /// something was. Returns what the merge found; the merge is still to be committed (or
    /// dropped).
    pub fn close(&mut self) -> Result<&MergeReport> {
        if self.unplanned != 0 {
            return Err(LedgerError::Corrupt(format!(
                "{} rows were merged to be planned but are in no order",
                self.unplanned
            )));
        }
        if !self.fresh {
            let missing = self.missing_rows()?;
            // Intents never sent that lose a row, with the rows they lose.
            let mut losing: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
            for (id, reference, state, order_id) in missing {
                let unsent_intent = match (state, order_id) {
                    (RowState::Planned, Some(order)) => (self.cancelling.contains(&order)
                        || self.never_sent(order)?)
                    .then_some(order),
                    _ => None,
                };
                if let Some(order) = unsent_intent {
                    self.leave_intent(
                        id,
                        order,
                        RowState::Removed,
                        &format!(
                            "row no longer in the input file; its intent (order {order}) was never sent and is cancelled"
                        ),
                    )?;
                    self.report.removed.push(reference.clone());
                    losing.entry(order).or_default().push(reference);
                    continue;
                }
                match state {
                    RowState::Pending | RowState::Invalid | RowState::Skipped => {
                        if !state.can_become(RowState::Removed) {
                            return Err(LedgerError::Transition {
                                subject: "row",
                                id,
                                from: state.as_str().into(),
                                to: RowState::Removed.as_str().into(),
                            });
                        }
                        exec(
                            &self.tx,
                            self.path,
                            "UPDATE rows SET state = 'REMOVED' WHERE id = ?1",
                            params![id],
                        )?;
                        self.event(
                            "row",
                            id,
                            Some(state.as_str()),
                            Some("REMOVED"),
                            "row no longer in the input file",
                        )?;
                        self.report.removed.push(reference);
                    }
                    other => self.report.missing_but_submitted.push((reference, other)),
                }
            }
            for &order in &self.cancelling {
                losing.entry(order).or_default();
            }
            for (order, gone) in losing {
                self.cancel(order, &gone)?;
            }
            self.report.removed.sort();
            self.report.missing_but_submitted.sort();
        }
        Ok(&self.report)
    }

    /// Cancels intent `order`, never sent, that lost the rows `gone` (already REMOVED). Rows
    /// still in it, which only an intent not named to [`Merge::cancelling`] can have, go back
    /// to PENDING for the next merge to plan.
    fn cancel(&mut self, order: i64, gone: &[String]) -> Result<()> {
        let left: Vec<i64> = {
            let mut st = self
                .tx
                .prepare_cached("SELECT id FROM rows WHERE order_id = ?1 ORDER BY item_index")
                .map_err(sqlerr(self.path))?;
            let ids = st
                .query_map([order], |r| r.get("id"))
                .map_err(sqlerr(self.path))?;
            ids.collect::<rusqlite::Result<_>>()
                .map_err(sqlerr(self.path))?
        };
        for &row in &left {
            self.release(row, Some(order))?;
        }
        self.report.pending_again += left.len();
        let key: String = self
            .tx
            .query_row(
                "SELECT idempotency_key FROM orders WHERE id = ?1",
                [order],
                |r| r.get("idempotency_key"),
            )
            .map_err(sqlerr(self.path))?;
        if !OrderState::Intent.can_become(OrderState::Cancelled) {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order,
                from: OrderState::Intent.as_str().into(),
                to: OrderState::Cancelled.as_str().into(),
            });
        }
        let changed = exec(
            &self.tx,
            self.path,
            "UPDATE orders SET state = 'CANCELLED', finished_at = ?2
             WHERE id = ?1 AND state = 'INTENT' AND sends = 0 AND last_sent_at IS NULL",
            params![order, self.at],
        )?;
        if changed != 1 {
            return Err(LedgerError::Transition {
                subject: "order",
                id: order,
                from: "not an intent never sent".into(),
                to: OrderState::Cancelled.as_str().into(),
            });
        }
        let cause = match gone {
            [] => "never sent; its rows are planned again".to_string(),
            [one] => format!("never sent; row {one} is no longer in the input file"),
            [first, rest @ ..] => format!(
                "never sent; rows {first} and {} more are no longer in the input file",
                rest.len()
            ),
        };
        self.event(
            "order",
            order,
            Some(OrderState::Intent.as_str()),
            Some(OrderState::Cancelled.as_str()),
            &cause,
        )?;
        self.report.cancelled.push(key);
        Ok(())
    }
}
