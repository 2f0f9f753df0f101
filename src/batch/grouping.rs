//! Planning: the second pass over the file merges every row into the ledger and puts the rows
//! to pay into orders, grouped by how they are paid and priced, each order's key and exact body
//! committed with its rows in one transaction before anything is sent.

use std::collections::{BTreeMap, HashMap};

use rust_decimal::Decimal;

use crate::api::ApiError;
use crate::api::models::{ExecutionMode, Product};
use crate::input::rules::{CatalogIndex, Problem, RowSpec, ValidateOptions};
use crate::input::scan;
use crate::ledger::merge::ToPlan;
use crate::ledger::{self, IncomingRow, Ledger, LedgerError, PlannedOrder};

use super::funds::{self, is_converted, row_card};
use super::options::{RunOptions, per_order};
use super::outcome::RunError;
use super::plan;

/// What merging and planning the file did.
pub struct Merged {
    pub report: ledger::MergeReport,
    /// New orders planned.
    pub orders: usize,
    /// New rows planned alone in sync orders because the service converts their currency.
    pub converted_rows: usize,
    /// What the new rows draw on each balance, for the person running the batch.
    pub balance_lines: Vec<String>,
}

/// How a group of rows is paid and priced: payment currency, the card (or `None`: the
/// balance), and the currency the products are priced in. Every item of an order is priced in
/// one currency, the payment currency, except an order of one row paid from the balance of
/// another currency (embedded FX).
type PaidBy = (String, Option<String>, String);
/// A row waiting for its order: as the ledger records it, how it is planned, what it pays.
type Waiting = (IncomingRow, ToPlan, RowSpec);

/// The rows of one open order and whether its `metadata` can still name one more.
#[derive(Default)]
struct OpenOrder {
    rows: Vec<Waiting>,
    fit: plan::MetadataFit,
}

/// Where each payment method's rows wait until they fill an order: rows are grouped by how
/// they are paid and priced ([`PaidBy`]), in input order, `per_order` at most an order, and
/// only as many as the order's `metadata` can name ([`plan::MetadataFit`]). A converted row
/// ([`is_converted`]) is an order of its own, in sync mode.
struct Groups<'f> {
    per_order: usize,
    open: HashMap<PaidBy, OpenOrder>,
    /// The groups in the order of their first row.
    order: Vec<PaidBy>,
    environment: &'f str,
    batch: &'f str,
    mode: ExecutionMode,
    planned: usize,
    /// Rows planned alone in sync orders because the service converts their currency.
    converted_rows: usize,
}

impl Groups<'_> {
    /// Adds a row to its group; plans the group's order when it is full.
    fn push(
        &mut self,
        merge: &mut ledger::merge::Merge<'_>,
        key: PaidBy,
        row: Waiting,
    ) -> Result<(), RunError> {
        if is_converted(&row.2, key.1.as_deref()) {
            self.converted_rows += 1;
            return self.plan(merge, &key, vec![row], ExecutionMode::Sync);
        }
        let (reference, attempt) = (row.0.reference.clone(), row.1.attempt);
        let full = self
            .open
            .get(&key)
            .is_some_and(|g| !g.fit.is_empty() && !g.fit.admits(&reference, attempt));
        if full {
            let rows = self
                .open
                .get_mut(&key)
                .map(std::mem::take)
                .unwrap_or_default();
            self.plan(merge, &key, rows.rows, self.mode)?;
        }
        let group = match self.open.get_mut(&key) {
            Some(g) => g,
            None => {
                self.order.push(key.clone());
                self.open.entry(key.clone()).or_default()
            }
        };
        group.fit.add(&reference, attempt);
        group.rows.push(row);
        if group.rows.len() >= self.per_order {
            let rows = std::mem::take(group);
            self.plan(merge, &key, rows.rows, self.mode)?;
        }
        Ok(())
    }

    /// Plans what is left in every group.
    fn finish(&mut self, merge: &mut ledger::merge::Merge<'_>) -> Result<(), RunError> {
        for key in std::mem::take(&mut self.order) {
            let rows = self.open.remove(&key).unwrap_or_default().rows;
            if !rows.is_empty() {
                self.plan(merge, &key, rows, self.mode)?;
            }
        }
        Ok(())
    }

    /// One order: its deterministic key and exact body, recorded with its rows.
    fn plan(
        &mut self,
        merge: &mut ledger::merge::Merge<'_>,
        (currency, card, _): &PaidBy,
        rows: Vec<Waiting>,
        mode: ExecutionMode,
    ) -> Result<(), RunError> {
        let payment = plan::payment_method(currency, card.as_deref());
        let items: Vec<(&RowSpec, i64)> = rows.iter().map(|(_, t, s)| (s, t.attempt)).collect();
        let keyed: Vec<(&str, i64)> = rows
            .iter()
            .map(|(r, t, _)| (r.reference.as_str(), t.attempt))
            .collect();
        let key = plan::order_key(self.environment, self.batch, &keyed);
        let body = plan::order_body(&key, self.batch, &payment, &items).map_err(|e| {
            RunError::Refused {
                message: format!("cannot encode an order of batch {}: {e}", self.batch),
                help: String::new(),
            }
        })?;
        let order = PlannedOrder {
            idempotency_key: key,
            body,
            mode: mode.as_str().to_string(),
            payment_currency: currency.clone(),
            payment_method: if card.is_some() {
                "CARD"
            } else {
                "ACCOUNT_BALANCE"
            }
            .into(),
            card_id: card.clone(),
        };
        let members: Vec<(&IncomingRow, ToPlan)> = rows.iter().map(|(r, t, _)| (r, *t)).collect();
        merge.plan(&order, &members)?;
        self.planned += 1;
        Ok(())
    }
}

