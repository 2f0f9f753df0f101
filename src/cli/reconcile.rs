//! `paybatch reconcile --batch NAME`: compares the ledger with the service's own order list and
//! repairs the ledger: orders it does not know (lost or restored ledger), in-doubt intents the
//! service never turned into orders, statuses behind the service's. `--dry-run` only reports;
//! `--rebuild FILE` restores a lost ledger from the service and the input file.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::batch::reconcile::ReconcileReport;
use crate::exit::Exit;
use crate::ops::reconcile::{ReconcileOptions, reconcile_batch};

use super::progress::Console;
use super::{CliError, ServiceArgs};

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
    #[arg(long, default_value_t = crate::batch::options::DEFAULT_IN_DOUBT_HOURS, value_name = "HOURS", value_parser = super::run::parse_hours)]
    pub in_doubt_hours: f64,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: ReconcileArgs) -> Result<Exit, CliError> {
    let environment = args.service.environment()?;
    let opts = ReconcileOptions {
        batch: args.batch.clone(),
        ledger: args.service.ledger.clone(),
        environment,
        api_key_file: args.service.api_key_file.clone(),
        dry_run: args.dry_run,
        rebuild: args.rebuild.clone(),
        payment_currency: args.payment_currency.clone(),
        in_doubt_window: crate::batch::in_doubt::window_of_hours(args.in_doubt_hours),
    };
    let console = Console::new(false);
    let done = reconcile_batch(&opts, &console.reporter()).await?;
    print_report(&done.report, args.dry_run, args.json);
    if done.unsettled {
        errln!(
            "{} orders of the account are still processing, or were answered without naming their rows, and cannot be attributed yet: they may hold rows of this batch, so `paybatch run` sends nothing for it until a reconciliation can tell them; run `paybatch reconcile --batch {}{}` again once they finish or are answered whole",
            done.report.unattributed.len(),
            crate::text::shell_word(&args.batch),
            args.service.repeated()
        );
        return Ok(Exit::Incomplete);
    }
    if !done.report.kept_in_doubt.is_empty() && !done.report.needs_a_person() {
        errln!(
            "{} in-doubt intents stay in doubt while orders of the account still processing cannot be attributed: run `paybatch reconcile --batch {}{}` again once they finish",
            done.report.kept_in_doubt.len(),
            crate::text::shell_word(&args.batch),
            args.service.repeated()
        );
        return Ok(Exit::Incomplete);
    }
    Ok(if done.report.needs_a_person() {
        Exit::Failures
    } else {
        Exit::Ok
    })
}

/// `reconcile --json`: whether it was a dry run, and what was found and what was (or would
/// be) done.
#[derive(Serialize)]
struct ReportJson<'a> {
    dry_run: bool,
    #[serde(flatten)]
    report: &'a ReconcileReport,
}

fn print_report(r: &ReconcileReport, dry_run: bool, json: bool) {
    if json {
        super::out_json(&ReportJson { dry_run, report: r });
        return;
    }
    let verb = if dry_run { "would record" } else { "recorded" };
    outln!("orders of this batch at the service: {}", r.found);
    for (reference, id) in &r.adopted {
        outln!("  {verb} order {id} for row {reference} (the ledger did not know it)");
    }
    print_intents(r, dry_run);
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
    for (reference, id) in &r.reissued {
        outln!(
            "  reissued: order {id} of row {reference}, whose payout link was read EXPIRED and reissued (not a second live order)"
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

/// What a reconciliation did, or would do, with the ledger's intents.
fn print_intents(r: &ReconcileReport, dry_run: bool) {
    for key in &r.absent {
        let verb = if dry_run { "would clear" } else { "cleared" };
        outln!(
            "  {verb} in-doubt intent {key}: the service never created it; the next run sends it"
        );
    }
    for key in &r.kept_in_doubt {
        outln!(
            "  in-doubt intent {key} stays in doubt: the service has no order that names it, but orders of the account still processing there do not say their rows yet and one may be its own (an answer lost while it processes); reconcile again once they finish"
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
            "  order {id} of the account at the service does not say its rows yet (still processing, or answered without them): no in-doubt key is given up until it does"
        );
    }
    for key in &r.released {
        let verb = if dry_run { "would cancel" } else { "cancelled" };
        outln!(
            "  {verb} intent {key}: the service never created it and has its rows in orders another ledger made; those are recorded for them instead"
        );
    }
    for key in &r.superseded {
        let verb = if dry_run { "would mark" } else { "marked" };
        outln!(
            "  {verb} intent {key} REJECTED: a later attempt of its row is at the service; it is never sent"
        );
    }
}
