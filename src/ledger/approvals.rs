//! The runs held to an approved plan (migration 012): each `paybatch run --expect-digest` whose
//! file gave the approved digest records one line with its batch before it sends anything: the
//! digest, when, by which user on which host, and which run. A resumed run records its own
//! line; a run without `--expect-digest` records none. The user and host are text a person
//! controls: whoever shows them escapes them.

use std::collections::BTreeMap;

use rusqlite::params;
use serde::Serialize;

use super::{Ledger, Result, begin, commit, exec, now};

/// What is said of a batch none of whose runs was held to an approved plan (`status`, the
/// report).
pub const NO_APPROVAL: &str = "no approval on record (runs without --expect-digest)";

/// A run held to an approved plan, to record.
#[derive(Debug, Clone, Copy)]
pub struct NewApproval<'a> {
    /// The approved digest the file gave (`sha256:` and lower-case hex).
    pub digest: &'a str,
    pub user: &'a str,
    pub host: &'a str,
    /// The run's own id.
    pub run: &'a str,
}

/// A run held to an approved plan, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub digest: String,
    /// When the run was held to it ([`super::now`]'s format).
    pub approved_at: String,
    pub user: String,
    pub host: String,
    pub run: String,
    /// Who approved the digest (`paybatch approve`) for the batch before the run, oldest
    /// first: empty when nobody did.
    pub approved_by: Vec<PlanApproval>,
}

impl Approval {
    /// `user@host`, as a person reads who ran it where (not escaped).
    pub fn by(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }

    /// Who approved the plan before the run, in words (not escaped): `approved by
    /// bob@desk-2 at TIME`, or that nobody did with `paybatch approve`.
    pub fn approvers(&self) -> String {
        if self.approved_by.is_empty() {
            return NOT_APPROVED.to_string();
        }
        let who: Vec<String> = self
            .approved_by
            .iter()
            .map(|a| format!("{} at {}", a.by(), a.approved_at))
            .collect();
        format!("approved by {}", who.join(", "))
    }
}

/// What is said of a run whose digest nobody approved with `paybatch approve` before it.
pub const NOT_APPROVED: &str = "not approved with `paybatch approve`";

/// A plan a person approved (`paybatch approve`, migration 020), to record.
#[derive(Debug, Clone, Copy)]
pub struct NewPlanApproval<'a> {
    pub digest: &'a str,
    pub batch: &'a str,
    pub environment: &'a str,
    pub user: &'a str,
    pub host: &'a str,
    /// The rows the plan pays.
    pub rows: i64,
    /// What the plan pays per currency (JSON: currency -> face value as decimal text).
    pub totals: &'a str,
}

/// A plan a person approved, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanApproval {
    pub digest: String,
    pub approved_at: String,
    pub user: String,
    pub host: String,
    pub rows: i64,
    /// Currency -> face value (decimal text), as recorded.
    pub totals: BTreeMap<String, String>,
}

impl PlanApproval {
    /// `user@host`, as a person reads who approved it where (not escaped).
    pub fn by(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }
}

