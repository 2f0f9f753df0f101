//! The plans `paybatch validate` approved (migration 009): per plan one row, its digest, batch
//! name, environment, input file, time, the other parts its digest covers (`context`) and its
//! rows' payable fields, compressed (`plan`, made and read by [`crate::batch::approved`]).
//! Validating creates no batch: a plan is kept under the batch's name, and no part of a
//! batch's state is read from here. The last [`KEPT_PER_BATCH`] plans of each batch and
//! environment are kept.

use rusqlite::{OptionalExtension, params};

use super::{Ledger, Result, begin, commit, exec, now, sqlerr};

/// How many approved plans are kept per batch and environment (the oldest go first).
pub const KEPT_PER_BATCH: i64 = 20;

/// A plan to keep.
#[derive(Debug, Clone)]
pub struct NewApprovedPlan<'a> {
    pub digest: &'a str,
    pub batch: &'a str,
    pub environment: &'a str,
    pub input_path: &'a str,
    pub input_hash: &'a str,
    pub rows: i64,
    pub context: &'a str,
    pub plan: &'a [u8],
}

/// A plan as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedPlan {
    pub digest: String,
    pub batch: String,
    pub environment: String,
    pub input_path: String,
    pub input_hash: String,
    pub approved_at: String,
    pub rows: i64,
    pub context: String,
    pub plan: Vec<u8>,
}

impl Ledger {
    /// Keeps a plan `validate` showed the digest of, in one transaction: the same digest kept
    /// before for the batch is replaced, and only the batch's last [`KEPT_PER_BATCH`] plans stay.
    pub fn keep_approved_plan(&mut self, p: &NewApprovedPlan<'_>) -> Result<()> {
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "DELETE FROM approved_plans WHERE batch = ?1 AND environment = ?2 AND digest = ?3",
            params![p.batch, p.environment, p.digest],
        )?;
        exec(
            &tx,
            &self.path,
            "INSERT INTO approved_plans (digest, batch, environment, input_path, input_hash,
                                         approved_at, rows, context, plan)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                p.digest,
                p.batch,
                p.environment,
                p.input_path,
                p.input_hash,
                now(),
                p.rows,
                p.context,
                p.plan
            ],
        )?;
        exec(
            &tx,
            &self.path,
            "DELETE FROM approved_plans WHERE batch = ?1 AND environment = ?2 AND id NOT IN
               (SELECT id FROM approved_plans WHERE batch = ?1 AND environment = ?2
                ORDER BY id DESC LIMIT ?3)",
            params![p.batch, p.environment, KEPT_PER_BATCH],
        )?;
        commit(tx, &self.path)
    }

    /// The plan last approved with `digest` (`sha256:` and lower-case hex), if this ledger
    /// kept one.
    pub fn approved_plan(&self, digest: &str) -> Result<Option<ApprovedPlan>> {
        self.conn
            .query_row(
                "SELECT digest, batch, environment, input_path, input_hash, approved_at, rows,
                        context, plan
                 FROM approved_plans WHERE digest = ?1 ORDER BY id DESC LIMIT 1",
                [digest],
                |r| {
                    Ok(ApprovedPlan {
                        digest: r.get("digest")?,
                        batch: r.get("batch")?,
                        environment: r.get("environment")?,
                        input_path: r.get("input_path")?,
                        input_hash: r.get("input_hash")?,
                        approved_at: r.get("approved_at")?,
                        rows: r.get("rows")?,
                        context: r.get("context")?,
                        plan: r.get("plan")?,
                    })
                },
            )
            .optional()
            .map_err(sqlerr(&self.path))
    }

    /// The digests of the plans kept for a batch in an environment, newest first.
    pub fn approved_digests(&self, batch: &str, environment: &str) -> Result<Vec<String>> {
        self.select_all(
            "SELECT digest FROM approved_plans WHERE batch = ?1 AND environment = ?2
             ORDER BY id DESC",
            params![batch, environment],
            |r| r.get("digest"),
        )
    }
}
