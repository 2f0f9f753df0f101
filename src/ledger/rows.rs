//! Rows: what the ledger holds of each input row, and the reads that the results, the
//! report and the funds check make of them.

use std::collections::BTreeMap;
use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};
use rust_decimal::Decimal;

use crate::api::models::PaymentMethodType;

use super::columns::{Amount, amount, stored_row, stored_row_in};
use super::payouts::{PayoutLife, PayoutNote, PayoutStatus};
use super::{Ledger, LedgerError, OrderState, Result, RowState, sqlerr};
use crate::row::RowContent;

/// A completed row of an order the service converted (embedded FX): its price in its product's
/// currency and what it took from the balance of another, as stored, and when it completed.
/// Whether a visit of rows reads their `spec` and `content_hash` (large) or leaves them empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Specs {
    Read,
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    pub payment_currency: String,
    pub product_currency: String,
    pub price: Decimal,
    pub debited: Decimal,
    pub completed_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRecord {
    pub id: i64,
    pub reference: String,
    pub position: i64,
    pub line: i64,
    /// The input cells: read by [`Ledger::visit_result_rows`] only (the result file and the
    /// report write them); empty where rows are read to be followed or checked, so that rows of
    /// a hundred thousand columns are not held a batch or an order at a time.
    pub fields: Vec<String>,
    /// What the row pays, `None` for a row that was not valid (and where rows are visited
    /// without it: [`Specs::Skip`]).
    pub spec: Option<RowContent>,
    pub content_hash: String,
    pub state: RowState,
    pub attempt: i64,
    pub order_id: Option<i64>,
    pub item_index: Option<i64>,
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    pub price: Option<Decimal>,
    pub discount: Option<Decimal>,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
    pub completed_at: Option<String>,
    /// What the paying balance (or card) was charged for the row, once it completed.
    pub debited_amount: Option<Decimal>,
    pub debited_currency: Option<String>,
    /// The number of the last merge whose file had the row ([`Ledger::merges`]).
    pub merged: i64,
}

/// What merging an input file into a batch found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub added: usize,
    pub unchanged: usize,
    pub updated: usize,
    /// Rows whose content changed after they were submitted: (reference, line, state).
    pub changed_after_submission: Vec<(String, i64, RowState)>,
    /// Rows in the ledger that the file no longer has, not yet submitted: now REMOVED.
    pub removed: Vec<String>,
    /// Rows the file no longer has but that were already sent (in an order sent, or in doubt,
    /// or answered): they stay, and are followed.
    pub missing_but_submitted: Vec<(String, RowState)>,
    /// The keys of the intents cancelled: never sent, and holding a row the file no longer has
    /// (now REMOVED, in `removed`).
    pub cancelled: Vec<String>,
    /// Rows of the cancelled intents still in the file, planned again in this merge.
    pub planned_again: usize,
    /// Rows of the cancelled intents still in the file, left PENDING for the next merge.
    pub pending_again: usize,
}

/// A row of a batch as the ledger holds it ([`Ledger::row_seen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRow {
    pub state: RowState,
    /// The hash of its payable content as last merged ([`crate::input::rules::content_hash`]).
    pub content_hash: String,
    /// The order it is in, if any.
    pub order_id: Option<i64>,
}

impl SeenRow {
    /// Whether a row of the file whose content hash is `content_hash` is a change the merge
    /// refuses: its payable content differs and something was planned or submitted for it
    /// (beyond PENDING), unless it is PLANNED in an intent the merge cancels (`cancelled`).
    pub fn refuses_change(&self, content_hash: &str, cancelled: impl Fn(i64) -> bool) -> bool {
        let may_change = matches!(
            self.state,
            RowState::Pending | RowState::Invalid | RowState::Removed | RowState::Skipped
        );
        let released = self.state == RowState::Planned && self.order_id.is_some_and(cancelled);
        !may_change && !released && self.content_hash != content_hash
    }
}

/// The columns of a [`RowRecord`] (and its batch, which names a row that cannot be read), in
/// the order of the select list [`row_columns`] makes of them; [`read_row`] reads them by name.
const ROW_COLUMNS: [&str; 22] = [
    "id",
    "batch_id",
    "reference",
    "position",
    "line",
    "fields",
    "spec",
    "content_hash",
    "state",
    "attempt",
    "order_id",
    "item_index",
    "item_id",
    "payout_url",
    "price",
    "discount",
    "error_type",
    "error_message",
    "completed_at",
    "debited_amount",
    "debited_currency",
    "merged",
];

