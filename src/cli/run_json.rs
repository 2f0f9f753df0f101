//! `--json` of `run` and `retry`: one JSON object on stdout at the end, for scripts and cron
//! jobs. Amounts are strings, exactly as recorded (never floating point).

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde_json::{Value, json};

use crate::batch::options::RunOptions;
use crate::batch::outcome::{Outcome, RunSummary};
use crate::ledger::RowState;
use crate::ops::retry::Retried;

use super::CliError;
use super::signals::{Progress, Stop};

fn rows(counts: &BTreeMap<RowState, i64>) -> Value {
    Value::Object(
        counts
            .iter()
            .map(|(state, n)| (state.as_str().to_string(), json!(n)))
            .collect(),
    )
}

/// What left each paying balance (or card): `[{"paid_by": "balance USD", "currency": "USD",
/// "amount": "12.50"}]`.
fn per_paying_balance(debited: &BTreeMap<(String, String), Decimal>) -> Value {
    debited
        .iter()
        .map(|((payer, currency), amount)| {
            json!({"paid_by": payer, "currency": currency, "amount": amount.to_string()})
        })
        .collect()
}

/// The completed rows per product currency: face value and price.
fn per_product_currency(totals: &BTreeMap<String, (Decimal, Decimal)>) -> Value {
    Value::Object(
        totals
            .iter()
            .map(|(currency, (face, price))| {
                (
                    currency.clone(),
                    json!({"face_value": face.to_string(), "price": price.to_string()}),
                )
            })
            .collect(),
    )
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::NeedsAPerson => "needs_a_person",
        Outcome::Incomplete => "incomplete",
    }
}

/// A run that went to its end.
pub fn summary(s: &RunSummary, code: i32) -> Value {
    json!({
        "batch": s.batch,
        "environment": s.environment.name(),
        "simulated": s.environment.is_simulated(),
        "exit_code": code,
        "outcome": outcome_word(s.outcome()),
        "rows": rows(&s.counts),
        "unconfirmed_rows": s.unconfirmed,
        "totals": {
            "per_paying_balance": per_paying_balance(&s.debited),
            "per_product_currency": per_product_currency(&s.totals),
        },
        "result_file": s.result_path.display().to_string(),
        "incomplete_reason": s.incomplete_reason,
        "stopped": s.held,
    })
}

/// A run that stopped on an error (nothing sent, or the service failed for a moment).
pub fn failure(opts: &RunOptions, e: &CliError) -> Value {
    json!({
        "batch": opts.batch_name(),
        "environment": opts.environment.name(),
        "simulated": opts.environment.is_simulated(),
        "exit_code": e.exit.code(),
        "outcome": "stopped",
        "error": {"message": e.message(), "help": e.help()},
        "problems": e.problems_total(),
    })
}

/// A run refused before it started (a setting, the key, a production run not confirmed).
pub fn refused(
    opts: Option<&RunOptions>,
    file: &std::path::Path,
    code: i32,
    message: &str,
    help: &str,
) -> Value {
    let mut v = stopped(code, message, help);
    v["batch"] = json!(opts.map(RunOptions::batch_name));
    v["file"] = json!(file.display().to_string());
    v["environment"] = json!(opts.map(|o| o.environment.name().to_string()));
    v
}

/// A command line or settings file that could not be used: nothing was run.
pub fn usage(message: &str, help: &str) -> Value {
    stopped(crate::exit::USAGE, message, help)
}

/// What every object of a command that did not run says: its exit code and its error.
fn stopped(code: i32, message: &str, help: &str) -> Value {
    json!({
        "exit_code": code,
        "outcome": "stopped",
        "error": {"message": message, "help": Some(help).filter(|h| !h.is_empty())},
    })
}

/// A run stopped by a signal.
pub fn interrupted(opts: &RunOptions, progress: &Progress, signal: Stop) -> Value {
    // Unknown (null) when the ledger could not be read: never a count of zero.
    let sent = match progress.unread {
        Some(_) => None,
        None => Some(progress.sent.unwrap_or_default()),
    };
    json!({
        "batch": opts.batch_name(),
        "environment": opts.environment.name(),
        "simulated": opts.environment.is_simulated(),
        "exit_code": signal.exit().code(),
        "outcome": "interrupted",
        "signal": signal.name(),
        "orders_sent": sent.map(|s| s.orders_sent),
        "orders_in_doubt": sent.map(|s| s.orders_in_doubt),
        "rows_not_sent": sent.map(|s| s.rows_not_sent),
        "progress_unread": progress.unread,
    })
}

/// What `retry` made payable again.
pub fn retried(r: &Retried, code: i32) -> Value {
    json!({
        "batch": r.batch,
        "environment": r.environment,
        "exit_code": code,
        "retried": r.references,
        "rows": rows(&r.counts),
        "totals": {"per_paying_balance": per_paying_balance(&r.debited)},
        "result_file": Value::Null,
    })
}
