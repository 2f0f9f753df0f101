//! The life of each paid row's payout link after its order COMPLETED (migration 010): its
//! status as the service last reported it (ACTIVE, CLAIMED, CANCELLED, EXPIRED), since when,
//! when the link expires, and when it was read. Written when the order completes
//! (`record_at_completion`, beside the row's own transition) and by `paybatch payouts`
//! ([`Ledger::record_payout_reads`]); each change of status is an event (subject `payout`), so
//! the history of a link is kept. `paybatch retry --expired` ([`Ledger::reissue_expired`]) keeps
//! an expired attempt's outcome here and makes its row payable again at the next attempt.

use std::fmt;

use rusqlite::{OptionalExtension, Transaction, params};
use rust_decimal::Decimal;

use super::columns::{amount, stored_row, stored_row_in};
use super::events::event;
use super::{Ledger, Result, begin, commit, exec, now, sqlerr};
use crate::row::RowContent;

/// A payout link's status as the service reports it (`payout.status`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PayoutStatus {
    /// Live, not claimed yet.
    Active,
    Claimed,
    Cancelled,
    /// The link itself expired (accounts configured with link expiry only).
    Expired,
    /// A status the published contract does not list, kept as the service sent it.
    Other(String),
}

impl PayoutStatus {
    /// The four published statuses, in the order they are shown.
    pub const PUBLISHED: [PayoutStatus; 4] = [
        PayoutStatus::Active,
        PayoutStatus::Claimed,
        PayoutStatus::Cancelled,
        PayoutStatus::Expired,
    ];

    pub fn parse(text: &str) -> Self {
        match text {
            "ACTIVE" => PayoutStatus::Active,
            "CLAIMED" => PayoutStatus::Claimed,
            "CANCELLED" => PayoutStatus::Cancelled,
            "EXPIRED" => PayoutStatus::Expired,
            other => PayoutStatus::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            PayoutStatus::Active => "ACTIVE",
            PayoutStatus::Claimed => "CLAIMED",
            PayoutStatus::Cancelled => "CANCELLED",
            PayoutStatus::Expired => "EXPIRED",
            PayoutStatus::Other(s) => s,
        }
    }

    /// CLAIMED, CANCELLED and EXPIRED never change again: an order whose links are all final is
    /// not read again. ACTIVE, and a status paybatch does not know, are read again.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            PayoutStatus::Claimed | PayoutStatus::Cancelled | PayoutStatus::Expired
        )
    }
}

impl fmt::Display for PayoutStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the service said of one item's payout link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutLife {
    pub status: PayoutStatus,
    /// The service's `status_updated_at`, as sent.
    pub since: Option<String>,
    /// The link's `expiry_date`, as sent; `None` when the account's links do not expire.
    pub expires_at: Option<String>,
}

/// A completed row followed by `paybatch payouts`: what the ledger knows of its item and link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedRow {
    pub row_id: i64,
    pub attempt: i64,
    pub reference: String,
    pub item_index: Option<i64>,
    pub item_id: Option<String>,
    pub payout_url: Option<String>,
    /// The last status known, `None` before a first read.
    pub status: Option<PayoutStatus>,
}

/// A COMPLETED order of a batch with at least one link not final (or never read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedOrder {
    pub order_id: i64,
    pub service_order_id: String,
}

/// A row of a batch with its link's last known life, for the summary and the lists of
/// What a COMPLETED row whose link is not claimed cost ([`Ledger::visit_unclaimed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unclaimed {
    pub status: Option<PayoutStatus>,
    pub currency: Option<String>,
    pub amount: Option<Decimal>,
    /// When the row was paid.
    pub completed_at: Option<String>,
}

/// `paybatch payouts` ([`Ledger::visit_payout_rows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutRow {
    pub row_id: i64,
    pub reference: String,
    pub attempt: i64,
    /// The input cells.
    pub fields: Vec<String>,
    /// The validated row, as stored.
    pub spec: Option<RowContent>,
    pub price: Option<Decimal>,
    pub payout_url: Option<String>,
    pub service_order_id: Option<String>,
    pub status: Option<PayoutStatus>,
    pub since: Option<String>,
    pub expires_at: Option<String>,
    /// What left the paying balance for the row, in which currency, and when its order became
    /// final (the payment).
    pub debited_amount: Option<Decimal>,
    pub debited_currency: Option<String>,
    pub completed_at: Option<String>,
}

/// The link of an earlier attempt of a row, reissued by `paybatch retry --expired`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReissuedAttempt {
    pub attempt: i64,
    pub service_order_id: Option<String>,
    pub status: PayoutStatus,
    pub expires_at: Option<String>,
    pub reissued_at: String,
}

