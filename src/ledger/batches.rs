//! Batches: their records, their creation and the input file each was last merged from.

use std::path::Path;

use rusqlite::{OptionalExtension, Transaction, params};

use super::{Ledger, LedgerError, Result, begin, commit, event, exec, now, sqlerr};
use crate::file_format::{FileFormat, ResultFormat};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    pub id: i64,
    pub name: String,
    pub input_path: String,
    pub input_hash: String,
    pub headers: Vec<String>,
    pub environment: String,
    pub base_url: String,
    pub key_fingerprint: String,
    pub created_at: String,
    /// The layout of the input file last merged; `None` in a batch of an earlier version.
    pub input_format: Option<FileFormat>,
    /// The layout of the result file and what chose it; `None` in a batch of an earlier
    /// version, whose result file is plain CSV ([`BatchRecord::result_format_or_earlier`]).
    pub result_format: Option<ResultFormat>,
}

impl BatchRecord {
    /// The layout of the batch's result file: as recorded, or plain CSV for a batch of an
    /// earlier version.
    pub fn result_format_or_earlier(&self) -> ResultFormat {
        self.result_format.unwrap_or(ResultFormat::EARLIER)
    }
}

/// The layouts a batch records of its latest input file: the input's, and the result file's
/// when it is chosen now (a new batch, or `--out-format` given); `None` keeps the one recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formats {
    pub input: FileFormat,
    pub result: Option<ResultFormat>,
}

#[derive(Debug, Clone)]
pub struct NewBatch<'a> {
    pub name: &'a str,
    pub input_path: &'a str,
    pub input_hash: &'a str,
    pub headers: &'a [String],
    pub environment: &'a str,
    pub base_url: &'a str,
    pub key_fingerprint: &'a str,
    /// `None` while the file is not read yet ([`super::Merge::record_input`] records them).
    pub formats: Option<Formats>,
}

/// How far the sending of a batch got ([`Ledger::send_progress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendProgress {
    pub orders_sent: i64,
    pub orders_in_doubt: i64,
    pub rows_not_sent: i64,
}

/// Whether a batch has finished, and when ([`Ledger::batch_completion`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// Rows not final yet (PENDING, PLANNED or SUBMITTED).
    pub rows_not_final: i64,
    /// When the last of its orders sent was booked final (COMPLETED, FAILED, REJECTED or
    /// MISMATCH: `booked_at`, the books' one clock); `None` when none was.
    pub last_final_at: Option<String>,
}

impl Completion {
    /// When the batch completed: the time its last order became final, once no row is left
    /// to finish; `None` while a row is not final, or when no order was ever answered.
    pub fn completed_at(&self) -> Option<&str> {
        (self.rows_not_final == 0)
            .then_some(self.last_final_at.as_deref())
            .flatten()
    }
}

