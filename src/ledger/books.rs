//! The books: one clock, the lines of a period and the months closed.
//!
//! Each order made final (COMPLETED, FAILED, REJECTED or MISMATCH) is given, in the transaction
//! that makes it so, its booking time (`booked_at`, by the clock of the books: the wall clock,
//! or on the embedded simulator its simulated clock, [`BooksClock`]) and the date its lines are
//! booked on (`booked_on`: the booking time's UTC date, or the first day of the first open month
//! after it when its month was closed, [`booking_date`]). A line of the books is an attempt of a
//! row paid (or held) by such an order; periods gather lines by `booked_on`, whichever batch
//! they belong to. Both are written once and never change, so a month's lines never change once
//! the month is over.

use std::sync::Arc;

use chrono::{Datelike, NaiveDate};
use rusqlite::{OptionalExtension, Transaction, params};

use super::columns::{amount, stored_row_in};
use super::{Ledger, OrderLabel, OrderState, Result, RowRecord, RowState, now, sqlerr};

/// The clock of the books: the now (RFC 3339, UTC) an order made final is booked at, or `None`
/// when it cannot be read (the wall clock is taken then).
pub type BooksClock = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// One line of the books: an attempt of a row held by an order made final in the period,
/// COMPLETED or MISMATCH, with the order that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookLine {
    pub batch_id: i64,
    /// The ledger's order.
    pub order_id: i64,
    pub order_state: OrderState,
    pub idempotency_key: String,
    pub label: OrderLabel,
    /// When paybatch recorded the order final, by the clock of the books.
    pub booked_at: String,
    /// The date its lines are booked on (`YYYY-MM-DD`).
    pub booked_on: String,
    /// The row at this attempt: its state, item, price, charge and the service's
    /// `completed_at` as that attempt left them.
    pub row: RowRecord,
}

/// A month closed with `paybatch close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedMonth {
    /// `YYYY-MM`.
    pub month: String,
    pub closed_at: String,
    pub user: String,
    pub host: String,
    /// `sha256:HEX` of the month's journal as it was closed.
    pub journal_digest: String,
    pub journal_lines: i64,
    /// JSON: the journal's totals per environment and balance currency.
    pub totals: String,
}

/// The orders of one batch that are not final: in doubt (sent, not answered) or unfinished
/// (accepted and processing, or planned and never sent).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotFinal {
    pub batch: String,
    pub in_doubt: i64,
    pub unfinished: i64,
}

/// The month (`YYYY-MM`) of a date or time (`YYYY-MM-DD...`).
pub fn month_of(date: &str) -> &str {
    date.get(..7).unwrap_or(date)
}

/// The first day of the month after `month` (`YYYY-MM`); `None` when it is not a month.
pub fn next_month(month: &str) -> Option<NaiveDate> {
    let first = NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").ok()?;
    let (year, m) = if first.month() == 12 {
        (first.year() + 1, 1)
    } else {
        (first.year(), first.month() + 1)
    };
    NaiveDate::from_ymd_opt(year, m, 1)
}