/// The last known life of a row's current attempt and the attempt it reissued, for the
/// result file and the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayoutNote {
    pub status: Option<PayoutStatus>,
    pub since: Option<String>,
    pub expires_at: Option<String>,
    /// The latest earlier attempt reissued because its link expired.
    pub reissue_of: Option<ReissuedAttempt>,
    /// What each earlier attempt reissued since charged: (currency, amount), in attempt order.
    pub earlier_charges: Vec<(String, Decimal)>,
}

/// An earlier attempt of a row that was paid, then reissued because its link expired: the
/// row as that attempt left it (state COMPLETED; its item, link, price, charge and completion
/// as kept in `payouts`; its cells and recorded content), and the order that paid it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierCharge {
    pub row: super::RowRecord,
    pub order: Option<super::OrderLabel>,
}

/// Records, inside the transaction that completes a row, the life its order's answer gave its
/// link.
pub(super) fn record_at_completion(
    tx: &Transaction<'_>,
    batch_id: i64,
    row_id: i64,
    attempt: i64,
    order_id: i64,
    life: &PayoutLife,
) -> rusqlite::Result<()> {
    let read_at = now();
    tx.prepare_cached(
        "INSERT INTO payouts (row_id, attempt, batch_id, order_id, status, since, expires_at,
                              read_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (row_id, attempt) DO UPDATE SET
             order_id = excluded.order_id, status = excluded.status, since = excluded.since,
             expires_at = excluded.expires_at, read_at = excluded.read_at",
    )?
    .execute(params![
        row_id,
        attempt,
        batch_id,
        order_id,
        life.status.as_str(),
        life.since,
        life.expires_at,
        read_at
    ])?;
    Ok(())
}

impl Ledger {
    /// The batch's COMPLETED orders with at least one COMPLETED row whose link is not final or
    /// was never read: the orders `paybatch payouts` reads, each once, oldest first.
    pub fn orders_to_follow(&self, batch_id: i64) -> Result<Vec<FollowedOrder>> {
        self.select_all(
            "SELECT o.id, o.service_order_id FROM orders o
             WHERE o.batch_id = ?1 AND o.state = 'COMPLETED' AND o.service_order_id IS NOT NULL
               AND EXISTS (
                 SELECT 1 FROM rows r
                 LEFT JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
                 WHERE r.order_id = o.id AND r.state = 'COMPLETED'
                   AND (p.status IS NULL OR p.status NOT IN ('CLAIMED', 'CANCELLED', 'EXPIRED')))
             ORDER BY o.id",
            params![batch_id],
            |r| {
                Ok(FollowedOrder {
                    order_id: r.get("id")?,
                    service_order_id: r.get("service_order_id")?,
                })
            },
        )
    }

    /// The COMPLETED rows of an order, in item order, with their link's last known status.
    pub fn rows_to_follow(&self, order_id: i64) -> Result<Vec<FollowedRow>> {
        self.select_all(
            "SELECT r.id, r.attempt, r.reference, r.item_index, r.item_id, r.payout_url, p.status
             FROM rows r LEFT JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             WHERE r.order_id = ?1 AND r.state = 'COMPLETED'
             ORDER BY r.item_index, r.id",
            params![order_id],
            |r| {
                Ok(FollowedRow {
                    row_id: r.get("id")?,
                    attempt: r.get("attempt")?,
                    reference: r.get("reference")?,
                    item_index: r.get("item_index")?,
                    item_id: r.get("item_id")?,
                    payout_url: r.get("payout_url")?,
                    status: r
                        .get::<_, Option<String>>("status")?
                        .map(|s| PayoutStatus::parse(&s)),
                })
            },
        )
    }

