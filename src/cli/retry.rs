//! `paybatch retry --batch NAME`: after a person fixed the cause, make FAILED and REJECTED rows
//! eligible again. Each gets the next attempt number, hence a new idempotency key; nothing is
//! retried automatically. The next `paybatch run` pays them. `--expired` reissues the rows whose
//! payout link expired, once the service still says so.

use clap::Args;

use crate::exit::Exit;

use super::{CliError, ServiceArgs};

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The batch whose failed and rejected rows should be paid again.
    #[arg(long)]
    pub batch: String,
    /// Only these row references (repeatable); default every FAILED and REJECTED row.
    #[arg(long = "reference", value_name = "REF")]
    pub references: Vec<String>,
    /// Reissue instead the rows whose payout link EXPIRED (as `paybatch payouts` last read it),
    /// once their order, read again at the service, still says so: each gets a new attempt and
    /// key, and the next `paybatch run` pays it again. A link that is ACTIVE, CLAIMED or
    /// CANCELLED, or never read, is never reissued; nor is one whose order cannot be read or
    /// believed now (exit 5).
    #[arg(long)]
    pub expired: bool,
    /// Print one JSON object on stdout at the end: batch, environment, exit code, the rows
    /// made payable again, rows per state, what left each balance so far.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: RetryArgs) -> Result<Exit, CliError> {
    let retried = match retry(&args).await {
        Ok(r) => r,
        Err(e) => {
            if args.json {
                let failed = super::run_json::retry_failed(&args.batch, &e);
                outln!("{}", serde_json::to_string(&failed).unwrap_or_default());
            }
            return Err(e);
        }
    };
    let batch = crate::text::shown(&args.batch);
    for n in &retried.not_read {
        errln!(
            "order {}: {}; its rows whose link was read EXPIRED are not reissued (they keep their last believed status)",
            n.order_id,
            n.reason
        );
    }
    if retried.references.is_empty() && args.expired && retried.not_read.is_empty() {
        errln!(
            "batch {batch}: no row whose payout link was read EXPIRED (`paybatch payouts --batch {}` reads them)",
            crate::text::shell_word(&args.batch)
        );
    } else if retried.references.is_empty() && !args.expired {
        errln!("batch {batch}: no FAILED or REJECTED rows to retry");
    } else if !retried.references.is_empty() {
        let what = if args.expired {
            "rows whose link the service still reads EXPIRED are payable again (reissued with a new attempt)"
        } else {
            "rows eligible again with a new attempt"
        };
        errln!(
            "batch {batch}: {} {what}: {}",
            retried.references.len(),
            crate::text::shown(&first_of(&retried.references))
        );
        let file = if args.expired {
            "the same file: it pays them again"
        } else {
            "the same file, fixed"
        };
        errln!(
            "next: paybatch run {} --batch {}{} ({file})",
            crate::text::shell_word(&retried.input_path),
            crate::text::shell_word(&args.batch),
            args.service.repeated()
        );
        errln!(
            "the batch's plan changed (it pays these rows again): a digest approved before this retry no longer passes `--expect-digest`; `paybatch validate` shows the new one, to approve"
        );
    }
    // An order not read or not believed: its rows wait for a person or a later read.
    let exit = if retried.not_read.is_empty() {
        Exit::Ok
    } else {
        Exit::Incomplete
    };
    if args.json {
        super::out_json(&super::run_json::retried(&retried, exit.code()));
    }
    Ok(exit)
}

/// The retry the flags ask for: of FAILED and REJECTED rows, or with `--expired` of the rows
/// whose link expired, read once more at the service.
async fn retry(args: &RetryArgs) -> Result<crate::ops::retry::Retried, CliError> {
    if !args.expired {
        return Ok(crate::ops::retry::retry(
            &args.service.ledger,
            &args.batch,
            &args.references,
        )?);
    }
    let opts = crate::ops::retry::ReissueOptions {
        ledger: args.service.ledger.clone(),
        batch: args.batch.clone(),
        references: args.references.clone(),
        environment: args.service.environment()?,
        api_key_file: args.service.api_key_file.clone(),
    };
    let console = super::progress::Console::new(false);
    Ok(crate::ops::retry::reissue_expired(&opts, &console.reporter()).await?)
}

/// References named on the line at most (`--json` lists them all).
const NAMED: usize = 20;

/// The first references, then how many more.
fn first_of(references: &[String]) -> String {
    let named = references[..references.len().min(NAMED)].join(", ");
    match references.len().saturating_sub(NAMED) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}
