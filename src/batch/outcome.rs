//! How a run that went to its end came out: its summary ([`RunSummary`], [`Outcome`]). The
//! command line maps it to an exit code; nothing here knows them. The error that stops a run
//! is the operations' ([`crate::ops::error::OpError`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rust_decimal::Decimal;

use crate::environment::Environment;
use crate::ledger::{Ledger, LedgerError, RowState};
use crate::ops::error::OpError;

/// How a run that went to its end came out, for the command line to turn into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every row completed.
    Completed,
    /// Rows failed, were rejected, invalid or mismatched, or the service stopped part of the
    /// batch: a person decides what next.
    NeedsAPerson,
    /// Rows are not finished: the same command resumes.
    Incomplete,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub batch: String,
    pub environment: Environment,
    pub result_path: PathBuf,
    /// The layout the result file was written in, and what chose it.
    pub result_format: crate::file_format::ResultFormat,
    pub counts: BTreeMap<RowState, i64>,
    /// Completed rows: (currency, face value total, price total).
    pub totals: BTreeMap<String, (Decimal, Decimal)>,
    pub incomplete_reason: Option<String>,
    /// Rows in orders per payment method (`balance USD`, `card card_x`).
    pub paid_by: BTreeMap<String, i64>,
    /// What left each paying balance (or card) for the completed rows: (`balance USD` or
    /// `card card_x`, currency) -> amount. Converted rows count in the payment currency.
    pub debited: BTreeMap<(String, String), Decimal>,
    /// What the service stopped during the run and a person must settle (a balance too low,
    /// the account's spending limit): one line each, with what is missing and what to do.
    pub stopped: Vec<String>,
    /// The batch's valid rows per delivery (`EMAIL`, `PAYOUT_LINK`).
    pub per_delivery: BTreeMap<String, i64>,
    /// COMPLETED rows whose order could not be confirmed as the one sent (the service's answer
    /// named neither its key nor its batch).
    pub unconfirmed: i64,
    /// COMPLETED rows whose order's total could not be checked (the service's answer left out
    /// the optional fields that check it: `transaction_detail` of a converted order).
    pub total_unconfirmed: i64,
    /// The first INVALID rows, named with their problems ([`INVALID_NAMED`] at most).
    pub invalid: Vec<String>,
    /// Rows planned again in new orders after the service refused other items of their
    /// orders, by the refusal's type ([`super::replan`]).
    pub replanned: Vec<(String, i64)>,
    /// The first rows of the run that pay a recipient what another batch paid them lately
    /// (likely repeats, paid: a warning), and how many there are in all.
    pub likely_repeats: Vec<LikelyPaid>,
    pub likely_repeats_total: usize,
}

/// A row a run paid that pays a recipient what another batch (`batch`, its row
/// `earlier_reference`, paid at `completed_at`) paid them lately: a likely repeat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LikelyPaid {
    pub reference: String,
    pub line: u64,
    pub batch: String,
    pub earlier_reference: String,
    pub completed_at: String,
}

/// INVALID rows named in a summary, at most (the result file has every one).
pub const INVALID_NAMED: i64 = 5;

impl RunSummary {
    /// The result file's path, then its layout when it is not plain CSV
    /// (`` nov.result.csv (`;`, BOM, CRLF: as the input) ``).
    pub fn result_file(&self) -> String {
        format!(
            "{}{}",
            self.result_path.display(),
            self.result_format.note()
        )
    }

    pub fn count(&self, state: RowState) -> i64 {
        self.counts.get(&state).copied().unwrap_or(0)
    }

    /// Completed when every row is; needs a person when rows failed, were rejected, invalid or
    /// mismatched, or the service stopped a balance or the account ([`RunSummary::stopped`]);
    /// incomplete while rows are not finished.
    pub fn outcome(&self) -> Outcome {
        let unfinished = self.count(RowState::Pending)
            + self.count(RowState::Planned)
            + self.count(RowState::Submitted);
        if !self.stopped.is_empty() {
            Outcome::NeedsAPerson
        } else if unfinished > 0 || self.incomplete_reason.is_some() {
            Outcome::Incomplete
        } else if self.count(RowState::Failed)
            + self.count(RowState::Rejected)
            + self.count(RowState::Invalid)
            + self.count(RowState::Mismatch)
            > 0
        {
            Outcome::NeedsAPerson
        } else {
            Outcome::Completed
        }
    }
}

/// The summary of a batch as the ledger has it now.
pub fn summarize(
    ledger: &Ledger,
    batch_id: i64,
    batch: &str,
    environment: &Environment,
    result_path: PathBuf,
    incomplete_reason: Option<String>,
) -> Result<RunSummary, OpError> {
    let (counts, per_delivery) = ledger.counts_and_deliveries(batch_id)?;
    let counts: BTreeMap<RowState, i64> = counts.into_iter().collect();
    let per_delivery = per_delivery.into_iter().collect();
    let mut totals: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
    for (currency, face, price) in ledger.completed_amounts(batch_id)? {
        let entry = totals.entry(currency).or_default();
        entry.0 += face;
        entry.1 += price;
    }
    let debited = debited_totals(ledger, batch_id)?;
    let mut paid_by: BTreeMap<String, i64> = BTreeMap::new();
    for (card, currency, rows) in ledger.rows_per_payment(batch_id)? {
        let method = match card {
            Some(card) => format!("card {card}"),
            None => format!("balance {currency}"),
        };
        *paid_by.entry(method).or_default() += rows;
    }
    let (mut unconfirmed, mut total_unconfirmed) = (0, 0);
    let noted_rows = ledger.completed_rows_noted(batch_id)?;
    for error_type in super::record::Unconfirmed::TYPES {
        let rows = noted_rows.get(error_type).copied().unwrap_or(0);
        let noted = super::record::Unconfirmed::of(Some(error_type));
        unconfirmed += if noted.order { rows } else { 0 };
        total_unconfirmed += if noted.total { rows } else { 0 };
    }
    let invalid = if counts.get(&RowState::Invalid).copied().unwrap_or(0) > 0 {
        ledger.first_invalid_rows(batch_id, INVALID_NAMED)?
    } else {
        Vec::new()
    };
    Ok(RunSummary {
        unconfirmed,
        total_unconfirmed,
        invalid,
        replanned: ledger.replanned_rows(batch_id)?,
        likely_repeats: Vec::new(),
        likely_repeats_total: 0,
        paid_by,
        debited,
        per_delivery,
        batch: batch.to_string(),
        environment: environment.clone(),
        result_format: ledger.result_format(batch_id)?,
        result_path,
        counts,
        totals,
        incomplete_reason,
        stopped: Vec::new(),
    })
}

/// What left each paying balance (or card) for the completed rows of a batch: (`balance CUR`
/// or `card ID`, currency) -> amount.
pub fn debited_totals(
    ledger: &Ledger,
    batch_id: i64,
) -> Result<BTreeMap<(String, String), Decimal>, LedgerError> {
    let mut out: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    for (card, currency, amount) in ledger.debited_sums(batch_id)? {
        let payer = match card {
            Some(card) => format!("card {card}"),
            None => format!("balance {currency}"),
        };
        *out.entry((payer, currency)).or_default() += amount;
    }
    Ok(out)
}
