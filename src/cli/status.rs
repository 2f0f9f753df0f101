//! `paybatch status [--batch NAME]`: what the ledger says, without asking the service: every
//! batch with its rows per state, or one batch in detail (rows per state, orders in flight and
//! their age, the last events) and what to do next. The ledger is read by
//! [`crate::ops::status`]; this file renders what it returns.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Args;
use serde::Serialize;

use crate::batch::in_doubt;
use crate::environment::Environment;
use crate::exit::Exit;
use crate::ledger::{BatchRecord, EventRecord, RowState, approvals};
use crate::ops::status::{self, BatchCounts, Detail, InFlight};
use crate::text::shell_word;

use super::{CliError, DEFAULT_LEDGER, InOrder, ServiceArgs};

/// Orders in flight listed one by one (the rest are counted).
const LISTED_IN_FLIGHT: usize = 20;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Show what the ledger says, without asking the service: every batch with its rows \
per state, or one batch (--batch) with its rows per state, the orders in flight and their age, \
the last events, and what to do next.\n\nReads the ledger only (a ledger of an earlier paybatch is first brought to this version's schema); safe while a run is going on.";

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Show this batch in detail.
    #[arg(long)]
    pub batch: Option<String>,
    /// JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// An order sent this many hours ago (fractions allowed) without a recorded answer has been
    /// in doubt too long: it is for `paybatch reconcile` (the same window as
    /// `run --in-doubt-hours`).
    #[arg(long, default_value_t = in_doubt::DEFAULT_IN_DOUBT_HOURS, value_name = "HOURS", value_parser = super::run::parse_hours)]
    pub in_doubt_hours: f64,
    #[command(flatten)]
    pub service: ServiceArgs,
}

impl StatusArgs {
    /// How long an order may be in doubt before status sends it to reconciliation.
    fn in_doubt_window(&self) -> std::time::Duration {
        in_doubt::window_of_hours(self.in_doubt_hours)
    }
}

pub async fn execute(args: StatusArgs) -> Result<Exit, CliError> {
    let ledger = status::open_existing(&args.service.ledger)?;
    match &args.batch {
        None => {
            let batches = status::batches(&ledger)?;
            if args.json {
                super::out_json(&batches_json(&batches));
            } else {
                print_batches(&batches, ledger.path());
                print_closed(&ledger.closed_months()?);
            }
        }
        Some(name) => {
            let d = status::batch_with_window(&ledger, name, args.in_doubt_window())?;
            let next = next_steps(
                ledger.path(),
                &d.batch,
                &d.by_state(),
                &d.in_flight(),
                args.in_doubt_hours,
                d.approved_digest(),
            );
            if args.json {
                super::out_json(&detail_json(&d, &next));
            } else {
                print_detail(&d, &next);
            }
        }
    }
    Ok(Exit::Ok)
}

fn states_text(counts: &[(RowState, i64)]) -> String {
    counts
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One batch of `status --json`: the ledger's batch with its row counts and charged amounts written
/// out (another shape).
#[derive(Serialize)]
struct BatchJson<'a> {
    batch: &'a str,
    environment: &'a str,
    base_url: &'a str,
    input: &'a str,
    created_at: &'a str,
    rows: i64,
    states: InOrder<&'static str, i64>,
    /// What left the balances (and cards), per currency, with the currency's decimals.
    charged: InOrder<&'a str, String>,
}

fn batches_json(batches: &[BatchCounts]) -> Vec<BatchJson<'_>> {
    batches
        .iter()
        .map(|c| {
            let b = &c.batch;
            BatchJson {
                batch: &b.name,
                environment: &b.environment,
                base_url: &b.base_url,
                input: &b.input_path,
                created_at: &b.created_at,
                rows: c.rows(),
                states: counts_map(&c.counts),
                charged: InOrder(
                    c.charged
                        .iter()
                        .map(|(currency, amount)| {
                            let amount = crate::money::display_amount(*amount, currency);
                            (currency.as_str(), amount)
                        })
                        .collect(),
                ),
            }
        })
        .collect()
}

