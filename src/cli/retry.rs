//! `paybatch retry --batch NAME`: after a person fixed the cause, make FAILED and REJECTED rows
//! eligible again. Each gets the next attempt number, hence a new idempotency key; nothing is
//! retried automatically. The next `paybatch run` pays them.

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
    /// Print one JSON object on stdout at the end: batch, environment, exit code, the rows
    /// made payable again, rows per state, what left each balance so far.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: RetryArgs) -> Result<Exit, CliError> {
    let retried =
        match crate::ops::retry::retry(&args.service.ledger, &args.batch, &args.references) {
            Ok(r) => r,
            Err(e) => {
                let e = CliError::from(e);
                if args.json {
                    let failed = super::run_json::retry_failed(&args.batch, &e);
                    outln!("{}", serde_json::to_string(&failed).unwrap_or_default());
                }
                return Err(e);
            }
        };
    if retried.references.is_empty() {
        errln!("batch {}: no FAILED or REJECTED rows to retry", args.batch);
    } else {
        errln!(
            "batch {}: {} rows eligible again with a new attempt: {}",
            args.batch,
            retried.references.len(),
            first_of(&retried.references)
        );
        errln!(
            "next: paybatch run FILE --batch {} (the same file, fixed)",
            crate::text::shell_word(&args.batch)
        );
    }
    if args.json {
        super::out_json(&super::run_json::retried(&retried, Exit::Ok.code()));
    }
    Ok(Exit::Ok)
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