impl Ledger {
    /// Whether the batch has finished and when its last order became final.
    pub fn batch_completion(&self, batch_id: i64) -> Result<Completion> {
        let rows_not_final: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) AS n FROM rows
                 WHERE batch_id = ?1 AND state IN ('PENDING', 'PLANNED', 'SUBMITTED')",
            )
            .and_then(|mut st| st.query_row([batch_id], |r| r.get("n")))
            .map_err(sqlerr(&self.path))?;
        let last_final_at: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT MAX(COALESCE(booked_at, finished_at)) AS last_final_at FROM orders
                 WHERE batch_id = ?1 AND state IN ('COMPLETED', 'FAILED', 'REJECTED', 'MISMATCH')",
            )
            .and_then(|mut st| st.query_row([batch_id], |r| r.get("last_final_at")))
            .map_err(sqlerr(&self.path))?;
        Ok(Completion {
            rows_not_final,
            last_final_at,
        })
    }

    pub fn batch(&self, name: &str) -> Result<Option<BatchRecord>> {
        self.conn
            .query_row(
                "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                        key_fingerprint, created_at, input_format, result_format FROM batches WHERE name = ?1",
                [name],
                batch_from_row,
            )
            .optional()
            .map_err(sqlerr(&self.path))
    }

    pub fn batch_by_id(&self, id: i64) -> Result<Option<BatchRecord>> {
        self.conn
            .query_row(
                "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                        key_fingerprint, created_at, input_format, result_format FROM batches WHERE id = ?1",
                [id],
                batch_from_row,
            )
            .optional()
            .map_err(sqlerr(&self.path))
    }

    pub fn batches(&self) -> Result<Vec<BatchRecord>> {
        self.select_all(
            "SELECT id, name, input_path, input_hash, headers, environment, base_url,
                    key_fingerprint, created_at, input_format, result_format FROM batches ORDER BY id",
            [],
            batch_from_row,
        )
    }

    pub fn create_batch(&mut self, b: &NewBatch<'_>) -> Result<BatchRecord> {
        let tx = begin(&mut self.conn, &self.path)?;
        insert_batch(&tx, &self.path, b)?;
        commit(tx, &self.path)?;
        self.batch(b.name)?
            .ok_or_else(|| LedgerError::Corrupt("batch vanished after insert".into()))
    }

    /// Records the latest input file of a batch (path, hash, headers, layouts).
    pub fn update_batch_input(
        &mut self,
        batch_id: i64,
        input_path: &str,
        input_hash: &str,
        headers: &[String],
        formats: Formats,
    ) -> Result<()> {
        let headers = serde_json::to_string(headers).unwrap_or_else(|_| "[]".into());
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "UPDATE batches SET input_path = ?2, input_hash = ?3, headers = ?4, updated_at = ?5
             WHERE id = ?1",
            params![batch_id, input_path, input_hash, headers, now()],
        )?;
        record_formats(&tx, &self.path, batch_id, &formats)?;
        commit(tx, &self.path)
    }

    /// The layout of the batch's result file (see [`BatchRecord::result_format_or_earlier`]).
    pub fn result_format(&self, batch_id: i64) -> Result<ResultFormat> {
        Ok(self
            .batch_by_id(batch_id)?
            .map_or(ResultFormat::EARLIER, |b| b.result_format_or_earlier()))
    }

    /// How many merges of an input file the batch has had: the rows of the latest file have
    /// this number ([`super::RowRecord::merged`]).
    pub fn merges(&self, batch_id: i64) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT merges FROM batches WHERE id = ?1")
            .and_then(|mut st| st.query_row([batch_id], |r| r.get("merges")))
            .map_err(sqlerr(&self.path))
    }

    /// How far the sending of a batch got: orders sent (answered or not), orders sent without
    /// an answer recorded (in doubt), and rows not sent yet (no order, or an order never sent).
    pub fn send_progress(&self, batch_id: i64) -> Result<SendProgress> {
        let orders: Vec<(i64, i64)> = self.select_all(
            "SELECT COUNT(*) AS sent, COALESCE(SUM(state = 'INTENT'), 0) AS in_doubt \
             FROM orders \
             WHERE batch_id = ?1 AND (sends > 0 OR state NOT IN ('INTENT', 'CANCELLED'))",
            [batch_id],
            |r| Ok((r.get("sent")?, r.get("in_doubt")?)),
        )?;
        let rows: Vec<i64> = self.select_all(
            "SELECT COUNT(*) AS n FROM rows r LEFT JOIN orders o ON o.id = r.order_id \
             WHERE r.batch_id = ?1 AND r.state IN ('PENDING', 'PLANNED') \
             AND (o.id IS NULL OR (o.state = 'INTENT' AND o.sends = 0))",
            [batch_id],
            |r| r.get("n"),
        )?;
        let (sent, in_doubt) = orders.first().copied().unwrap_or_default();
        Ok(SendProgress {
            orders_sent: sent,
            orders_in_doubt: in_doubt,
            rows_not_sent: rows.first().copied().unwrap_or_default(),
        })
    }

    /// Whether the batch was rebuilt while orders it could not attribute were still processing
    /// (and no reconciliation has found every order attributable since).
    pub fn is_unsettled(&self, batch_id: i64) -> Result<bool> {
        let flags: Vec<i64> = self.select_all(
            "SELECT unsettled FROM batches WHERE id = ?1",
            [batch_id],
            |r| r.get("unsettled"),
        )?;
        Ok(flags.first().copied().unwrap_or(0) != 0)
    }

    /// Marks the batch unsettled (see [`Ledger::is_unsettled`]), or settled again.
    pub fn set_unsettled(&mut self, batch_id: i64, unsettled: bool) -> Result<()> {
        self.conn
            .execute(
                "UPDATE batches SET unsettled = ?2 WHERE id = ?1",
                params![batch_id, unsettled as i64],
            )
            .map(drop)
            .map_err(sqlerr(&self.path))
    }
}

/// Inserts a new batch (and its CREATED event) in `tx`; returns its id.
pub(super) fn insert_batch(tx: &Transaction<'_>, path: &Path, b: &NewBatch<'_>) -> Result<i64> {
    let at = now();
    let headers = serde_json::to_string(b.headers).unwrap_or_else(|_| "[]".into());
    exec(
        tx,
        path,
        "INSERT INTO batches (name, input_path, input_hash, headers, environment, base_url,
                              key_fingerprint, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        params![
            b.name,
            b.input_path,
            b.input_hash,
            headers,
            b.environment,
            b.base_url,
            b.key_fingerprint,
            at
        ],
    )?;
    let id = tx.last_insert_rowid();
    if let Some(formats) = &b.formats {
        record_formats(tx, path, id, formats)?;
    }
    event(tx, id, "batch", id, None, Some("CREATED"), "batch created").map_err(sqlerr(path))?;
    Ok(id)
}

/// Records the layouts of a batch's latest input file, in `tx`: the input's, and the result
/// file's when one is chosen.
pub(super) fn record_formats(
    tx: &Transaction<'_>,
    path: &Path,
    batch_id: i64,
    formats: &Formats,
) -> Result<()> {
    exec(
        tx,
        path,
        "UPDATE batches SET input_format = ?2, result_format = COALESCE(?3, result_format)
         WHERE id = ?1",
        params![
            batch_id,
            formats.input.to_stored(),
            formats.result.map(|r| r.to_stored())
        ],
    )
    .map(drop)
}

fn batch_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BatchRecord> {
    let headers: String = r.get("headers")?;
    Ok(BatchRecord {
        id: r.get("id")?,
        name: r.get("name")?,
        input_path: r.get("input_path")?,
        input_hash: r.get("input_hash")?,
        headers: serde_json::from_str(&headers).unwrap_or_default(),
        environment: r.get("environment")?,
        base_url: r.get("base_url")?,
        key_fingerprint: r.get("key_fingerprint")?,
        created_at: r.get("created_at")?,
        input_format: stored_format(r.get("input_format")?, FileFormat::from_stored),
        result_format: stored_format(r.get("result_format")?, ResultFormat::from_stored),
    })
}

/// A layout as recorded; one that cannot be read is taken as none recorded (the result file is
/// then plain CSV), and said in the log.
fn stored_format<T>(text: Option<String>, read: impl Fn(&str) -> Option<T>) -> Option<T> {
    let text = text?;
    let read = read(&text);
    if read.is_none() {
        tracing::warn!("a batch's recorded file layout cannot be read: {text}");
    }
    read
}
