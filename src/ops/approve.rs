//! `paybatch approve FILE --expect-digest DIGEST`: a person approves the plan `validate` showed.
//! The file is checked exactly as `validate` checks it; when it still gives that digest, the
//! approval is recorded in the ledger ([`crate::ledger::approvals`], `plan_approvals`): who
//! (user and host), when, which digest, and what the plan pays per currency. A run that
//! requires a second person pays only a plan approved by another user than the one running it
//! ([`crate::ops::run`]).

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use crate::batch::options::RunOptions;
use crate::input::scan;
use crate::ledger::Ledger;
use crate::ledger::approvals::NewPlanApproval;
use crate::ledger::lock::LedgerLock;
use crate::ops::error::OpError;

use super::preview::{self, Preview};
use super::run::approval::{bounded, host_name, login_name};

/// An approval as recorded.
#[derive(Debug, Clone)]
pub struct Approved {
    pub digest: String,
    pub approved_at: String,
    pub user: String,
    pub host: String,
    /// The rows the plan pays.
    pub rows: usize,
    /// What the plan pays per product currency (face values).
    pub totals: BTreeMap<String, Decimal>,
    /// Everything `validate` says of the file.
    pub preview: Preview,
}

/// Checks the file as `validate` does and records that the user running this approved its plan,
/// when the plan's digest is `expected`. An invalid batch, or a file whose plan is not
/// `expected`, is refused: nothing is recorded.
pub async fn approve(opts: &RunOptions, expected: &str) -> Result<Approved, OpError> {
    let preview = preview::preview(opts).await?;
    let digest = match &preview.digest {
        Some(d) if preview.is_valid() => d.clone(),
        _ => {
            return Err(OpError::Refused {
                message: format!(
                    "{} is not a payable plan ({} problem(s)); nothing was approved",
                    preview.file, preview.problems_total
                ),
                help: "run `paybatch validate` on the file, fix what it says, and approve the digest it then shows".into(),
            });
        }
    };
    if !scan::digests_match(expected, &digest) {
        return Err(OpError::Refused {
            message: format!(
                "the file's plan is {digest}, not {expected}; nothing was approved"
            ),
            help: "run `paybatch validate` on the file, check what it pays, and approve the digest it shows".into(),
        });
    }
    let mut totals: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut rows = 0;
    for t in preview.totals.per_product.values() {
        *totals.entry(t.currency.clone()).or_default() += t.face_value;
        rows += t.rows;
    }
    let (user, host) = (bounded(login_name()), bounded(host_name()));
    let recorded: BTreeMap<&str, String> = totals
        .iter()
        .map(|(c, v)| (c.as_str(), crate::money::display_amount(*v, c)))
        .collect();
    let totals_json = serde_json::to_string(&recorded).unwrap_or_else(|_| "{}".into());
    let approved_at = {
        let _lock = LedgerLock::acquire(&opts.ledger)?;
        let mut ledger = Ledger::open(&opts.ledger)?;
        ledger.record_plan_approval(&NewPlanApproval {
            digest: &digest,
            batch: &opts.batch_name(),
            environment: opts.environment.name(),
            user: &user,
            host: &host,
            rows: i64::try_from(rows).unwrap_or(i64::MAX),
            totals: &totals_json,
        })?
    };
    Ok(Approved {
        digest,
        approved_at,
        user,
        host,
        rows,
        totals,
        preview,
    })
}