/// The months of the books closed (`paybatch close`), one line each.
fn print_closed(closed: &[crate::ledger::books::ClosedMonth]) {
    for c in closed {
        outln!(
            "month {} closed at {} by {}@{}: journal {} ({} lines); nothing more is booked in it",
            c.month,
            c.closed_at,
            crate::text::shown(&c.user),
            crate::text::shown(&c.host),
            c.journal_digest,
            c.journal_lines
        );
    }
}

fn print_batches(batches: &[BatchCounts], ledger: &Path) {
    if batches.is_empty() {
        outln!("no batches in {}", ledger.display());
        return;
    }
    let width = batches
        .iter()
        .map(|c| c.batch.name.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    outln!(
        "{:<width$}  {:<11}  {:>6}  {:<24}  ROWS PER STATE",
        "BATCH",
        "ENVIRONMENT",
        "ROWS",
        "CREATED"
    );
    for c in batches {
        outln!(
            "{:<width$}  {:<11}  {:>6}  {:<24}  {}",
            c.batch.name,
            env_label(&c.batch.environment),
            c.rows(),
            c.batch.created_at,
            states_text(&c.counts)
        );
        if !c.charged.is_empty() {
            let amounts: Vec<String> = c
                .charged
                .iter()
                .map(|(currency, amount)| {
                    format!(
                        "{currency} {}",
                        crate::money::human_amount(*amount, currency)
                    )
                })
                .collect();
            outln!("{:<width$}  charged: {}", "", amounts.join(", "));
        }
    }
    outln!();
    outln!("details of one batch: paybatch status --batch NAME");
}

fn env_label(environment: &str) -> String {
    if environment == "sim" {
        "SIMULATED".into()
    } else {
        environment.to_string()
    }
}

/// Rows per state, in the states' order.
fn counts_map(counts: &[(RowState, i64)]) -> InOrder<&'static str, i64> {
    InOrder(counts.iter().map(|(s, n)| (s.as_str(), *n)).collect())
}

/// `3d 4h`, `2h 10m`, `5m 03s`, `12s`.
pub fn human_age(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    let (days, hours, minutes, seconds) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds:02}s")
    } else {
        format!("{seconds}s")
    }
}

/// The command that runs the batch again, to be copied into a shell (every argument quoted for
/// it): its file, name, ledger and environment, and `--skip-invalid` when the batch has
/// `invalid` rows (a run without it refuses the file: the batch's INVALID rows say its runs had
/// it).
fn run_command(ledger: &Path, b: &BatchRecord, invalid: bool) -> String {
    let name = shell_word(&b.name);
    let input = shell_word(&b.input_path);
    let mut run = format!("paybatch run {input} --batch {name}");
    run.push_str(&ledger_flag(ledger));
    run.push_str(&service_flag(b));
    if invalid {
        run.push_str(" --skip-invalid");
    }
    run
}

/// ` --ledger PATH` for a ledger that is not the default, quoted for a shell; else nothing.
fn ledger_flag(ledger: &Path) -> String {
    if ledger == Path::new(DEFAULT_LEDGER) {
        return String::new();
    }
    format!(" --ledger {}", shell_word(&ledger.display().to_string()))
}

/// The service the batch is bound to, as a flag: ` --env NAME` or ` --base-url URL`. Named
/// explicitly (even `sim`), so that a settings file cannot point the advice elsewhere.
fn service_flag(b: &BatchRecord) -> String {
    match Environment::from_recorded(&b.environment, &b.base_url) {
        Ok(Environment::Custom(url)) => format!(" --base-url {}", shell_word(&url)),
        Ok(env) => format!(" --env {}", env.name()),
        Err(_) => String::new(),
    }
}

/// The command after `retry`: `run` again, or for a batch whose runs were held to an approved
/// plan, `validate` (the retried rows make another plan, whose digest is approved anew) then
/// `run` with the new digest.
fn after_retry(run: &str, approved: bool) -> String {
    if !approved {
        return run.to_string();
    }
    format!(
        "{} shows the new plan's digest to approve, then {run} --expect-digest DIGEST",
        run.replacen("paybatch run", "paybatch validate", 1)
    )
}

