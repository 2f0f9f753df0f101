//! `paybatch reconcile --batch NAME`: compares the ledger with the service's own order list and
//! repairs the ledger: orders it does not know (lost or restored ledger), in-doubt intents the
//! service never turned into orders, statuses behind the service's. `--dry-run` only reports;
//! `--rebuild FILE` restores a lost ledger from the service and the input file.

use std::path::PathBuf;

use clap::Args;

use crate::batch::pipeline::RunError;
use crate::batch::reconcile::{self, ReconcileReport};
use crate::catalog;
use crate::environment::Connection;
use crate::exit;
use crate::input::rules::{CatalogIndex, ValidateOptions};
use crate::input::scan;
use crate::ledger::{Ledger, NewBatch};

use super::{ServiceArgs, config_failure, lock_ledger, print_error};

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The batch to reconcile.
    #[arg(long)]
    pub batch: String,
    /// Report what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The ledger was lost: rebuild the batch from this input file and the service's orders.
    #[arg(long, value_name = "FILE")]
    pub rebuild: Option<PathBuf>,
    /// With --rebuild: the balance the batch's run was told to pay from (its --payment-currency),
    /// so that rows needing it are read as they were paid.
    #[arg(long, value_name = "CUR", requires = "rebuild")]
    pub payment_currency: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// An intent in doubt for longer than this many hours, that the service holds no order for
    /// and whose key only gets a server error back, is given up: its rows are REJECTED for
    /// `paybatch retry` to send under a new key (the same window as `run --in-doubt-hours`).
    #[arg(long, default_value_t = crate::batch::pipeline::DEFAULT_IN_DOUBT_HOURS, value_name = "HOURS", value_parser = super::run::parse_hours)]
    pub in_doubt_hours: f64,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: ReconcileArgs) -> i32 {
    let environment = match args.service.environment() {
        Ok(e) => e,
        Err(e) => return config_failure(&e),
    };
    let ledger_path = &args.service.ledger;
    let _lock = match lock_ledger(ledger_path) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let mut ledger = match Ledger::open(ledger_path) {
        Ok(l) => l,
        Err(e) => {
            print_error(&e.to_string(), None);
            return exit::UNEXPECTED;
        }
    };
    let conn = match Connection::open(
        environment,
        args.service.api_key_file.as_deref(),
        ledger_path,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return config_failure(&e),
    };
    errln!(
        "paybatch reconcile: {} | batch {}",
        conn.environment.banner(),
        args.batch
    );
    let mut rebuilt = false;
    let batch = match ledger.batch(&args.batch) {
        Ok(Some(b)) => b,
        Ok(None) => match &args.rebuild {
            Some(file) if !args.dry_run => {
                let default_payment = args.payment_currency.clone();
                match rebuild(&mut ledger, &conn, &args.batch, file, default_payment).await {
                    Ok(b) => {
                        rebuilt = true;
                        b
                    }
                    Err(code) => return code,
                }
            }
            _ => {
                print_error(
                    &format!("no batch `{}` in {}", args.batch, ledger_path.display()),
                    Some(
                        "if the ledger was lost, pass --rebuild FILE (the batch's input file) to restore it from the service",
                    ),
                );
                return exit::USAGE;
            }
        },
        Err(e) => {
            print_error(&e.to_string(), None);
            return exit::UNEXPECTED;
        }
    };
    let window = std::time::Duration::from_secs_f64(args.in_doubt_hours * 3600.0);
    match reconcile::reconcile(&mut ledger, &conn.client, &batch, window, args.dry_run).await {
        Ok(report) => {
            print_report(&report, args.dry_run, args.json);
            if rebuilt && !report.unattributed.is_empty() {
                // Orders still processing may hold rows the file now has PENDING: a run
                // would plan them again under other keys. Nothing is planned until they can be
                // told.
                if let Err(e) = ledger.set_unsettled(batch.id, true) {
                    print_error(&e.to_string(), None);
                    return exit::UNEXPECTED;
                }
                errln!(
                    "{} orders of the account are still processing and cannot be attributed yet: they may hold rows of this batch, so `paybatch run` sends nothing for it until a reconciliation can tell them; run `paybatch reconcile --batch {}` again once they finish",
                    report.unattributed.len(),
                    crate::text::shell_word(&batch.name)
                );
                return exit::INCOMPLETE;
            }
            if report.needs_a_person() {
                exit::FAILURES
            } else {
                exit::OK
            }
        }
        Err(e) => {
            print_error(
                &e.to_string(),
                Some("check the key and environment with `paybatch ping`"),
            );
            exit::UNEXPECTED
        }
    }
}

