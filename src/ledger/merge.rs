//! Merging an input file into a batch, one row at a time, in one transaction: the rows of a
//! million-row file stream through without being held in memory, and planning happens in the
//! same transaction, so a row is recorded PLANNED (with its order's intent) the moment it is
//! recorded at all. Nothing is visible to another reader until [`Merge::commit`]; a merge that
//! is dropped instead leaves the ledger as it was.
//!
//! Rows the file no longer has are found without a list of references: every merge stamps the
//! rows it sees with the batch's merge number (`rows.merged`), and the rows with an older stamp
//! are the missing ones.
//!
//! A plan is not a payment: an intent never sent that holds a row the file no longer has is
//! cancelled by the merge ([`Merge::cancelling`]); the rows of it still in the file are planned
//! again as they come, under new keys, and the rows taken out are REMOVED, all in the merge's
//! transaction.

mod close;
mod insert;
mod journal;

use std::collections::BTreeSet;

use rusqlite::{OptionalExtension, Transaction, params};

use super::{
    IncomingRow, Ledger, LedgerError, MergeReport, OrderState, PlannedOrder, Result, RowState,
    begin_merge, commit, exec, now, sqlerr,
};
use journal::RollbackJournal;

/// A row that the merge leaves to be planned: it must go into an order ([`Merge::plan`]) before
/// the merge is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToPlan {
    /// The ledger's row, or `None` for a row new to the batch (inserted when it is planned).
    pub row_id: Option<i64>,
    pub attempt: i64,
    /// The row was planned before, in an intent this merge cancels (never sent): planned again.
    pub again: bool,
}

/// What a merge does with the rows that are to be paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planning {
    /// Each is handed back by [`Merge::row`] and must be put in an order by [`Merge::plan`].
    Plan,
    /// Each is recorded PENDING.
    RecordPending,
}

/// One merge of an input file into a batch (see the module documentation).
pub struct Merge<'l> {
    tx: Transaction<'l>,
    /// Declared after `tx`: a merge that is dropped rolls back before the ledger is given its
    /// write-ahead log back.
    journal: Option<RollbackJournal<'l>>,
    path: &'l std::path::Path,
    batch_id: i64,
    stamp: i64,
    /// The batch had no rows: no lookups, no missing rows.
    fresh: bool,
    /// Whether pending rows are handed back to be planned or recorded PENDING.
    planning: Planning,
    /// Rows handed back and not planned yet.
    unplanned: usize,
    /// Intents never sent that hold a row the file no longer has: cancelled by this merge
    /// ([`Merge::cancelling`]).
    cancelling: BTreeSet<i64>,
    at: String,
    report: MergeReport,
}

impl super::Ledger {
    /// Starts merging a new version of the input file into the batch. With [`Planning::Plan`],
    /// every row that is to be paid is handed back by [`Merge::row`] and must be put in an order
    /// by [`Merge::plan`]; with [`Planning::RecordPending`], such rows are recorded PENDING.
    pub fn merge(&mut self, batch_id: i64, planning: Planning) -> Result<Merge<'_>> {
        self.merge_sized(batch_id, planning, 0)
    }

    /// [`Ledger::merge`] of a file of about `rows` rows (see `RollbackJournal`).
    pub fn merge_sized(
        &mut self,
        batch_id: i64,
        planning: Planning,
        rows: usize,
    ) -> Result<Merge<'_>> {
        let ledger: &Ledger = self;
        let journal = RollbackJournal::for_rows(ledger, rows);
        let tx = begin_merge(&ledger.conn, &ledger.path)?;
        Merge::start(tx, ledger, journal, batch_id, planning)
    }

    /// Creates batch `b` and starts merging its first input file into it, in one
    /// transaction: a merge that is dropped leaves no trace of the batch either. Its input hash
    /// is recorded once the file is read ([`Merge::record_input`]).
    pub fn merge_new(&mut self, b: &super::NewBatch<'_>, rows: usize) -> Result<Merge<'_>> {
        let ledger: &Ledger = self;
        let journal = RollbackJournal::for_rows(ledger, rows);
        let tx = begin_merge(&ledger.conn, &ledger.path)?;
        let batch_id = super::insert_batch(&tx, &ledger.path, b)?;
        Merge::start(tx, ledger, journal, batch_id, Planning::Plan)
    }
}

