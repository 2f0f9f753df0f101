//! What the service holds of paybatch's orders that this ledger did not make (another ledger's,
//! another machine's, a lost ledger's), row by row: each finished order read whole once and kept
//! for ever (a finished order never changes), and how far each service's order list has been
//! read. Every row about to be paid is checked against these rows (`batch::repeats`).

use rusqlite::{OptionalExtension, params};

use super::repeats::service_address;
use super::{Ledger, Result, begin, commit, exec, sqlerr};

/// A finished order of paybatch's at the service that this ledger did not make, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnedOrder {
    pub service_order_id: String,
    /// The idempotency key its description names (none in the older form).
    pub key: Option<String>,
    /// The batch as its metadata names it ([`crate::batch::order_body::batch_tag`] form), or
    /// as its description does when it has no metadata; none for an order that is not
    /// paybatch's (kept so that it is not read again).
    pub batch_tag: Option<String>,
    pub status: String,
    /// The service's `created_at`.
    pub created_at: Option<String>,
    /// Its rows, in item order: (reference, attempt when the order says).
    pub rows: Vec<(String, Option<i64>)>,
    /// Whether `rows` are all of its rows (its metadata named them), or only the first that its
    /// description names.
    pub rows_whole: bool,
}

/// A row of an order at the service that this ledger did not make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRow {
    pub service_order_id: String,
    pub key: Option<String>,
    pub batch_tag: Option<String>,
    pub created_at: Option<String>,
    /// When this ledger learned of it (this machine's clock).
    pub read_at: String,
    pub reference: String,
    pub attempt: Option<i64>,
    /// Whether its order's rows are all known (its metadata named them), or only its first.
    pub rows_whole: bool,
}

/// How far a service's order list has been read ([`Ledger::service_read_mark`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMark {
    /// Every order the service created up to this time (its clock) is known.
    pub read_to: String,
    /// When that read was made (this machine's clock).
    pub read_at: String,
}

/// The statement every look-up of [`ServiceRow`]s starts with: rows of orders this ledger
/// still does not know (neither by service id nor by key: an order adopted since is its own)
/// that paid something (a FAILED order paid nothing: its rows are nobody's repeat).
const SERVICE_ROWS: &str =
    "SELECT o.service_order_id, o.idempotency_key, o.batch_tag, o.created_at,
        o.read_at, r.reference, r.attempt, o.rows_whole
   FROM service_order_rows r
   JOIN service_orders o ON o.service = r.service AND o.service_order_id = r.service_order_id
  WHERE r.service = ?1 AND o.status != 'FAILED'
    AND NOT EXISTS (SELECT 1 FROM orders m WHERE m.service_order_id = o.service_order_id)
    AND (o.idempotency_key IS NULL
         OR NOT EXISTS (SELECT 1 FROM orders m WHERE m.idempotency_key = o.idempotency_key))";

fn service_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ServiceRow> {
    Ok(ServiceRow {
        service_order_id: r.get("service_order_id")?,
        key: r.get("idempotency_key")?,
        batch_tag: r.get("batch_tag")?,
        created_at: r.get("created_at")?,
        read_at: r.get("read_at")?,
        reference: r.get("reference")?,
        attempt: r.get("attempt")?,
        rows_whole: r.get("rows_whole")?,
    })
}