async fn rebuild(
    ledger: &mut Ledger,
    conn: &Connection,
    name: &str,
    file: &std::path::Path,
    default_payment_currency: Option<String>,
) -> Result<crate::ledger::BatchRecord, i32> {
    let fail = |msg: String| {
        print_error(&msg, None);
        exit::UNEXPECTED
    };
    let (products, _) = catalog::load(
        ledger,
        &conn.client,
        &conn.environment.identity(),
        catalog::DEFAULT_TTL,
        false,
    )
    .await
    .map_err(|e| fail(e.to_string()))?;
    let options = ValidateOptions {
        allow_duplicates: true,
        default_payment_currency,
    };
    let catalog = CatalogIndex::new(products);
    let scanned = scan::scan(file, None, &catalog, &options, None, |_| {}).map_err(|p| {
        super::print_problem(&p);
        exit::INVALID
    })?;
    let batch = ledger
        .create_batch(&NewBatch {
            name,
            input_path: &file.display().to_string(),
            input_hash: &scanned.file_hash,
            headers: &scanned.headers,
            environment: conn.environment.name(),
            base_url: &conn.environment.recorded_base_url(),
            key_fingerprint: &conn.key_fingerprint,
        })
        .map_err(|e| fail(e.to_string()))?;
    // Rows are recorded as the file has them (PENDING or INVALID); reconcile then attaches the
    // service's orders to them.
    let mut merge = ledger
        .merge(batch.id, false)
        .map_err(|e| fail(e.to_string()))?;
    scan::read_again(&scanned, file, &catalog, &options, |row, _| {
        merge.row(&row).map(drop).map_err(RunError::from)
    })
    .map_err(|e| fail(e.to_string()))?;
    merge.close().map_err(|e| fail(e.to_string()))?;
    merge.commit().map_err(|e| fail(e.to_string()))?;
    errln!(
        "rebuilt batch {name} from {} ({} rows)",
        file.display(),
        scanned.rows
    );
    Ok(batch)
}

fn print_report(r: &ReconcileReport, dry_run: bool, json: bool) {
    if json {
        outln!(
            "{}",
            serde_json::json!({
                "dry_run": dry_run,
                "found": r.found,
                "adopted": r.adopted,
                "absent": r.absent,
                "retired": r.retired,
                "unattributed": r.unattributed,
                "updated": r.updated,
                "unknown_rows": r.unknown_rows,
                "duplicates": r.duplicates,
                "superseded": r.superseded,
                "unattached": r.unattached,
            })
        );
        return;
    }
    let verb = if dry_run { "would record" } else { "recorded" };
    outln!("orders of this batch at the service: {}", r.found);
    for (reference, id) in &r.adopted {
        outln!("  {verb} order {id} for row {reference} (the ledger did not know it)");
    }
    for key in &r.absent {
        let verb = if dry_run { "would clear" } else { "cleared" };
        outln!(
            "  {verb} in-doubt intent {key}: the service never created it; the next run sends it"
        );
    }
    for key in &r.retired {
        let verb = if dry_run { "would mark" } else { "marked" };
        outln!(
            "  {verb} in-doubt intent {key} REJECTED: the service never created it and answers its key only with the server error it keeps for it; `paybatch retry` sends its rows under a new key"
        );
    }
    for id in &r.unattributed {
        outln!(
            "  order {id} of this batch at the service does not say its rows yet (still processing?): no in-doubt key is given up until it does"
        );
    }
    for key in &r.superseded {
        let verb = if dry_run { "would mark" } else { "marked" };
        outln!(
            "  {verb} intent {key} REJECTED: a later attempt of its row is at the service; it is never sent"
        );
    }
    for (id, from, to) in &r.updated {
        outln!("  order {id}: {from} -> {to}");
    }
    for (reference, id) in &r.unknown_rows {
        outln!(
            "  order {id} is for row {reference}, which the ledger does not have (pass --rebuild FILE)"
        );
    }
    for (reference, id) in &r.unattached {
        outln!(
            "  ALERT: order {id} pays row {reference}, which the ledger cannot attach it to (the row is INVALID or REMOVED there, or has another order); when rebuilding, give the options the batch ran with (--payment-currency)"
        );
    }
    for (reference, ids) in &r.duplicates {
        outln!(
            "  ALERT: row {reference} has {} live orders: {}",
            ids.len(),
            ids.join(", ")
        );
    }
    if r.is_clean() {
        outln!("the ledger agrees with the service");
    }
}