/// What to do next with a batch, most urgent first. The command that resumes a batch whose
/// runs were held to an approved plan keeps that plan (`approved`, the latest recorded digest):
/// an approved run from cron resumes as approved.
fn next_steps(
    ledger: &Path,
    b: &BatchRecord,
    counts: &BTreeMap<RowState, i64>,
    flights: &[InFlight<'_>],
    in_doubt_hours: f64,
    approved: Option<&str>,
) -> Vec<String> {
    let n = |s: RowState| counts.get(&s).copied().unwrap_or(0);
    // The batch, and the ledger when it is not the default, as every command below names them
    // (`reconcile` the service too, as `run` does).
    let name = format!("{}{}", shell_word(&b.name), ledger_flag(ledger));
    let input = shell_word(&b.input_path);
    let mut run = run_command(ledger, b, n(RowState::Invalid) > 0);
    // Paying rows other batches have changes the plan: that run is approved anew.
    let with_repeats = format!("{run} --allow-repeats");
    let after_retry = after_retry(&run, approved.is_some());
    if let Some(digest) = approved {
        run.push_str(&format!(" --expect-digest {}", shell_word(digest)));
    }
    let mut steps = Vec::new();
    if flights.iter().any(|f| f.in_doubt_too_long) {
        steps.push(format!(
            "orders have been in doubt for more than {in_doubt_hours} hours: paybatch reconcile --batch {name}{} (it asks the service which of them exist)",
            service_flag(b)
        ));
    }
    let unfinished = n(RowState::Pending) + n(RowState::Planned) + n(RowState::Submitted);
    if unfinished > 0 || !flights.is_empty() {
        steps.push(format!(
            "{unfinished} rows are not finished: run the same command again to resume ({run}); nothing is paid twice"
        ));
    }
    if n(RowState::Mismatch) > 0 {
        steps.push(format!(
            "{} rows are MISMATCH: the service answered their orders finished but not as they were sent (what differs: paybatch report --batch {name} --html report.html); a person must compare them with the account's orders before anything else is done for them: they are never paid again by paybatch",
            n(RowState::Mismatch),
        ));
    }
    let failed = n(RowState::Failed) + n(RowState::Rejected);
    if failed > 0 {
        steps.push(format!(
            "{failed} rows FAILED or were REJECTED (reasons: paybatch report --batch {name} --html report.html): after fixing the cause, paybatch retry --batch {name}, then {after_retry}"
        ));
    }
    if n(RowState::Skipped) > 0 {
        steps.push(format!(
            "{} rows are SKIPPED: other batches of this ledger have them (which: paybatch report --batch {name}); nothing to do, unless they must be paid again: then {with_repeats}{}",
            n(RowState::Skipped),
            if approved.is_some() {
                " (a plan that pays them is another plan: paybatch validate shows its digest to approve)"
            } else {
                ""
            },
        ));
    }
    if n(RowState::Invalid) > 0 {
        steps.push(format!(
            "{} rows are INVALID: fix them in {} and run the same command again (paybatch validate {input} --batch {name}{} shows the problems)",
            n(RowState::Invalid),
            b.input_path,
            service_flag(b)
        ));
    }
    if counts.values().all(|n| *n == 0) && flights.is_empty() {
        // A run stopped before it recorded a row (after its approval, say): nothing was paid.
        steps.push(format!(
            "nothing was planned yet: run the same command again to start the batch ({run})"
        ));
    }
    if steps.is_empty() {
        steps.push(format!(
            "nothing to do: every row completed; the result file again: paybatch report --batch {name}"
        ));
    }
    steps
}

/// `status --batch NAME --json`: the ledger's batch with what [`Detail`] computes of it (another
/// shape).
#[derive(Serialize)]
struct DetailJson<'a> {
    batch: &'a str,
    environment: &'a str,
    base_url: &'a str,
    key_fingerprint: &'a str,
    input: &'a str,
    input_sha256: &'a str,
    created_at: &'a str,
    rows: i64,
    states: InOrder<&'static str, i64>,
    orders: BTreeMap<&'a str, i64>,
    unconfirmed_orders: Vec<String>,
    total_unconfirmed_orders: Vec<String>,
    charged: Vec<ChargedJson<'a>>,
    repeats: Vec<RepeatJson<'a>>,
    /// Paid rows per payout link status as last read, and when (`paybatch payouts`).
    payouts: &'a BTreeMap<String, i64>,
    payouts_read_at: Option<&'a str>,
    in_flight: Vec<InFlightJson<'a>>,
    events: Vec<EventJson<'a>>,
    /// The runs held to an approved plan (`run --expect-digest`), oldest first.
    approvals: Vec<ApprovalJson<'a>>,
    /// The first REJECTED and FAILED rows with the service's reasons.
    refused_rows: &'a [String],
    next: &'a [String],
}

