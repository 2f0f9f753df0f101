//! `paybatch history --email ADDRESS | --reference REF`: "did we pay this person already?".
//! Every payout of the ledger to that recipient or reference, across all batches, whatever its
//! state, with the answer first (`paid N times: ...`). Reads the ledger only, never creates
//! one, and never shows a payout link.

use std::collections::BTreeSet;

use clap::{ArgGroup, Args};
use serde::Serialize;

use crate::exit::Exit;
use crate::ledger::RowState;
use crate::ledger::history::{PayoutQuery, PayoutRecord};
use crate::ops::history::{History, history};
use crate::text::{escape, shell_word};

use super::{CliError, InOrder, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "List every payout of the ledger to one recipient (--email) or \
one reference (--reference), across all batches, to answer \"did we pay this person \
already?\": the first line says how many times they were paid (COMPLETED) and how much, then a \
table of every row found, whatever its state (COMPLETED, FAILED, PLANNED, ...): batch, \
environment, date (when it completed, else when its batch was created), reference, product, \
face value, price and what left the paying balance, state, attempt and the service's order \
id.\n\nAn email address is compared without regard to case; a reference exactly. With both, \
only the rows that match both. Rows that failed validation are found by reference only (their \
content is not recorded). Payout links are never shown.\n\nReads the ledger only (a ledger of \
an earlier paybatch is first brought to this version's schema); a ledger that does not exist \
is an error (exit 2), never created.";

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("who").required(true).multiple(true).args(["email", "reference"])))]
pub struct HistoryArgs {
    /// The recipient's email address (any case).
    #[arg(long, value_name = "ADDRESS")]
    pub email: Option<String>,
    /// The row reference, as in the batch files.
    #[arg(long, value_name = "REF")]
    pub reference: Option<String>,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

pub async fn execute(args: HistoryArgs) -> Result<Exit, CliError> {
    let Some(query) = PayoutQuery::new(args.email.as_deref(), args.reference.as_deref()) else {
        return Err(CliError::usage(
            "--email and --reference need a value that is not blank",
            "e.g. paybatch history --email jane.doe@example.com",
        ));
    };
    let ledger = crate::ops::status::open_existing(&args.service.ledger)?;
    let found = history(&ledger, &query)?;
    let place = ledger.path().display().to_string();
    if args.json {
        super::out_json(&to_json(&found, &place));
    } else {
        print_history(&found, &place);
    }
    Ok(Exit::Ok)
}

/// Who the query names, for a sentence: `jane@example.com`, `reference R-1`, or both.
fn subject(q: &PayoutQuery) -> String {
    match (q.email(), q.reference()) {
        (Some(e), Some(r)) => format!("{e} with reference {r}"),
        (Some(e), None) => e.to_string(),
        (None, Some(r)) => format!("reference {r}"),
        (None, None) => String::new(),
    }
}

/// `history --json`: the query and totals computed over the payouts (another shape than
/// [`History`]).
#[derive(Serialize)]
struct HistoryJson<'a> {
    email: Option<&'a str>,
    reference: Option<&'a str>,
    ledger: &'a str,
    batches_searched: usize,
    count: usize,
    paid: usize,
    paid_face_value: InOrder<String, String>,
    payouts: Vec<PayoutJson<'a>>,
}

/// One payout found: the ledger's record with its date and its state as text (another shape).
#[derive(Serialize)]
struct PayoutJson<'a> {
    batch: &'a str,
    environment: &'a str,
    date: &'a str,
    completed_at: Option<&'a str>,
    batch_created_at: &'a str,
    reference: &'a str,
    email: Option<&'a str>,
    product_codes: &'a [String],
    face_value: Option<&'a str>,
    currency: Option<&'a str>,
    price: Option<String>,
    debited_amount: Option<String>,
    debited_currency: Option<&'a str>,
    state: &'static str,
    attempt: i64,
    order_id: Option<&'a str>,
    error_type: Option<&'a str>,
}

fn to_json<'a>(h: &'a History, ledger: &'a str) -> HistoryJson<'a> {
    HistoryJson {
        email: h.query.email(),
        reference: h.query.reference(),
        ledger,
        batches_searched: h.batches,
        count: h.payouts.len(),
        paid: h.paid().count(),
        paid_face_value: InOrder(
            h.paid_face_value()
                .into_iter()
                .map(|(currency, amount)| (currency, amount.to_string()))
                .collect(),
        ),
        payouts: h.payouts.iter().map(payout_json).collect(),
    }
}

