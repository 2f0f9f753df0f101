//! The runs held to an approved plan (migration 012): each `paybatch run --expect-digest` whose
//! file gave the approved digest records one line with its batch before it sends anything: the
//! digest, when, by which user on which host, and which run. A resumed run records its own
//! line; a run without `--expect-digest` records none. The user and host are text a person
//! controls: whoever shows them escapes them.

use rusqlite::params;

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
}

impl Approval {
    /// `user@host`, as a person reads who ran it where (not escaped).
    pub fn by(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }
}

impl Ledger {
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

    /// The runs of a batch held to an approved plan, oldest first.
    pub fn approvals(&self, batch_id: i64) -> Result<Vec<Approval>> {
        self.select_all(
            "SELECT digest, approved_at, user, host, run FROM approvals
             WHERE batch_id = ?1 ORDER BY id",
            [batch_id],
            |r| {
                Ok(Approval {
                    digest: r.get(0)?,
                    approved_at: r.get(1)?,
                    user: r.get(2)?,
                    host: r.get(3)?,
                    run: r.get(4)?,
                })
            },
        )
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
}
