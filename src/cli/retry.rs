//! `paybatch retry --batch NAME`: after a person fixed the cause, make FAILED and REJECTED rows
//! eligible again. Each gets the next attempt number, hence a new idempotency key; nothing is
//! retried automatically. The next `paybatch run` pays them.

use clap::Args;

use crate::exit;
use crate::ledger::Ledger;

use super::{ServiceArgs, lock_ledger, print_error};

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The batch whose failed and rejected rows should be paid again.
    #[arg(long)]
    pub batch: String,
    /// Only these row references (repeatable); default every FAILED and REJECTED row.
    #[arg(long = "reference", value_name = "REF")]
    pub references: Vec<String>,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: RetryArgs) -> i32 {
    let ledger_path = &args.service.ledger;
    if !ledger_path.exists() {
        print_error(
            &format!("no ledger at {}", ledger_path.display()),
            Some("pass --ledger PATH, the ledger the batch was run with"),
        );
        return exit::USAGE;
    }
    let _lock = match lock_ledger(ledger_path) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let result = (|| -> Result<Option<Vec<String>>, crate::ledger::LedgerError> {
        let mut ledger = Ledger::open(ledger_path)?;
        let Some(batch) = ledger.batch(&args.batch)? else {
            return Ok(None);
        };
        let refs = (!args.references.is_empty()).then_some(args.references.as_slice());
        ledger.retry_rows(batch.id, refs).map(Some)
    })();
    match result {
        Ok(None) => {
            print_error(
                &format!("no batch `{}` in {}", args.batch, ledger_path.display()),
                Some("`paybatch run` names a batch after its file unless --batch is given"),
            );
            exit::USAGE
        }
        Ok(Some(refs)) if refs.is_empty() => {
            errln!("batch {}: no FAILED or REJECTED rows to retry", args.batch);
            exit::OK
        }
        Ok(Some(refs)) => {
            errln!(
                "batch {}: {} rows eligible again with a new attempt: {}",
                args.batch,
                refs.len(),
                refs.join(", ")
            );
            errln!(
                "next: paybatch run FILE --batch {} (the same file, fixed)",
                crate::text::shell_word(&args.batch)
            );
            exit::OK
        }
        Err(e) => {
            print_error(&e.to_string(), None);
            exit::UNEXPECTED
        }
    }
}