fn payout_json(p: &PayoutRecord) -> PayoutJson<'_> {
    PayoutJson {
        batch: &p.batch,
        environment: &p.environment,
        date: p.date(),
        completed_at: p.completed_at.as_deref(),
        batch_created_at: &p.batch_created_at,
        reference: &p.reference,
        email: p.email.as_deref(),
        product_codes: &p.product_codes,
        face_value: p.face_value.as_deref(),
        currency: p.currency.as_deref(),
        price: p.price.map(|d| d.to_string()),
        debited_amount: p.debited_amount.map(|d| d.to_string()),
        debited_currency: p.debited_currency.as_deref(),
        state: p.state.as_str(),
        attempt: p.attempt,
        order_id: p.order_id.as_deref(),
        error_type: p.error_type.as_deref(),
    }
}

/// `1 time`, `2 times`.
fn times(n: usize) -> String {
    if n == 1 {
        "1 time".into()
    } else {
        format!("{n} times")
    }
}

/// A time the ledger or the service recorded, as `2026-11-03 10:22` (UTC), or as it is when it
/// cannot be read.
fn short_time(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_else(|_| at.to_string())
}

fn env_label(environment: &str) -> &str {
    if environment == "sim" {
        "SIMULATED"
    } else {
        environment
    }
}

/// The answer first, then what the rows that did not pay mean, then the table.
fn print_history(h: &History, ledger: &str) {
    let who = subject(&h.query);
    if h.payouts.is_empty() {
        outln!(
            "no payout to {who} in this ledger ({} searched, {ledger})",
            match h.batches {
                1 => "1 batch".to_string(),
                n => format!("{n} batches"),
            }
        );
        return;
    }
    let paid: Vec<&PayoutRecord> = h.paid().collect();
    match h.last_paid() {
        Some(last) => {
            let amounts = h
                .paid_face_value()
                .iter()
                .map(|(currency, amount)| {
                    format!(
                        "{} {currency}",
                        crate::money::human_amount(*amount, currency)
                    )
                })
                .collect::<Vec<_>>()
                .join(" + ");
            outln!(
                "{who}: paid {}: {amounts} face value, last on {} UTC in batch {}",
                times(paid.len()),
                short_time(last.date()),
                last.batch
            );
            let simulated = paid.iter().filter(|p| p.environment == "sim").count();
            if simulated > 0 {
                outln!(
                    "  {} SIMULATED: no real money moved",
                    if simulated == paid.len() {
                        "all of them".to_string()
                    } else {
                        format!("{simulated} of them")
                    }
                );
            }
        }
        None => outln!(
            "{who}: not paid: {} in this ledger, {} completed",
            match h.payouts.len() {
                1 => "1 payout".to_string(),
                n => format!("{n} payouts"),
            },
            if h.payouts.len() == 1 { "not" } else { "none" }
        ),
    }
    for note in notes(h, ledger) {
        outln!("  {note}");
    }
    outln!();
    print_table(h);
}