impl Ledger {
    /// How far the order list of the service at `base_url` has been read, if ever.
    pub fn service_read_mark(&self, base_url: &str) -> Result<Option<ReadMark>> {
        self.conn
            .prepare_cached("SELECT read_to, read_at FROM service_reads WHERE service = ?1")
            .and_then(|mut st| {
                st.query_row(params![service_address(base_url)], |r| {
                    Ok(ReadMark {
                        read_to: r.get("read_to")?,
                        read_at: r.get("read_at")?,
                    })
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// Whether the order `service_order_id` of the service at `base_url` was read whole already.
    pub fn learned_order(&self, base_url: &str, service_order_id: &str) -> Result<bool> {
        self.conn
            .prepare_cached(
                "SELECT 1 FROM service_orders WHERE service = ?1 AND service_order_id = ?2",
            )
            .and_then(|mut st| st.exists(params![service_address(base_url), service_order_id]))
            .map_err(sqlerr(&self.path))
    }

    /// Keeps orders learned from the service at `base_url` (each once: one read again is left
    /// as it was), in one transaction, durable before anything is sent on what they say.
    pub fn record_service_orders(
        &mut self,
        base_url: &str,
        learned: &[LearnedOrder],
    ) -> Result<()> {
        if learned.is_empty() {
            return Ok(());
        }
        let service = service_address(base_url);
        let at = super::now();
        let path = self.path.clone();
        let tx = begin(&mut self.conn, &path)?;
        for o in learned {
            exec(
                &tx,
                &path,
                "INSERT OR IGNORE INTO service_orders (service, service_order_id, idempotency_key,
                     batch_tag, status, created_at, read_at, rows_whole)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    service,
                    o.service_order_id,
                    o.key,
                    o.batch_tag,
                    o.status,
                    o.created_at,
                    at,
                    o.rows_whole
                ],
            )?;
            for (i, (reference, attempt)) in o.rows.iter().enumerate() {
                exec(
                    &tx,
                    &path,
                    "INSERT OR IGNORE INTO service_order_rows (service, service_order_id,
                         item_index, reference, attempt)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        service,
                        o.service_order_id,
                        i64::try_from(i).unwrap_or(i64::MAX),
                        reference,
                        attempt
                    ],
                )?;
            }
        }
        commit(tx, &path)
    }

    /// Moves the mark of how far the order list of the service at `base_url` was read to
    /// `read_to` (never back), after a read that reached a documented end with nothing left
    /// untold; `pages` and `learned` are kept for the record.
    pub fn record_read_mark(
        &mut self,
        base_url: &str,
        read_to: &str,
        pages: usize,
        learned: usize,
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = begin(&mut self.conn, &path)?;
        exec(
            &tx,
            &path,
            "INSERT INTO service_reads (service, read_to, read_at, pages, learned)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (service) DO UPDATE SET
                read_to = max(read_to, excluded.read_to), read_at = excluded.read_at,
                pages = excluded.pages, learned = excluded.learned",
            params![
                service_address(base_url),
                read_to,
                super::now(),
                i64::try_from(pages).unwrap_or(i64::MAX),
                i64::try_from(learned).unwrap_or(i64::MAX)
            ],
        )?;
        commit(tx, &path)
    }

    /// The orders at the service at `base_url` that this ledger does not know, whose batch is
    /// `batch_tag`, and that paid something: another ledger's run of the batch. FAILED orders
    /// are left out (nothing was paid). An attempt number says nothing across ledgers: an
    /// order of another ledger at an attempt lower than this ledger's is not history here.
    pub fn service_orders_of_batch(
        &self,
        base_url: &str,
        batch_tag: &str,
    ) -> Result<Vec<(String, Option<String>)>> {
        self.select_all(
            "SELECT o.service_order_id, o.created_at FROM service_orders o
              WHERE o.service = ?1 AND o.batch_tag = ?2 AND o.status != 'FAILED'
                AND NOT EXISTS (SELECT 1 FROM orders m WHERE m.service_order_id = o.service_order_id)
                AND (o.idempotency_key IS NULL
                     OR NOT EXISTS (SELECT 1 FROM orders m WHERE m.idempotency_key = o.idempotency_key))
              ORDER BY o.created_at, o.service_order_id",
            params![service_address(base_url), batch_tag],
            |r| Ok((r.get("service_order_id")?, r.get("created_at")?)),
        )
    }

    /// The rows with `reference` of the orders at the service at `base_url` that this ledger
    /// does not know, oldest first.
    pub fn service_rows(&self, base_url: &str, reference: &str) -> Result<Vec<ServiceRow>> {
        self.select_all(
            &format!("{SERVICE_ROWS} AND r.reference = ?2 ORDER BY o.created_at"),
            params![service_address(base_url), reference],
            service_row,
        )
    }

    /// Visits every row of the orders at the service at `base_url` that this ledger does not
    /// know, order by order (for what a file's rows are looked up in).
    pub fn visit_service_rows(
        &self,
        base_url: &str,
        mut visit: impl FnMut(&ServiceRow),
    ) -> Result<()> {
        let err = sqlerr(&self.path);
        // The orders this ledger does not know are told once each (not once a row), and their
        // rows read in the order of the table's key: nothing is sorted in memory.
        let mut st = self
            .conn
            .prepare_cached(
                "WITH unknown AS MATERIALIZED (
                   SELECT o.service, o.service_order_id, o.idempotency_key, o.batch_tag,
                          o.created_at, o.read_at, o.rows_whole
                     FROM service_orders o
                    WHERE o.service = ?1 AND o.status != 'FAILED'
                      AND NOT EXISTS (SELECT 1 FROM orders m
                                       WHERE m.service_order_id = o.service_order_id)
                      AND (o.idempotency_key IS NULL
                           OR NOT EXISTS (SELECT 1 FROM orders m
                                           WHERE m.idempotency_key = o.idempotency_key)))
                 SELECT u.service_order_id, u.idempotency_key, u.batch_tag, u.created_at,
                        u.read_at, r.reference, r.attempt, u.rows_whole
                   FROM unknown u
                   JOIN service_order_rows r
                     ON r.service = u.service AND r.service_order_id = u.service_order_id",
            )
            .map_err(&err)?;
        let mut rows = st.query(params![service_address(base_url)]).map_err(&err)?;
        while let Some(r) = rows.next().map_err(&err)? {
            visit(&service_row(r).map_err(&err)?);
        }
        Ok(())
    }