impl Ledger {
    /// Records that a person approved a plan, in a transaction of its own, committed before it
    /// returns; returns when, as recorded.
    pub fn record_plan_approval(&mut self, a: &NewPlanApproval<'_>) -> Result<String> {
        let at = now();
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "INSERT INTO plan_approvals (digest, batch, environment, approved_at, user, host,
                                         rows, totals)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                a.digest,
                a.batch,
                a.environment,
                at,
                a.user,
                a.host,
                a.rows,
                a.totals
            ],
        )?;
        commit(tx, &self.path)?;
        Ok(at)
    }

    /// Who approved plan `digest` of batch `batch` in `environment`, oldest first.
    pub fn plan_approvals(
        &self,
        batch: &str,
        environment: &str,
        digest: &str,
    ) -> Result<Vec<PlanApproval>> {
        self.select_all(
            "SELECT digest, approved_at, user, host, rows, totals FROM plan_approvals
             WHERE batch = ?1 AND environment = ?2 AND digest = ?3 ORDER BY id",
            params![batch, environment, digest],
            |r| {
                let totals: String = r.get("totals")?;
                Ok(PlanApproval {
                    digest: r.get("digest")?,
                    approved_at: r.get("approved_at")?,
                    user: r.get("user")?,
                    host: r.get("host")?,
                    rows: r.get("rows")?,
                    totals: serde_json::from_str(&totals).unwrap_or_default(),
                })
            },
        )
    }

    /// Records that a run of batch `batch_id` was held to an approved plan, in a transaction of
    /// its own, committed (`synchronous=FULL`) before it returns; returns when, as recorded.
    pub fn record_approval(&mut self, batch_id: i64, a: &NewApproval<'_>) -> Result<String> {
        let at = now();
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "INSERT INTO approvals (batch_id, digest, approved_at, user, host, run)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![batch_id, a.digest, at, a.user, a.host, a.run],
        )?;
        commit(tx, &self.path)?;
        Ok(at)
    }

    /// The runs of a batch held to an approved plan, oldest first, each with who approved its
    /// digest for the batch (by name and environment) before it ran.
    pub fn approvals(&self, batch_id: i64) -> Result<Vec<Approval>> {
        let runs: Vec<(Approval, String, String)> = self.select_all(
            "SELECT a.digest, a.approved_at, a.user, a.host, a.run, b.name, b.environment
             FROM approvals a JOIN batches b ON b.id = a.batch_id
             WHERE a.batch_id = ?1 ORDER BY a.id",
            [batch_id],
            |r| {
                Ok((
                    Approval {
                        digest: r.get("digest")?,
                        approved_at: r.get("approved_at")?,
                        user: r.get("user")?,
                        host: r.get("host")?,
                        run: r.get("run")?,
                        approved_by: Vec::new(),
                    },
                    r.get("name")?,
                    r.get("environment")?,
                ))
            },
        )?;
        let mut out = Vec::with_capacity(runs.len());
        for (mut run, batch, environment) in runs {
            run.approved_by = self
                .plan_approvals(&batch, &environment, &run.digest)?
                .into_iter()
                .filter(|a| a.approved_at <= run.approved_at)
                .collect();
            out.push(run);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::NewBatch;

    #[test]
    fn each_run_held_to_a_digest_is_kept_with_its_batch_oldest_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ledger = Ledger::open(&dir.path().join("l.db")).expect("ledger");
        let new = |name| NewBatch {
            name,
            input_path: "nov.csv",
            input_hash: "",
            headers: &[],
            environment: "sim",
            base_url: "embedded-simulator",
            key_fingerprint: "",
            formats: None,
        };
        let nov = ledger.create_batch(&new("nov")).expect("batch");
        let dec = ledger.create_batch(&new("dec")).expect("batch");
        assert!(ledger.approvals(nov.id).expect("read").is_empty());
        let first = NewApproval {
            digest: "sha256:aa",
            user: "alice",
            host: "pay-1",
            run: "01A",
        };
        let at = ledger.record_approval(nov.id, &first).expect("recorded");
        let second = NewApproval {
            run: "01B",
            user: "1000",
            ..first
        };
        ledger.record_approval(nov.id, &second).expect("recorded");
        let kept = ledger.approvals(nov.id).expect("read");
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept[0].approved_at, at);
        assert_eq!(kept[0].by(), "alice@pay-1");
        assert_eq!(
            (kept[1].run.as_str(), kept[1].user.as_str()),
            ("01B", "1000")
        );
        assert!(ledger.approvals(dec.id).expect("read").is_empty());
    }

    #[test]
    fn a_plan_approval_is_kept_by_batch_environment_and_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ledger = Ledger::open(&dir.path().join("l.db")).expect("ledger");
        let bob = NewPlanApproval {
            digest: "sha256:aa",
            batch: "nov",
            environment: "sim",
            user: "bob",
            host: "desk-2",
            rows: 3,
            totals: r#"{"EUR":"1017.50","USD":"24.50"}"#,
        };
        let at = ledger.record_plan_approval(&bob).expect("recorded");
        ledger
            .record_plan_approval(&NewPlanApproval {
                environment: "production",
                ..bob
            })
            .expect("recorded");
        let kept = ledger
            .plan_approvals("nov", "sim", "sha256:aa")
            .expect("read");
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            (kept[0].by(), kept[0].approved_at.as_str()),
            ("bob@desk-2".to_string(), at.as_str())
        );
        assert_eq!(kept[0].totals["EUR"], "1017.50");
        assert!(
            ledger
                .plan_approvals("nov", "sim", "sha256:bb")
                .expect("read")
                .is_empty()
        );
        assert!(
            ledger
                .plan_approvals("dec", "sim", "sha256:aa")
                .expect("read")
                .is_empty()
        );

        // A run of batch nov held to that digest names who approved it before it ran.
        let nov = ledger
            .create_batch(&NewBatch {
                name: "nov",
                input_path: "nov.csv",
                input_hash: "",
                headers: &[],
                environment: "sim",
                base_url: "embedded-simulator",
                key_fingerprint: "",
                formats: None,
            })
            .expect("batch");
        let run = NewApproval {
            digest: "sha256:aa",
            user: "alice",
            host: "pay-1",
            run: "01A",
        };
        ledger.record_approval(nov.id, &run).expect("recorded");
        ledger
            .record_approval(
                nov.id,
                &NewApproval {
                    digest: "sha256:bb",
                    ..run
                },
            )
            .expect("recorded");
        let runs = ledger.approvals(nov.id).expect("read");
        assert_eq!(runs[0].approved_by, kept);
        assert!(
            runs[0]
                .approvers()
                .starts_with("approved by bob@desk-2 at "),
            "{runs:?}"
        );
        assert!(runs[1].approved_by.is_empty());
        assert_eq!(runs[1].approvers(), NOT_APPROVED);
    }
}