impl<'l> Merge<'l> {
    fn start(
        tx: Transaction<'l>,
        ledger: &'l Ledger,
        journal: Option<RollbackJournal<'l>>,
        batch_id: i64,
        planning: Planning,
    ) -> Result<Merge<'l>> {
        let path = ledger.path.as_path();
        exec(
            &tx,
            path,
            "UPDATE batches SET merges = merges + 1 WHERE id = ?1",
            params![batch_id],
        )?;
        let stamp: i64 = tx
            .query_row(
                "SELECT merges FROM batches WHERE id = ?1",
                [batch_id],
                |r| r.get("merges"),
            )
            .map_err(sqlerr(path))?;
        let fresh = tx
            .query_row(
                "SELECT NOT EXISTS (SELECT 1 FROM rows WHERE batch_id = ?1) AS fresh",
                [batch_id],
                |r| r.get::<_, bool>("fresh"),
            )
            .map_err(sqlerr(path))?;
        Ok(Merge {
            tx,
            journal,
            path,
            batch_id,
            stamp,
            fresh,
            planning,
            unplanned: 0,
            cancelling: BTreeSet::new(),
            at: now(),
            report: MergeReport::default(),
        })
    }

    /// The batch merged into.
    pub fn batch_id(&self) -> i64 {
        self.batch_id
    }

    /// Records the hash, headers and layouts of the input file the merge read (a batch made by
    /// [`super::Ledger::merge_new`] is created before its file is read to the end).
    pub fn record_input(
        &self,
        input_hash: &str,
        headers: &[String],
        formats: super::Formats,
    ) -> Result<()> {
        let headers = serde_json::to_string(headers).unwrap_or_else(|_| "[]".into());
        exec(
            &self.tx,
            self.path,
            "UPDATE batches SET input_hash = ?2, headers = ?3 WHERE id = ?1",
            params![self.batch_id, input_hash, headers],
        )?;
        super::batches::record_formats(&self.tx, self.path, self.batch_id, &formats)
    }

    /// The intents this merge cancels: intents never sent that hold a row the file no longer
    /// has ([`super::Ledger::orders_outside_file`], asked before the merge with the references
    /// of the same file). Their rows still in the file are handed back by [`Merge::row`] to be
    /// planned again; [`Merge::close`] removes the others and cancels the intents. An order
    /// that is not an intent of this batch never sent is refused.
    pub fn cancelling(&mut self, intents: &BTreeSet<i64>) -> Result<()> {
        for &id in intents {
            if !self.never_sent(id)? {
                return Err(LedgerError::Transition {
                    subject: "order",
                    id,
                    from: "not an intent never sent".into(),
                    to: OrderState::Cancelled.as_str().into(),
                });
            }
        }
        self.cancelling.extend(intents);
        Ok(())
    }

    /// Whether order `id` is an intent of this batch that was never sent: no send was ever
    /// marked (`sends` counts them, durably before each; `last_sent_at` is never cleared, even
    /// when reconciliation clears a doubt).
    fn never_sent(&self, id: i64) -> Result<bool> {
        self.tx
            .prepare_cached(
                "SELECT 1 FROM orders WHERE id = ?1 AND batch_id = ?2 AND state = 'INTENT'
                 AND sends = 0 AND last_sent_at IS NULL",
            )
            .and_then(|mut st| st.exists(params![id, self.batch_id]))
            .map_err(sqlerr(self.path))
    }

    /// A row moves out of an intent being cancelled, from PLANNED to `to`: PENDING (still in
    /// the file: planned again) or REMOVED (taken out of the file, with the next attempt
    /// number: no later order of it can have the cancelled key).
    fn leave_intent(&self, row_id: i64, order_id: i64, to: RowState, cause: &str) -> Result<()> {
        if !RowState::Planned.can_become(to) {
            return Err(LedgerError::Transition {
                subject: "row",
                id: row_id,
                from: RowState::Planned.as_str().into(),
                to: to.as_str().into(),
            });
        }
        let changed = exec(
            &self.tx,
            self.path,
            "UPDATE rows SET state = ?3, attempt = attempt + (?3 = 'REMOVED'), order_id = NULL,
                    item_index = NULL
             WHERE id = ?1 AND order_id = ?2 AND state = 'PLANNED'",
            params![row_id, order_id, to],
        )?;
        if changed != 1 {
            return Err(LedgerError::Transition {
                subject: "row",
                id: row_id,
                from: "not PLANNED in its order".into(),
                to: to.as_str().into(),
            });
        }
        self.event(
            "row",
            row_id,
            Some(RowState::Planned.as_str()),
            Some(to.as_str()),
            cause,
        )
    }

    /// A row still in the file whose intent is cancelled: PENDING, to be planned again.
    fn release(&self, row_id: i64, order_id: Option<i64>) -> Result<()> {
        let order_id = order_id
            .ok_or_else(|| LedgerError::Corrupt(format!("row {row_id} is PLANNED in no order")))?;
        self.leave_intent(
            row_id,
            order_id,
            RowState::Pending,
            &format!(
                "its intent (order {order_id}), never sent, is cancelled: a row of it is no longer in the input file; planned again"
            ),
        )
    }
}

/// What a merge knows of a row of the batch (`?1`) by its reference (`?2`): read once a row
/// of the file.
pub(super) const KNOWN_ROW: super::columns::Named = super::columns::Named {
    sql: "SELECT id, content_hash, state, attempt, order_id FROM rows
          WHERE batch_id = ?1 AND reference = ?2",
    columns: &["id", "content_hash", "state", "attempt", "order_id"],
};

/// What the ledger has of a row, for the merge.
struct Known {
    id: i64,
    content_hash: String,
    state: RowState,
    attempt: i64,
    order_id: Option<i64>,
}