    /// Records what one read of order `order_id` said of its rows' links, in one transaction:
    /// each status, since when and expiry; a status that changed is an event. Returns how many
    /// links changed status.
    pub fn record_payout_reads(
        &mut self,
        batch_id: i64,
        order_id: i64,
        reads: &[(FollowedRow, PayoutLife)],
    ) -> Result<usize> {
        let tx = begin(&mut self.conn, &self.path)?;
        let read_at = now();
        let mut changed = 0;
        for (row, life) in reads {
            exec(
                &tx,
                &self.path,
                "INSERT INTO payouts (row_id, attempt, batch_id, order_id, status, since,
                                      expires_at, read_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (row_id, attempt) DO UPDATE SET
                     status = excluded.status, since = excluded.since,
                     expires_at = excluded.expires_at, read_at = excluded.read_at",
                params![
                    row.row_id,
                    row.attempt,
                    batch_id,
                    order_id,
                    life.status.as_str(),
                    life.since,
                    life.expires_at,
                    read_at
                ],
            )?;
            if row.status.as_ref() != Some(&life.status) {
                changed += 1;
                let cause = match &life.since {
                    Some(since) => format!(
                        "payout link read from the service: {} since {since}",
                        life.status
                    ),
                    None => format!("payout link read from the service: {}", life.status),
                };
                event(
                    &tx,
                    batch_id,
                    "payout",
                    row.row_id,
                    row.status.as_ref().map(PayoutStatus::as_str),
                    Some(life.status.as_str()),
                    &cause,
                )
                .map_err(sqlerr(&self.path))?;
            }
        }
        commit(tx, &self.path)?;
        Ok(changed)
    }

