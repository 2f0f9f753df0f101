//! `--json` of `run` and `retry`: one JSON object on stdout at the end, for scripts and cron
//! jobs. Amounts are strings with their currency's decimal places (never floating point, never
//! rounded). Each object is a
//! struct: its fields are the keys, in the order they are printed.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::batch::options::RunOptions;
use crate::batch::outcome::{Outcome, RunSummary};
use crate::ledger::RowState;
use crate::money::display_amount;
use crate::ops::retry::Retried;

use super::CliError;
use super::InOrder;
use super::signals::{SentSoFar, StopSignal};

/// Rows per state, in the states' order.
fn rows(counts: &BTreeMap<RowState, i64>) -> InOrder<&'static str, i64> {
    InOrder(counts.iter().map(|(s, n)| (s.as_str(), *n)).collect())
}

/// What left one paying balance (or card): `{"paid_by": "balance USD", "currency": "USD",
/// "amount": "12.50"}`.
#[derive(Serialize)]
struct PaidFrom<'a> {
    paid_by: &'a str,
    currency: &'a str,
    amount: String,
}

fn per_paying_balance(debited: &BTreeMap<(String, String), Decimal>) -> Vec<PaidFrom<'_>> {
    debited
        .iter()
        .map(|((payer, currency), amount)| PaidFrom {
            paid_by: payer,
            currency,
            amount: display_amount(*amount, currency),
        })
        .collect()
}

/// The completed rows of one product currency: face value and price.
#[derive(Serialize)]
struct FaceAndPrice {
    face_value: String,
    price: String,
}

#[derive(Serialize)]
struct Totals<'a> {
    per_paying_balance: Vec<PaidFrom<'a>>,
    per_product_currency: InOrder<&'a str, FaceAndPrice>,
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::NeedsAPerson => "needs_a_person",
        Outcome::Incomplete => "incomplete",
    }
}

/// A run that went to its end.
#[derive(Serialize)]
pub struct Summary<'a> {
    batch: &'a str,
    environment: &'a str,
    simulated: bool,
    exit_code: i32,
    outcome: &'static str,
    rows: InOrder<&'static str, i64>,
    unconfirmed_rows: i64,
    total_unconfirmed_rows: i64,
    totals: Totals<'a>,
    result_file: String,
    /// The result file's layout and what chose it: `{"delimiter": ";", "bom": true,
    /// "line_end": "CRLF", "chosen": "same"}`.
    result_format: &'a crate::file_format::ResultFormat,
    incomplete_reason: Option<&'a str>,
    stopped: &'a [String],
    replanned: Replanned<'a>,
    likely_repeats: LikelyRepeats<'a>,
}

/// The rows the run paid that pay a recipient what another batch paid them lately: how many,
/// and the first of them with the earlier batch's row.
#[derive(Serialize)]
struct LikelyRepeats<'a> {
    rows: usize,
    listed: &'a [crate::batch::outcome::LikelyPaid],
}

/// Rows planned again in new orders after the service refused other items of their orders:
/// `{"rows": 672, "because": {"validation_error": 672}}`.
#[derive(Serialize)]
struct Replanned<'a> {
    rows: i64,
    because: InOrder<&'a str, i64>,
}

pub fn summary(s: &RunSummary, code: i32) -> Summary<'_> {
    Summary {
        batch: &s.batch,
        environment: s.environment.name(),
        simulated: s.environment.is_simulated(),
        exit_code: code,
        outcome: outcome_word(s.outcome()),
        rows: rows(&s.counts),
        unconfirmed_rows: s.unconfirmed,
        total_unconfirmed_rows: s.total_unconfirmed,
        totals: Totals {
            per_paying_balance: per_paying_balance(&s.debited),
            per_product_currency: InOrder(
                s.totals
                    .iter()
                    .map(|(currency, (face, price))| {
                        let totals = FaceAndPrice {
                            face_value: display_amount(*face, currency),
                            price: display_amount(*price, currency),
                        };
                        (currency.as_str(), totals)
                    })
                    .collect(),
            ),
        },
        result_file: s.result_path.display().to_string(),
        result_format: &s.result_format,
        incomplete_reason: s.incomplete_reason.as_deref(),
        stopped: &s.stopped,
        replanned: Replanned {
            rows: s.replanned.iter().map(|(_, n)| n).sum(),
            because: InOrder(s.replanned.iter().map(|(k, n)| (k.as_str(), *n)).collect()),
        },
        likely_repeats: LikelyRepeats {
            rows: s.likely_repeats_total,
            listed: &s.likely_repeats,
        },
    }
}

/// The error of a command that stopped: what went wrong and what to do.
#[derive(Serialize)]
pub struct ErrorJson<'a> {
    message: &'a str,
    help: Option<&'a str>,
}

impl<'a> ErrorJson<'a> {
    pub fn of(e: &'a CliError) -> Self {
        ErrorJson {
            message: e.message(),
            help: e.help(),
        }
    }
}