/// The select list of [`ROW_COLUMNS`], each column of `rows` but those `instead` gives a value
/// of their own (`'[]'` for the cells, `NULL` for the spec).
fn row_columns(instead: &[(&str, &str)]) -> String {
    let column = |name: &&str| match instead.iter().find(|(n, _)| n == name) {
        Some((_, value)) => format!("{value} AS {name}"),
        None => format!("rows.{name}"),
    };
    ROW_COLUMNS
        .iter()
        .map(column)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The position of a column of [`ROW_COLUMNS`] by its name, found as the code is built.
macro_rules! at {
    ($name:literal) => {
        const { super::columns::position(&ROW_COLUMNS, $name) }
    };
}

/// A PLANNED or REJECTED row with what its order says ([`Ledger::visit_planned_or_refused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpaidRow {
    pub row_state: RowState,
    pub error_type: Option<String>,
    /// What the row pays, as recorded.
    pub spec: Option<RowContent>,
    pub order_state: OrderState,
    pub payment_currency: String,
    pub card_id: Option<String>,
}

/// What the result file says of a row's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLabel {
    pub service_order_id: Option<String>,
    /// `ACCOUNT_BALANCE` or `CARD`.
    pub payment_method: PaymentMethodType,
    pub payment_currency: String,
    pub card_id: Option<String>,
}

/// Each order of a batch with its way of paying and its number of rows (`?1`: the batch).
pub(super) const ROWS_PER_ORDER_AND_PAYMENT: &str = "SELECT o.card_id, o.payment_currency,
        (SELECT COUNT(*) FROM rows WHERE rows.order_id = o.id) AS rows_in_order
 FROM orders o WHERE o.batch_id = ?1";

/// The debited amounts of a batch's COMPLETED rows and of its reissued earlier attempts.
const DEBITED: &str = "SELECT o.card_id, r.debited_currency, r.debited_amount
     FROM rows r JOIN orders o ON o.id = r.order_id
     WHERE r.batch_id = ?1 AND r.state = 'COMPLETED' AND r.debited_amount IS NOT NULL
     UNION ALL
     SELECT o.card_id, p.debited_currency, p.debited_amount
     FROM payouts p JOIN orders o ON o.id = p.order_id
     WHERE p.batch_id = ?1 AND p.reissued_at IS NOT NULL
       AND p.debited_amount IS NOT NULL";

/// The card, the charged currency (both where they lie) and the amount of a line of
/// [`DEBITED`].
fn debited_of<'r>(
    r: &'r rusqlite::Row<'_>,
) -> rusqlite::Result<(Option<&'r str>, &'r str, Decimal)> {
    let card = r.get_ref("card_id")?.as_str_or_null()?;
    let currency = r.get_ref("debited_currency")?.as_str()?;
    Ok((card, currency, r.get::<_, Amount>("debited_amount")?.0))
}

/// Rows per state (in [`RowState::ALL`]'s order), and valid rows per delivery.
pub type StatesAndDeliveries = (Vec<(RowState, i64)>, Vec<(String, i64)>);

impl Ledger {
    /// Reads, through the one conversion, the stored row of every row of the batch's orders a
    /// run may still send or record (INTENT, ACCEPTED), before anything is sent: a row that
    /// cannot be read, or one of those rows with none stored, is a damaged ledger met before
    /// money moves, not once the service has answered. Returns how many rows were read.
    pub fn check_rows_to_send(&self, batch_id: i64) -> Result<usize> {
        let lines = self.select_all(
            "SELECT r.batch_id, r.line, r.spec FROM rows r JOIN orders o ON o.id = r.order_id
             WHERE o.batch_id = ?1 AND o.state IN ('INTENT', 'ACCEPTED')",
            params![batch_id],
            |r| Ok((stored_row(r, "spec")?.is_some(), r.get::<_, i64>("line")?)),
        )?;
        match lines.iter().find(|(stored, _)| !stored) {
            None => Ok(lines.len()),
            Some(&(_, line)) => Err(LedgerError::Corrupt(
                super::columns::DamagedRow {
                    batch_id,
                    batch: self.batch_by_id(batch_id)?.map(|b| b.name),
                    line,
                    reason: "no row is stored for it, yet an order to send holds it".into(),
                }
                .to_string(),
            )),
        }
    }

    /// The rows of a batch, in input order, without their cells ([`RowRecord::fields`]).
    pub fn rows(&self, batch_id: i64) -> Result<Vec<RowRecord>> {
        self.query_rows(
            "WHERE batch_id = ?1 ORDER BY position, id",
            params![batch_id],
        )
    }

    /// The rows of an order, in item order, without their cells ([`RowRecord::fields`]).
    pub fn rows_of_order(&self, order_id: i64) -> Result<Vec<RowRecord>> {
        self.query_rows(
            "WHERE order_id = ?1 ORDER BY item_index, id",
            params![order_id],
        )
    }

