//! `paybatch status [--batch NAME]`: what the ledger says, without asking the service: every
//! batch with its rows per state, or one batch in detail (rows per state, orders in flight and
//! their age, the last events) and what to do next. Reads the ledger only.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use clap::Args;
use serde_json::json;

use crate::environment::Environment;
use crate::exit;
use crate::ledger::{BatchRecord, EventRecord, Ledger, OrderRecord, OrderState, RowState};
use crate::text::shell_word;

use super::{DEFAULT_LEDGER, ServiceArgs, print_error};

/// Events shown for one batch.
const LAST_EVENTS: i64 = 10;
/// Orders in flight listed one by one (the rest are counted).
const LISTED_IN_FLIGHT: usize = 20;
/// In-doubt intents first sent longer ago than this are left for `paybatch reconcile`.
const IN_DOUBT_HOURS: i64 = 24;

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
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: StatusArgs) -> i32 {
    let ledger = match open_existing(&args.service.ledger) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let result = match &args.batch {
        None => all_batches(&ledger, args.json),
        Some(name) => one_batch(&ledger, name, args.json),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            print_error(&e.to_string(), None);
            exit::UNEXPECTED
        }
    }
}

/// Opens a ledger that must exist already (a read-only command never creates one).
pub fn open_existing(path: &Path) -> Result<Ledger, i32> {
    if !path.exists() {
        print_error(
            &format!(
                "no ledger at {}: nothing has been run here (--ledger PATH to read another)",
                path.display()
            ),
            Some(
                "give the ledger the batches were run with: --ledger PATH, PAYBATCH_LEDGER or `ledger` in paybatch.toml",
            ),
        );
        return Err(exit::USAGE);
    }
    Ledger::open(path).map_err(|e| {
        print_error(&e.to_string(), None);
        exit::UNEXPECTED
    })
}

/// Prints "no batch NAME" and returns the usage exit code.
pub fn no_such_batch(ledger: &Ledger, name: &str) -> i32 {
    let known: Vec<String> = ledger
        .batches()
        .map(|bs| bs.into_iter().map(|b| b.name).collect())
        .unwrap_or_default();
    let help = if known.is_empty() {
        "this ledger has no batch yet; `paybatch run FILE` names a batch after its file unless --batch is given".to_string()
    } else {
        format!("batches in this ledger: {}", known.join(", "))
    };
    print_error(
        &format!("no batch `{name}` in {}", ledger.path().display()),
        Some(&help),
    );
    exit::USAGE
}

fn states_text(counts: &[(RowState, i64)]) -> String {
    counts
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn all_batches(ledger: &Ledger, json: bool) -> crate::ledger::Result<i32> {
    let batches = ledger.batches()?;
    let mut listed = Vec::new();
    for b in &batches {
        let counts = ledger.row_counts(b.id)?;
        listed.push((b, counts));
    }
    if json {
        let value: Vec<_> = listed
            .iter()
            .map(|(b, counts)| {
                json!({
                    "batch": b.name,
                    "environment": b.environment,
                    "base_url": b.base_url,
                    "input": b.input_path,
                    "created_at": b.created_at,
                    "rows": counts.iter().map(|(_, n)| n).sum::<i64>(),
                    "states": counts_map(counts),
                })
            })
            .collect();
        super::out_json(&serde_json::Value::Array(value));
        return Ok(exit::OK);
    }
    if listed.is_empty() {
        outln!("no batches in {}", ledger.path().display());
        return Ok(exit::OK);
    }
    let width = listed
        .iter()
        .map(|(b, _)| b.name.chars().count())
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
    for (b, counts) in &listed {
        outln!(
            "{:<width$}  {:<11}  {:>6}  {:<24}  {}",
            b.name,
            env_label(&b.environment),
            counts.iter().map(|(_, n)| n).sum::<i64>(),
            b.created_at,
            states_text(counts)
        );
    }
    outln!();
    outln!("details of one batch: paybatch status --batch NAME");
    Ok(exit::OK)
}

fn env_label(environment: &str) -> String {
    if environment == "sim" {
        "SIMULATED".into()
    } else {
        environment.to_string()
    }
}

fn counts_map(counts: &[(RowState, i64)]) -> serde_json::Map<String, serde_json::Value> {
    counts
        .iter()
        .map(|(s, n)| (s.as_str().to_string(), json!(n)))
        .collect()
}

/// An order still in flight, as status shows it.
struct InFlight<'a> {
    order: &'a OrderRecord,
    what: &'static str,
    since: Option<&'a str>,
    in_doubt_too_long: bool,
}