/// The second pass over the file (see [`scan`]): merges every row into the batch and plans
/// the rows to pay into orders, in one transaction. Nothing is committed when a submitted row
/// changed, when the balances cannot pay the new rows, or when the file changed since it was
/// checked.
pub fn merge_and_plan(
    ledger: &mut Ledger,
    batch: &ledger::BatchRecord,
    scanned: &scan::Scan,
    options: &ValidateOptions,
    products: &[Product],
    mut balances: BTreeMap<String, Result<Decimal, ApiError>>,
    opts: &RunOptions,
) -> Result<Merged, RunError> {
    let by_code: HashMap<&str, &Product> = products.iter().map(|p| (p.code.as_str(), p)).collect();
    let mut need = funds::Need::default();
    let mut groups = Groups {
        per_order: per_order(opts, scanned.valid_rows),
        open: HashMap::new(),
        order: Vec::new(),
        environment: opts.environment.name(),
        batch: &batch.name,
        mode: opts.mode,
        planned: 0,
        converted_rows: 0,
    };
    let mut merge = ledger.merge(batch.id, true)?;
    // The second pass finds the invalid rows again with the same checks as the first.
    let index = CatalogIndex::new(products.to_vec());
    let merging = std::time::Instant::now();
    scan::read_again_in_parallel(scanned, &opts.input, &index, options, |row, spec| {
        let Some(to_plan) = merge.row(&row)? else {
            return Ok(());
        };
        let spec = spec.ok_or_else(|| {
            RunError::Ledger(LedgerError::Corrupt(format!(
                "row `{}` is to be paid but has no valid spec",
                row.reference
            )))
        })?;
        let card = row_card(&spec, opts.card_id.as_deref()).map(str::to_string);
        need.add(&spec, card.as_deref(), &by_code);
        let key = (spec.payment_currency.clone(), card, spec.currency.clone());
        groups.push(&mut merge, key, (row, to_plan, spec))
    })?;
    tracing::info!(
        "second pass: rows read and recorded: {:.2?}",
        merging.elapsed()
    );
    groups.finish(&mut merge)?;
    let report = merge.close()?.clone();
    if !report.changed_after_submission.is_empty() {
        return Err(RunError::Invalid {
            input: opts.input.clone(),
            problems: changed_after_submission(&report),
        });
    }
    let balance_lines = preflight(&need, &mut balances)?;
    let committing = std::time::Instant::now();
    let report = merge.commit()?;
    tracing::info!("second pass: committed: {:.2?}", committing.elapsed());
    Ok(Merged {
        report,
        orders: groups.planned,
        converted_rows: groups.converted_rows,
        balance_lines,
    })
}

/// The rows of the file that changed after they were submitted: a submitted payout cannot be
/// changed.
fn changed_after_submission(report: &ledger::MergeReport) -> crate::input::rules::Problems {
    report
        .changed_after_submission
        .iter()
        .map(|(reference, line, state)| Problem {
            line: *line as u64,
            column: None,
            column_name: Some("reference".into()),
            value: Some(reference.clone()),
            message: format!(
                "row `{reference}` changed after it was submitted (it is {state}); a submitted payout cannot be changed"
            ),
            help: Some("restore the row as it was, or give the new payout a new reference".into()),
        })
        .collect()
}

/// The balance pre-flight of the rows about to be planned ([`funds::check`]): what each balance
/// has and what the new rows need, or why nothing can be submitted.
fn preflight(
    need: &funds::Need,
    balances: &mut BTreeMap<String, Result<Decimal, ApiError>>,
) -> Result<Vec<String>, RunError> {
    let checks = funds::check(&need.from_balance, balances)?;
    let mut lines: Vec<String> = checks
        .iter()
        .map(|c| {
            format!(
                "balance {}: {} available, {} needed",
                c.currency, c.available, c.needed
            )
        })
        .collect();
    for ((pay, product_currency), amount) in &need.converted {
        lines.push(format!(
            "balance {pay}: plus {amount} {product_currency} converted by the service at order time (not checked here)"
        ));
    }
    let short: Vec<String> = checks
        .iter()
        .filter(|c| !c.enough)
        .map(|c| {
            format!(
                "{}: need {}, available {}, short by {}",
                c.currency,
                c.needed,
                c.available,
                c.needed - c.available
            )
        })
        .collect();
    if !short.is_empty() {
        return Err(RunError::Refused {
            message: format!(
                "the balance is too low; nothing was submitted:\n  {}",
                short.join("\n  ")
            ),
            help: "top up the account, or pay fewer rows (split the file), then run again".into(),
        });
    }
    Ok(lines)
}