/// A run held to an approved plan: the whole digest, when, by whom, where, which run (its
/// approvers in the shape of [`ApproverJson`]).
#[derive(Serialize)]
struct ApprovalJson<'a> {
    digest: &'a str,
    approved_at: &'a str,
    user: &'a str,
    host: &'a str,
    run: &'a str,
    /// Who approved the digest (`paybatch approve`) before the run, oldest first.
    approved_by: Vec<ApproverJson<'a>>,
}

/// A person who approved a plan (`paybatch approve`): who, where, when, what it pays (the
/// recorded approval without its digest, in another order).
#[derive(Serialize)]
struct ApproverJson<'a> {
    user: &'a str,
    host: &'a str,
    approved_at: &'a str,
    rows: i64,
    totals: &'a BTreeMap<String, String>,
}

/// What left one balance: an entry of a map, its payer said twice (another shape).
#[derive(Serialize)]
struct ChargedJson<'a> {
    by: &'a str,
    /// The same as `by`, under the name `run --json` gives it.
    paid_by: &'a str,
    currency: &'a str,
    amount: String,
}

/// What a person decided about rows other batches have: a pair, named.
#[derive(Serialize)]
struct RepeatJson<'a> {
    at: &'a str,
    decision: &'a str,
}

/// An order in flight: the ledger's order with its age and what it waits for (another shape).
#[derive(Serialize)]
struct InFlightJson<'a> {
    order: i64,
    service_order_id: Option<&'a str>,
    state: &'static str,
    what: &'static str,
    since: Option<&'a str>,
    age_seconds: Option<i64>,
    sends: i64,
    polls: i64,
}

/// One of the last events: the ledger's event with its subject beside it (another shape).
#[derive(Serialize)]
struct EventJson<'a> {
    at: &'a str,
    subject: &'a str,
    from: Option<&'a str>,
    to: Option<&'a str>,
    cause: &'a str,
}

fn detail_json<'a>(d: &'a Detail, next: &'a [String]) -> DetailJson<'a> {
    let b = &d.batch;
    DetailJson {
        batch: &b.name,
        environment: &b.environment,
        base_url: &b.base_url,
        key_fingerprint: &b.key_fingerprint,
        input: &b.input_path,
        input_sha256: &b.input_hash,
        created_at: &b.created_at,
        rows: d.rows(),
        states: counts_map(&d.counts),
        orders: d.order_counts(),
        unconfirmed_orders: d.unconfirmed(),
        total_unconfirmed_orders: d.total_unconfirmed(),
        charged: d
            .charged
            .iter()
            .map(|((payer, currency), amount)| ChargedJson {
                by: payer,
                paid_by: payer,
                currency,
                amount: crate::money::display_amount(*amount, currency),
            })
            .collect(),
        repeats: d
            .repeats
            .iter()
            .map(|(at, what)| RepeatJson { at, decision: what })
            .collect(),
        payouts: &d.payouts,
        payouts_read_at: d.payouts_read_at.as_deref(),
        in_flight: d.in_flight().iter().map(in_flight_json).collect(),
        events: d
            .events
            .iter()
            .zip(&d.subjects)
            .map(|(e, subject)| EventJson {
                at: &e.at,
                subject,
                from: e.from_state.as_deref(),
                to: e.to_state.as_deref(),
                cause: &e.cause,
            })
            .collect(),
        approvals: d
            .approvals
            .iter()
            .map(|a| ApprovalJson {
                digest: &a.digest,
                approved_at: &a.approved_at,
                user: &a.user,
                host: &a.host,
                run: &a.run,
                approved_by: a
                    .approved_by
                    .iter()
                    .map(|p| ApproverJson {
                        user: &p.user,
                        host: &p.host,
                        approved_at: &p.approved_at,
                        rows: p.rows,
                        totals: &p.totals,
                    })
                    .collect(),
            })
            .collect(),
        refused_rows: &d.refused,
        next,
    }
}

