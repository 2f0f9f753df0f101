//! `paybatch run FILE`: the main job. Validates the batch, pays every row exactly once, polls
//! until every order is terminal and writes the result file. Running the same command again
//! resumes an interrupted run from the ledger.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::api::models::ExecutionMode;
use crate::batch::options::{self, RunOptions};
use crate::batch::outcome::{Outcome, RunSummary};
use crate::environment::Environment;
use crate::exit::Exit;
use crate::money::human_amount;

use super::CliError;
use super::plan_args::{PlanArgs, delivery_counts};
use super::progress::Console;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Validate a CSV batch, pay every row exactly once, poll every order \
until it is finished, and write the result file beside the input (mode 0600: it holds payout \
links). Every step is recorded in the ledger first: after any interruption, run the same command \
again to resume; nothing is paid twice.\n\nThe first line always names the environment; on the \
embedded simulator (the default) it says SIMULATED. With --env production on a terminal, the rows, \
totals per currency, balance and plan digest are shown and the batch name must be typed to go on; \
without a terminal (cron) --yes is required. --expect-digest DIGEST (from `paybatch validate`) \
refuses a file that changed since it was approved.\n\nExit codes: 0 every row completed; 1 \
unexpected; 2 usage or configuration (or production not confirmed); 3 invalid or balance too low, \
nothing submitted; 4 finished with failed, rejected, invalid or mismatched rows, or the service stopped part of the batch; 5 incomplete, run again to \
resume (also any error once orders went out: the help line gives the command); 6 the ledger is in use by another paybatch; 130 interrupted (Ctrl-C) and 143 terminated \
(SIGTERM): what was sent is recorded or in doubt, run the same command again to resume.";

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Where to write the result CSV (default: beside the input).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "FORMAT", help = super::out_format::HELP)]
    pub out_format: Option<crate::file_format::OutFormat>,
    /// Validate and commit the planned orders (keys and bodies) to the ledger, send nothing;
    /// exits 5 ("run again to resume"), and the next run sends them.
    #[arg(long)]
    pub plan_only: bool,
    /// Not a flag of `run` (it pays): refused with where to look instead, `paybatch validate`
    /// or `--plan-only`.
    #[arg(long, hide = true)]
    pub dry_run: bool,
    /// Create orders synchronously (one item per order) instead of asynchronously.
    #[arg(long)]
    pub sync: bool,
    /// Rows per order: `auto` (chosen from the batch's size, the rate and the requests in
    /// flight, and printed with the plan) or a number from 1 to 200. The rows of one order share
    /// their payment method and product currency; a converted row goes alone in a sync order.
    #[arg(long, default_value_t = options::ItemsPerOrder::Auto, value_name = "auto|N")]
    pub items_per_order: options::ItemsPerOrder,
    /// Order creations in any sliding minute (the service publishes 300): up to N go at once
    /// after a quiet minute, sends of earlier runs on this ledger count, and an account with a
    /// lower limit is found by its first 429s and kept under from then on.
    #[arg(long, default_value_t = options::DEFAULT_ORDER_RATE, value_name = "N")]
    pub order_rate: u32,
    /// Orders in flight at once [default: orders sized for 8 in flight, up to 64 sent at once]
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// How long the run waits for the service: polling orders that are not finished (from the
    /// first poll), and the pauses it asks for (429, errors) without an answer in between; then
    /// the run exits 5 and resumes later. At most 604800 (a week).
    #[arg(long, default_value_t = options::DEFAULT_POLL_TIMEOUT_SECS, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(0..=options::MAX_POLL_TIMEOUT_SECS))]
    pub poll_timeout: u64,
    /// Pay only if the file's plan digest is this one (from `paybatch validate`); else exit 3.
    #[arg(long, value_name = "DIGEST", value_parser = parse_digest)]
    pub expect_digest: Option<String>,
    /// Pay only a plan another user approved (`paybatch approve FILE --expect-digest DIGEST`)
    /// than the one running this: without --expect-digest, or with a digest approved by nobody
    /// else, the run is refused (exit 3). `second_person = true` in paybatch.toml sets it for
    /// every run.
    #[arg(long)]
    pub second_person: bool,
    /// Do not ask for confirmation with --env production (required there without a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// An order sent this many hours ago (fractions allowed) without a recorded answer is looked
    /// up at the service (`paybatch reconcile`) before it may be sent again.
    #[arg(long, default_value_t = options::DEFAULT_IN_DOUBT_HOURS, value_name = "HOURS", value_parser = parse_hours)]
    pub in_doubt_hours: f64,
    /// Print one JSON object on stdout at the end instead of the summary: batch, environment,
    /// exit code, rows per state, totals per paying balance and per product currency, result
    /// file.
    #[arg(long)]
    pub json: bool,
    /// Times one order is sent in this run (the first send and its retries with the same key)
    /// before it is left in doubt for the next run.
    #[arg(long, default_value_t = options::DEFAULT_SEND_TRIES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub send_tries: u32,
}

