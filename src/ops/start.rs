//! What every operation on a batch starts with: the input file readable, the catalog of the
//! environment (cached in the ledger), an existing batch bound to this environment and key, and
//! the ledger's batch for the file.

use std::path::Path;

use crate::api::models::Product;
use crate::batch::approved::{PlanContext, RepeatsKept};
use crate::batch::options::RunOptions;
use crate::batch::progress::Reporter;
use crate::batch::repeats::Repeats;
use crate::catalog::{self, CatalogError};
use crate::environment::{Connection, UsageError};
use crate::input::scan;
use crate::ledger::attempts::LaterAttempt;
use crate::ledger::{self, Ledger};
use crate::ops::error::{OpError, is_auth_error};

/// The catalog of the run's environment, cached in the ledger (fetched when older than
/// `--catalog-ttl`); a refused key is reported as such.
pub async fn load_catalog(
    ledger: &mut Ledger,
    conn: &Connection,
    opts: &RunOptions,
) -> Result<(Vec<Product>, catalog::CatalogSource), OpError> {
    catalog::load(
        ledger,
        &conn.client,
        &opts.environment.identity(),
        opts.catalog_ttl,
        catalog::Fetch::IfStale,
    )
    .await
    .map_err(catalog_error)
}

/// A catalog that could not be had, as the operations report it: a refused key as such.
pub fn catalog_error(e: CatalogError) -> OpError {
    match e {
        CatalogError::Api(api) if is_auth_error(&api) => OpError::Auth(api),
        other => OpError::Catalog(other),
    }
}

/// An existing batch is resumed only with the environment, address and key it was started with.
pub fn check_binding(b: &ledger::BatchRecord, conn: &Connection) -> Result<(), OpError> {
    let env = &conn.environment;
    let base = env.recorded_base_url();
    if b.environment != env.name() || b.base_url != base {
        return Err(OpError::Binding {
            message: format!(
                "batch `{}` belongs to environment {} ({}), not {} ({})",
                b.name,
                b.environment,
                b.base_url,
                env.name(),
                base
            ),
            help: "resume it with the environment it was started in, or give this run another --batch name (a rehearsal and a real payout must not share a batch)".into(),
        });
    }
    if b.key_fingerprint != conn.key_fingerprint {
        return Err(OpError::Binding {
            message: format!(
                "batch `{}` was started with another API key ({}; this run uses {})",
                b.name, b.key_fingerprint, conn.key_fingerprint
            ),
            help: "orders are visible only to the key that created them: resume with the same key, or reconcile the batch first".into(),
        });
    }
    Ok(())
}

/// What the batch's ledger holds for rows the file does not have ([`ledger::OutsideFile`]):
/// nothing for a batch new to the ledger.
pub fn outside_file(
    ledger: &Ledger,
    batch: Option<&ledger::BatchRecord>,
    scanned: &scan::Scan,
) -> Result<ledger::OutsideFile, OpError> {
    match batch {
        Some(b) => Ok(ledger.orders_outside_file(b.id, |r| scanned.has_reference(r))?),
        None => Ok(ledger::OutsideFile::default()),
    }
}

/// The plan digest of a file whose own digest is `file` ([`scan::PlanDigest`]), with the
/// orders followed for rows it does not have (`outside`, see [`scan::plan_digest`]), the rows
/// of the file at a later attempt than their first (`attempts`, see [`scan::fold_attempts`])
/// and the repeats and the decision on them ([`Repeats::fold_into`]): what `validate` shows and
/// `run --expect-digest` insists on, made the same way from the same ledger and file. With it,
/// what the digest covers besides the rows, as an approved plan keeps it.
pub fn plan_and_context(
    ledger: &Ledger,
    outside: &ledger::OutsideFile,
    file: String,
    repeats: &Repeats,
    attempts: Vec<LaterAttempt>,
) -> Result<(String, PlanContext), OpError> {
    let orders = orders_outside(ledger, outside)?;
    let plan = scan::fold_attempts(
        scan::plan_digest(file.clone(), orders.clone()),
        attempts.iter().map(|a| (a.reference.as_str(), a.attempt)),
    );
    let context = PlanContext {
        rows_digest: file,
        followed: orders.sorted(),
        repeats: RepeatsKept::of(repeats),
        attempts,
    };
    Ok((repeats.fold_into(&plan), context))
}