/// A run that stopped on an error (nothing sent, or the service failed for a moment).
#[derive(Serialize)]
pub struct Failure<'a> {
    batch: String,
    environment: &'a str,
    simulated: bool,
    exit_code: i32,
    outcome: &'static str,
    error: ErrorJson<'a>,
    problems: usize,
}

pub fn failure<'a>(opts: &'a RunOptions, e: &'a CliError) -> Failure<'a> {
    Failure {
        batch: opts.batch_name(),
        environment: opts.environment.name(),
        simulated: opts.environment.is_simulated(),
        exit_code: e.exit.code(),
        outcome: "stopped",
        error: ErrorJson::of(e),
        problems: e.problems_total(),
    }
}

/// A run refused before it started (a setting, the key, a production run not confirmed).
#[derive(Serialize)]
pub struct Refused<'a> {
    #[serde(flatten)]
    stopped: Stopped<'a>,
    batch: Option<String>,
    file: String,
    environment: Option<&'a str>,
}

pub fn refused<'a>(
    opts: Option<&'a RunOptions>,
    file: &std::path::Path,
    code: i32,
    message: &'a str,
    help: &'a str,
) -> Refused<'a> {
    Refused {
        stopped: stopped(code, message, help),
        batch: opts.map(RunOptions::batch_name),
        file: file.display().to_string(),
        environment: opts.map(|o| o.environment.name()),
    }
}

/// A command line or settings file that could not be used: nothing was run.
pub fn usage<'a>(message: &'a str, help: &'a str) -> Stopped<'a> {
    stopped(crate::exit::Exit::Usage.code(), message, help)
}

/// What every object of a command that did not run says: its exit code and its error.
#[derive(Serialize)]
pub struct Stopped<'a> {
    exit_code: i32,
    outcome: &'static str,
    error: ErrorJson<'a>,
}

fn stopped<'a>(code: i32, message: &'a str, help: &'a str) -> Stopped<'a> {
    Stopped {
        exit_code: code,
        outcome: "stopped",
        error: ErrorJson {
            message,
            help: Some(help).filter(|h| !h.is_empty()),
        },
    }
}

/// A run stopped by a signal.
#[derive(Serialize)]
pub struct Interrupted<'a> {
    batch: String,
    environment: &'a str,
    simulated: bool,
    exit_code: i32,
    outcome: &'static str,
    signal: &'static str,
    orders_sent: Option<i64>,
    orders_in_doubt: Option<i64>,
    rows_not_sent: Option<i64>,
    progress_unread: Option<&'a str>,
}

pub fn interrupted<'a>(
    opts: &'a RunOptions,
    progress: &'a SentSoFar,
    signal: StopSignal,
) -> Interrupted<'a> {
    // Unknown (null) when the ledger could not be read: never a count of zero.
    let sent = match progress.unread {
        Some(_) => None,
        None => Some(progress.sent.unwrap_or_default()),
    };
    Interrupted {
        batch: opts.batch_name(),
        environment: opts.environment.name(),
        simulated: opts.environment.is_simulated(),
        exit_code: signal.exit().code(),
        outcome: "interrupted",
        signal: signal.name(),
        orders_sent: sent.map(|s| s.orders_sent),
        orders_in_doubt: sent.map(|s| s.orders_in_doubt),
        rows_not_sent: sent.map(|s| s.rows_not_sent),
        progress_unread: progress.unread.as_deref(),
    }
}

#[derive(Serialize)]
struct RetriedTotals<'a> {
    per_paying_balance: Vec<PaidFrom<'a>>,
}

/// What `retry` made payable again: with the exit code, the rows by state and the totals
/// computed (another shape than [`Retried`]).
#[derive(Serialize)]
pub struct RetriedJson<'a> {
    batch: &'a str,
    environment: &'a str,
    exit_code: i32,
    retried: &'a [String],
    rows: InOrder<&'static str, i64>,
    totals: RetriedTotals<'a>,
    result_file: Option<String>,
    /// `retry --expired`: the orders not read or not believed, whose rows were not reissued.
    not_read: &'a [crate::ops::payouts::NotRead],
}

pub fn retried(r: &Retried, code: i32) -> RetriedJson<'_> {
    RetriedJson {
        batch: &r.batch,
        environment: &r.environment,
        exit_code: code,
        retried: &r.references,
        rows: rows(&r.counts),
        totals: RetriedTotals {
            per_paying_balance: per_paying_balance(&r.debited),
        },
        result_file: None,
        not_read: &r.not_read,
    }
}

/// A `retry` that stopped: the batch, the exit code and the error.
#[derive(Serialize)]
pub struct RetryFailed<'a> {
    batch: &'a str,
    exit_code: i32,
    error: ErrorJson<'a>,
}

pub fn retry_failed<'a>(batch: &'a str, e: &'a CliError) -> RetryFailed<'a> {
    RetryFailed {
        batch,
        exit_code: e.exit.code(),
        error: ErrorJson::of(e),
    }
}
