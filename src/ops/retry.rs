//! `retry`: after a person fixed the cause, FAILED and REJECTED rows become payable again.
//! Each gets the next attempt number, hence a new idempotency key; the next run pays them.
//! Nothing is retried automatically.

use std::collections::BTreeMap;
use std::path::Path;

use rust_decimal::Decimal;

use crate::batch::outcome::{OpError, debited_totals};
use crate::environment::UsageError;
use crate::ledger::lock::LedgerLock;
use crate::ledger::{Ledger, RowState};

/// What a retry did.
#[derive(Debug, Clone)]
pub struct Retried {
    pub batch: String,
    /// The environment the batch belongs to (`sim`, `playground`, `production`).
    pub environment: String,
    /// The batch's input file, as its latest run recorded the path.
    pub input_path: String,
    /// The references made payable again, in ledger order.
    pub references: Vec<String>,
    /// The batch's rows per state, after the retry.
    pub counts: BTreeMap<RowState, i64>,
    /// What left each paying balance so far: (`balance CUR` or `card ID`, currency) -> amount.
    pub debited: BTreeMap<(String, String), Decimal>,
}

/// Makes the FAILED and REJECTED rows of `batch` (only `references`, when given) payable
/// again ([`retry_rows`] with [`RetryRows::Failed`]).
pub fn retry(ledger_path: &Path, batch: &str, references: &[String]) -> Result<Retried, OpError> {
    retry_rows(ledger_path, batch, references, RetryRows::Failed)
}

/// Which rows a retry makes payable again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryRows {
    /// FAILED and REJECTED rows (`paybatch retry`).
    Failed,
    /// COMPLETED rows whose payout link was last read EXPIRED (`paybatch retry --expired`):
    /// reissued under a new attempt; the expired attempt's outcome is kept.
    Expired,
}

/// Makes the FAILED and REJECTED rows of `batch` (or, with [`RetryRows::Expired`], the rows
/// whose link expired; only `references`, when given) payable again. A ledger or batch that
/// does not exist is a usage error; nothing is created.
pub fn retry_rows(
    ledger_path: &Path,
    batch: &str,
    references: &[String],
    which: RetryRows,
) -> Result<Retried, OpError> {
    if !ledger_path.exists() {
        return Err(OpError::Usage(UsageError::new(
            format!("no ledger at {}", ledger_path.display()),
            "pass --ledger PATH, the ledger the batch was run with",
        )));
    }
    let _lock = LedgerLock::acquire(ledger_path)?;
    let mut ledger = Ledger::open(ledger_path)?;
    let Some(record) = ledger.batch(batch)? else {
        return Err(OpError::Usage(UsageError::new(
            format!("no batch `{batch}` in {}", ledger_path.display()),
            "`paybatch run` names a batch after its file unless --batch is given",
        )));
    };
    let refs = (!references.is_empty()).then_some(references);
    let references = match which {
        RetryRows::Failed => ledger.retry_rows(record.id, refs)?,
        RetryRows::Expired => ledger.reissue_expired(record.id, refs)?,
    };
    Ok(Retried {
        batch: record.name.clone(),
        environment: record.environment.clone(),
        input_path: record.input_path.clone(),
        references,
        counts: ledger.row_counts(record.id)?.into_iter().collect(),
        debited: debited_totals(&ledger, record.id)?,
    })
}