/// Hours as a positive finite number, at most ten years (`0.5`, `24`, `0.0001`).
pub(super) fn parse_hours(s: &str) -> Result<f64, String> {
    let hours: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of hours"))?;
    if !hours.is_finite() || !(0.0..=24.0 * 3650.0).contains(&hours) {
        return Err(format!("`{s}` hours: give a number from 0 to 87600"));
    }
    Ok(hours)
}

pub(super) fn parse_digest(s: &str) -> Result<String, String> {
    crate::input::scan::normalize_digest(s).ok_or_else(|| {
        format!("`{s}` is not a plan digest: expected sha256: and 64 hex digits, as `paybatch validate` prints it")
    })
}

impl RunArgs {
    fn options(&self) -> Result<RunOptions, crate::environment::UsageError> {
        let mut o = self.plan.options()?;
        o.out = self.out.clone();
        o.out_format = self.out_format;
        o.plan_only = self.plan_only;
        o.mode = if self.sync {
            ExecutionMode::Sync
        } else {
            ExecutionMode::Async
        };
        if self.sync && matches!(self.items_per_order, options::ItemsPerOrder::Fixed(n) if n > 1) {
            return Err(crate::environment::UsageError::new(
                "--sync orders hold one item only (the service's rule)",
                "drop --sync, or use --items-per-order 1",
            ));
        }
        o.items_per_order = self.items_per_order;
        o.order_rate = self.order_rate;
        o.concurrency = self.concurrency;
        o.poll_timeout = Duration::from_secs(self.poll_timeout);
        o.expect_digest = self.expect_digest.clone();
        o.second_person = self.second_person;
        o.in_doubt_window = crate::batch::in_doubt::window_of_hours(self.in_doubt_hours);
        o.max_send_tries = self.send_tries;
        Ok(o)
    }
}

pub async fn execute(args: RunArgs, quiet: bool) -> Result<Exit, CliError> {
    if args.dry_run {
        return Err(stopped(
            &args,
            None,
            CliError::usage(
                "`paybatch run` has no --dry-run: it pays",
                "`paybatch validate FILE` checks the file against the catalog, prices it and shows its plan digest without paying or recording anything; `paybatch run FILE --plan-only` records the planned orders in the ledger and sends nothing",
            ),
        ));
    }
    let mut opts = match args.options() {
        Ok(o) => o,
        Err(e) => return Err(stopped(&args, None, e.into())),
    };
    // A key of the wrong kind (or none, or a production key for another address) is the first
    // thing to say, before the ledger is touched: no confirmation can help.
    if let Err(e) = opts.environment.api_key(opts.api_key_file.as_deref()) {
        return Err(stopped(&args, Some(&opts), e.into()));
    }
    if opts.environment == Environment::Production && !args.yes {
        confirmed_on_a_terminal(&args, &mut opts).await?;
    }
    let console = Console::new(quiet);
    // Signals are caught from here on; the run goes on a task of its own, so that a signal is
    // acted on at once even while the run reads the file or writes the ledger without a pause.
    let mut signals = super::signals::Listener::new();
    let task_opts = opts.clone();
    let reporter = console.reporter();
    let mut task = tokio::spawn(async move { crate::ops::run::run(&task_opts, reporter).await });
    let outcome = tokio::select! {
        biased;
        signal = signals.next() => {
            // The run stops at its next wait (a send without its answer stays in doubt); a
            // ledger transaction under way ends, or is rolled back when the process exits.
            task.abort();
            let _ = tokio::time::timeout(STOP_GRACE, &mut task).await;
            return Ok(interrupted(&opts, signal, args.json));
        }
        joined = &mut task => match joined {
            Ok(outcome) => outcome,
            Err(e) => return Err(stopped_unexpectedly(&opts, &e)),
        },
    };
    // Quiet: the warnings held back matter only when the run does not end well.
    let ended_well = matches!(&outcome, Ok(s) if s.outcome() == Outcome::Completed);
    if !ended_well {
        for line in console.take_held_back() {
            errln!("{line}");
        }
    }
    match outcome {
        Ok(summary) => {
            let exit = super::outcome_exit(summary.outcome());
            if args.json {
                super::out_json(&super::run_json::summary(&summary, exit.code()));
            } else {
                print_summary(&summary, quiet, opts.expect_digest.as_deref());
            }
            Ok(exit)
        }
        Err(e) => {
            let e = CliError::from(e);
            if args.json {
                super::out_json(&super::run_json::failure(&opts, &e));
            }
            Err(e)
        }
    }
}