/// The rows of the file that the batch holds at a later attempt than their first (made payable
/// again by `retry` or `retry --expired`): none for a batch new to the ledger.
pub fn attempts_in_file(
    ledger: &Ledger,
    batch: Option<&ledger::BatchRecord>,
    scanned: &scan::Scan,
) -> Result<Vec<LaterAttempt>, OpError> {
    let Some(b) = batch else {
        return Ok(Vec::new());
    };
    let mut attempts = ledger.later_attempts(b.id)?;
    attempts.retain(|a| scanned.has_reference(&a.reference));
    Ok(attempts)
}

/// The orders followed for rows the file does not have, by key and body, as the plan digest
/// covers them.
pub fn orders_outside(
    ledger: &Ledger,
    outside: &ledger::OutsideFile,
) -> Result<scan::OrdersOutside, OpError> {
    let mut orders = scan::OrdersOutside::default();
    for &id in &outside.followed {
        let (key, body) = ledger.order_key_and_body(id)?.ok_or_else(|| {
            OpError::Ledger(ledger::LedgerError::Corrupt(format!(
                "order {id} vanished while it was read"
            )))
        })?;
        orders.add(&key, &body);
    }
    Ok(orders)
}

/// The ledger's batch: the existing one, now bound to this file, or a new one.
pub fn open_batch(
    ledger: &mut Ledger,
    existing: Option<ledger::BatchRecord>,
    opts: &RunOptions,
    scanned: &scan::Scan,
    conn: &Connection,
    reporter: &Reporter,
) -> Result<ledger::BatchRecord, OpError> {
    let input_path = opts.input.display().to_string();
    let batch_name = opts.batch_name();
    Ok(match existing {
        Some(b) => {
            ledger.update_batch_input(
                b.id,
                &input_path,
                &scanned.file_hash,
                &scanned.headers,
                opts.formats(scanned.format, false),
            )?;
            reporter.line(format!(
                "resuming batch {batch_name} (created {})",
                b.created_at
            ));
            b
        }
        None => {
            let origin = BatchOrigin::of(opts);
            ledger.create_batch(&origin.new_batch(
                opts,
                &conn.key_fingerprint,
                &scanned.file_hash,
                &scanned.headers,
                Some(opts.formats(scanned.format, true)),
            ))?
        }
    })
}

/// What a new batch records of the run that creates it (its name, input path and the address
/// of its environment), held for [`BatchOrigin::new_batch`].
pub struct BatchOrigin {
    name: String,
    input_path: String,
    base_url: String,
}

impl BatchOrigin {
    pub fn of(opts: &RunOptions) -> Self {
        BatchOrigin {
            name: opts.batch_name(),
            input_path: opts.input.display().to_string(),
            base_url: opts.environment.recorded_base_url(),
        }
    }

    /// The batch to create for `opts`, started with the key of `key_fingerprint`, from a file
    /// of `input_hash` with `headers` and layouts `formats` (`None`: recorded once read).
    pub fn new_batch<'a>(
        &'a self,
        opts: &'a RunOptions,
        key_fingerprint: &'a str,
        input_hash: &'a str,
        headers: &'a [String],
        formats: Option<ledger::Formats>,
    ) -> ledger::NewBatch<'a> {
        ledger::NewBatch {
            name: &self.name,
            input_path: &self.input_path,
            input_hash,
            headers,
            environment: opts.environment.name(),
            base_url: &self.base_url,
            key_fingerprint,
            formats,
        }
    }
}

/// The input file can be read: checked before anything is made (ledger, lock, simulator
/// state). A missing or unreadable file is a usage error.
pub fn check_input(path: &Path) -> Result<(), OpError> {
    let help = "check the file's path (a relative path starts from the current directory) and that this user can read it";
    // The kind of file is read before it is opened: opening a FIFO would wait for a writer.
    match std::fs::metadata(path).and_then(|m| {
        if m.is_file() {
            std::fs::File::open(path).map(|_| m)
        } else {
            Ok(m)
        }
    }) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(OpError::Usage(UsageError::new(
            format!("{} is not a file", path.display()),
            help,
        ))),
        Err(e) => Err(OpError::Usage(UsageError::new(
            format!("cannot read {}: {e}", path.display()),
            help,
        ))),
    }
}
