//! `retry`: after a person fixed the cause, FAILED and REJECTED rows become payable again.
//! Each gets the next attempt number, hence a new idempotency key; the next run pays them.
//! Nothing is retried automatically. `retry --expired` ([`reissue_expired`]) does the same for
//! rows whose payout link expired, once the service still says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rust_decimal::Decimal;

use crate::batch::outcome::debited_totals;
use crate::batch::progress::Reporter;
use crate::environment::{Connection, Environment, UsageError};
use crate::ledger::lock::LedgerLock;
use crate::ledger::payouts::FollowedOrder;
use crate::ledger::{BatchRecord, Ledger, RowState};
use crate::ops::error::OpError;

use super::payouts::{NotRead, PayoutsOptions, ReadPace};

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
    /// `retry --expired`: the orders whose read failed or was not believed; their rows are not
    /// reissued.
    pub not_read: Vec<NotRead>,
}

/// Makes the FAILED and REJECTED rows of `batch` (only `references`, when given) payable
/// again. A ledger or batch that does not exist is a usage error; nothing is created.
pub fn retry(ledger_path: &Path, batch: &str, references: &[String]) -> Result<Retried, OpError> {
    let _lock = LedgerLock::acquire(existing(ledger_path)?)?;
    let mut ledger = Ledger::open(ledger_path)?;
    let record = batch_of(&ledger, ledger_path, batch)?;
    let refs = (!references.is_empty()).then_some(references);
    let references = ledger.retry_rows(record.id, refs)?;
    retried(&ledger, &record, references, Vec::new())
}

/// Where `retry --expired` reads the links again.
#[derive(Debug, Clone)]
pub struct ReissueOptions {
    pub ledger: PathBuf,
    pub batch: String,
    /// Only these references, when not empty.
    pub references: Vec<String>,
    pub environment: Environment,
    pub api_key_file: Option<PathBuf>,
}

/// `retry --expired`: the rows of `batch` whose payout link was last read EXPIRED (only
/// `references`, when given) are read once more at the service, each order once, as `paybatch
/// payouts` reads them; a row becomes payable again at its next attempt (a new key) only when
/// its order's answer is believed and still says EXPIRED. A row whose order could not be read
/// or whose answer is not believed (a link EXPIRED before its expiry date, a final status that
/// changed) keeps its last believed status and is not reissued; its order is named in
/// [`Retried::not_read`]. The expired attempt's outcome is kept in the ledger.
pub async fn reissue_expired(
    opts: &ReissueOptions,
    reporter: &Reporter,
) -> Result<Retried, OpError> {
    let _lock = LedgerLock::acquire(existing(&opts.ledger)?)?;
    let mut ledger = Ledger::open(&opts.ledger)?;
    let record = batch_of(&ledger, &opts.ledger, &opts.batch)?;
    let wanted = |reference: &String| {
        opts.references.is_empty() || opts.references.iter().any(|r| r == reference)
    };
    let expired: Vec<(String, FollowedOrder)> = ledger
        .expired_rows(record.id)?
        .into_iter()
        .filter(|(reference, _)| wanted(reference))
        .collect();
    if expired.is_empty() {
        return retried(&ledger, &record, Vec::new(), Vec::new());
    }
    let payouts = PayoutsOptions {
        ledger: opts.ledger.clone(),
        environment: opts.environment.clone(),
        api_key_file: opts.api_key_file.clone(),
        batch: Some(opts.batch.clone()),
        reads_per_second: super::payouts::DEFAULT_READS_PER_SECOND,
        timeout: std::time::Duration::from_secs(super::payouts::DEFAULT_TIMEOUT_SECS),
        offline: false,
    };
    // The now an answer's expiry date is compared with (the embedded simulator's clock there).
    let now = super::payouts::clock_now(&payouts);
    let conn = Connection::open_for_reading(
        opts.environment.clone(),
        opts.api_key_file.as_deref(),
        &opts.ledger,
    )
    .await?;
    super::start::check_binding(&record, &conn)?;
    reporter.line(format!(
        "paybatch retry --expired: {}",
        conn.environment.banner()
    ));
    let mut orders: Vec<FollowedOrder> = Vec::new();
    for (_, order) in &expired {
        if !orders.contains(order) {
            orders.push(order.clone());
        }
    }
    let client = conn
        .client
        .with_deadline(tokio::time::Instant::now().checked_add(payouts.timeout));
    let pace = ReadPace::new(payouts.reads_per_second);
    let read =
        super::payouts::read_batch(&mut ledger, &client, &record, orders, &pace, now, reporter)
            .await?;
    let doubted: BTreeSet<&str> = read.not_read.iter().map(|n| n.order_id.as_str()).collect();
    // The rows whose order was read and believed; of them, the ledger reissues those still
    // read EXPIRED.
    let confirmed: Vec<String> = expired
        .iter()
        .filter(|(_, order)| !doubted.contains(order.service_order_id.as_str()))
        .map(|(reference, _)| reference.clone())
        .collect();
    let references = ledger.reissue_expired(record.id, Some(&confirmed))?;
    retried(&ledger, &record, references, read.not_read)
}

/// The ledger at `path`, which must exist: nothing is created.
fn existing(path: &Path) -> Result<&Path, OpError> {
    if path.exists() {
        return Ok(path);
    }
    Err(OpError::Usage(UsageError::new(
        format!("no ledger at {}", path.display()),
        "pass --ledger PATH, the ledger the batch was run with",
    )))
}

/// The batch named `batch`, which must exist.
fn batch_of(ledger: &Ledger, path: &Path, batch: &str) -> Result<BatchRecord, OpError> {
    ledger.batch(batch)?.ok_or_else(|| {
        OpError::Usage(UsageError::new(
            format!("no batch `{batch}` in {}", path.display()),
            "`paybatch run` names a batch after its file unless --batch is given",
        ))
    })
}

fn retried(
    ledger: &Ledger,
    record: &BatchRecord,
    references: Vec<String>,
    not_read: Vec<NotRead>,
) -> Result<Retried, OpError> {
    Ok(Retried {
        batch: record.name.clone(),
        environment: record.environment.clone(),
        input_path: record.input_path.clone(),
        references,
        counts: ledger.row_counts(record.id)?.into_iter().collect(),
        debited: debited_totals(ledger, record.id)?,
        not_read,
    })
}