/// The run's task ended without an outcome (`e`): exit 5 with the command that resumes when the
/// ledger says orders of the batch went out, else exit 1.
fn stopped_unexpectedly(opts: &RunOptions, e: &tokio::task::JoinError) -> CliError {
    let message = format!("the run stopped unexpectedly: {e}");
    let batch = opts.batch_name();
    match super::signals::progress_of(&opts.ledger, &batch).sent {
        Some(p) if p.orders_sent > 0 => {
            let sent = format!(
                "{} of batch {batch} went out to the service, so money may have moved",
                crate::text::count(p.orders_sent, "order", "orders")
            );
            let help = crate::ops::error::resume_after_sending(&sent);
            let help = format!("{help}: {}", super::error::this_command());
            CliError::new(Exit::Incomplete, message, Some(&help))
        }
        _ => CliError::unexpected(message),
    }
}

/// A production run without `--yes`: confirmed by a person on a terminal (who types the batch
/// name), or refused.
async fn confirmed_on_a_terminal(args: &RunArgs, opts: &mut RunOptions) -> Result<(), CliError> {
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !terminal {
        let e = CliError::usage(
            "--env production pays real money, and there is no terminal to confirm the run",
            "pass --yes (from cron, together with --expect-digest DIGEST from `paybatch validate`), or run it in a terminal and confirm by typing the batch name",
        );
        return Err(stopped(args, Some(opts), e));
    }
    if let Err(e) = confirm_production(opts).await {
        if args.json {
            super::out_json(&super::run_json::refused(
                Some(opts),
                &args.plan.file,
                e.exit.code(),
                "not confirmed",
                "",
            ));
        }
        return Err(e);
    }
    Ok(())
}

/// A run refused before it started: with `--json`, the object says so too. Returns the error.
fn stopped(args: &RunArgs, opts: Option<&RunOptions>, e: CliError) -> CliError {
    if args.json {
        super::out_json(&super::run_json::refused(
            opts,
            &args.plan.file,
            e.exit.code(),
            e.message(),
            e.help().unwrap_or_default(),
        ));
    }
    e
}

/// How long a stopped run may take to reach its next wait before the process says how far it
/// got and exits.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The run was stopped by a signal: the operation was dropped at its next wait (a send whose
/// answer did not come stays in doubt and is re-sent with its key by the next run). Says what
/// the ledger holds and gives the signal's exit code.
fn interrupted(opts: &RunOptions, signal: super::signals::StopSignal, json: bool) -> Exit {
    // A result file being written (a plan-only run writes it while it reads) is not left.
    crate::batch::output::remove_unfinished();
    let progress = super::signals::progress_of(&opts.ledger, &opts.batch_name());
    let line = format!(
        "{}: {}; nothing is lost; run the same command again{} to resume",
        signal.word(),
        progress.describe(),
        held_to(opts.expect_digest.as_deref())
    );
    errln!("{line}");
    if json {
        super::out_json(&super::run_json::interrupted(opts, &progress, signal));
    }
    signal.exit()
}

