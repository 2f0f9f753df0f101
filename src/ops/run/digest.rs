//! `run --expect-digest`: only the plan a person approved is paid, and a refusal says what
//! changed since that plan was approved.

use std::time::Instant;

use crate::batch::approved::{self, PlanContext};
use crate::batch::plan::RunContext;
use crate::batch::progress::Reporter;
use crate::batch::repeats::Repeats;
use crate::input::rules::CatalogIndex;
use crate::input::scan;
use crate::ledger::{self, Ledger};
use crate::ops::error::OpError;
use crate::ops::start::{attempts_in_file, plan_and_context};

/// `--expect-digest`: only the plan a person approved is paid (checked before the ledger
/// batch is touched). The digest is the one `validate` shows: the file's, with the orders the
/// ledger follows for rows the file does not have (`outside`). A refusal says what changed
/// since the plan was approved, when the ledger kept it ([`since_approved`]). Returns the
/// approved digest when the run is held to one (the file gave it), for the run to record.
pub(super) fn check_digest(
    run: &RunContext,
    ledger: &Ledger,
    (scanned, existing): (&scan::Scan, Option<&ledger::BatchRecord>),
    (outside, repeats): (&ledger::OutsideFile, &Repeats),
    reporter: &Reporter,
) -> Result<Option<String>, OpError> {
    let opts = &run.opts;
    let (Some(expected), Some(file)) = (&opts.expect_digest, &scanned.digest) else {
        return Ok(None);
    };
    let attempts = attempts_in_file(ledger, existing, scanned)?;
    let (actual, context) = plan_and_context(ledger, outside, file.clone(), repeats, attempts)?;
    if !scan::digests_match(expected, &actual) {
        let changed = since_approved(run, ledger, expected, &context)?;
        return Err(OpError::Refused {
            message: format!(
                "the file no longer matches the approved plan: expected {expected}, the file gives {actual}; nothing was submitted\n{}",
                changed.join("\n")
            ),
            help: "run `paybatch validate` on the file, check what changed, and approve the new digest".into(),
        });
    }
    reporter.line(format!(
        "plan digest: {actual} (matches the approved digest)"
    ));
    Ok(Some(actual))
}

/// What changed since the plan approved with `expected` (kept by `validate` in this ledger):
/// the rows of the file compared with the plan's when their digest differs (the file read
/// again), and the other parts of the digest; or that this ledger did not keep that plan.
fn since_approved(
    run: &RunContext,
    ledger: &Ledger,
    expected: &str,
    context: &PlanContext,
) -> Result<Vec<String>, OpError> {
    let opts = &run.opts;
    let expected = scan::normalize_digest(expected).unwrap_or_else(|| expected.to_string());
    let Some(plan) = ledger.approved_plan(&expected)? else {
        return Ok(vec![format!(
            "{expected} is not a plan this ledger kept (validated with another ledger or on another machine, before this version kept approved plans, or more than {} validations of the batch ago): what changed cannot be said here",
            crate::ledger::approved::KEPT_PER_BATCH
        )]);
    };
    let kept: PlanContext = match serde_json::from_str(&plan.context) {
        Ok(c) => c,
        Err(e) => return Ok(vec![format!("the kept plan cannot be read ({e})")]),
    };
    let rows = if kept.rows_digest == context.rows_digest {
        None
    } else {
        let started = Instant::now();
        let compared = compare_rows(run, &plan.plan);
        tracing::info!(
            "rows compared with the approved plan: {:.2?}",
            started.elapsed()
        );
        match compared {
            Ok(d) => Some(d),
            Err(why) => return Ok(vec![why]),
        }
    };
    let now = approved::Now {
        batch: &opts.batch_name(),
        environment: opts.environment.name(),
        context,
    };
    Ok(approved::what_changed(&plan, &kept, &now, rows.as_ref()))
}

/// The valid rows of the file (read again) against those of a kept plan.
fn compare_rows(run: &RunContext, kept: &[u8]) -> Result<approved::RowDifferences, String> {
    let mut comparison = approved::RowComparison::new(kept)?;
    let index = CatalogIndex::new(run.catalog.clone());
    scan::scan(
        &run.opts.input,
        &run.opts.input_options(),
        &index,
        &run.checks,
        None,
        |spec| comparison.see(spec),
    )
    .map_err(|p| {
        format!(
            "the file cannot be read again to compare it ({})",
            p.message
        )
    })?;
    Ok(comparison.finish())
}