    /// How many of paybatch's orders of the service at `base_url` this ledger learned, of them
    /// those known only by their first row, and the orders whose answers named no batch and
    /// showed neither description nor metadata (whose they are cannot be told).
    pub fn service_order_counts(&self, base_url: &str) -> Result<(i64, i64, i64)> {
        self.conn
            .prepare_cached(
                "SELECT coalesce(sum(batch_tag IS NOT NULL), 0) AS tagged,
                        coalesce(sum(batch_tag IS NOT NULL AND rows_whole = 0), 0) AS tagged_part,
                        coalesce(sum(batch_tag IS NULL AND rows_whole = 0), 0) AS untagged_part
                   FROM service_orders WHERE service = ?1",
            )
            .and_then(|mut st| {
                st.query_row(params![service_address(base_url)], |r| {
                    Ok((
                        r.get("tagged")?,
                        r.get("tagged_part")?,
                        r.get("untagged_part")?,
                    ))
                })
            })
            .map_err(sqlerr(&self.path))
    }

    /// When the row `reference` of the batch was planned, while it is PLANNED in an intent not
    /// answered yet (the intent's `created_at`), and whether that intent was ever sent; `None`
    /// otherwise.
    pub fn planned_intent_of(
        &self,
        batch_id: i64,
        reference: &str,
    ) -> Result<Option<(String, bool)>> {
        self.conn
            .prepare_cached(
                "SELECT o.created_at, o.sends = 0 AND o.last_sent_at IS NULL AS never_sent
                   FROM rows r JOIN orders o ON o.id = r.order_id
                  WHERE r.batch_id = ?1 AND r.reference = ?2 AND r.state = 'PLANNED'
                    AND o.state = 'INTENT'",
            )
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| {
                    Ok((r.get("created_at")?, r.get("never_sent")?))
                })
                .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// The intent never sent that holds the row `reference` of the batch, PLANNED.
    pub fn unsent_intent_of(&self, batch_id: i64, reference: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached(
                "SELECT o.id FROM rows r JOIN orders o ON o.id = r.order_id
                  WHERE r.batch_id = ?1 AND r.reference = ?2 AND r.state = 'PLANNED'
                    AND o.state = 'INTENT' AND o.sends = 0 AND o.last_sent_at IS NULL",
            )
            .and_then(|mut st| {
                st.query_row(params![batch_id, reference], |r| r.get("id"))
                    .optional()
            })
            .map_err(sqlerr(&self.path))
    }

    /// The rows of the orders `ids` learned from the service at `base_url` that this ledger
    /// still does not know: what a read made while a run sends has just learned.
    pub fn service_rows_of(&self, base_url: &str, ids: &[String]) -> Result<Vec<ServiceRow>> {
        let mut out = Vec::new();
        for id in ids {
            out.extend(self.select_all(
                &format!("{SERVICE_ROWS} AND o.service_order_id = ?2"),
                params![service_address(base_url), id],
                service_row,
            )?);
        }
        Ok(out)
    }

    /// The recorded bodies of this ledger's intents sent without an answer (in doubt), of any
    /// batch.
    pub fn in_doubt_bodies(&self) -> Result<Vec<Vec<u8>>> {
        self.select_all(
            "SELECT body FROM orders
              WHERE state = 'INTENT' AND (sends > 0 OR last_sent_at IS NOT NULL)",
            [],
            |r| r.get("body"),
        )
    }

    /// The idempotency keys and last send times of this ledger's intents sent without an answer
    /// and not cleared by a reconciliation (`sends > 0`), of any batch.
    pub fn in_doubt_sends(&self) -> Result<Vec<(String, Option<String>)>> {
        self.select_all(
            "SELECT idempotency_key, last_sent_at FROM orders
              WHERE state = 'INTENT' AND sends > 0",
            [],
            |r| Ok((r.get("idempotency_key")?, r.get("last_sent_at")?)),
        )
    }