/// How the advice to run the same command again keeps the approved plan a run was held to
/// (given, or confirmed on a terminal): ` (with --expect-digest DIGEST)`, else nothing.
fn held_to(digest: Option<&str>) -> String {
    digest
        .map(|d| format!(" (with --expect-digest {d})"))
        .unwrap_or_default()
}

/// On a terminal, before a production run: shows what will be paid (rows, totals per currency,
/// balance, plan digest) and goes on only when the person types the batch name. The digest
/// shown is then required of the run, so what was confirmed is what is paid. An invalid batch
/// is not confirmed: the run itself reports it and submits nothing.
async fn confirm_production(opts: &mut RunOptions) -> Result<(), CliError> {
    errln!("paybatch run: {}", opts.environment.banner());
    let preview = crate::ops::preview::preview(opts).await?;
    // Nothing to confirm when the run will refuse anyway (it says why): an invalid batch, or a
    // file that is not the plan given with --expect-digest.
    let approved_elsewhere = opts.expect_digest.as_deref().is_some_and(|expected| {
        preview
            .digest
            .as_deref()
            .is_none_or(|d| !crate::input::scan::digests_match(expected, d))
    });
    if !preview.is_valid() || approved_elsewhere {
        return Ok(());
    }
    let _ = super::validate::print_preview(&preview, &mut std::io::stderr());
    let batch = opts.batch_name();
    let stdin = std::io::stdin();
    match ask_batch_name(&batch, &mut stdin.lock(), &mut std::io::stderr()) {
        Ok(true) => {
            if opts.expect_digest.is_none() {
                opts.expect_digest = preview.digest.clone();
            }
            Ok(())
        }
        Ok(false) => Err(CliError::usage(
            "not confirmed: nothing was submitted",
            &format!("to pay this batch, run the command again and type `{batch}` when asked"),
        )),
        Err(e) => Err(CliError::new(
            Exit::Usage,
            format!("cannot read the confirmation: {e}"),
            None,
        )),
    }
}