    /// Rows without their cells (see [`RowRecord::fields`]).
    pub(super) fn query_rows(
        &self,
        tail: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<RowRecord>> {
        let columns = row_columns(&[("fields", "'[]'")]);
        let sql = format!("SELECT {columns} FROM rows {tail}");
        // Kept prepared: an order's rows are read at each of its moves.
        let mut stmt = self.conn.prepare_cached(&sql).map_err(sqlerr(&self.path))?;
        let mapped = stmt
            .query_map(args, |r| read_row(r, Specs::Read))
            .map_err(sqlerr(&self.path))?;
        mapped
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.read_error())
    }

    /// Visits the rows of a batch still in its input file (not REMOVED), in input order, each
    /// with what the result file says of its order and of its payout link; one row in memory
    /// at a time. With [`Specs::Skip`], a row's `spec` and `content_hash` are left empty (not
    /// read).
    ///
    /// The note of the link (its last known life, and the attempt it reissued) comes with a
    /// COMPLETED row, or one reissued at a later attempt; its current attempt's line of
    /// `payouts` is read in the same step as the row, the attempts it reissued (a later
    /// attempt's only) on their own.
    pub fn visit_result_rows<E: From<LedgerError>>(
        &self,
        batch_id: i64,
        specs: Specs,
        mut visit: impl FnMut(
            RowRecord,
            Option<OrderLabel>,
            Option<PayoutNote>,
        ) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let columns = if specs == Specs::Read {
            row_columns(&[])
        } else {
            row_columns(&[("spec", "NULL"), ("content_hash", "''")])
        };
        // The link's columns follow the row's (`link_life`).
        let sql = format!(
            "SELECT {columns}, p.status AS link_status, p.since AS link_since,
                    p.expires_at AS link_expires_at
             FROM rows LEFT JOIN payouts p ON p.row_id = rows.id AND p.attempt = rows.attempt
             WHERE rows.batch_id = ?1 AND rows.state != 'REMOVED'
             ORDER BY rows.position, rows.id"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        // Orders by id, read once each: an order's later columns sit behind its body, which
        // can span many pages. Bounded, for batches of a million one-row orders.
        let mut labels: HashMap<i64, OrderLabel> = HashMap::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let row = read_row(r, specs).map_err(self.read_error())?;
            let order = match row.order_id {
                Some(id) => {
                    if !labels.contains_key(&id) {
                        if labels.len() >= 4096 {
                            labels.clear();
                        }
                        labels.insert(id, self.order_label(id)?);
                    }
                    labels.get(&id).cloned()
                }
                None => None,
            };
            let note = if row.state == RowState::Completed || row.attempt > 1 {
                let life = link_life(r).map_err(self.read_error())?;
                Some(self.payout_note_with(row.id, row.attempt, life)?)
            } else {
                None
            };
            visit(row, order, note)?;
        }
        Ok(())
    }