fn in_flight_json<'a>(f: &InFlight<'a>) -> InFlightJson<'a> {
    InFlightJson {
        order: f.order.id,
        service_order_id: f.order.service_order_id.as_deref(),
        state: f.order.state.as_str(),
        what: f.what,
        since: f.since,
        age_seconds: f.age().map(|a| a.num_seconds()),
        sends: f.order.sends,
        polls: f.order.polls,
    }
}

fn print_detail(d: &Detail, next: &[String]) {
    let b = &d.batch;
    let label = match b.environment.as_str() {
        "sim" => " (SIMULATED: no real money moved)",
        "production" => " (PRODUCTION: real money)",
        _ => "",
    };
    outln!("batch {}{label}", b.name);
    outln!("  environment: {} ({})", b.environment, b.base_url);
    outln!("  input:       {} (sha256 {})", b.input_path, b.input_hash);
    outln!("  created:     {}", b.created_at);
    outln!("  key:         {}", b.key_fingerprint);
    print_approvals(d);
    outln!();
    outln!("rows: {}", d.rows());
    for (state, n) in &d.counts {
        outln!("  {:<10} {:>8}", state.as_str(), n);
    }
    if !d.charged.is_empty() {
        outln!("charged (what left each balance, conversions included):");
        for ((payer, currency), amount) in &d.charged {
            let amount = crate::money::human_amount(*amount, currency);
            outln!("  {payer:<20} {amount:>14} {currency}");
        }
    }
    for (at, what) in &d.repeats {
        outln!("{} ({at})", crate::text::escape(what));
    }
    print_payouts(d);
    outln!();
    print_orders(d);
    outln!();
    outln!("last events (newest first):");
    for (e, subject) in d.events.iter().zip(&d.subjects) {
        outln!("  {}", event_text(e, subject));
    }
    outln!();
    for step in next {
        outln!("next: {step}");
    }
    print_refused(d);
    if !d.invalid.is_empty() {
        let all = d.by_state().get(&RowState::Invalid).copied().unwrap_or(0);
        outln!("INVALID rows (every one with its problem in the result file's error_message):");
        for row in &d.invalid {
            outln!("  {row}");
        }
        let more = all - d.invalid.len() as i64;
        if more > 0 {
            outln!("  and {more} more");
        }
    }
}

/// The first REJECTED and FAILED rows with the service's reasons, and how many more.
fn print_refused(d: &Detail) {
    if d.refused.is_empty() {
        return;
    }
    let states = d.by_state();
    let all = [RowState::Rejected, RowState::Failed]
        .iter()
        .map(|s| states.get(s).copied().unwrap_or(0))
        .sum::<i64>();
    outln!(
        "REJECTED and FAILED rows, with the service's reasons (every one in the result file's error_message):"
    );
    for row in &d.refused {
        outln!("  {row}");
    }
    let more = all - d.refused.len() as i64;
    if more > 0 {
        outln!("  and {more} more");
    }
}

/// Approvals listed one by one (the earlier ones are counted).
const LISTED_APPROVALS: usize = 10;

/// The runs held to an approved plan, newest last, or that there is none. Who and where are
/// text a person controls: the line is escaped as every line of the command.
fn print_approvals(d: &Detail) {
    if d.approvals.is_empty() {
        outln!("  approval:    {}", approvals::NO_APPROVAL);
        return;
    }
    outln!(
        "  approvals:   runs held to --expect-digest, oldest first: digest, when, run by, approved by"
    );
    let earlier = d.approvals.len().saturating_sub(LISTED_APPROVALS);
    if earlier > 0 {
        outln!("    ({earlier} earlier)");
    }
    for a in &d.approvals[earlier..] {
        outln!(
            "    {}  {}  run by {}  (run {})  {}",
            crate::input::scan::short_digest(&a.digest),
            a.approved_at,
            a.by(),
            a.run,
            a.approvers()
        );
    }
}