/// Asks for the batch name; true when exactly that was typed (surrounding spaces ignored).
pub fn ask_batch_name(
    batch: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<bool> {
    write!(
        output,
        "This pays REAL MONEY. Type the batch name `{}` to go on (anything else stops): ",
        crate::text::shown(batch)
    )?;
    output.flush()?;
    let mut answer = String::new();
    input.read_line(&mut answer)?;
    Ok(answer.trim() == batch)
}

/// The run's summary on stdout; `approved`: the plan digest the run was held to, which the
/// advice to resume keeps.
fn print_summary(s: &RunSummary, quiet: bool, approved: Option<&str>) {
    let outcome = s.outcome();
    if quiet && outcome == Outcome::Completed {
        return;
    }
    let label = if s.environment.is_simulated() {
        " (SIMULATED: no real money moved)"
    } else {
        ""
    };
    outln!("batch {}{label}", s.batch);
    outln!("  {:<12} {:>8}", "status", "rows");
    for (state, n) in &s.counts {
        outln!("  {:<12} {:>8}", state.as_str(), n);
    }
    print_money(s);
    if !s.per_delivery.is_empty() {
        outln!("  rows per delivery: {}", delivery_counts(&s.per_delivery));
    }
    print_invalid(s);
    if s.unconfirmed > 0 {
        outln!(
            "  unconfirmed: {} COMPLETED rows, their orders not confirmed as the ones sent (the service's answer named neither key nor batch; error_type order_unconfirmed, or order_and_total_unconfirmed, in the result file)",
            s.unconfirmed
        );
    }
    if s.total_unconfirmed > 0 {
        outln!(
            "  total not confirmed: {} COMPLETED rows, converted, their orders' totals not checked (the service's answer left out the transaction_detail that checks them; error_type total_unconfirmed, or order_and_total_unconfirmed, in the result file)",
            s.total_unconfirmed
        );
    }
    if !s.paid_by.is_empty() {
        let parts: Vec<String> = s
            .paid_by
            .iter()
            .map(|(method, n)| match method.strip_prefix("balance ") {
                Some(currency) => format!("{} from the {currency} balance", crate::text::rows(*n)),
                None => format!("{} by {method}", crate::text::rows(*n)),
            })
            .collect();
        outln!("  paid from: {}", parts.join(", "));
    }
    for line in &s.stopped {
        outln!("  stopped: {line}");
    }
    print_replanned(s);
    outln!("result file: {}", s.result_file());
    let verdict = match outcome {
        Outcome::Completed => "every row completed".to_string(),
        Outcome::NeedsAPerson if !s.stopped.is_empty() => {
            "the service stopped part of the batch (see `stopped` above); nothing is lost".to_string()
        }
        Outcome::NeedsAPerson => "finished with failed, rejected, invalid or mismatched rows (see the result file; `paybatch status` says what to do)".to_string(),
        Outcome::Incomplete => format!(
            "incomplete{}: run the same command again{} to resume",
            s.incomplete_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            held_to(approved)
        ),
    };
    let code = super::outcome_exit(outcome).code();
    outln!("paybatch run: {verdict} (exit {code})");
}

/// The completed totals per product currency and what left each balance, amounts grouped.
fn print_money(s: &RunSummary) {
    if !s.totals.is_empty() {
        outln!("  completed totals:");
        outln!("  {:<8} {:>14} {:>14}", "currency", "face value", "price");
        for (cur, (face, price)) in &s.totals {
            outln!(
                "  {:<8} {:>14} {:>14}",
                cur,
                human_amount(*face, cur),
                human_amount(*price, cur)
            );
        }
    }
    if !s.debited.is_empty() {
        outln!("  charged (what left each balance, conversions included):");
        for ((payer, currency), amount) in &s.debited {
            outln!(
                "  {:<20} {:>14} {currency}",
                payer,
                human_amount(*amount, currency)
            );
        }
    }
}

/// The rows planned again after the service refused other items of their orders, and why.
fn print_replanned(s: &RunSummary) {
    let rows: i64 = s.replanned.iter().map(|(_, n)| n).sum();
    if rows == 0 {
        return;
    }
    let why: Vec<String> = s
        .replanned
        .iter()
        .map(|(kind, n)| format!("{kind}: {n}"))
        .collect();
    outln!(
        "  re-planned: {} planned again in new orders, as the service refused other items of their orders ({}; the refused rows are REJECTED with its reason)",
        crate::text::rows(rows),
        why.join(", ")
    );
}

/// The first INVALID rows with their problems, and how many more.
fn print_invalid(s: &RunSummary) {
    if s.invalid.is_empty() {
        return;
    }
    let all = s.count(crate::ledger::RowState::Invalid);
    let more = all - s.invalid.len() as i64;
    outln!(
        "  INVALID, not paid ({all}; each with its problem in the result file's error_message){}:",
        if more > 0 {
            format!(", the first {}", s.invalid.len())
        } else {
            String::new()
        }
    );
    for row in &s.invalid {
        outln!("    {row}");
    }
    if more > 0 {
        outln!("    and {more} more");
    }
}

#[cfg(test)]
mod tests {
    use super::{ask_batch_name, held_to};

    #[test]
    fn the_advice_to_resume_keeps_the_approved_digest() {
        let digest = format!("sha256:{}", "0f".repeat(32));
        assert_eq!(
            held_to(Some(&digest)),
            format!(" (with --expect-digest {digest})")
        );
        assert_eq!(held_to(None), "");
    }

    #[test]
    fn production_is_confirmed_only_by_the_batch_name() {
        let ask = |typed: &str| {
            let mut out = Vec::new();
            let ok = ask_batch_name("nov", &mut typed.as_bytes(), &mut out).expect("io");
            let prompt = String::from_utf8(out).expect("utf-8");
            assert!(
                prompt.contains("REAL MONEY") && prompt.contains("`nov`"),
                "{prompt}"
            );
            ok
        };
        assert!(ask("nov\n"));
        assert!(ask("  nov \r\n"));
        assert!(!ask("y\n"));
        assert!(!ask("NOV\n"));
        assert!(!ask(""));
    }
}