/// What the rows that did not complete mean for "did we pay them?".
fn notes(h: &History, ledger: &str) -> Vec<String> {
    let ledger = format!(" --ledger {}", shell_word(ledger));
    let counts = h.counts();
    let n = |states: &[RowState]| -> (usize, String) {
        let found: Vec<String> = states
            .iter()
            .filter_map(|s| counts.get(s).map(|c| format!("{s} {c}")))
            .collect();
        let total = states.iter().filter_map(|s| counts.get(s)).sum();
        (total, found.join(", "))
    };
    let batches_in = |states: &[RowState]| -> String {
        let names: BTreeSet<&str> = h
            .payouts
            .iter()
            .filter(|p| states.contains(&p.state))
            .map(|p| p.batch.as_str())
            .collect();
        names
            .iter()
            .map(|b| format!("paybatch status --batch {}{ledger}", shell_word(b)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut notes = Vec::new();
    let unfinished = [RowState::Pending, RowState::Planned, RowState::Submitted];
    let (k, which) = n(&unfinished);
    if k > 0 {
        notes.push(format!(
            "{k} not finished ({which}): may still be paid when its batch is run again ({})",
            batches_in(&unfinished)
        ));
    }
    let (k, _) = n(&[RowState::Mismatch]);
    if k > 0 {
        notes.push(format!(
            "{k} MISMATCH: the service finished the order but not as it was sent, so it may have paid; a person must compare it with the account's orders ({})",
            batches_in(&[RowState::Mismatch])
        ));
    }
    let (k, which) = n(&[RowState::Failed, RowState::Rejected]);
    if k > 0 {
        notes.push(format!("{k} not paid ({which})"));
    }
    let (k, which) = n(&[RowState::Invalid, RowState::Removed, RowState::Skipped]);
    if k > 0 {
        notes.push(format!("{k} never sent ({which})"));
    }
    notes
}

/// One cell of the table: escaped for the terminal, `-` when absent.
fn cell(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => escape(v).into_owned(),
        _ => "-".into(),
    }
}

fn amount(value: Option<&str>, currency: Option<&str>) -> String {
    match (value, currency) {
        (Some(v), Some(c)) => {
            // An amount the ledger recorded is shown with its currency's places, grouped.
            let shown = crate::api::decimal::parse_decimal_text(v)
                .map_or_else(|| v.to_string(), |d| crate::money::human_amount(d, c));
            cell(Some(&format!("{shown} {c}")))
        }
        (Some(v), None) => cell(Some(v)),
        _ => "-".into(),
    }
}

/// A price or a charge the ledger recorded, as [`amount`] shows it.
fn charge(value: Option<rust_decimal::Decimal>, currency: Option<&str>) -> String {
    amount(value.map(|d| d.to_string()).as_deref(), currency)
}

/// The rows found, in columns aligned for a terminal (widths measured on the escaped text).
fn print_table(h: &History) {
    // The address is shown when the rows were not looked up by it.
    let with_email = h.query.email().is_none();
    let mut header = vec!["BATCH", "ENVIRONMENT", "DATE (UTC)", "REFERENCE"];
    if with_email {
        header.push("EMAIL");
    }
    header.extend([
        "PRODUCT",
        "FACE VALUE",
        "PRICE",
        "DEBITED",
        "STATE",
        "ATTEMPT",
        "ORDER",
    ]);
    // Right-aligned: the amounts and the attempt.
    let right: Vec<bool> = header
        .iter()
        .map(|h| matches!(*h, "FACE VALUE" | "PRICE" | "DEBITED" | "ATTEMPT"))
        .collect();
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    let mut from_batch_time = false;
    for p in &h.payouts {
        let mut date = cell(Some(&short_time(p.date())));
        if p.completed_at.is_none() {
            date.push('*');
            from_batch_time = true;
        }
        let mut line = vec![
            cell(Some(&p.batch)),
            cell(Some(env_label(&p.environment))),
            date,
            cell(Some(&p.reference)),
        ];
        if with_email {
            line.push(cell(p.email.as_deref()));
        }
        line.extend([
            cell(Some(&p.product_codes.join("|"))),
            amount(p.face_value.as_deref(), p.currency.as_deref()),
            charge(p.price, p.currency.as_deref()),
            charge(p.debited_amount, p.debited_currency.as_deref()),
            p.state.as_str().to_string(),
            p.attempt.to_string(),
            cell(p.order_id.as_deref()),
        ]);
        lines.push(line);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths[i];
                if right[i] {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        outln!("{}", cells.join("  ").trim_end());
    }
    if from_batch_time {
        outln!();
        outln!("* not completed: the date is when its batch was created");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_person_would_say_them() {
        assert_eq!(times(1), "1 time");
        assert_eq!(times(2), "2 times");
        assert_eq!(short_time("2026-11-03T10:22:33.123Z"), "2026-11-03 10:22");
        assert_eq!(short_time("2026-11-03T11:22:33+01:00"), "2026-11-03 10:22");
        assert_eq!(short_time("yesterday"), "yesterday");
    }

    #[test]
    fn cells_are_escaped_for_the_terminal() {
        assert_eq!(cell(Some("nov\x1b[2J")), "nov\\u{1b}[2J");
        assert_eq!(cell(Some("")), "-");
        assert_eq!(cell(None), "-");
        assert_eq!(amount(Some("10.00"), Some("USD")), "10.00 USD");
        assert_eq!(amount(None, Some("USD")), "-");
    }
}