fn in_flight(orders: &[OrderRecord]) -> Vec<InFlight<'_>> {
    orders
        .iter()
        .filter_map(|o| {
            let (what, since) = match o.state {
                OrderState::Accepted => (
                    "accepted by the service, not finished",
                    o.accepted_at.as_deref(),
                ),
                OrderState::Intent if o.sends > 0 => (
                    "sent, no answer recorded (in doubt)",
                    o.first_sent_at.as_deref(),
                ),
                OrderState::Intent => (
                    "intent committed, not sent yet",
                    Some(o.created_at.as_str()),
                ),
                _ => return None,
            };
            let in_doubt_too_long = o.state == OrderState::Intent
                && o.sends > 0
                && age(since).is_some_and(|a| a > chrono::Duration::hours(IN_DOUBT_HOURS));
            Some(InFlight {
                order: o,
                what,
                since,
                in_doubt_too_long,
            })
        })
        .collect()
}

fn age(at: Option<&str>) -> Option<chrono::Duration> {
    let t = chrono::DateTime::parse_from_rfc3339(at?).ok()?;
    Some(chrono::Utc::now().signed_duration_since(t))
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

/// What to do next with a batch, most urgent first.
fn next_steps(
    ledger: &Path,
    b: &BatchRecord,
    counts: &BTreeMap<RowState, i64>,
    flights: &[InFlight<'_>],
) -> Vec<String> {
    let n = |s: RowState| counts.get(&s).copied().unwrap_or(0);
    // The commands are to be copied into a shell: every argument is quoted for it.
    let name = shell_word(&b.name);
    let input = shell_word(&b.input_path);
    let mut run = format!("paybatch run {input} --batch {name}");
    if ledger != Path::new(DEFAULT_LEDGER) {
        run.push_str(&format!(
            " --ledger {}",
            shell_word(&ledger.display().to_string())
        ));
    }
    // Named explicitly (even `sim`), so that a settings file cannot point the advice elsewhere.
    match Environment::from_recorded(&b.environment, &b.base_url) {
        Ok(Environment::Custom(url)) => run.push_str(&format!(" --base-url {}", shell_word(&url))),
        Ok(env) => run.push_str(&format!(" --env {}", env.name())),
        Err(_) => {}
    }
    let mut steps = Vec::new();
    if flights.iter().any(|f| f.in_doubt_too_long) {
        steps.push(format!(
            "orders have been in doubt for more than {IN_DOUBT_HOURS} hours: paybatch reconcile --batch {name} (it asks the service which of them exist)"
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
            "{failed} rows FAILED or were REJECTED (reasons: paybatch report --batch {name} --html report.html): after fixing the cause, paybatch retry --batch {name}, then {run}"
        ));
    }
    if n(RowState::Skipped) > 0 {
        steps.push(format!(
            "{} rows are SKIPPED: other batches of this ledger have them (which: paybatch report --batch {name}); nothing to do, unless they must be paid again: then {run} --allow-repeats",
            n(RowState::Skipped),
        ));
    }
    if n(RowState::Invalid) > 0 {
        steps.push(format!(
            "{} rows are INVALID: fix them in {} and run the same command again (paybatch validate {input} shows the problems)",
            n(RowState::Invalid),
            b.input_path,
        ));
    }
    if steps.is_empty() {
        steps.push(format!(
            "nothing to do: every row completed; the result file again: paybatch report --batch {name}"
        ));
    }
    steps
}

fn one_batch(ledger: &Ledger, name: &str, json: bool) -> crate::ledger::Result<i32> {
    let Some(b) = ledger.batch(name)? else {
        return Ok(no_such_batch(ledger, name));
    };
    let d = detail(ledger, b)?;
    if json {
        super::out_json(&detail_json(&d));
    } else {
        print_detail(&d);
    }
    Ok(exit::OK)
}

/// What `status --batch` shows of one batch.
struct Detail {
    batch: BatchRecord,
    counts: Vec<(RowState, i64)>,
    orders: Vec<OrderRecord>,
    events: Vec<EventRecord>,
    /// What each of `events` is about, named (`row R-1`, `order O-123`).
    subjects: Vec<String>,
    /// What left each balance: (payer, currency) -> amount.
    charged: BTreeMap<(String, String), rust_decimal::Decimal>,
    /// What a person decided about rows other batches have (`--allow-repeats`,
    /// `--skip-repeats`): (when, what).
    repeats: Vec<(String, String)>,
    next: Vec<String>,
}

/// The service's ids of the batch's COMPLETED orders that could not be confirmed as the orders
/// sent (their answer named neither key nor batch).
fn unconfirmed(orders: &[OrderRecord]) -> Vec<String> {
    orders
        .iter()
        .filter(|o| {
            o.state == crate::ledger::OrderState::Completed
                && o.error_type.as_deref() == Some(crate::batch::record::UNCONFIRMED_TYPE)
        })
        .map(|o| {
            o.service_order_id
                .clone()
                .unwrap_or_else(|| format!("#{}", o.id))
        })
        .collect()
}

impl Detail {
    fn rows(&self) -> i64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    fn order_counts(&self) -> BTreeMap<&str, i64> {
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for o in &self.orders {
            *counts.entry(o.state.as_str()).or_default() += 1;
        }
        counts
    }
}

fn detail(ledger: &Ledger, b: BatchRecord) -> crate::ledger::Result<Detail> {
    let counts = ledger.row_counts(b.id)?;
    let orders = ledger.order_heads(b.id)?;
    let events = ledger.events(b.id, LAST_EVENTS)?;
    let subjects = event_subjects(ledger, &events, &orders)?;
    let by_state: BTreeMap<RowState, i64> = counts.iter().copied().collect();
    let next = next_steps(ledger.path(), &b, &by_state, &in_flight(&orders));
    let charged = crate::batch::outcome::debited_totals(ledger, b.id)?;
    let repeats = ledger.batch_notes(b.id, "repeats ")?;
    Ok(Detail {
        repeats,
        batch: b,
        counts,
        orders,
        events,
        subjects,
        charged,
        next,
    })
}

/// Names what each event is about. Only the rows the events name are looked up (a batch can
/// hold a million).
fn event_subjects(
    ledger: &Ledger,
    events: &[EventRecord],
    orders: &[OrderRecord],
) -> crate::ledger::Result<Vec<String>> {
    let mut row_names: HashMap<i64, String> = HashMap::new();
    for e in events.iter().filter(|e| e.subject == "row") {
        if let Some(reference) = ledger.row_reference(e.subject_id)? {
            row_names.insert(e.subject_id, reference);
        }
    }
    let order_names: HashMap<i64, String> = orders
        .iter()
        .map(|o| {
            let name = o
                .service_order_id
                .clone()
                .unwrap_or_else(|| format!("#{} (key {})", o.id, o.idempotency_key));
            (o.id, name)
        })
        .collect();
    Ok(events
        .iter()
        .map(|e| {
            let name = match e.subject.as_str() {
                "row" => row_names.get(&e.subject_id),
                "order" => order_names.get(&e.subject_id),
                _ => None,
            };
            match name {
                Some(n) => format!("{} {n}", e.subject),
                None => e.subject.clone(),
            }
        })
        .collect())
}

fn detail_json(d: &Detail) -> serde_json::Value {
    let b = &d.batch;
    let flights = in_flight(&d.orders);
    json!({
        "batch": b.name,
        "environment": b.environment,
        "base_url": b.base_url,
        "key_fingerprint": b.key_fingerprint,
        "input": b.input_path,
        "input_sha256": b.input_hash,
        "created_at": b.created_at,
        "rows": d.rows(),
        "states": counts_map(&d.counts),
        "orders": d.order_counts(),
        "unconfirmed_orders": unconfirmed(&d.orders),
        "charged": d.charged.iter().map(|((payer, currency), amount)| json!({
            "by": payer,
            "currency": currency,
            "amount": amount.to_string(),
        })).collect::<Vec<_>>(),
        "repeats": d.repeats.iter().map(|(at, what)| json!({"at": at, "decision": what})).collect::<Vec<_>>(),
        "in_flight": flights.iter().map(|f| json!({
            "order": f.order.id,
            "service_order_id": f.order.service_order_id,
            "state": f.order.state.as_str(),
            "what": f.what,
            "since": f.since,
            "age_seconds": age(f.since).map(|a| a.num_seconds()),
            "sends": f.order.sends,
            "polls": f.order.polls,
        })).collect::<Vec<_>>(),
        "events": d.events.iter().zip(&d.subjects).map(|(e, s)| event_json(e, s)).collect::<Vec<_>>(),
        "next": d.next,
    })
}

fn print_detail(d: &Detail) {
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
    outln!();
    outln!("rows: {}", d.rows());
    for (state, n) in &d.counts {
        outln!("  {:<10} {:>8}", state.as_str(), n);
    }
    if !d.charged.is_empty() {
        outln!("charged (what left each balance, conversions included):");
        for ((payer, currency), amount) in &d.charged {
            outln!("  {payer:<20} {amount:>14} {currency}");
        }
    }
    for (at, what) in &d.repeats {
        outln!("{} ({at})", crate::text::escape(what));
    }
    outln!();
    print_orders(d);
    outln!();
    outln!("last events (newest first):");
    for (e, subject) in d.events.iter().zip(&d.subjects) {
        outln!("  {}", event_text(e, subject));
    }
    outln!();
    for step in &d.next {
        outln!("next: {step}");
    }
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
    let unconfirmed = unconfirmed(&d.orders);
    if !unconfirmed.is_empty() {
        let more = unconfirmed.len().saturating_sub(LISTED_IN_FLIGHT);
        outln!(
            "  unconfirmed: {} COMPLETED (the service's answer named neither key nor batch: compare with the account's orders): {}{}",
            unconfirmed.len(),
            crate::text::escape(&unconfirmed[..unconfirmed.len() - more].join(", ")),
            if more > 0 {
                format!(" (+{more} more)")
            } else {
                String::new()
            }
        );
    }
    let flights = in_flight(&d.orders);
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
        let how_long = age(f.since)
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

fn event_json(e: &EventRecord, subject: &str) -> serde_json::Value {
    json!({
        "at": e.at,
        "subject": subject,
        "from": e.from_state,
        "to": e.to_state,
        "cause": e.cause,
    })
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
        );
        assert!(steps[0].starts_with("nothing to do"), "{steps:?}");
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
        let steps = next_steps(Path::new("ledgers/our ledger.db"), &b, &counts, &[]);
        let run = "paybatch run 'my batches/nov'\\''s.csv' --batch 'nov $HOME; rm -rf x' \
                   --ledger 'ledgers/our ledger.db' --base-url 'http://127.0.0.1:9/v2?a=1&b=2'";
        assert!(steps[0].contains(run), "{steps:?}");
        assert!(
            steps[1].contains("paybatch retry --batch 'nov $HOME; rm -rf x', then"),
            "{steps:?}"
        );
        assert!(
            steps[2].contains("paybatch validate 'my batches/nov'\\''s.csv' shows"),
            "{steps:?}"
        );
        let done: BTreeMap<RowState, i64> = [(RowState::Completed, 1)].into_iter().collect();
        let steps = next_steps(Path::new("paybatch.db"), &b, &done, &[]);
        assert!(
            steps[0].ends_with("paybatch report --batch 'nov $HOME; rm -rf x'"),
            "{steps:?}"
        );
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