impl Merge<'_> {
    fn event(
        &self,
        subject: &str,
        id: i64,
        from: Option<&str>,
        to: Option<&str>,
        cause: &str,
    ) -> Result<()> {
        exec(
            &self.tx,
            self.path,
            "INSERT INTO events (batch_id, at, subject, subject_id, from_state, to_state, cause)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![self.batch_id, self.at, subject, id, from, to, cause],
        )
        .map(drop)
    }

    fn known(&self, reference: &str) -> Result<Option<Known>> {
        if self.fresh {
            return Ok(None);
        }
        macro_rules! at {
            ($name:literal) => {
                const { super::columns::position(KNOWN_ROW.columns, $name) }
            };
        }
        let found = self
            .tx
            .prepare_cached(KNOWN_ROW.sql)
            .and_then(|mut st| {
                st.query_row(params![self.batch_id, reference], |r| {
                    Ok((
                        r.get(at!("id"))?,
                        r.get(at!("content_hash"))?,
                        r.get(at!("state"))?,
                        r.get(at!("attempt"))?,
                        r.get(at!("order_id"))?,
                    ))
                })
                .optional()
            })
            .map_err(sqlerr(self.path))?;
        Ok(
            found.map(|(id, content_hash, state, attempt, order_id)| Known {
                id,
                content_hash,
                state,
                attempt,
                order_id,
            }),
        )
    }

    /// The ledger's latest converted order of a currency pair, read in this transaction
    /// (`super::latest_conversion_in`).
    pub fn latest_conversion(
        &self,
        base_url: &str,
        payment_currency: &str,
        product_currency: &str,
    ) -> Result<Option<super::Conversion>> {
        super::latest_conversion_in(&self.tx, base_url, payment_currency, product_currency)
            .map_err(sqlerr(self.path))
    }

    /// The row of another batch with `reference` ([`super::repeats::earlier_row_in`]), read
    /// in this merge's transaction.
    pub fn earlier_row(
        &self,
        batch_id: i64,
        reference: &str,
    ) -> Result<Option<super::repeats::EarlierRow>> {
        super::repeats::earlier_row_in(&self.tx, self.path, batch_id, reference)
    }

    /// Every reference of another batch ([`super::repeats::visit_references_in`]), read in this
    /// merge's transaction.
    pub fn visit_references(&self, batch_id: i64, visit: impl FnMut(&str)) -> Result<()> {
        super::repeats::visit_references_in(&self.tx, self.path, batch_id, visit)
    }

    /// Merges one row of the file. Unchanged rows keep their state; new rows are added; a
    /// changed row is updated only while nothing was submitted for it (a change to a submitted
    /// row is reported in [`MergeReport::changed_after_submission`] and the merge must not be
    /// committed). Returns the row when it is to be planned (see [`Ledger::merge`]).
    ///
    /// [`Ledger::merge`]: super::Ledger::merge
    pub fn row(&mut self, row: &IncomingRow) -> Result<Option<ToPlan>> {
        let target = if row.skipped {
            RowState::Skipped
        } else if row.valid {
            RowState::Pending
        } else {
            RowState::Invalid
        };
        let Some(mut old) = self.known(&row.reference)? else {
            return self.add(row, target);
        };
        let again = old.state == RowState::Planned
            && old.order_id.is_some_and(|o| self.cancelling.contains(&o));
        if again {
            // Its intent, never sent, is cancelled: the row is as if it had never been planned
            // (a change to it is taken, as for any row not sent).
            self.release(old.id, old.order_id)?;
            old.state = RowState::Pending;
        }
        let same = old.content_hash == row.content_hash;
        // The rule `validate` checks too (`SeenRow::refuses_change`).
        let may_change = matches!(
            old.state,
            RowState::Pending | RowState::Invalid | RowState::Removed | RowState::Skipped
        );
        let now_pending = if same && (!may_change || old.state == target) {
            self.keep(&old, row)?
        } else if may_change {
            self.update(&old, row, target, same)?
        } else {
            self.refuse_change(&old, row)?;
            return Ok(None);
        };
        if now_pending && self.planning == Planning::Plan {
            self.unplanned += 1;
            if again {
                self.report.planned_again += 1;
            }
            return Ok(Some(ToPlan {
                row_id: Some(old.id),
                attempt: old.attempt,
                again,
            }));
        }
        if now_pending && again {
            self.report.pending_again += 1;
        }
        Ok(None)
    }

    /// A row new to the batch: handed back to be planned when it is to be paid and the merge
    /// plans, else inserted in state `target`.
    fn add(&mut self, row: &IncomingRow, target: RowState) -> Result<Option<ToPlan>> {
        self.report.added += 1;
        if target == RowState::Pending && self.planning == Planning::Plan {
            self.unplanned += 1;
            return Ok(Some(ToPlan {
                row_id: None,
                attempt: 1,
                again: false,
            }));
        }
        let id = self.insert(row, target, None)?;
        self.event("row", id, None, Some(target.as_str()), "row added")?;
        Ok(None)
    }

    /// An unchanged row: only where it is in the file (and carried-through cells) follow.
    /// Whether it is PENDING.
    fn keep(&mut self, old: &Known, row: &IncomingRow) -> Result<bool> {
        exec(
            &self.tx,
            self.path,
            "UPDATE rows SET position = ?2, line = ?3, fields = ?4, merged = ?5 WHERE id = ?1",
            params![old.id, row.position, row.line, row.fields, self.stamp],
        )?;
        self.report.unchanged += 1;
        Ok(old.state == RowState::Pending)
    }

    /// A row that changed (or whose checks did) while nothing was submitted for it: takes the
    /// file's version and state `target`. Whether it is now PENDING.
    fn update(
        &mut self,
        old: &Known,
        row: &IncomingRow,
        target: RowState,
        same: bool,
    ) -> Result<bool> {
        exec(
            &self.tx,
            self.path,
            "UPDATE rows SET position = ?2, line = ?3, fields = ?4, spec = ?5,
                    content_hash = ?6, state = ?7, error_type = ?8, error_message = ?9,
                    merged = ?10, delivery = ?11
             WHERE id = ?1",
            params![
                old.id,
                row.position,
                row.line,
                row.fields,
                row.spec,
                row.content_hash,
                target,
                row.error_type(),
                row.error_message,
                self.stamp,
                row.delivery
            ],
        )?;
        if old.state != target {
            let cause = if same {
                "row checked again: its checks changed"
            } else {
                "row changed in the input file before submission"
            };
            self.event(
                "row",
                old.id,
                Some(old.state.as_str()),
                Some(target.as_str()),
                cause,
            )?;
        }
        self.report.updated += 1;
        Ok(target == RowState::Pending)
    }

    /// A row changed after something was submitted for it: only stamped as seen, and reported
    /// (the merge must not be committed).
    fn refuse_change(&mut self, old: &Known, row: &IncomingRow) -> Result<()> {
        exec(
            &self.tx,
            self.path,
            "UPDATE rows SET merged = ?2 WHERE id = ?1",
            params![old.id, self.stamp],
        )?;
        self.report
            .changed_after_submission
            .push((row.reference.clone(), row.line, old.state));
        Ok(())
    }

    /// Records the intent of one order (key and exact body; durable at [`Merge::commit`]) and
    /// puts its rows in it, in item order: rows new to the batch are recorded PLANNED, known rows
    /// move from PENDING.
    pub fn plan(&mut self, order: &PlannedOrder, items: &[(&IncomingRow, ToPlan)]) -> Result<i64> {
        exec(
            &self.tx,
            self.path,
            "INSERT INTO orders (batch_id, idempotency_key, body, mode, payment_currency,
                                 state, created_at, payment_method, card_id)
             VALUES (?1, ?2, ?3, ?4, ?5, 'INTENT', ?6, ?7, ?8)",
            params![
                self.batch_id,
                order.idempotency_key,
                order.body,
                order.mode,
                order.payment_currency,
                self.at,
                order.payment_method,
                order.card_id
            ],
        )?;
        let order_id = self.tx.last_insert_rowid();
        // Rows new to the batch, with their item index: inserted several to a statement.
        let new_rows: Vec<(&IncomingRow, i64)> = items
            .iter()
            .enumerate()
            .filter(|(_, (_, t))| t.row_id.is_none())
            .map(|(index, (row, _))| (*row, index as i64))
            .collect();
        let added = new_rows.len();
        // Rows new to the batch are recorded PLANNED, in this order: this event is theirs too
        // (one event an order, not one a row, keeps a million-row merge small).
        let cause = if added == 0 {
            "intent committed".to_string()
        } else {
            format!("intent committed; {added} new rows recorded PLANNED in it")
        };
        self.event("order", order_id, None, Some("INTENT"), &cause)?;
        self.insert_planned(&new_rows, order_id)?;
        self.unplanned = self.unplanned.saturating_sub(added);
        for (index, (_, to_plan)) in items.iter().enumerate() {
            let Some(id) = to_plan.row_id else {
                continue;
            };
            let changed = exec(
                &self.tx,
                self.path,
                "UPDATE rows SET state = 'PLANNED', order_id = ?2, item_index = ?3,
                        error_type = NULL, error_message = NULL
                 WHERE id = ?1 AND state = 'PENDING'",
                params![id, order_id, index as i64],
            )?;
            if changed != 1 {
                return Err(LedgerError::Transition {
                    subject: "row",
                    id,
                    from: "not PENDING".into(),
                    to: "PLANNED".into(),
                });
            }
            self.event("row", id, Some("PENDING"), Some("PLANNED"), "in an order")?;
            self.unplanned = self.unplanned.saturating_sub(1);
        }
        Ok(order_id)
    }

    /// Makes the merge (and the intents planned in it) durable.
    pub fn commit(self) -> Result<MergeReport> {
        if self.unplanned != 0 {
            return Err(LedgerError::Corrupt(format!(
                "{} rows were merged to be planned but are in no order",
                self.unplanned
            )));
        }
        let Merge {
            tx,
            path,
            journal,
            report,
            ..
        } = self;
        commit(tx, path)?;
        drop(journal);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Ledger;
    use super::insert::rows_next;
    use super::journal::ROWS_WITH_ROLLBACK_JOURNAL;
    use super::*;
    use crate::api::models::PaymentMethodType;
    use crate::ledger::OrderMode;

    fn incoming(n: i64, valid: bool) -> IncomingRow {
        let row = crate::ledger::sample_row(n);
        if valid {
            return row;
        }
        IncomingRow {
            spec: None,
            delivery: None,
            valid: false,
            error_message: Some("bad".to_string()),
            ..row
        }
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

    fn ledger() -> (tempfile::TempDir, Ledger, i64) {
        let (dir, ledger, batch_id) = crate::ledger::with_a_batch();
        (dir, ledger, batch_id)
    }

    #[test]
    fn an_order_of_many_new_rows_records_each_at_its_item_index() {
        let (_dir, mut ledger, batch) = ledger();
        // 60 rows in two orders of 30 (a full statement of 25 and 5 one by one each), the
        // second with its items in reverse file order, and one invalid row between.
        let rows: Vec<IncomingRow> = (0..61).map(|n| incoming(n, n != 30)).collect();
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        let mut to_plan = Vec::new();
        for row in &rows {
            if let Some(t) = merge.row(row).expect("row") {
                to_plan.push((row, t));
            }
        }
        assert_eq!(to_plan.len(), 60);
        let (first, second) = to_plan.split_at(30);
        let mut second = second.to_vec();
        second.reverse();
        let o1 = merge.plan(&order("k1"), first).expect("plan 1");
        let o2 = merge.plan(&order("k2"), &second).expect("plan 2");
        merge.close().expect("close");
        let report = merge.commit().expect("commit");
        assert_eq!(report.added, 61);

        for (order_id, items) in [(o1, first.to_vec()), (o2, second)] {
            let got = ledger.rows_of_order(order_id).expect("rows");
            let refs: Vec<&str> = got.iter().map(|r| r.reference.as_str()).collect();
            let want: Vec<&str> = items.iter().map(|(r, _)| r.reference.as_str()).collect();
            assert_eq!(refs, want);
            for (index, r) in got.iter().enumerate() {
                let source = items[index].0;
                assert_eq!(r.state, RowState::Planned);
                assert_eq!(r.item_index, Some(index as i64));
                assert_eq!(
                    (r.position, r.line, r.content_hash.as_str()),
                    (source.position, source.line, source.content_hash.as_str())
                );
                // The cells are recorded, and read back by the result file only.
                assert!(r.fields.is_empty());
                let cells: String = ledger
                    .conn
                    .query_row("SELECT fields FROM rows WHERE id = ?1", [r.id], |c| {
                        c.get("fields")
                    })
                    .expect("cells");
                assert_eq!(cells, source.fields);
                assert_eq!(r.error_message, None);
            }
        }
        let invalid = ledger.rows(batch).expect("rows");
        let r30 = invalid.iter().find(|r| r.reference == "R30").expect("R30");
        assert_eq!(r30.state, RowState::Invalid);
        assert_eq!(r30.order_id, None);
    }

    fn modes(conn: &rusqlite::Connection) -> (String, i64) {
        let journal = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get("journal_mode"))
            .expect("journal mode");
        let synchronous = conn
            .query_row("PRAGMA synchronous", [], |r| r.get("synchronous"))
            .expect("synchronous");
        (journal, synchronous)
    }

    /// Merges rows `R0` to `R{rows - 1}` without planning them, committed or dropped, and gives the
    /// journal mode and `synchronous` (2 FULL, 3 EXTRA) seen during the merge.
    fn large_merge(ledger: &mut Ledger, batch: i64, rows: i64, keep: bool) -> (String, i64) {
        let mut merge = ledger
            .merge_sized(batch, Planning::RecordPending, rows as usize)
            .expect("merge");
        for n in 0..rows {
            assert!(merge.row(&incoming(n, true)).expect("row").is_none());
        }
        let during = modes(&merge.tx);
        merge.close().expect("close");
        if keep {
            merge.commit().expect("commit");
        }
        during
    }

    #[test]
    fn a_large_merge_has_a_rollback_journal_and_the_ledger_gets_its_log_back() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, mut ledger, batch) = ledger();
        let rows = ROWS_WITH_ROLLBACK_JOURNAL as i64;
        // Dropped: nothing stays, and the log is back.
        assert_eq!(
            large_merge(&mut ledger, batch, rows, false),
            ("delete".to_string(), 3)
        );
        assert!(ledger.rows(batch).expect("rows").is_empty());
        assert_eq!(modes(&ledger.conn), ("wal".to_string(), 2));
        // Committed: every row, and the log is back.
        assert_eq!(
            large_merge(&mut ledger, batch, rows, true),
            ("delete".to_string(), 3)
        );
        assert_eq!(ledger.rows(batch).expect("rows").len(), rows as usize);
        assert_eq!(modes(&ledger.conn), ("wal".to_string(), 2));
        // The log and shared memory made again are private, like the ledger.
        let mut merge = ledger
            .merge(batch, Planning::RecordPending)
            .expect("small merge");
        assert_eq!(modes(&merge.tx), ("wal".to_string(), 2));
        merge.row(&incoming(rows, true)).expect("row");
        merge.close().expect("close");
        merge.commit().expect("commit");
        for side in ["l.db-wal", "l.db-shm"] {
            let mode = std::fs::metadata(dir.path().join(side))
                .expect(side)
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{side}");
        }
        // A smaller merge stays in the log.
        let (journal, _) = large_merge(&mut ledger, batch, rows - 1, true);
        assert_eq!(journal, "wal");
    }

    #[test]
    fn a_large_merge_stays_in_the_log_while_another_connection_has_the_ledger_open() {
        let (dir, mut ledger, batch) = ledger();
        let other = rusqlite::Connection::open(dir.path().join("l.db")).expect("other");
        let before: i64 = other
            .query_row("SELECT COUNT(*) AS n FROM rows", [], |r| r.get("n"))
            .expect("read");
        let rows = ROWS_WITH_ROLLBACK_JOURNAL as i64;
        assert_eq!(
            large_merge(&mut ledger, batch, rows, true),
            ("wal".to_string(), 2)
        );
        let after: i64 = other
            .query_row("SELECT COUNT(*) AS n FROM rows", [], |r| r.get("n"))
            .expect("read");
        assert_eq!((before, after), (0, rows));
    }

    /// The summary's rows per way of paying: summed per card and currency, in that order,
    /// read one order at a time (no temporary b-tree holding every order of the batch).
    #[test]
    fn rows_per_payment_are_summed_per_card_and_currency_without_sorting_the_orders() {
        let (_dir, mut ledger, batch) = ledger();
        let rows: Vec<IncomingRow> = (0..10).map(|n| incoming(n, true)).collect();
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        let mut to_plan = Vec::new();
        for row in &rows {
            to_plan.push((row, merge.row(row).expect("row").expect("to plan")));
        }
        let paid = |key: &str, currency: &str, card: Option<&str>| PlannedOrder {
            payment_currency: currency.into(),
            payment_method: if card.is_some() {
                PaymentMethodType::Card
            } else {
                PaymentMethodType::AccountBalance
            },
            card_id: card.map(str::to_string),
            ..order(key)
        };
        // Orders of 3, 2, 1, 2 and 2 rows; the ways of paying interleaved.
        let plans = [
            (paid("k1", "USD", None), 0..3),
            (paid("k2", "EUR", Some("card-1")), 3..5),
            (paid("k3", "EUR", None), 5..6),
            (paid("k4", "USD", None), 6..8),
            (paid("k5", "EUR", Some("card-1")), 8..10),
        ];
        for (planned, range) in plans {
            merge.plan(&planned, &to_plan[range]).expect("plan");
        }
        merge.close().expect("close");
        merge.commit().expect("commit");
        assert_eq!(
            ledger.rows_per_payment(batch).expect("per payment"),
            vec![
                (None, "EUR".to_string(), 1),
                (None, "USD".to_string(), 5),
                (Some("card-1".to_string()), "EUR".to_string(), 4),
            ]
        );
        let plan: Vec<String> = ledger
            .conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                super::super::rows::ROWS_PER_ORDER_AND_PAYMENT
            ))
            .expect("explain")
            .query_map([batch], |r| r.get::<_, String>("detail"))
            .expect("plan")
            .collect::<rusqlite::Result<_>>()
            .expect("plan rows");
        assert!(
            plan.iter().all(|step| !step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_new_send_forgets_what_the_last_one_got_back() {
        let (_dir, mut ledger, batch) = ledger();
        let row = incoming(0, true);
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        let plan = merge.row(&row).expect("row").expect("new row");
        let id = merge.plan(&order("k"), &[(&row, plan)]).expect("plan");
        merge.close().expect("close");
        merge.commit().expect("commit");
        ledger.mark_sending(id).expect("mark");
        ledger
            .record_send_error(id, Some(503), "service_unavailable", "later")
            .expect("error");
        let o = ledger.order(id).expect("read").expect("order");
        assert_eq!(o.last_http_status, Some(503));
        // The next send is killed before its answer: nothing is known of it.
        ledger.mark_sending(id).expect("mark again");
        let o = ledger.order(id).expect("read").expect("order");
        assert_eq!(
            (o.sends, o.last_http_status, o.error_type.as_deref()),
            (2, None, None)
        );
    }

    /// Rows R0..R{n-1} planned in one order `key`, committed.
    fn planned_in_one_order(ledger: &mut Ledger, batch: i64, n: i64, key: &str) -> i64 {
        let rows: Vec<IncomingRow> = (0..n).map(|i| incoming(i, true)).collect();
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        let members: Vec<(&IncomingRow, ToPlan)> = rows
            .iter()
            .map(|r| (r, merge.row(r).expect("row").expect("to plan")))
            .collect();
        let id = merge.plan(&order(key), &members).expect("plan");
        merge.close().expect("close");
        merge.commit().expect("commit");
        id
    }

    fn states(ledger: &Ledger, batch: i64) -> Vec<(String, RowState, i64, Option<i64>)> {
        ledger
            .rows(batch)
            .expect("rows")
            .into_iter()
            .map(|r| (r.reference, r.state, r.attempt, r.order_id))
            .collect()
    }

    /// An intent never sent that loses a row: cancelled in the merge, the row taken out
    /// REMOVED at its next attempt, the rows still in the file handed back to be planned again.
    #[test]
    fn an_intent_never_sent_that_loses_a_row_is_cancelled_and_its_other_rows_planned_again() {
        let (_dir, mut ledger, batch) = ledger();
        let old = planned_in_one_order(&mut ledger, batch, 3, "k-old");
        // R2 changed meanwhile: its intent was never sent, so the change is taken.
        let changed = IncomingRow {
            content_hash: "hash-2-changed".into(),
            ..incoming(2, true)
        };
        let kept = [incoming(0, true), changed];
        let outside = ledger
            .orders_outside_file(batch, |r| r != "R1")
            .expect("outside");
        assert_eq!(outside.to_cancel, BTreeSet::from([old]));
        assert!(outside.followed.is_empty());
        assert_eq!(outside.unsent_rows, (1, vec!["R1".to_string()]));

        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        merge.cancelling(&outside.to_cancel).expect("cancelling");
        let mut members = Vec::new();
        for row in &kept {
            let to_plan = merge.row(row).expect("row").expect("planned again");
            assert!(to_plan.again && to_plan.row_id.is_some(), "{to_plan:?}");
            members.push((row, to_plan));
        }
        let new = merge.plan(&order("k-new"), &members).expect("plan");
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert_eq!(report.cancelled, vec!["k-old".to_string()]);
        assert_eq!(report.removed, vec!["R1".to_string()]);
        assert_eq!(report.planned_again, 2);
        assert!(report.missing_but_submitted.is_empty());
        assert_eq!(
            ledger.order(old).expect("read").expect("order").state,
            OrderState::Cancelled
        );
        assert_eq!(
            states(&ledger, batch),
            [
                ("R0".to_string(), RowState::Planned, 1, Some(new)),
                // Its next attempt: no later order of it can have the cancelled key.
                ("R1".to_string(), RowState::Removed, 2, None),
                ("R2".to_string(), RowState::Planned, 1, Some(new)),
            ]
        );
        assert_eq!(report.updated, 1);
        assert_eq!(
            ledger.rows(batch).expect("rows")[2].content_hash,
            "hash-2-changed"
        );
        // Nothing of the batch is outside the file any more.
        let outside = ledger
            .orders_outside_file(batch, |r| r != "R1")
            .expect("outside");
        assert_eq!(outside, crate::ledger::OutsideFile::default());
    }

    /// An intent sent (in doubt) that loses a row is followed: not cancelled, the row reported;
    /// an intent sent is refused for cancellation, even once reconciliation has cleared its
    /// doubt.
    #[test]
    fn an_intent_sent_is_never_cancelled() {
        let (_dir, mut ledger, batch) = ledger();
        let sent = planned_in_one_order(&mut ledger, batch, 2, "k-sent");
        ledger.mark_sending(sent).expect("mark");
        let outside = ledger
            .orders_outside_file(batch, |r| r != "R1")
            .expect("outside");
        assert!(outside.to_cancel.is_empty());
        assert_eq!(outside.followed, BTreeSet::from([sent]));
        assert_eq!(outside.sent_rows, (1, vec!["R1".to_string()]));
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        assert!(merge.cancelling(&BTreeSet::from([sent])).is_err());
        assert_eq!(merge.row(&incoming(0, true)).expect("row"), None);
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert!(report.cancelled.is_empty() && report.removed.is_empty());
        assert_eq!(
            report.missing_but_submitted,
            vec![("R1".to_string(), RowState::Planned)]
        );
        // Reconciliation found no order at the service: sends is 0 again, yet it was sent.
        ledger.clear_in_doubt(sent, "test").expect("clear");
        let outside = ledger
            .orders_outside_file(batch, |r| r != "R1")
            .expect("outside");
        assert!(outside.to_cancel.is_empty(), "{outside:?}");
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        assert!(merge.cancelling(&BTreeSet::from([sent])).is_err());
    }

    /// A merge told of no intent to cancel still cancels an intent never sent that lost a row;
    /// its rows still in the file wait, PENDING, for the next merge.
    #[test]
    fn an_intent_not_named_before_the_merge_is_cancelled_at_its_end() {
        let (_dir, mut ledger, batch) = ledger();
        let old = planned_in_one_order(&mut ledger, batch, 2, "k-old");
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        assert_eq!(merge.row(&incoming(0, true)).expect("row"), None);
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert_eq!(report.cancelled, vec!["k-old".to_string()]);
        assert_eq!(report.pending_again, 1);
        assert_eq!(
            states(&ledger, batch),
            [
                ("R0".to_string(), RowState::Pending, 1, None),
                ("R1".to_string(), RowState::Removed, 2, None),
            ]
        );
        assert_eq!(
            ledger.order(old).expect("read").expect("order").state,
            OrderState::Cancelled
        );
    }

    /// A row with problems taken out of the file is REMOVED, as the table allows.
    #[test]
    fn an_invalid_row_taken_out_of_the_file_is_removed() {
        let (_dir, mut ledger, batch) = ledger();
        let mut merge = ledger.merge(batch, Planning::RecordPending).expect("merge");
        assert_eq!(merge.row(&incoming(0, false)).expect("row"), None);
        merge.close().expect("close");
        merge.commit().expect("commit");
        let mut merge = ledger.merge(batch, Planning::RecordPending).expect("merge");
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert_eq!(report.removed, vec!["R0".to_string()]);
        assert_eq!(
            states(&ledger, batch),
            [("R0".to_string(), RowState::Removed, 1, None)]
        );
    }

    /// The references of a batch are read from their index alone, without the rows.
    #[test]
    fn orders_outside_a_file_are_found_from_the_index_of_references() {
        let (_dir, ledger, _) = ledger();
        let plan: Vec<String> = ledger
            .conn
            .prepare("EXPLAIN QUERY PLAN SELECT reference FROM rows WHERE batch_id = ?1")
            .expect("explain")
            .query_map([1], |r| r.get::<_, String>("detail"))
            .expect("plan")
            .collect::<rusqlite::Result<_>>()
            .expect("plan rows");
        assert!(
            plan.iter().any(|step| step.contains("COVERING INDEX")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_merge_with_rows_left_unplanned_cannot_commit_and_a_dropped_merge_leaves_nothing() {
        let (_dir, mut ledger, batch) = ledger();
        let row = incoming(0, true);
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        assert!(merge.row(&row).expect("row").is_some());
        assert!(merge.close().is_err(), "a row to plan is in no order");
        drop(merge);
        assert!(ledger.rows(batch).expect("rows").is_empty());

        // Merged again without planning, then a later file without the row: REMOVED.
        let mut merge = ledger.merge(batch, Planning::RecordPending).expect("merge");
        assert!(merge.row(&row).expect("row").is_none());
        merge.close().expect("close");
        merge.commit().expect("commit");
        let mut merge = ledger.merge(batch, Planning::RecordPending).expect("merge");
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert_eq!(report.removed, vec!["R0".to_string()]);
        assert_eq!(
            ledger.rows(batch).expect("rows")[0].state,
            RowState::Removed
        );
    }

    /// The migrations before the delivery column (schema version 6).
    const OLD_MIGRATIONS: [&str; 6] = [
        include_str!("../../migrations/001_init.sql"),
        include_str!("../../migrations/002_payment_method.sql"),
        include_str!("../../migrations/003_streaming_merge.sql"),
        include_str!("../../migrations/004_one_intent_per_service_order.sql"),
        include_str!("../../migrations/005_debited.sql"),
        include_str!("../../migrations/006_rebuilt_unsettled.sql"),
    ];

    /// A ledger at the schema of `migrations` (an older one), holding batch 1 with `rows`:
    /// SQL tuples of (reference, position, line, fields, spec, content_hash, state).
    fn old_ledger(path: &std::path::Path, migrations: &[&str], rows: &str) {
        let conn = rusqlite::Connection::open(path).expect("open");
        for sql in migrations {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.execute_batch(&format!(
            "PRAGMA user_version = {};
             INSERT INTO batches (id, name, input_path, input_hash, headers, environment,
                                  base_url, key_fingerprint, created_at, updated_at)
             VALUES (1, 'b', 'b.csv', 'h', '[]', 'sim', 'embedded-simulator', 'f', 't', 't');
             CREATE TEMP TABLE old_rows (reference, position, line, fields, spec,
                                         content_hash, state);
             INSERT INTO old_rows VALUES {rows};
             INSERT INTO rows (batch_id, reference, position, line, fields, spec,
                               content_hash, state)
             SELECT 1, * FROM old_rows;",
            migrations.len()
        ))
        .expect("old rows");
    }

    /// A row's content as earlier versions stored it (its reference too, absent fields `null`).
    fn old_spec(distribution: &str) -> String {
        format!(
            r#"{{"reference":"R","product_codes":["AMZ-US"],"face_value":"10.00","currency":"USD","distribution":"{distribution}","email":null,"payment_currency":"USD","country":null,"card_id":null}}"#
        )
    }

    /// A ledger written before merge stamps existed (schema version 2) is merged correctly: its
    /// PENDING row is planned, its row missing from the file is REMOVED, its submitted row stays.
    #[test]
    fn a_ledger_from_before_merge_stamps_is_merged_correctly() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("old.db");
        old_ledger(
            &path,
            &OLD_MIGRATIONS[..2],
            &format!(
                "('KEEP', 0, 2, '[]', '{0}', 'h-keep', 'PENDING'),
                 ('GONE', 1, 3, '[]', '{0}', 'h-gone', 'PENDING'),
                 ('SENT', 2, 4, '[]', '{0}', 'h-sent', 'SUBMITTED')",
                old_spec("EMAIL")
            ),
        );
        let mut ledger = Ledger::open(&path).expect("migrated");
        let keep = IncomingRow {
            reference: "KEEP".into(),
            position: 0,
            line: 2,
            fields: "[]".into(),
            spec: Some(crate::row::ContentText::of(
                &crate::row::RowContent::sample(),
            )),
            content_hash: "h-keep".into(),
            delivery: Some("EMAIL"),
            valid: true,
            error_message: None,
            skipped: false,
        };
        let sent = IncomingRow {
            reference: "SENT".into(),
            position: 1,
            line: 3,
            content_hash: "h-sent".into(),
            ..keep.clone()
        };
        let mut merge = ledger.merge(1, Planning::Plan).expect("merge");
        let to_plan = merge.row(&keep).expect("keep").expect("KEEP is to plan");
        assert!(to_plan.row_id.is_some(), "the known row, not a new one");
        assert_eq!(merge.row(&sent).expect("sent"), None);
        merge
            .plan(
                &PlannedOrder {
                    idempotency_key: "k".into(),
                    body: b"{}".to_vec(),
                    mode: OrderMode::Async,
                    payment_currency: "USD".into(),
                    payment_method: PaymentMethodType::AccountBalance,
                    card_id: None,
                },
                &[(&keep, to_plan)],
            )
            .expect("plan");
        let report = merge.close().expect("close").clone();
        merge.commit().expect("commit");
        assert_eq!(report.removed, vec!["GONE".to_string()]);
        assert!(report.missing_but_submitted.is_empty());
        let states: Vec<(String, RowState)> = ledger
            .rows(1)
            .expect("rows")
            .into_iter()
            .map(|r| (r.reference, r.state))
            .collect();
        assert_eq!(
            states,
            [
                ("KEEP".to_string(), RowState::Planned),
                // A removed row keeps its last position (a tie with SENT's new one: by id).
                ("GONE".to_string(), RowState::Removed),
                ("SENT".to_string(), RowState::Submitted)
            ]
        );
    }

    /// Rows are inserted several to a statement: a whole order of 200, else the multiples of 8
    /// it holds, then the rest (at most two statements an order, 32 shapes in all): every size
    /// of order keeps each row, its item index and its content.
    #[test]
    fn orders_of_every_size_record_each_row_with_its_item_index() {
        assert_eq!(
            (1..=20).map(rows_next).collect::<Vec<_>>()[..],
            [
                1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 16
            ]
        );
        assert_eq!(
            [57, 171, 199, 200, 201].map(rows_next),
            [56, 168, 192, 200, 200]
        );
        let statements = |mut left: usize| {
            let mut shapes = Vec::new();
            while left > 0 {
                shapes.push(rows_next(left));
                left -= rows_next(left);
            }
            shapes
        };
        let mut shapes = std::collections::BTreeSet::new();
        for size in 1..=200 {
            let of_order = statements(size);
            assert!(of_order.len() <= 2, "{size} rows: {of_order:?}");
            shapes.extend(of_order);
        }
        assert_eq!(shapes.len(), 32);
        let (_dir, mut ledger, batch) = ledger();
        let sizes = [1usize, 2, 3, 7, 8, 9, 21, 57, 171, 200];
        let mut merge = ledger.merge(batch, Planning::Plan).expect("merge");
        let mut n = 0;
        for (k, size) in sizes.iter().enumerate() {
            let rows: Vec<IncomingRow> = (0..*size)
                .map(|i| {
                    let mut row = incoming(n + i as i64, true);
                    row.delivery = Some(if i % 2 == 0 { "EMAIL" } else { "PAYOUT_LINK" });
                    row
                })
                .collect();
            n += *size as i64;
            let members: Vec<(&IncomingRow, ToPlan)> = rows
                .iter()
                .map(|r| (r, merge.row(r).expect("row").expect("to plan")))
                .collect();
            merge
                .plan(&order(&format!("k{k}")), &members)
                .expect("plan");
        }
        merge.close().expect("close");
        merge.commit().expect("commit");
        let rows = ledger.rows(batch).expect("rows");
        assert_eq!(rows.len(), sizes.iter().sum::<usize>());
        let mut first = 0;
        for size in sizes {
            let order = &rows[first..first + size];
            for (i, row) in order.iter().enumerate() {
                let n = first + i;
                assert_eq!(row.reference, format!("R{n}"));
                assert_eq!(row.item_index, Some(i as i64), "row R{n}");
                assert_eq!(row.order_id, order[0].order_id, "row R{n}");
                assert_eq!(row.content_hash, format!("hash-{n}"));
                assert_eq!(row.state, RowState::Planned);
            }
            first += size;
        }
        let emails = sizes.iter().map(|s| s.div_ceil(2)).sum::<usize>() as i64;
        assert_eq!(
            ledger.rows_per_delivery(batch).expect("per delivery"),
            [
                ("EMAIL".to_string(), emails),
                ("PAYOUT_LINK".to_string(), rows.len() as i64 - emails)
            ]
        );
    }

    /// A ledger from before the delivery column (schema version 6) gets each valid row's
    /// delivery from its recorded content; REMOVED and invalid rows are not counted.
    #[test]
    fn a_ledger_from_before_the_delivery_column_counts_rows_per_delivery() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("v6.db");
        old_ledger(
            &path,
            &OLD_MIGRATIONS,
            &format!(
                "('A', 0, 2, '[]', '{}', 'a', 'COMPLETED'),
                 ('B', 1, 3, '[]', '{}', 'b', 'PLANNED'),
                 ('C', 2, 4, '[]', '{}', 'c', 'PENDING'),
                 ('D', 3, 5, '[]', '{}', 'd', 'REMOVED'),
                 ('E', 4, 6, '[]', NULL, 'invalid:e', 'INVALID')",
                old_spec("EMAIL"),
                old_spec("PAYOUT_LINK"),
                old_spec("EMAIL"),
                old_spec("EMAIL"),
            ),
        );
        let ledger = Ledger::open(&path).expect("migrated");
        assert_eq!(
            ledger.rows_per_delivery(1).expect("per delivery"),
            [("EMAIL".to_string(), 2), ("PAYOUT_LINK".to_string(), 1)]
        );
    }
}