    /// The rows of this batch in intents not answered yet, never sent or in doubt: reference
    /// and the ledger's order id, in the order they are sent.
    pub fn rows_in_intents(&self, batch_id: i64) -> Result<Vec<(String, i64)>> {
        self.select_all(
            "SELECT r.reference, o.id FROM rows r JOIN orders o ON o.id = r.order_id
              WHERE r.batch_id = ?1 AND r.state = 'PLANNED' AND o.state = 'INTENT'
              ORDER BY o.id, r.position",
            params![batch_id],
            |r| Ok((r.get("reference")?, r.get("id")?)),
        )
    }

    /// The rows of this batch about to be sent for the first time: PLANNED in an intent never
    /// sent, with when they were planned (the intent's `created_at`).
    pub fn unsent_rows(&self, batch_id: i64) -> Result<Vec<(String, i64, String)>> {
        self.select_all(
            "SELECT r.reference, r.attempt, o.created_at FROM rows r
               JOIN orders o ON o.id = r.order_id
              WHERE r.batch_id = ?1 AND r.state = 'PLANNED' AND o.state = 'INTENT'
                AND o.sends = 0 AND o.last_sent_at IS NULL
              ORDER BY r.position",
            params![batch_id],
            |r| Ok((r.get("reference")?, r.get("attempt")?, r.get("created_at")?)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(id: &str, batch: &str, rows: &[&str]) -> LearnedOrder {
        LearnedOrder {
            service_order_id: id.into(),
            key: Some(format!("key-{id}")),
            batch_tag: Some(batch.into()),
            status: "COMPLETED".into(),
            created_at: Some("2026-11-20T10:00:00Z".into()),
            rows: rows.iter().map(|r| (r.to_string(), Some(1))).collect(),
            rows_whole: true,
        }
    }

    #[test]
    fn learned_orders_are_kept_once_and_the_mark_only_moves_forward() {
        let dir = tempfile::tempdir().expect("dir");
        let mut ledger = Ledger::open(&dir.path().join("l.db")).expect("ledger");
        let url = "http://127.0.0.1:9/v2/";
        assert_eq!(ledger.service_read_mark(url).expect("mark"), None);
        let a = learned("O-1", "nov", &["A", "B", "C"]);
        ledger
            .record_service_orders(url, std::slice::from_ref(&a))
            .expect("record");
        ledger
            .record_read_mark(url, "2026-11-20T10:00:00Z", 1, 1)
            .expect("mark");
        // Read again: the same order is not kept twice; an earlier mark does not move it back.
        ledger.record_service_orders(url, &[a]).expect("record");
        ledger
            .record_read_mark(url, "2026-11-19T10:00:00Z", 1, 0)
            .expect("mark");
        let mark = ledger
            .service_read_mark("HTTP://127.0.0.1:9/v2")
            .expect("mark");
        assert_eq!(
            mark.map(|m| m.read_to).as_deref(),
            Some("2026-11-20T10:00:00Z")
        );
        assert!(ledger.learned_order(url, "O-1").expect("learned"));
        assert_eq!(ledger.service_order_counts(url).expect("counts"), (1, 0, 0));
        let rows = ledger.service_rows(url, "B").expect("rows");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].service_order_id, "O-1");
        assert_eq!(rows[0].batch_tag.as_deref(), Some("nov"));
        let mut all = Vec::new();
        ledger
            .visit_service_rows(url, |r| all.push(r.reference.clone()))
            .expect("visit");
        assert_eq!(all, ["A", "B", "C"]);
        assert_eq!(
            ledger
                .service_orders_of_batch(url, "nov")
                .expect("of batch")
                .len(),
            1
        );
        // Another service's orders are its own.
        assert!(
            ledger
                .service_rows("http://127.0.0.1:10/v2", "B")
                .expect("rows")
                .is_empty()
        );
        // A read that did not reach its end keeps what it learned and leaves the mark.
        ledger
            .record_service_orders(url, &[learned("O-2", "dec", &["D"])])
            .expect("record");
        assert_eq!(ledger.service_order_counts(url).expect("counts"), (2, 0, 0));
        assert_eq!(
            ledger
                .service_read_mark(url)
                .expect("mark")
                .map(|m| m.read_to)
                .as_deref(),
            Some("2026-11-20T10:00:00Z")
        );
    }
}