    fn order_label(&self, order_id: i64) -> Result<OrderLabel> {
        self.conn
            .prepare_cached(
                "SELECT service_order_id, payment_method, payment_currency, card_id
                 FROM orders WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([order_id], |r| {
                    Ok(OrderLabel {
                        service_order_id: r.get("service_order_id")?,
                        payment_method: r.get("payment_method")?,
                        payment_currency: r.get("payment_currency")?,
                        card_id: r.get("card_id")?,
                    })
                })
            })
            .map_err(sqlerr(&self.path))
    }

    /// Currency and face value (as recorded; a COMPLETED row without one is a damaged ledger)
    /// and price (0 where none is stored) of every COMPLETED row of a batch.
    pub fn completed_amounts(&self, batch_id: i64) -> Result<Vec<(String, Decimal, Decimal)>> {
        self.select_all(
            "SELECT batch_id, line, spec, COALESCE(price, '0') AS price
             FROM rows WHERE batch_id = ?1 AND state = 'COMPLETED'",
            [batch_id],
            |r| {
                let (currency, face_value) = stored_row_in(r, "spec", RowState::Completed)?
                    .map_or_else(
                        || ("?".to_string(), Decimal::ZERO),
                        |s| (s.currency, s.face_value),
                    );
                Ok((currency, face_value, r.get::<_, Amount>("price")?.0))
            },
        )
    }

    /// The ledger's latest converted order of a currency pair (`latest_conversion_in`).
    pub fn latest_conversion(
        &self,
        base_url: &str,
        payment_currency: &str,
        product_currency: &str,
    ) -> Result<Option<Conversion>> {
        latest_conversion_in(&self.conn, base_url, payment_currency, product_currency)
            .map_err(self.read_error())
    }

    /// What left each balance (or card) for the COMPLETED rows of a batch, and for the earlier
    /// attempts whose expired links were reissued (`payouts`): (card id, charged currency,
    /// amount), one per row and attempt that records it. The yardstick of
    /// [`Ledger::debited_sums`].
    #[cfg(test)]
    pub fn debited_amounts(&self, batch_id: i64) -> Result<Vec<(Option<String>, String, Decimal)>> {
        self.select_all(DEBITED, [batch_id], |r| {
            Ok((
                r.get("card_id")?,
                r.get("debited_currency")?,
                r.get::<_, Amount>("debited_amount")?.0,
            ))
        })
    }

    /// What left each balance (or card) for the COMPLETED rows of a batch, and for the earlier
    /// attempts whose expired links were reissued (`payouts`), summed per (card id, charged
    /// currency), in that order. Summed as the rows are read, each row's texts where they lie.
    pub fn debited_sums(&self, batch_id: i64) -> Result<Vec<(Option<String>, String, Decimal)>> {
        let mut stmt = self
            .conn
            .prepare_cached(DEBITED)
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        let mut sums: Vec<(Option<String>, String, Decimal)> = Vec::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let (card, currency, amount) = debited_of(r).map_err(self.read_error())?;
            match sums
                .iter_mut()
                .find(|(c, cur, _)| c.as_deref() == card && cur == currency)
            {
                Some((_, _, sum)) => *sum += amount,
                None => sums.push((card.map(str::to_string), currency.to_string(), amount)),
            }
        }
        sums.sort();
        Ok(sums)
    }

    /// The first `limit` INVALID rows of a batch in input order, each named as a person reads
    /// it: `line 4 (R-1): what is wrong` (the ledger keeps each row's problem as its error).
    pub fn first_invalid_rows(&self, batch_id: i64, limit: i64) -> Result<Vec<String>> {
        self.select_all(
            "SELECT line, reference, error_message FROM rows
             WHERE batch_id = ?1 AND state = 'INVALID'
             ORDER BY position, id LIMIT ?2",
            params![batch_id, limit],
            |r| {
                let line: i64 = r.get("line")?;
                let reference: String = r.get("reference")?;
                let problem: Option<String> = r.get("error_message")?;
                Ok(match problem {
                    Some(p) => format!("line {line} ({reference}): {p}"),
                    None => format!("line {line} ({reference})"),
                })
            },
        )
    }

    /// Rows in orders, per way of paying: (card id, payment currency, rows), in that order.
    pub fn rows_per_payment(&self, batch_id: i64) -> Result<Vec<(Option<String>, String, i64)>> {
        // Summed here, one order at a time: a GROUP BY would sort every order of the batch in
        // a temporary b-tree first (about 50 MB for a million one-row orders).
        let mut stmt = self
            .conn
            .prepare_cached(ROWS_PER_ORDER_AND_PAYMENT)
            .map_err(sqlerr(&self.path))?;
        // The columns by name, found once for the statement: one row an order.
        let at = |name| stmt.column_index(name).map_err(sqlerr(&self.path));
        let (card, currency, rows) = (
            at("card_id")?,
            at("payment_currency")?,
            at("rows_in_order")?,
        );
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        let mut out: BTreeMap<(Option<String>, String), i64> = BTreeMap::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let way = (
                r.get(card).map_err(sqlerr(&self.path))?,
                r.get(currency).map_err(sqlerr(&self.path))?,
            );
            *out.entry(way).or_default() += r.get::<_, i64>(rows).map_err(sqlerr(&self.path))?;
        }
        Ok(out
            .into_iter()
            .map(|((card, currency), rows)| (card, currency, rows))
            .collect())
    }

    /// The batch's valid rows (not taken out of the file) per delivery (`EMAIL`,
    /// `PAYOUT_LINK`), from their recorded deliveries.
    pub fn rows_per_delivery(&self, batch_id: i64) -> Result<Vec<(String, i64)>> {
        Ok(self.counts_and_deliveries(batch_id)?.1)
    }

    /// [`Ledger::row_counts`] and [`Ledger::rows_per_delivery`] in one read of the batch's
    /// index of states and deliveries (`rows_batch_state`: batch, state, delivery), without a
    /// sort: the groups are summed here.
    pub fn counts_and_deliveries(&self, batch_id: i64) -> Result<StatesAndDeliveries> {
        let counted: Vec<(RowState, Option<String>, i64)> = self.select_all(
            "SELECT state, delivery, COUNT(*) AS rows_counted FROM rows
             WHERE batch_id = ?1 GROUP BY state, delivery",
            [batch_id],
            |r| Ok((r.get("state")?, r.get("delivery")?, r.get("rows_counted")?)),
        )?;
        let mut states: BTreeMap<RowState, i64> = BTreeMap::new();
        let mut deliveries: BTreeMap<String, i64> = BTreeMap::new();
        for (state, delivery, rows) in counted {
            *states.entry(state).or_default() += rows;
            if let Some(delivery) = delivery.filter(|_| state != RowState::Removed) {
                *deliveries.entry(delivery).or_default() += rows;
            }
        }
        let mut states: Vec<(RowState, i64)> = states.into_iter().collect();
        states.sort_by_key(|(s, _)| RowState::ALL.iter().position(|x| x == s));
        Ok((states, deliveries.into_iter().collect()))
    }

    /// Visits the batch's rows that are PLANNED or REJECTED, each with its order's state and
    /// way of paying: what a stop of the service left unpaid is among them. One row in memory
    /// at a time.
    pub fn visit_planned_or_refused(
        &self,
        batch_id: i64,
        mut visit: impl FnMut(&UnpaidRow),
    ) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT r.batch_id, r.line, r.state AS row_state, r.error_type, r.spec,
                        o.state AS order_state, o.payment_currency, o.card_id
                 FROM rows r JOIN orders o ON o.id = r.order_id
                 WHERE r.batch_id = ?1 AND r.state IN ('PLANNED', 'REJECTED')",
            )
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let unpaid = || -> rusqlite::Result<UnpaidRow> {
                Ok(UnpaidRow {
                    row_state: r.get("row_state")?,
                    error_type: r.get("error_type")?,
                    spec: stored_row(r, "spec")?,
                    order_state: r.get("order_state")?,
                    payment_currency: r.get("payment_currency")?,
                    card_id: r.get("card_id")?,
                })
            };
            visit(&unpaid().map_err(self.read_error())?);
        }
        Ok(())
    }

    /// The reference of a row, by id.
    pub fn row_reference(&self, row_id: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT reference FROM rows WHERE id = ?1")
            .and_then(|mut st| st.query_row([row_id], |r| r.get("reference")).optional())
            .map_err(sqlerr(&self.path))
    }

    /// The state of the batch's row with this reference, if the batch has one.
    pub fn row_state(&self, batch_id: i64, reference: &str) -> Result<Option<RowState>> {
        self.conn
            .prepare_cached("SELECT state FROM rows WHERE batch_id = ?1 AND reference = ?2")
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| r.get("state"))
                    .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// What the ledger holds of one row of a batch, for checking a file against it without
    /// merging it ([`Ledger::row_seen`]): one look-up, by the same index as [`Ledger::row_state`].
    pub fn row_seen(&self, batch_id: i64, reference: &str) -> Result<Option<SeenRow>> {
        self.conn
            .prepare_cached(
                "SELECT state, content_hash, order_id FROM rows
                 WHERE batch_id = ?1 AND reference = ?2",
            )
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| {
                    Ok(SeenRow {
                        state: r.get("state")?,
                        content_hash: r.get("content_hash")?,
                        order_id: r.get("order_id")?,
                    })
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// Counts of rows per state.
    pub fn row_counts(&self, batch_id: i64) -> Result<Vec<(RowState, i64)>> {
        Ok(self.counts_and_deliveries(batch_id)?.0)
    }

    /// How many of a batch's COMPLETED rows carry each note (an `error_type`, such as an
    /// order that could not be confirmed as the one sent): one read of the batch's completed
    /// rows for every note.
    pub fn completed_rows_noted(&self, batch_id: i64) -> Result<BTreeMap<String, i64>> {
        let noted: Vec<(String, i64)> = self.select_all(
            "SELECT error_type, COUNT(*) AS noted FROM rows
             WHERE batch_id = ?1 AND state = 'COMPLETED' AND error_type IS NOT NULL
             GROUP BY error_type",
            [batch_id],
            |r| Ok((r.get("error_type")?, r.get("noted")?)),
        )?;
        Ok(noted.into_iter().collect())
    }
}

/// The ledger's latest recorded row converted from `payment_currency` to `product_currency`
/// among the batches made with the service at `base_url`: a completed row of a one-item sync
/// order paid from a balance (embedded FX). Read newest first, each row through the one
/// conversion ([`RowContent`]) before its currency is compared: found at once where the pair is
/// common; a pair never converted reads every completed sync row paid from that balance. A
/// stored row paybatch cannot read (not JSON, or of another shape) is a damaged ledger, never
/// passed over and never a price.
pub(crate) fn latest_conversion_in(
    conn: &Connection,
    base_url: &str,
    payment_currency: &str,
    product_currency: &str,
) -> rusqlite::Result<Option<Conversion>> {
    // Every completed row of a sync order paid from the balance, newest first, each read
    // through the one conversion before its currency is compared: a stored row that cannot be
    // read is met (a damaged ledger), never passed over by a filter on its text.
    let mut stmt = conn.prepare_cached(
        "SELECT r.price AS price, r.debited_amount AS debited_amount,
                r.completed_at AS completed_at, r.spec AS spec, r.batch_id AS batch_id,
                r.line AS line
         FROM rows r
         JOIN orders o ON o.id = r.order_id
         JOIN batches b ON b.id = r.batch_id
         WHERE r.debited_currency = ?2 AND r.state = 'COMPLETED'
           AND r.price IS NOT NULL AND r.debited_amount IS NOT NULL
           AND r.completed_at IS NOT NULL
           AND o.mode = 'sync' AND o.state = 'COMPLETED' AND o.card_id IS NULL
           AND b.base_url = ?1
         ORDER BY r.id DESC",
    )?;
    let mut rows = stmt.query(params![base_url, payment_currency])?;
    while let Some(r) = rows.next()? {
        let converted = stored_row_in(r, "spec", RowState::Completed)?
            .is_some_and(|row| row.currency == product_currency);
        if converted {
            return Ok(Some(Conversion {
                payment_currency: payment_currency.to_string(),
                product_currency: product_currency.to_string(),
                price: r.get::<_, Amount>("price")?.0,
                debited: r.get::<_, Amount>("debited_amount")?.0,
                completed_at: r.get("completed_at")?,
            }));
        }
    }
    Ok(None)
}

/// The line of `payouts` of a row's current attempt, read with the row by
/// [`Ledger::visit_result_rows`] (its columns follow [`ROW_COLUMNS`]); `None` without one.
fn link_life(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<PayoutLife>> {
    let at = ROW_COLUMNS.len();
    let Some(status) = r.get::<_, Option<String>>(at)? else {
        return Ok(None);
    };
    Ok(Some(PayoutLife {
        status: PayoutStatus::parse(&status),
        since: r.get(at + 1)?,
        expires_at: r.get(at + 2)?,
    }))
}

/// A row as [`row_columns`] select it; its stored row read, or left out with [`Specs::Skip`].
fn read_row(r: &rusqlite::Row<'_>, specs: Specs) -> rusqlite::Result<RowRecord> {
    let fields: String = r.get(at!("fields"))?;
    let state = r.get(at!("state"))?;
    Ok(RowRecord {
        id: r.get(at!("id"))?,
        reference: r.get(at!("reference"))?,
        position: r.get(at!("position"))?,
        line: r.get(at!("line"))?,
        fields: serde_json::from_str(&fields).unwrap_or_default(),
        spec: match specs {
            Specs::Read => stored_row_in(r, at!("spec"), state)?,
            Specs::Skip => None,
        },
        content_hash: r.get(at!("content_hash"))?,
        state,
        attempt: r.get(at!("attempt"))?,
        order_id: r.get(at!("order_id"))?,
        item_index: r.get(at!("item_index"))?,
        item_id: r.get(at!("item_id"))?,
        payout_url: r.get(at!("payout_url"))?,
        price: amount(r, at!("price"))?,
        discount: amount(r, at!("discount"))?,
        error_type: r.get(at!("error_type"))?,
        error_message: r.get(at!("error_message"))?,
        completed_at: r.get(at!("completed_at"))?,
        debited_amount: amount(r, at!("debited_amount"))?,
        debited_currency: r.get(at!("debited_currency"))?,
        merged: r.get(at!("merged"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::merge::Planning;
    use crate::row::IncomingRow;

    /// A ledger whose batch `b` has one valid row, PENDING, at line 7, its stored text then set
    /// to `text`.
    fn stored_as(text: &str) -> (tempfile::TempDir, Ledger, i64) {
        let (dir, mut ledger, batch) = crate::ledger::with_a_batch();
        let row = IncomingRow {
            reference: "R-1".into(),
            position: 0,
            line: 7,
            fields: "[\"R-1\"]".into(),
            spec: Some(crate::row::ContentText::of(&RowContent::sample())),
            content_hash: "h".into(),
            delivery: Some("EMAIL"),
            valid: true,
            error_message: None,
            skipped: false,
        };
        let mut merge = ledger.merge(batch, Planning::RecordPending).expect("merge");
        assert!(merge.row(&row).expect("row").is_none());
        merge.close().expect("close");
        merge.commit().expect("commit");
        ledger
            .conn
            .execute("UPDATE rows SET spec = ?1", [text])
            .expect("set the text");
        (dir, ledger, batch)
    }

    /// Rows stored by earlier versions (the reference in the text, absent fields as `null`)
    /// read as the same typed row.
    #[test]
    fn rows_stored_by_earlier_versions_read_typed() {
        let old = r#"{"reference":"R-1","product_codes":["AMZ-US","ITUNES-US"],"face_value":"25.50","currency":"USD","distribution":"EMAIL","email":"a@example.com","payment_currency":"EUR","country":null,"card_id":null}"#;
        let (_dir, ledger, batch) = stored_as(old);
        let rows = ledger.rows(batch).expect("rows");
        let spec = rows[0].spec.clone().expect("a stored row");
        assert_eq!(spec.product_codes, ["AMZ-US", "ITUNES-US"]);
        assert_eq!(spec.face_value.to_string(), "25.50");
        assert_eq!(
            (spec.email.as_deref(), spec.payment_currency.as_str()),
            (Some("a@example.com"), "EUR")
        );
        assert_eq!((spec.country, spec.card_id), (None, None));
    }

    /// A stored row that cannot be read stops every read of it with the damage, naming the
    /// batch and the line: it is never left out.
    #[test]
    fn an_unreadable_stored_row_is_a_damaged_ledger_naming_batch_and_line() {
        for text in [
            "{\"product_codes\":",
            r#"{"product_codes":["AMZ-US"],"face_value":"1e3","currency":"USD","distribution":"EMAIL","payment_currency":"USD"}"#,
        ] {
            let (_dir, ledger, batch) = stored_as(text);
            let damaged = |e: LedgerError| match e {
                LedgerError::Corrupt(m) => {
                    assert!(m.contains("line 7 of batch `b`"), "{m}");
                    assert!(m.contains("help:"), "{m}");
                }
                other => panic!("not a damaged ledger: {other}"),
            };
            damaged(ledger.rows(batch).expect_err("rows"));
            let visited =
                ledger.visit_result_rows::<LedgerError>(batch, Specs::Read, |_, _, _| Ok(()));
            damaged(visited.expect_err("result rows"));
            ledger
                .conn
                .execute("UPDATE rows SET state = 'COMPLETED'", [])
                .expect("completed");
            damaged(ledger.completed_amounts(batch).expect_err("amounts"));
        }
    }

    /// A price or a charge is read back as the decimal stored, its text unchanged (`9.80`, from
    /// text or a number); one that is not a decimal amount is a damaged ledger, never a row
    /// without a price.
    #[test]
    fn stored_amounts_read_exactly_and_damaged_ones_are_a_damaged_ledger() {
        let (_dir, ledger, batch) = stored_as(&RowContent::sample().to_json());
        let set = |price: &dyn rusqlite::ToSql| {
            ledger
                .conn
                .execute(
                    "UPDATE rows SET state = 'COMPLETED', price = ?1, debited_amount = '9.80'",
                    [price],
                )
                .expect("priced");
        };
        set(&"9.80");
        let row = ledger.rows(batch).expect("rows").remove(0);
        assert_eq!(row.price.map(|p| p.to_string()).as_deref(), Some("9.80"));
        assert_eq!(row.debited_amount, Some(Decimal::new(980, 2)));
        set(&7_i64);
        assert_eq!(
            ledger.rows(batch).expect("rows")[0].price,
            Some(Decimal::from(7))
        );
        set(&"nine");
        for read in [
            ledger.rows(batch).map(drop),
            ledger.completed_amounts(batch).map(drop),
        ] {
            match read {
                Err(LedgerError::Corrupt(m)) => assert!(m.contains("`nine`"), "{m}"),
                other => panic!("not a damaged ledger: {other:?}"),
            }
        }
    }

    /// Expects a damaged ledger naming line 7 of batch `b`.
    fn damage_at_line_7(read: Result<()>) -> String {
        match read {
            Err(LedgerError::Corrupt(m)) => {
                assert!(m.contains("line 7 of batch `b`"), "{m}");
                m
            }
            other => panic!("not a damaged ledger: {other:?}"),
        }
    }

    /// A row that passed validation without its stored row (the column emptied outside
    /// paybatch) is damage wherever it is read, not a row of unknown currency.
    #[test]
    fn a_valid_row_without_its_stored_row_is_a_damaged_ledger() {
        let (_dir, ledger, batch) = stored_as(&RowContent::sample().to_json());
        ledger
            .conn
            .execute("UPDATE rows SET spec = NULL, state = 'COMPLETED'", [])
            .expect("emptied");
        damage_at_line_7(ledger.rows(batch).map(drop));
        damage_at_line_7(ledger.completed_amounts(batch).map(drop));
        let visited = ledger.visit_result_rows::<LedgerError>(batch, Specs::Read, |_, _, _| Ok(()));
        damage_at_line_7(visited);
        // A row that failed validation has none: read as such.
        ledger
            .conn
            .execute("UPDATE rows SET state = 'INVALID'", [])
            .expect("invalid");
        assert_eq!(ledger.rows(batch).expect("rows")[0].spec, None);
    }

    /// A stored row kept as bytes rather than text is damage naming its line, not SQLite's
    /// message about a column type.
    #[test]
    fn a_stored_row_kept_as_bytes_is_a_damaged_ledger() {
        let (_dir, ledger, batch) = stored_as(&RowContent::sample().to_json());
        let bytes = RowContent::sample().to_json().into_bytes();
        ledger
            .conn
            .execute("UPDATE rows SET spec = ?1", [bytes])
            .expect("bytes");
        let m = damage_at_line_7(ledger.rows(batch).map(drop));
        assert!(m.contains("not as text"), "{m}");
    }

    /// A stored row holding what no validated row holds (a face value not positive, no or an
    /// empty product code, a distribution method paybatch does not send) is damage.
    #[test]
    fn a_stored_row_no_validation_lets_through_is_a_damaged_ledger() {
        let sample = RowContent::sample().to_json();
        for (from, to) in [
            ("\"10\"", "\"-10\""),
            ("\"10\"", "\"0\""),
            ("[\"AMZ-US\"]", "[\"\"]"),
            ("[\"AMZ-US\"]", "[]"),
            ("\"EMAIL\"", "\"CARRIER_PIGEON\""),
        ] {
            assert!(sample.contains(from), "{sample}");
            let (_dir, ledger, batch) = stored_as(&sample.replace(from, to));
            damage_at_line_7(ledger.rows(batch).map(drop));
        }
    }

    /// The stored row `text`, its row completed in a converted order (EUR paid for USD), and
    /// what the converted-price look-up finds of EUR to USD.
    fn converted_as(text: &str) -> Result<Option<Conversion>> {
        let (_dir, ledger, batch) = stored_as(text);
        ledger
            .conn
            .execute_batch(&format!(
                "INSERT INTO orders (id, batch_id, idempotency_key, body, mode, payment_currency,
                                     state, created_at)
                 VALUES (1, {batch}, 'k', x'00', 'sync', 'EUR', 'COMPLETED', '');
                 UPDATE rows SET state = 'COMPLETED', order_id = 1, price = '10',
                        debited_amount = '9.20', debited_currency = 'EUR', completed_at = 'x';"
            ))
            .expect("a converted row");
        let base_url = ledger
            .batch_by_id(batch)
            .expect("batch")
            .expect("b")
            .base_url;
        ledger.latest_conversion(&base_url, "EUR", "USD")
    }

    /// A stored row that is not JSON, met by the converted-price look-up, is a damaged ledger,
    /// not SQLite's error.
    #[test]
    fn the_converted_price_lookup_calls_an_unreadable_stored_row_damage() {
        match converted_as("{\"product_codes\":") {
            Err(LedgerError::Corrupt(m)) => assert!(m.contains("help:"), "{m}"),
            other => panic!("not a damaged ledger: {other:?}"),
        }
    }

    /// A stored row SQLite reads as JSON but of another shape than a stored row's (a field
    /// missing, its currency among them; a face value no validation lets through) is a damaged
    /// ledger naming its line, not the price of a conversion, and not a row passed over.
    #[test]
    fn the_converted_price_lookup_calls_a_stored_row_of_another_shape_damage() {
        let sample = RowContent::sample().to_json();
        assert!(
            sample.contains("\"USD\"") && sample.contains("\"10\""),
            "{sample}"
        );
        for text in [
            "{\"currency\":\"USD\"}".to_string(),
            "{\"face_value\":\"10\"}".to_string(),
            sample.replace("\"10\"", "\"-10\""),
        ] {
            damage_at_line_7(converted_as(&text).map(drop));
        }
        // The same row, as stored, is the conversion found.
        let found = converted_as(&sample).expect("read").expect("a conversion");
        assert_eq!(
            (found.price, found.debited),
            (Decimal::TEN, "9.20".parse().expect("d"))
        );
    }

    /// Before a run sends, the stored rows of the orders it may send or record are read: an
    /// unreadable one, or none stored, is a damaged ledger then, not after the service answered.
    #[test]
    fn the_rows_of_orders_to_send_are_read_before_sending() {
        let (_dir, ledger, batch) = stored_as(&RowContent::sample().to_json());
        let order = ledger
            .conn
            .query_row(
                "INSERT INTO orders (batch_id, idempotency_key, body, mode, payment_currency, state, created_at)
                 VALUES (?1, 'k', x'00', 'async', 'USD', 'INTENT', '2026-11-27T00:00:00Z') RETURNING id",
                [batch],
                |r| r.get::<_, i64>("id"),
            )
            .expect("an intent");
        ledger
            .conn
            .execute("UPDATE rows SET order_id = ?1, state = 'PLANNED'", [order])
            .expect("planned");
        assert_eq!(ledger.check_rows_to_send(batch).expect("readable"), 1);
        for text in [Some("{}"), None] {
            ledger
                .conn
                .execute("UPDATE rows SET spec = ?1", [text])
                .expect("damaged");
            match ledger.check_rows_to_send(batch) {
                Err(LedgerError::Corrupt(m)) => assert!(m.contains("line 7 of batch `b`"), "{m}"),
                other => panic!("not a damaged ledger: {other:?}"),
            }
        }
    }
}