/// The paid rows per payout link status, and when they were read.
fn print_payouts(d: &Detail) {
    let counts: Vec<String> = d
        .payouts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    if counts.is_empty() {
        return;
    }
    let read = match &d.payouts_read_at {
        Some(at) => format!("read {at}"),
        None => "as the orders completed; `paybatch payouts` reads them again".into(),
    };
    outln!("payout links: {} ({read})", counts.join(", "));
}

fn print_orders(d: &Detail) {
    let orders_text = d
        .order_counts()
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    outln!(
        "orders: {}{}",
        d.orders.len(),
        if orders_text.is_empty() {
            String::new()
        } else {
            format!(" ({orders_text})")
        }
    );
    print_noted(
        &d.unconfirmed(),
        "unconfirmed: {} COMPLETED (the service's answer named neither key nor batch: compare with the account's orders)",
    );
    print_noted(
        &d.total_unconfirmed(),
        "total not confirmed: {} COMPLETED (converted, the service's answer left out the transaction_detail that checks the total charged: compare with the account's orders)",
    );
    let flights = d.in_flight();
    if flights.is_empty() {
        outln!("  none in flight");
        return;
    }
    outln!("  in flight: {}", flights.len());
    for f in flights.iter().take(LISTED_IN_FLIGHT) {
        let id = f
            .order
            .service_order_id
            .clone()
            .unwrap_or_else(|| format!("#{}", f.order.id));
        let how_long = f
            .age()
            .map(|a| format!(" for {}", human_age(a)))
            .unwrap_or_default();
        outln!(
            "  {id:<24} {}{how_long} (sent {}x, polled {}x){}",
            f.what,
            f.order.sends,
            f.order.polls,
            if f.in_doubt_too_long {
                " -- reconcile"
            } else {
                ""
            }
        );
    }
    if flights.len() > LISTED_IN_FLIGHT {
        outln!("  ... and {} more", flights.len() - LISTED_IN_FLIGHT);
    }
}

fn event_text(e: &EventRecord, subject: &str) -> String {
    let transition = match (&e.from_state, &e.to_state) {
        (Some(f), Some(t)) => format!("{f} -> {t}"),
        (None, Some(t)) => format!("-> {t}"),
        (Some(f), None) => format!("{f} ->"),
        (None, None) => String::new(),
    };
    format!("{}  {subject}  {transition}  {}", e.at, e.cause)
}

