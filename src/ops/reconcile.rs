//! `reconcile`: the ledger of a batch against the service's own order list, repairing what the
//! ledger lacks or has behind; and the rebuild of a lost ledger from the service and the
//! batch's input file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::batch::options::RunOptions;
use crate::batch::progress::Reporter;
use crate::batch::reconcile::{self, ReconcileReport};
use crate::environment::{Connection, Environment, UsageError};
use crate::input::rules::{CatalogIndex, Problems, ValidateOptions};
use crate::input::scan;
use crate::ledger::lock::LedgerLock;
use crate::ledger::merge::Planning;
use crate::ledger::{BatchRecord, Ledger};
use crate::ops::error::OpError;

use super::start::{load_catalog, open_batch};

/// What to reconcile, and how.
#[derive(Debug, Clone)]
pub struct ReconcileOptions {
    pub batch: String,
    pub ledger: PathBuf,
    pub environment: Environment,
    pub api_key_file: Option<PathBuf>,
    /// Report only; change nothing.
    pub dry_run: bool,
    /// Restore a batch the ledger does not have from the service and this input file.
    pub rebuild: Option<PathBuf>,
    /// `--payment-currency` the batch ran with (for a rebuild).
    pub payment_currency: Option<String>,
    /// In-doubt intents first sent longer ago than this may be given up.
    pub in_doubt_window: Duration,
}

/// What a reconciliation found and did.
#[derive(Debug, Clone)]
pub struct Reconciled {
    pub report: ReconcileReport,
    /// The batch was rebuilt from the input file first.
    pub rebuilt: bool,
    /// A rebuilt batch whose service orders are not all attributable yet: `run` plans nothing
    /// for it until a later reconciliation can tell them.
    pub unsettled: bool,
}

/// Reconciles a batch (rebuilding it first when asked and the ledger lacks it).
pub async fn reconcile_batch(
    opts: &ReconcileOptions,
    reporter: &Reporter,
) -> Result<Reconciled, OpError> {
    let _lock = LedgerLock::acquire(&opts.ledger)?;
    let mut ledger = Ledger::open(&opts.ledger)?;
    let conn = Connection::open(
        opts.environment.clone(),
        opts.api_key_file.as_deref(),
        &opts.ledger,
    )
    .await?;
    ledger.set_books_clock(conn.books_clock());
    reporter.line(format!(
        "paybatch reconcile: {} | batch {}",
        conn.environment.banner(),
        opts.batch
    ));
    let existing = ledger.batch(&opts.batch)?;
    // A batch that has sent nothing (a restored backup, a run stopped before its first send)
    // may take the file's rows too, for the service's orders of it to be adopted.
    let unsent = match &existing {
        Some(b) => !ledger.has_sent(b.id)?,
        None => true,
    };
    let (batch, rebuilt) = match (existing, &opts.rebuild) {
        (existing, Some(file)) if !opts.dry_run && unsent => (
            rebuild(&mut ledger, &conn, opts, file, existing, reporter).await?,
            true,
        ),
        (Some(b), _) => (b, false),
        (None, _) => {
            return Err(OpError::Usage(UsageError::new(
                format!("no batch `{}` in {}", opts.batch, opts.ledger.display()),
                "if the ledger was lost, pass --rebuild FILE (the batch's input file) to restore it from the service",
            )));
        }
    };
    let report = reconcile::reconcile(
        &mut ledger,
        &conn.client,
        &batch,
        opts.in_doubt_window,
        crate::settings::settle_override(),
        if opts.dry_run {
            reconcile::Apply::DryRun
        } else {
            reconcile::Apply::Repair
        },
    )
    .await
    .map_err(|e| {
        if opts.dry_run {
            OpError::from(e)
        } else {
            OpError::from(e).while_adopting(&opts.batch)
        }
    })?;
    // Orders still processing may hold rows the file now has PENDING: a run would plan them
    // again under other keys. Nothing is planned until they can be told.
    let unsettled = rebuilt && !report.unattributed.is_empty();
    if unsettled {
        ledger.set_unsettled(batch.id, true)?;
    }
    Ok(Reconciled {
        report,
        rebuilt,
        unsettled,
    })
}

/// Restores a batch from its input file: the rows as the file has them (PENDING or INVALID),
/// to which the reconciliation then attaches the service's orders. An `existing` batch (one
/// that has sent nothing) is given the rows it lacks.
pub async fn rebuild(
    ledger: &mut Ledger,
    conn: &Connection,
    opts: &ReconcileOptions,
    file: &Path,
    existing: Option<BatchRecord>,
    reporter: &Reporter,
) -> Result<BatchRecord, OpError> {
    let mut run = RunOptions::new(file);
    run.batch = Some(opts.batch.clone());
    run.environment = opts.environment.clone();
    run.ledger = opts.ledger.clone();
    let (products, _) = load_catalog(ledger, conn, &run).await?;
    let options = ValidateOptions {
        allow_duplicates: true,
        default_payment_currency: opts.payment_currency.clone(),
        decimal_comma: false,
    };
    let catalog = CatalogIndex::new(products);
    let scanned =
        scan::scan(file, &Default::default(), &catalog, &options, None, |_| {}).map_err(|p| {
            OpError::Invalid {
                input: file.to_path_buf(),
                problems: Problems::from_iter([p]),
            }
        })?;
    if let Some(b) = &existing {
        super::start::check_binding(b, conn)?;
    }
    let batch = open_batch(ledger, existing, &run, &scanned, conn, &Reporter::silent())?;
    let mut merge = ledger.merge(batch.id, Planning::RecordPending)?;
    scan::read_again(&scanned, file, &catalog, &options, |row, _| {
        merge.row(&row).map(drop).map_err(OpError::from)
    })?;
    merge.close()?;
    merge.commit()?;
    reporter.line(format!(
        "rebuilt batch {} from {} ({} rows)",
        opts.batch,
        file.display(),
        scanned.rows
    ));
    Ok(batch)
}