/// The UTC date of a time the ledger recorded (RFC 3339); its first ten characters when it
/// cannot be read as one.
fn utc_day(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| t.with_timezone(&chrono::Utc).format("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| at.get(..10).unwrap_or(at).to_string())
}

/// The date the lines of an order booked at `booked_at` are booked on: its UTC date when its
/// month is open; else the first day of the first open month after it (the accounting practice
/// of posting a late item to the current period).
pub(super) fn booking_date(tx: &Transaction<'_>, booked_at: &str) -> rusqlite::Result<String> {
    let day = utc_day(booked_at);
    let mut closed = tx.prepare_cached("SELECT 1 FROM closed_months WHERE month = ?1")?;
    let mut month = month_of(&day).to_string();
    if !closed.exists([&month])? {
        return Ok(day);
    }
    // Bounded: one step per month closed, and no ledger closes ten thousand years.
    for _ in 0..120_000 {
        let Some(first) = next_month(&month) else {
            break;
        };
        month = first.format("%Y-%m").to_string();
        if !closed.exists([&month])? {
            return Ok(first.to_string());
        }
    }
    Ok(day)
}

/// The columns of a line, for [`line_from`]: the order's, then the row's at the attempt (named
/// apart where both have one).
const LINE_COLUMNS: &str = "o.id AS order_id, o.batch_id, o.state AS order_state,
        o.idempotency_key, o.service_order_id, o.payment_method, o.payment_currency, o.card_id,
        o.booked_at, o.booked_on, r.id AS row_id, r.reference, r.position, r.line, r.fields,
        r.spec, r.content_hash, r.merged";

fn line_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<BookLine> {
    let fields: String = r.get("fields")?;
    let state = r.get("row_state")?;
    Ok(BookLine {
        order_id: r.get("order_id")?,
        batch_id: r.get("batch_id")?,
        order_state: r.get("order_state")?,
        idempotency_key: r.get("idempotency_key")?,
        label: OrderLabel {
            service_order_id: r.get("service_order_id")?,
            payment_method: r.get("payment_method")?,
            payment_currency: r.get("payment_currency")?,
            card_id: r.get("card_id")?,
        },
        booked_at: r.get("booked_at")?,
        booked_on: r.get("booked_on")?,
        row: RowRecord {
            id: r.get("row_id")?,
            reference: r.get("reference")?,
            position: r.get("position")?,
            line: r.get("line")?,
            fields: serde_json::from_str(&fields).unwrap_or_default(),
            spec: stored_row_in(r, "spec", state)?,
            content_hash: r.get("content_hash")?,
            merged: r.get("merged")?,
            state,
            attempt: r.get("attempt")?,
            order_id: r.get("row_order_id")?,
            item_index: r.get("item_index")?,
            item_id: r.get("item_id")?,
            payout_url: None,
            price: amount(r, "price")?,
            discount: None,
            error_type: r.get("error_type")?,
            error_message: None,
            completed_at: r.get("completed_at")?,
            debited_amount: amount(r, "debited_amount")?,
            debited_currency: r.get("debited_currency")?,
        },
    })
}

impl Ledger {
    /// Books the orders made final from now on by `clock` (the embedded simulator's); by the
    /// wall clock when `None`.
    pub fn set_books_clock(&mut self, clock: Option<BooksClock>) {
        self.books_clock = clock;
    }

    /// The now of the books (RFC 3339, UTC).
    pub fn books_now(&self) -> String {
        self.books_clock
            .as_ref()
            .and_then(|clock| clock())
            .unwrap_or_else(now)
    }

    /// Visits every line of the books booked on `since` to `until` (dates, both included),
    /// of every batch: the attempts of rows held by COMPLETED or MISMATCH orders, the
    /// current ones and the earlier ones reissued since, in the order they were booked (then
    /// by order, row and attempt), the same every time.
    pub fn visit_book_lines<E: From<super::LedgerError>>(
        &self,
        since: &str,
        until: &str,
        mut visit: impl FnMut(BookLine) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let sql = format!(
            "SELECT {LINE_COLUMNS}, r.state AS row_state, r.attempt, r.order_id AS row_order_id,
                    r.item_index, r.item_id, r.price, r.error_type, r.completed_at,
                    r.debited_amount, r.debited_currency
             FROM orders o JOIN rows r ON r.order_id = o.id
             WHERE o.booked_on >= ?1 AND o.booked_on <= ?2
               AND o.state IN ('COMPLETED', 'MISMATCH') AND r.state IN ('COMPLETED', 'MISMATCH')
             UNION ALL
             SELECT {LINE_COLUMNS}, 'COMPLETED', p.attempt, p.order_id, NULL, p.item_id,
                    p.price, p.error_type, p.completed_at, p.debited_amount, p.debited_currency
             FROM payouts p JOIN rows r ON r.id = p.row_id JOIN orders o ON o.id = p.order_id
             WHERE p.reissued_at IS NOT NULL AND o.booked_on >= ?1 AND o.booked_on <= ?2
               AND o.state = 'COMPLETED'
             ORDER BY 10, 9, 1, 11, 20"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mut cursor = stmt
            .query(params![since, until])
            .map_err(sqlerr(&self.path))?;
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let line = line_from(r).map_err(self.read_error())?;
            if matches!(line.row.state, RowState::Completed | RowState::Mismatch) {
                visit(line)?;
            }
        }
        Ok(())
    }

    /// The batches with a line booked on `since` to `until` (dates, both included), in id
    /// order.
    pub fn batches_booked(&self, since: &str, until: &str) -> Result<Vec<i64>> {
        self.select_all(
            "SELECT DISTINCT batch_id FROM orders
             WHERE booked_on >= ?1 AND booked_on <= ?2 AND state IN ('COMPLETED', 'MISMATCH')
             ORDER BY batch_id",
            [since, until],
            |r| r.get("batch_id"),
        )
    }

    /// Whether the service order `service_order_id` is another's than the ledger's order
    /// `order_id`: held by another order of this ledger, or known as another ledger's order
    /// (`service_orders`).
    pub fn answered_for_another(&self, order_id: i64, service_order_id: &str) -> Result<bool> {
        let held_here: bool = self
            .conn
            .prepare_cached("SELECT 1 FROM orders WHERE service_order_id = ?1 AND id != ?2")
            .and_then(|mut st| st.exists(params![service_order_id, order_id]))
            .map_err(sqlerr(&self.path))?;
        let elsewhere: bool = self
            .conn
            .prepare_cached("SELECT 1 FROM service_orders WHERE service_order_id = ?1")
            .and_then(|mut st| st.exists([service_order_id]))
            .map_err(sqlerr(&self.path))?;
        Ok(held_here || elsewhere)
    }

    /// The last answer the service gave for the ledger's order `order_id`.
    pub fn last_response(&self, order_id: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT last_response FROM orders WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([order_id], |r| r.get("last_response"))
                    .optional()
            })
            .map_err(sqlerr(&self.path))
            .map(Option::flatten)
    }

    /// The orders not final created on or before `until` (a date, UTC), per batch, in batch
    /// order: what refuses closing a month.
    pub fn not_final_until(&self, until: &str) -> Result<Vec<NotFinal>> {
        let end = format!("{until}T23:59:59.999Z");
        self.select_all(
            "SELECT b.name,
                    SUM(o.state = 'INTENT' AND (o.sends > 0 OR o.last_sent_at IS NOT NULL))
                        AS in_doubt,
                    SUM(o.state = 'ACCEPTED'
                        OR (o.state = 'INTENT' AND o.sends = 0 AND o.last_sent_at IS NULL))
                        AS unfinished
             FROM orders o JOIN batches b ON b.id = o.batch_id
             WHERE o.state IN ('INTENT', 'ACCEPTED') AND o.created_at <= ?1
             GROUP BY b.id ORDER BY b.id",
            [end],
            |r| {
                Ok(NotFinal {
                    batch: r.get("name")?,
                    in_doubt: r.get("in_doubt")?,
                    unfinished: r.get("unfinished")?,
                })
            },
        )
    }

    /// Every month closed, oldest first.
    pub fn closed_months(&self) -> Result<Vec<ClosedMonth>> {
        self.select_all(
            "SELECT month, closed_at, user, host, journal_digest, journal_lines, totals
             FROM closed_months ORDER BY month",
            [],
            closed_from,
        )
    }

    /// The month `month` (`YYYY-MM`) when it is closed.
    pub fn closed_month(&self, month: &str) -> Result<Option<ClosedMonth>> {
        Ok(self.closed_months()?.into_iter().find(|c| c.month == month))
    }

    /// Records the close of a month; `false` (and nothing written) when it was closed already.
    pub fn close_month(&mut self, closed: &ClosedMonth) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "INSERT INTO closed_months
                     (month, closed_at, user, host, journal_digest, journal_lines, totals)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (month) DO NOTHING",
                params![
                    closed.month,
                    closed.closed_at,
                    closed.user,
                    closed.host,
                    closed.journal_digest,
                    closed.journal_lines,
                    closed.totals
                ],
            )
            .map_err(sqlerr(&self.path))?;
        Ok(n == 1)
    }
}

fn closed_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClosedMonth> {
    Ok(ClosedMonth {
        month: r.get("month")?,
        closed_at: r.get("closed_at")?,
        user: r.get("user")?,
        host: r.get("host")?,
        journal_digest: r.get("journal_digest")?,
        journal_lines: r.get("journal_lines")?,
        totals: r.get("totals")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_month_after_december_is_january() {
        assert_eq!(
            next_month("2026-12").map(|d| d.to_string()).as_deref(),
            Some("2027-01-01")
        );
        assert_eq!(
            next_month("2026-11").map(|d| d.to_string()).as_deref(),
            Some("2026-12-01")
        );
        assert_eq!(next_month("nope"), None);
    }
}