/// A line naming the COMPLETED orders noted as not confirmed, when there are some: `what`
/// with `{}` for their count, then the first orders.
fn print_noted(orders: &[String], what: &str) {
    if orders.is_empty() {
        return;
    }
    let more = orders.len().saturating_sub(LISTED_IN_FLIGHT);
    outln!(
        "  {}: {}{}",
        what.replacen("{}", &orders.len().to_string(), 1),
        crate::text::escape(&orders[..orders.len() - more].join(", ")),
        if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(environment: &str, base_url: &str) -> BatchRecord {
        BatchRecord {
            id: 1,
            name: "nov".into(),
            input_path: "nov.csv".into(),
            input_hash: String::new(),
            headers: Vec::new(),
            environment: environment.into(),
            base_url: base_url.into(),
            key_fingerprint: String::new(),
            created_at: String::new(),
            input_format: None,
            result_format: None,
        }
    }

    #[test]
    fn the_resume_advice_names_the_batch_environment_and_ledger() {
        let counts: BTreeMap<RowState, i64> = [(RowState::Pending, 2)].into_iter().collect();
        let sim = next_steps(
            Path::new("paybatch.db"),
            &batch("sim", "embedded-simulator"),
            &counts,
            &[],
            24.0,
            None,
        );
        assert!(
            sim[0].contains("paybatch run nov.csv --batch nov --env sim"),
            "a settings file must not send the advice elsewhere: {sim:?}"
        );
        let custom = next_steps(
            Path::new("other.db"),
            &batch("custom", "http://127.0.0.1:9/v2"),
            &counts,
            &[],
            24.0,
            None,
        );
        assert!(
            custom[0].contains("--ledger other.db --base-url http://127.0.0.1:9/v2"),
            "{custom:?}"
        );
        let done: BTreeMap<RowState, i64> = [(RowState::Completed, 2)].into_iter().collect();
        let steps = next_steps(
            Path::new("paybatch.db"),
            &batch("production", ""),
            &done,
            &[],
            24.0,
            None,
        );
        assert!(steps[0].starts_with("nothing to do"), "{steps:?}");
    }

    /// A batch whose runs were held to an approved plan is resumed held to it (the latest
    /// digest recorded); rows to pay again with `--allow-repeats` make another plan.
    #[test]
    fn the_resume_advice_of_an_approved_batch_keeps_its_digest() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let counts: BTreeMap<RowState, i64> = [(RowState::Pending, 2), (RowState::Skipped, 1)]
            .into_iter()
            .collect();
        let steps = next_steps(
            Path::new("paybatch.db"),
            &batch("sim", "embedded-simulator"),
            &counts,
            &[],
            24.0,
            Some(&digest),
        );
        assert!(
            steps[0].contains(&format!(
                "(paybatch run nov.csv --batch nov --env sim --expect-digest {digest})"
            )),
            "{steps:?}"
        );
        assert!(
            steps[1].contains("paybatch run nov.csv --batch nov --env sim --allow-repeats (")
                && steps[1].contains("paybatch validate shows its digest"),
            "{steps:?}"
        );
    }

    /// A batch with INVALID rows was run with --skip-invalid: the command that resumes it
    /// keeps it, or the run refuses the file.
    #[test]
    fn the_resume_advice_of_a_batch_with_invalid_rows_skips_them() {
        let counts: BTreeMap<RowState, i64> = [(RowState::Planned, 1), (RowState::Invalid, 1)]
            .into_iter()
            .collect();
        let steps = next_steps(
            Path::new("paybatch.db"),
            &batch("sim", "embedded-simulator"),
            &counts,
            &[],
            24.0,
            Some("sha256:ab"),
        );
        assert!(
            steps[0].contains(
                "(paybatch run nov.csv --batch nov --env sim --skip-invalid --expect-digest sha256:ab)"
            ),
            "{steps:?}"
        );
    }

    /// A batch on record without a row (its run stopped after its approval, before it planned
    /// anything) is not done: nothing was paid.
    #[test]
    fn a_batch_without_rows_is_started_again_not_said_completed() {
        let steps = next_steps(
            Path::new("paybatch.db"),
            &batch("sim", "embedded-simulator"),
            &BTreeMap::new(),
            &[],
            24.0,
            Some("sha256:ab"),
        );
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert!(
            steps[0].starts_with("nothing was planned yet")
                && steps[0].contains("--expect-digest sha256:ab)"),
            "{steps:?}"
        );
    }

    #[test]
    fn the_commands_to_copy_quote_their_arguments_for_the_shell() {
        let mut b = batch("custom", "http://127.0.0.1:9/v2?a=1&b=2");
        b.name = "nov $HOME; rm -rf x".into();
        b.input_path = "my batches/nov's.csv".into();
        let counts: BTreeMap<RowState, i64> = [
            (RowState::Pending, 1),
            (RowState::Failed, 1),
            (RowState::Invalid, 1),
        ]
        .into_iter()
        .collect();
        let steps = next_steps(
            Path::new("ledgers/our ledger.db"),
            &b,
            &counts,
            &[],
            24.0,
            None,
        );
        let run = "paybatch run 'my batches/nov'\\''s.csv' --batch 'nov $HOME; rm -rf x' \
                   --ledger 'ledgers/our ledger.db' --base-url 'http://127.0.0.1:9/v2?a=1&b=2'";
        assert!(steps[0].contains(run), "{steps:?}");
        assert!(
            steps[1].contains(
                "paybatch retry --batch 'nov $HOME; rm -rf x' --ledger 'ledgers/our ledger.db', then"
            ),
            "{steps:?}"
        );
        assert!(
            steps[2].contains(
                "paybatch validate 'my batches/nov'\\''s.csv' --batch 'nov $HOME; rm -rf x' \
                 --ledger 'ledgers/our ledger.db' --base-url 'http://127.0.0.1:9/v2?a=1&b=2' shows"
            ),
            "{steps:?}"
        );
        let done: BTreeMap<RowState, i64> = [(RowState::Completed, 1)].into_iter().collect();
        let steps = next_steps(Path::new("paybatch.db"), &b, &done, &[], 24.0, None);
        assert!(
            steps[0].ends_with("paybatch report --batch 'nov $HOME; rm -rf x'"),
            "{steps:?}"
        );
    }

    /// `paybatch status --batch nov` with `extra` arguments.
    fn status_args(extra: &[&str]) -> StatusArgs {
        use clap::Parser;
        let argv = ["paybatch", "status", "--batch", "nov"].iter().chain(extra);
        match super::super::Cli::try_parse_from(argv).map(|cli| cli.command) {
            Ok(super::super::Command::Status(args)) => args,
            other => panic!("not the status command: {other:?}"),
        }
    }

    #[test]
    fn status_tells_an_order_in_doubt_too_long_by_its_in_doubt_hours() {
        // An intent first sent two hours ago, without an answer recorded.
        let two_hours_ago = (chrono::Utc::now() - chrono::Duration::hours(2))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let orders = [crate::ledger::OrderRecord {
            id: 1,
            batch_id: 1,
            idempotency_key: "k".into(),
            body: Vec::new(),
            mode: crate::ledger::OrderMode::Async,
            payment_currency: "USD".into(),
            payment_method: crate::api::models::PaymentMethodType::AccountBalance,
            card_id: None,
            state: crate::ledger::OrderState::Intent,
            service_order_id: None,
            sends: 1,
            polls: 0,
            created_at: two_hours_ago.clone(),
            first_sent_at: Some(two_hours_ago.clone()),
            last_sent_at: Some(two_hours_ago),
            last_http_status: None,
            accepted_at: None,
            error_type: None,
            error_message: None,
        }];
        let default = status_args(&[]);
        assert_eq!(
            default.in_doubt_hours,
            crate::batch::options::DEFAULT_IN_DOUBT_HOURS,
            "the same default as run and reconcile"
        );
        for (extra, too_long) in [
            (&[][..], false),
            (&["--in-doubt-hours", "1"][..], true),
            (&["--in-doubt-hours", "0.5"][..], true),
            (&["--in-doubt-hours", "3"][..], false),
        ] {
            let args = status_args(extra);
            let flights = status::in_flight(&orders, args.in_doubt_window());
            assert_eq!(flights.len(), 1);
            assert_eq!(flights[0].in_doubt_too_long, too_long, "{extra:?}");
            let pending: BTreeMap<RowState, i64> = [(RowState::Planned, 1)].into_iter().collect();
            let steps = next_steps(
                Path::new("paybatch.db"),
                &batch("sim", "embedded-simulator"),
                &pending,
                &flights,
                args.in_doubt_hours,
                None,
            );
            let reconcile = format!(
                "orders have been in doubt for more than {} hours: paybatch reconcile --batch nov",
                args.in_doubt_hours
            );
            assert_eq!(
                steps[0].starts_with(&reconcile),
                too_long,
                "{extra:?}: {steps:?}"
            );
        }
    }

    #[test]
    fn ages_read_like_a_person_would_say_them() {
        let s = chrono::Duration::seconds;
        assert_eq!(human_age(s(12)), "12s");
        assert_eq!(human_age(s(5 * 60 + 3)), "5m 03s");
        assert_eq!(human_age(s(2 * 3600 + 10 * 60)), "2h 10m");
        assert_eq!(human_age(s(3 * 86_400 + 4 * 3600)), "3d 4h");
        assert_eq!(human_age(s(-5)), "0s");
    }
}