    /// Notes that `paybatch payouts` read the batch's orders at `at`.
    pub fn mark_payouts_read(&mut self, batch_id: i64, at: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE batches SET payouts_read_at = ?2 WHERE id = ?1",
                params![batch_id, at],
            )
            .map_err(sqlerr(&self.path))?;
        Ok(())
    }

    /// When `paybatch payouts` last read the batch's orders.
    pub fn payouts_read_at(&self, batch_id: i64) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT payouts_read_at FROM batches WHERE id = ?1",
                params![batch_id],
                |r| r.get("payouts_read_at"),
            )
            .optional()
            .map(Option::flatten)
            .map_err(sqlerr(&self.path))
    }

    /// The batch's COMPLETED rows per last known payout status (`None`: never read), from the
    /// index.
    pub fn payout_counts(&self, batch_id: i64) -> Result<Vec<(Option<PayoutStatus>, i64)>> {
        self.select_all(
            "SELECT p.status AS status, COUNT(*) AS rows_counted FROM rows r
             LEFT JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             WHERE r.batch_id = ?1 AND r.state = 'COMPLETED'
             GROUP BY p.status ORDER BY p.status",
            params![batch_id],
            |r| {
                Ok((
                    r.get::<_, Option<String>>("status")?
                        .map(|s| PayoutStatus::parse(&s)),
                    r.get("rows_counted")?,
                ))
            },
        )
    }

    /// How many rows of the batch had an expired link reissued (`retry --expired`), counted
    /// once each.
    pub fn reissued_rows(&self, batch_id: i64) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(DISTINCT row_id) AS reissued FROM payouts
                 WHERE batch_id = ?1 AND reissued_at IS NOT NULL",
                params![batch_id],
                |r| r.get("reissued"),
            )
            .map_err(sqlerr(&self.path))
    }

    /// Visits what each COMPLETED row of the batch whose link is ACTIVE, EXPIRED or CANCELLED
    /// was charged, in no order: what the value not claimed is counted from.
    pub fn visit_unclaimed(&self, batch_id: i64, mut visit: impl FnMut(&Unclaimed)) -> Result<()> {
        let err = sqlerr(&self.path);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT p.status, r.debited_currency, r.debited_amount, r.completed_at
                   FROM rows r
                   JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
                  WHERE r.batch_id = ?1 AND r.state = 'COMPLETED'
                    AND p.status IN ('ACTIVE', 'EXPIRED', 'CANCELLED')",
            )
            .map_err(&err)?;
        let mut cursor = stmt.query([batch_id]).map_err(&err)?;
        while let Some(r) = cursor.next().map_err(&err)? {
            let row = Unclaimed {
                status: r
                    .get::<_, Option<String>>("status")
                    .map_err(&err)?
                    .map(|s| PayoutStatus::parse(&s)),
                currency: r.get("debited_currency").map_err(&err)?,
                amount: amount(r, "debited_amount").map_err(&err)?,
                completed_at: r.get("completed_at").map_err(&err)?,
            };
            visit(&row);
        }
        Ok(())
    }

    /// Visits the batch's COMPLETED rows in input order, each with its link's last known life;
    /// one row in memory at a time. With `cells`, a row's input cells are read too.
    pub fn visit_payout_rows<E: From<super::LedgerError>>(
        &self,
        batch_id: i64,
        cells: bool,
        mut visit: impl FnMut(PayoutRow) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let fields = if cells { "r.fields" } else { "'[]'" };
        let sql = format!(
            "SELECT r.id, r.batch_id, r.line, r.reference, r.attempt, {fields} AS fields, r.spec,
                    r.price, r.payout_url, o.service_order_id, p.status, p.since, p.expires_at,
                    r.debited_amount, r.debited_currency, r.completed_at
             FROM rows r
             LEFT JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             LEFT JOIN orders o ON o.id = r.order_id
             WHERE r.batch_id = ?1 AND r.state = 'COMPLETED'
             ORDER BY r.position, r.id"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let row = (|| -> rusqlite::Result<PayoutRow> {
                let fields: String = r.get("fields")?;
                Ok(PayoutRow {
                    row_id: r.get("id")?,
                    reference: r.get("reference")?,
                    attempt: r.get("attempt")?,
                    fields: serde_json::from_str(&fields).unwrap_or_default(),
                    spec: stored_row_in(r, "spec", super::RowState::Completed)?,
                    price: amount(r, "price")?,
                    payout_url: r.get("payout_url")?,
                    service_order_id: r.get("service_order_id")?,
                    status: r
                        .get::<_, Option<String>>("status")?
                        .map(|s| PayoutStatus::parse(&s)),
                    since: r.get("since")?,
                    expires_at: r.get("expires_at")?,
                    debited_amount: amount(r, "debited_amount")?,
                    debited_currency: r.get("debited_currency")?,
                    completed_at: r.get("completed_at")?,
                })
            })()
            .map_err(self.read_error())?;
            visit(row)?;
        }
        Ok(())
    }

    /// Visits the attempts of the batch's rows that were paid and then reissued because their
    /// link expired (what they charged is kept in `payouts`), in row and attempt order. An
    /// attempt's `completed_at` is when its order became final.
    pub fn visit_earlier_charges<E: From<super::LedgerError>>(
        &self,
        batch_id: i64,
        mut visit: impl FnMut(EarlierCharge) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT r.id, r.batch_id, r.reference, r.position, r.line, r.fields, r.spec,
                        r.content_hash, r.merged, p.attempt, p.item_id, p.payout_url, p.price,
                        COALESCE(o.finished_at, p.completed_at) AS completed_at,
                        p.debited_amount, p.debited_currency,
                        o.service_order_id, o.payment_method, o.payment_currency, o.card_id
                 FROM payouts p JOIN rows r ON r.id = p.row_id
                 LEFT JOIN orders o ON o.id = p.order_id
                 WHERE p.batch_id = ?1 AND p.reissued_at IS NOT NULL
                 ORDER BY r.position, r.id, p.attempt",
            )
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([batch_id]).map_err(sqlerr(&self.path))?;
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let earlier = (|| -> rusqlite::Result<EarlierCharge> {
                let fields: String = r.get("fields")?;
                let payment_method: Option<crate::api::models::PaymentMethodType> =
                    r.get("payment_method")?;
                let payment_currency: Option<String> = r.get("payment_currency")?;
                let order = match (payment_method, payment_currency) {
                    (Some(payment_method), Some(payment_currency)) => Some(super::OrderLabel {
                        service_order_id: r.get("service_order_id")?,
                        payment_method,
                        payment_currency,
                        card_id: r.get("card_id")?,
                    }),
                    _ => None,
                };
                Ok(EarlierCharge {
                    row: super::RowRecord {
                        id: r.get("id")?,
                        reference: r.get("reference")?,
                        position: r.get("position")?,
                        line: r.get("line")?,
                        fields: serde_json::from_str(&fields).unwrap_or_default(),
                        spec: stored_row(r, "spec")?,
                        content_hash: r.get("content_hash")?,
                        state: super::RowState::Completed,
                        attempt: r.get("attempt")?,
                        order_id: None,
                        item_index: None,
                        item_id: r.get("item_id")?,
                        payout_url: r.get("payout_url")?,
                        price: amount(r, "price")?,
                        discount: None,
                        error_type: None,
                        error_message: None,
                        completed_at: r.get("completed_at")?,
                        debited_amount: amount(r, "debited_amount")?,
                        debited_currency: r.get("debited_currency")?,
                        merged: r.get("merged")?,
                    },
                    order,
                })
            })()
            .map_err(self.read_error())?;
            visit(earlier)?;
        }
        Ok(())
    }

    /// The last known life of row `row_id`'s attempt `attempt`, and the latest attempt of it
    /// reissued because its link expired, read on its own: the tests' yardstick for the note
    /// [`Ledger::visit_result_rows`] reads with each row (its only reader outside the tests).
    #[cfg(test)]
    pub fn payout_note(&self, row_id: i64, attempt: i64) -> Result<PayoutNote> {
        let current = self
            .conn
            .prepare_cached(
                "SELECT status, since, expires_at FROM payouts WHERE row_id = ?1 AND attempt = ?2",
            )
            .and_then(|mut st| {
                st.query_row(params![row_id, attempt], |r| {
                    Ok(PayoutLife {
                        status: PayoutStatus::parse(&r.get::<_, String>("status")?),
                        since: r.get("since")?,
                        expires_at: r.get("expires_at")?,
                    })
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))?;
        self.payout_note_with(row_id, attempt, current)
    }

    /// The note of an attempt whose link's last known life (`current`, its
    /// line of `payouts`) was read with its row.
    pub(super) fn payout_note_with(
        &self,
        row_id: i64,
        attempt: i64,
        current: Option<PayoutLife>,
    ) -> Result<PayoutNote> {
        // A first attempt has no earlier one to have been reissued.
        let reissue_of = if attempt <= 1 {
            None
        } else {
            self.reissue_of(row_id, attempt)?
        };
        let (status, since, expires_at) = match current {
            Some(life) => (Some(life.status), life.since, life.expires_at),
            None => (None, None, None),
        };
        let earlier_charges = match reissue_of {
            Some(_) => self.select_all(
                "SELECT debited_currency, debited_amount FROM payouts
                 WHERE row_id = ?1 AND attempt < ?2 AND reissued_at IS NOT NULL
                   AND debited_amount IS NOT NULL AND debited_currency IS NOT NULL
                 ORDER BY attempt",
                params![row_id, attempt],
                |r| {
                    Ok((
                        r.get("debited_currency")?,
                        r.get::<_, super::Amount>("debited_amount")?.0,
                    ))
                },
            )?,
            None => Vec::new(),
        };
        Ok(PayoutNote {
            status,
            since,
            expires_at,
            reissue_of,
            earlier_charges,
        })
    }

    /// The latest attempt of row `row_id` before `attempt` reissued because its link expired.
    fn reissue_of(&self, row_id: i64, attempt: i64) -> Result<Option<ReissuedAttempt>> {
        self.conn
            .prepare_cached(
                "SELECT p.attempt, o.service_order_id, p.status, p.expires_at, p.reissued_at
                 FROM payouts p LEFT JOIN orders o ON o.id = p.order_id
                 WHERE p.row_id = ?1 AND p.attempt < ?2 AND p.reissued_at IS NOT NULL
                 ORDER BY p.attempt DESC LIMIT 1",
            )
            .and_then(|mut st| {
                st.query_row(params![row_id, attempt], |r| {
                    Ok(ReissuedAttempt {
                        attempt: r.get("attempt")?,
                        service_order_id: r.get("service_order_id")?,
                        status: PayoutStatus::parse(&r.get::<_, String>("status")?),
                        expires_at: r.get("expires_at")?,
                        reissued_at: r.get("reissued_at")?,
                    })
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// The batch's COMPLETED rows whose link was last read EXPIRED and not reissued yet, each
    /// with its order, in input order: what `paybatch retry --expired` reads once more before it
    /// reissues any.
    pub fn expired_rows(&self, batch_id: i64) -> Result<Vec<(String, FollowedOrder)>> {
        self.select_all(
            "SELECT r.reference, o.id, o.service_order_id FROM rows r
             JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             JOIN orders o ON o.id = r.order_id
             WHERE r.batch_id = ?1 AND r.state = 'COMPLETED' AND p.status = 'EXPIRED'
               AND p.reissued_at IS NULL AND o.service_order_id IS NOT NULL
             ORDER BY r.position, r.id",
            params![batch_id],
            |r| {
                Ok((
                    r.get("reference")?,
                    FollowedOrder {
                        order_id: r.get("id")?,
                        service_order_id: r.get("service_order_id")?,
                    },
                ))
            },
        )
    }

    /// The orders of the batch's rows whose link was read EXPIRED and then reissued: (reference,
    /// service order id). Reconciliation lists them as reissued, not as a second live order.
    pub fn reissued_orders(&self, batch_id: i64) -> Result<Vec<(String, String)>> {
        self.select_all(
            "SELECT r.reference AS reference, o.service_order_id AS service_order_id FROM payouts p
             JOIN rows r ON r.id = p.row_id
             JOIN orders o ON o.id = p.order_id
             WHERE p.batch_id = ?1 AND p.reissued_at IS NOT NULL AND p.status = 'EXPIRED'
               AND o.service_order_id IS NOT NULL
             ORDER BY r.position, p.attempt",
            params![batch_id],
            |r| Ok((r.get("reference")?, r.get("service_order_id")?)),
        )
    }

    /// `paybatch retry --expired`: the batch's COMPLETED rows whose link was last read EXPIRED
    /// (only `references`, when given) become PENDING at the next attempt (hence a new
    /// idempotency key), in one transaction; each attempt's outcome (order, item, link, price,
    /// what was charged) stays in `payouts`, marked reissued. An ACTIVE, CLAIMED or CANCELLED
    /// link, or one never read, is never reissued. Returns the references made payable.
    pub fn reissue_expired(
        &mut self,
        batch_id: i64,
        references: Option<&[String]>,
    ) -> Result<Vec<String>> {
        let candidates: Vec<(i64, String, i64, Option<String>)> = self
            .select_all(
                "SELECT r.id AS id, r.reference AS reference, r.attempt AS attempt,
                        p.expires_at AS expires_at
                 FROM rows r
                 JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
                 WHERE r.batch_id = ?1 AND r.state = 'COMPLETED' AND p.status = 'EXPIRED'
                   AND p.reissued_at IS NULL
                 ORDER BY r.position, r.id",
                params![batch_id],
                |r| {
                    Ok((
                        r.get("id")?,
                        r.get("reference")?,
                        r.get("attempt")?,
                        r.get("expires_at")?,
                    ))
                },
            )?
            .into_iter()
            .filter(|(_, reference, _, _)| references.is_none_or(|refs| refs.contains(reference)))
            .collect();
        let tx = begin(&mut self.conn, &self.path)?;
        let at = now();
        let mut out = Vec::new();
        for (id, reference, attempt, expires_at) in candidates {
            exec(
                &tx,
                &self.path,
                "UPDATE payouts SET reissued_at = ?3,
                        item_id = (SELECT item_id FROM rows WHERE id = ?1),
                        payout_url = (SELECT payout_url FROM rows WHERE id = ?1),
                        price = (SELECT price FROM rows WHERE id = ?1),
                        debited_amount = (SELECT debited_amount FROM rows WHERE id = ?1),
                        debited_currency = (SELECT debited_currency FROM rows WHERE id = ?1),
                        completed_at = (SELECT completed_at FROM rows WHERE id = ?1),
                        error_type = (SELECT error_type FROM rows WHERE id = ?1)
                 WHERE row_id = ?1 AND attempt = ?2",
                params![id, attempt, at],
            )?;
            exec(
                &tx,
                &self.path,
                "UPDATE rows SET state = 'PENDING', attempt = attempt + 1, order_id = NULL,
                        item_index = NULL, item_id = NULL, payout_url = NULL, price = NULL,
                        discount = NULL, error_type = NULL, error_message = NULL,
                        completed_at = NULL, debited_amount = NULL, debited_currency = NULL
                 WHERE id = ?1",
                params![id],
            )?;
            let expired = expires_at
                .map(|t| format!(" (expired {t})"))
                .unwrap_or_default();
            event(
                &tx,
                batch_id,
                "row",
                id,
                Some("COMPLETED"),
                Some("PENDING"),
                &format!(
                    "reissue requested: the payout link of attempt {attempt} expired{expired}; attempt {}",
                    attempt + 1
                ),
            )
            .map_err(sqlerr(&self.path))?;
            out.push(reference);
        }
        commit(tx, &self.path)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger with one batch and two completed orders: order 1 holds, order 2
    /// holds R-3; each row charged 9.50 USD.
    fn ledger() -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().expect("temp dir");
        let ledger = Ledger::open(&dir.path().join("ledger.db")).expect("ledger");
        ledger
            .conn
            .execute_batch(
                &"INSERT INTO batches (id, name, input_path, input_hash, headers, environment,
                                      base_url, key_fingerprint, created_at, updated_at)
                 VALUES (1, 'nov', 'nov.csv', '', '[]', 'sim', 'embedded-simulator', '', '', '');
                 INSERT INTO orders (id, batch_id, idempotency_key, body, mode, payment_currency,
                                     state, service_order_id, created_at)
                 VALUES (1, 1, 'k1', x'', 'async', 'USD', 'COMPLETED', 'ORD-1', ''),
                        (2, 1, 'k2', x'', 'async', 'USD', 'COMPLETED', 'ORD-2', '');
                 INSERT INTO rows (id, batch_id, reference, position, line, fields, spec,
                                   content_hash, state, order_id, item_index, item_id,
                                   payout_url, price, debited_amount, debited_currency)
                 VALUES (1, 1, 'R-1', 0, 2, '[]', '{SPEC}', '', 'COMPLETED', 1, 0, 'i1',
                         'https://pay.example/1', '9.50', '9.50', 'USD'),
                        (2, 1, 'R-2', 1, 3, '[]', '{SPEC}', '', 'COMPLETED', 1, 1, 'i2',
                         'https://pay.example/2', '9.50', '9.50', 'USD'),
                        (3, 1, 'R-3', 2, 4, '[]', '{SPEC}', '', 'COMPLETED', 2, 0, 'i3',
                         'https://pay.example/3', '9.50', '9.50', 'USD');"
                    .replace("{SPEC}", &crate::row::RowContent::sample().to_json()),
            )
            .expect("rows");
        (dir, ledger)
    }

    fn life(status: PayoutStatus) -> PayoutLife {
        PayoutLife {
            status,
            since: Some("2026-11-20T10:00:00Z".into()),
            expires_at: Some("2026-12-20T10:00:00Z".into()),
        }
    }

    fn read(ledger: &mut Ledger, order_id: i64, statuses: &[PayoutStatus]) -> usize {
        let rows = ledger.rows_to_follow(order_id).expect("rows");
        let reads: Vec<(FollowedRow, PayoutLife)> = rows
            .into_iter()
            .zip(statuses)
            .map(|(r, s)| (r, life(s.clone())))
            .collect();
        ledger
            .record_payout_reads(1, order_id, &reads)
            .expect("recorded")
    }

    fn followed(ledger: &Ledger) -> Vec<String> {
        ledger
            .orders_to_follow(1)
            .expect("orders")
            .into_iter()
            .map(|o| o.service_order_id)
            .collect()
    }

    #[test]
    fn an_order_is_followed_until_every_link_is_final_and_each_change_is_an_event() {
        let (_dir, mut ledger) = ledger();
        assert_eq!(
            followed(&ledger),
            ["ORD-1", "ORD-2"],
            "never read: followed"
        );
        let changed = read(
            &mut ledger,
            1,
            &[PayoutStatus::Claimed, PayoutStatus::Active],
        );
        assert_eq!(changed, 2);
        assert_eq!(
            followed(&ledger),
            ["ORD-1", "ORD-2"],
            "one link still ACTIVE"
        );
        // The same status again is no change, and no event.
        let changed = read(
            &mut ledger,
            1,
            &[PayoutStatus::Claimed, PayoutStatus::Active],
        );
        assert_eq!(changed, 0);
        read(
            &mut ledger,
            1,
            &[PayoutStatus::Claimed, PayoutStatus::Expired],
        );
        read(&mut ledger, 2, &[PayoutStatus::Cancelled]);
        assert!(
            followed(&ledger).is_empty(),
            "every link final: nothing to read"
        );
        let history: Vec<(Option<String>, Option<String>)> = ledger
            .events(1, 100)
            .expect("events")
            .into_iter()
            .filter(|e| e.subject == "payout" && e.subject_id == 2)
            .map(|e| (e.from_state, e.to_state))
            .collect();
        assert_eq!(
            history,
            [
                (Some("ACTIVE".into()), Some("EXPIRED".into())),
                (None, Some("ACTIVE".into())),
            ],
            "the history of R-2's link, newest first"
        );
        let counts = ledger.payout_counts(1).expect("counts");
        assert_eq!(
            counts,
            [
                (Some(PayoutStatus::Cancelled), 1),
                (Some(PayoutStatus::Claimed), 1),
                (Some(PayoutStatus::Expired), 1),
            ]
        );
    }

    #[test]
    fn only_expired_links_are_reissued_and_the_expired_attempt_is_kept_and_counted() {
        let (_dir, mut ledger) = ledger();
        read(
            &mut ledger,
            1,
            &[PayoutStatus::Expired, PayoutStatus::Active],
        );
        read(&mut ledger, 2, &[PayoutStatus::Claimed]);
        let expired: Vec<(String, String)> = ledger
            .expired_rows(1)
            .expect("expired")
            .into_iter()
            .map(|(r, o)| (r, o.service_order_id))
            .collect();
        assert_eq!(expired, [("R-1".to_string(), "ORD-1".to_string())]);
        let reissued = ledger.reissue_expired(1, None).expect("reissued");
        assert_eq!(reissued, ["R-1"], "never an ACTIVE or CLAIMED link");
        let r1 = ledger
            .query_rows("WHERE id = 1", [])
            .expect("row")
            .remove(0);
        assert_eq!((r1.state, r1.attempt), (super::super::RowState::Pending, 2));
        assert_eq!(
            (r1.order_id, r1.payout_url, r1.debited_amount),
            (None, None, None)
        );
        // What left the balance still counts the expired attempt.
        let debited: Vec<Decimal> = ledger
            .debited_amounts(1)
            .expect("debited")
            .into_iter()
            .map(|(_, _, amount)| amount)
            .collect();
        assert_eq!(
            debited.len(),
            3,
            "R-2, R-3 and R-1's first attempt: {debited:?}"
        );
        // Summed per way of paying as they are read: the same amounts.
        let mut folded: Vec<(Option<String>, String, Decimal)> = Vec::new();
        for (card, currency, amount) in ledger.debited_amounts(1).expect("debited") {
            match folded
                .iter_mut()
                .find(|(c, cur, _)| *c == card && *cur == currency)
            {
                Some(sum) => sum.2 += amount,
                None => folded.push((card, currency, amount)),
            }
        }
        folded.sort();
        assert_eq!(ledger.debited_sums(1).expect("sums"), folded);
        assert_eq!(
            folded.iter().map(|(_, _, a)| *a).sum::<Decimal>(),
            debited.iter().copied().sum::<Decimal>()
        );
        // The new attempt names the one it reissued.
        let note = ledger.payout_note(1, 2).expect("note");
        assert_eq!(note.status, None, "the new attempt is not paid yet");
        let earlier = note.reissue_of.expect("reissue of");
        assert_eq!(
            (
                earlier.attempt,
                earlier.service_order_id.as_deref(),
                earlier.status
            ),
            (1, Some("ORD-1"), PayoutStatus::Expired)
        );
        // Nothing more to reissue; a reference filter is honoured.
        assert!(ledger.reissue_expired(1, None).expect("again").is_empty());
        assert_eq!(ledger.reissued_rows(1).expect("count"), 1);
        // The expired attempt's order is known as reissued, and is no longer to be reissued.
        assert_eq!(
            ledger.reissued_orders(1).expect("reissued orders"),
            [("R-1".to_string(), "ORD-1".to_string())]
        );
        assert!(ledger.expired_rows(1).expect("expired").is_empty());
    }

    /// The note the result file's visit brings with each row is the one [`Ledger::payout_note`]
    /// reads on its own: a COMPLETED row's link, a reissued row's earlier attempt, none for a
    /// row neither paid nor reissued.
    #[test]
    fn the_visit_of_the_result_rows_brings_each_row_the_note_of_its_link() {
        let (_dir, mut ledger) = ledger();
        read(
            &mut ledger,
            1,
            &[PayoutStatus::Expired, PayoutStatus::Active],
        );
        assert_eq!(ledger.reissue_expired(1, None).expect("reissued"), ["R-1"]);
        let mut seen = Vec::new();
        ledger
            .visit_result_rows::<super::super::LedgerError>(
                1,
                super::super::Specs::Skip,
                |row, _, note| {
                    let own = (row.state == super::super::RowState::Completed || row.attempt > 1)
                        .then(|| ledger.payout_note(row.id, row.attempt))
                        .transpose()?;
                    assert_eq!(note, own, "{}", row.reference);
                    seen.push((
                        row.reference,
                        note.as_ref().and_then(|n| n.status.clone()),
                        note.and_then(|n| n.reissue_of.map(|e| e.attempt)),
                    ));
                    Ok(())
                },
            )
            .expect("visited");
        assert_eq!(
            seen,
            [
                ("R-1".to_string(), None, Some(1)),
                ("R-2".to_string(), Some(PayoutStatus::Active), None),
                ("R-3".to_string(), None, None),
            ],
            "R-3's order was never followed"
        );
    }

    #[test]
    fn a_reference_filter_reissues_only_the_rows_named() {
        let (_dir, mut ledger) = ledger();
        read(
            &mut ledger,
            1,
            &[PayoutStatus::Expired, PayoutStatus::Expired],
        );
        let only = ledger
            .reissue_expired(1, Some(&["R-2".to_string()]))
            .expect("reissued");
        assert_eq!(only, ["R-2"]);
        assert_eq!(ledger.reissue_expired(1, None).expect("rest"), ["R-1"]);
    }

    #[test]
    fn statuses_the_contract_does_not_list_are_kept_and_followed() {
        assert!(!PayoutStatus::parse("REVOKED").is_final());
        assert_eq!(PayoutStatus::parse("REVOKED").as_str(), "REVOKED");
        for s in PayoutStatus::PUBLISHED {
            assert_eq!(PayoutStatus::parse(s.as_str()), s);
        }
        assert!(!PayoutStatus::Active.is_final());
    }
}
