//! Planning: the second pass over the file merges every row into the ledger and puts the rows
//! to pay into orders, grouped by how they are paid and priced, each order's key and exact body
//! committed with its rows in one transaction before anything is sent.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rust_decimal::Decimal;

use crate::api::ApiError;
use crate::api::models::{ExecutionMode, Product};
use crate::input::rules::{CatalogIndex, Problem, RowSpec, ValidateOptions};
use crate::input::scan;
use crate::ledger::merge::ToPlan;
use crate::ledger::{self, IncomingRow, Ledger, LedgerError, PlannedOrder};

use super::funds::{self, is_converted, row_card};
use super::options::{RunOptions, per_order};
use super::order_body;
use super::repeats::{Earlier, Noticed};
use crate::ops::error::OpError;

/// What a run's rows are checked and planned with, built once the catalog and the ledger's
/// other batches are read: the run's options (its input, ledger and environment), the catalog
/// of its environment, how its rows are validated, and what the other batches hold.
pub struct RunContext {
    pub opts: RunOptions,
    pub catalog: Vec<Product>,
    pub checks: ValidateOptions,
    pub earlier: Earlier,
}

/// What merging and planning the file did.
pub struct Merged {
    pub report: ledger::MergeReport,
    /// New orders planned.
    pub orders: usize,
    /// New rows planned alone in sync orders because the service converts their currency.
    pub converted_rows: usize,
    /// What the new rows draw on each balance, for the person running the batch.
    pub balance_lines: Vec<String>,
    /// Balances that may be short for converted rows no one could price, said plainly.
    pub balance_warnings: Vec<String>,
    /// Rows read in one pass that may pay what another batch paid lately (checked once the
    /// plan is committed: a warning).
    pub noticed: Noticed,
}

/// How a group of rows is paid and priced. Every item of an order is priced in one currency,
/// the payment currency, except an order of one row paid from the balance of another currency
/// (embedded FX).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PaidBy {
    payment_currency: String,
    /// The card, or `None`: the balance of the payment currency.
    card: Option<String>,
    /// The currency the products are priced in: part of the key only (rows priced in another
    /// currency never share an order), never read on its own.
    #[allow(dead_code)]
    priced_in: String,
}

/// A row waiting for its order.
struct Waiting {
    /// As the ledger records it.
    row: IncomingRow,
    /// How it is planned.
    to_plan: ToPlan,
    /// What it pays.
    spec: RowSpec,
}

/// The rows of one open order and whether its `metadata` can still name one more.
#[derive(Default)]
struct OpenOrder {
    rows: Vec<Waiting>,
    fit: order_body::MetadataFit,
    /// The bytes of its rows ([`IncomingRow::size`]).
    bytes: usize,
}

/// The bytes of rows ([`IncomingRow::size`]) the open orders may hold in all: past it, the
/// order a row has just joined is planned with the rows it has. Narrow rows never reach it
/// (200 rows an order of a few hundred bytes each); very wide ones (a hundred thousand
/// columns carried through, hundreds of KiB a row) make smaller orders instead of holding
/// hundreds of rows.
const OPEN_BYTES: usize = 16 << 20;

/// Where each payment method's rows wait until they fill an order: rows are grouped by how
/// they are paid and priced ([`PaidBy`]), in input order, `per_order` at most an order, and
/// only as many as the order's `metadata` can name ([`order_body::MetadataFit`]). A converted row
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
    /// The bytes of the rows of every open order.
    open_bytes: usize,
}

impl Groups<'_> {
    /// Adds a row to its group; plans the group's order when it is full.
    fn push(
        &mut self,
        merge: &mut ledger::merge::Merge<'_>,
        key: PaidBy,
        row: Waiting,
    ) -> Result<(), OpError> {
        if is_converted(&row.spec, key.card.as_deref()) {
            self.converted_rows += 1;
            return self.plan(merge, &key, vec![row], ExecutionMode::Sync);
        }
        let attempt = row.to_plan.attempt;
        let full = self
            .open
            .get(&key)
            .is_some_and(|g| !g.fit.is_empty() && !g.fit.admits(&row.row.reference, attempt));
        if full {
            self.plan_open(merge, &key)?;
        }
        let group = match self.open.get_mut(&key) {
            Some(g) => g,
            None => {
                self.order.push(key.clone());
                self.open.entry(key.clone()).or_default()
            }
        };
        let bytes = row.row.size();
        group.fit.add(&row.row.reference, attempt);
        group.rows.push(row);
        group.bytes += bytes;
        self.open_bytes += bytes;
        if group.rows.len() >= self.per_order || self.open_bytes > OPEN_BYTES {
            self.plan_open(merge, &key)?;
        }
        Ok(())
    }

    /// Plans the open order of `key` with the rows it has.
    fn plan_open(
        &mut self,
        merge: &mut ledger::merge::Merge<'_>,
        key: &PaidBy,
    ) -> Result<(), OpError> {
        let group = self
            .open
            .get_mut(key)
            .map(std::mem::take)
            .unwrap_or_default();
        self.open_bytes = self.open_bytes.saturating_sub(group.bytes);
        self.plan(merge, key, group.rows, self.mode)
    }

    /// Plans what is left in every group.
    fn finish(&mut self, merge: &mut ledger::merge::Merge<'_>) -> Result<(), OpError> {
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
        paid_by: &PaidBy,
        rows: Vec<Waiting>,
        mode: ExecutionMode,
    ) -> Result<(), OpError> {
        let (currency, card) = (&paid_by.payment_currency, &paid_by.card);
        let payment = order_body::payment_method(currency, card.as_deref());
        let items: Vec<(&RowSpec, i64)> =
            rows.iter().map(|w| (&w.spec, w.to_plan.attempt)).collect();
        let keyed: Vec<(&str, i64)> = rows
            .iter()
            .map(|w| (w.row.reference.as_str(), w.to_plan.attempt))
            .collect();
        let key = order_body::order_key(self.environment, self.batch, &keyed);
        let body = order_body::order_body(&key, self.batch, &payment, &items).map_err(|e| {
            OpError::Refused {
                message: format!("cannot encode an order of batch {}: {e}", self.batch),
                help: String::new(),
            }
        })?;
        let order = PlannedOrder {
            idempotency_key: key,
            body,
            mode: mode.into(),
            payment_currency: currency.clone(),
            payment_method: payment.kind,
            card_id: card.clone(),
        };
        let members: Vec<(&IncomingRow, ToPlan)> =
            rows.iter().map(|w| (&w.row, w.to_plan)).collect();
        merge.plan(&order, &members)?;
        self.planned += 1;
        Ok(())
    }
}

/// The balances read for the pre-flight, by currency.
pub type Balances = BTreeMap<String, Result<Decimal, ApiError>>;

/// Rows merged into the ledger and put into orders as they come, until the merge is closed.
struct Planning<'r> {
    by_code: HashMap<&'r str, &'r Product>,
    need: funds::Need,
    groups: Groups<'r>,
    card_id: Option<&'r str>,
    /// Told of each currency whose balance the new rows draw on, the first time they do.
    first_drawn: Option<&'r dyn Fn(&str)>,
    /// The currencies whose balances the new rows draw on.
    drawn: BTreeSet<String>,
    /// The service's address as the ledger records it (whose converted orders give rates).
    base_url: String,
    /// Rows left out because other batches have them (`--skip-repeats`), with why.
    skipped: HashMap<String, String>,
}

impl<'r> Planning<'r> {
    fn new(opts: &'r RunOptions, batch: &'r str, products: &'r [Product], per: usize) -> Self {
        Planning {
            by_code: products.iter().map(|p| (p.code.as_str(), p)).collect(),
            need: funds::Need::default(),
            groups: Groups {
                per_order: per,
                open: HashMap::new(),
                order: Vec::new(),
                environment: opts.environment.name(),
                batch,
                mode: opts.mode,
                planned: 0,
                converted_rows: 0,
                open_bytes: 0,
            },
            card_id: opts.card_id.as_deref(),
            first_drawn: None,
            drawn: BTreeSet::new(),
            base_url: opts.environment.recorded_base_url(),
            skipped: HashMap::new(),
        }
    }

    /// Merges one row of the file; a row to pay goes into its group's order.
    fn take(
        &mut self,
        merge: &mut ledger::merge::Merge<'_>,
        mut row: IncomingRow,
        spec: Option<RowSpec>,
    ) -> Result<(), OpError> {
        if spec.is_some()
            && let Some(why) = self.skipped.get(&row.reference)
        {
            row.skipped = true;
            row.error_message = Some(why.clone());
        }
        let Some(to_plan) = merge.row(&row)? else {
            return Ok(());
        };
        let spec = spec.ok_or_else(|| {
            OpError::Ledger(LedgerError::Corrupt(format!(
                "row `{}` is to be paid but has no valid spec",
                row.reference
            )))
        })?;
        let card = row_card(&spec, self.card_id).map(str::to_string);
        // A row planned again (its intent, never sent, cancelled) was counted by the pre-flight
        // that planned it, as every intent not sent yet is.
        if !to_plan.again {
            self.need.add(&spec, card.as_deref(), &self.by_code);
            if card.is_none() && !self.drawn.contains(&spec.payment_currency) {
                self.drawn.insert(spec.payment_currency.clone());
                if let Some(tell) = self.first_drawn {
                    tell(&spec.payment_currency);
                }
            }
        }
        let key = PaidBy {
            payment_currency: spec.payment_currency.clone(),
            card,
            priced_in: spec.currency.clone(),
        };
        let waiting = Waiting { row, to_plan, spec };
        self.groups.push(merge, key, waiting)
    }

    /// Plans what is left, then commits the merge, unless a submitted row changed or the
    /// balances (`read_funds` of the currencies the new rows draw on, with the kinds of
    /// converted rows among them priced) cannot pay the new rows; then nothing is committed.
    fn close(
        mut self,
        mut merge: ledger::merge::Merge<'_>,
        input: &std::path::Path,
        read_funds: impl FnOnce(Vec<String>, Vec<funds::ConvertedKind>) -> funds::Funds,
    ) -> Result<Merged, OpError> {
        self.groups.finish(&mut merge)?;
        let report = merge.close()?.clone();
        if !report.changed_after_submission.is_empty() {
            return Err(OpError::Invalid {
                input: input.to_path_buf(),
                problems: changed_after_submission(&report),
            });
        }
        if !report.cancelled.is_empty() {
            // Intents cancelled and their rows planned again, not committed yet: a stop here
            // leaves the plan as it was.
            crate::failpoint::hit("before_cancel_commit");
        }
        let mut funds = read_funds(
            self.drawn.iter().cloned().collect(),
            self.need.converted.keys().cloned().collect(),
        );
        // The converted rows the service did not estimate, priced from the ledger's rates.
        let base_url = &self.base_url;
        funds
            .prices
            .price_from_ledger(self.need.converted.keys(), |pay, product| {
                merge.latest_conversion(base_url, pay, product)
            })?;
        let (balance_lines, balance_warnings) = preflight(&self.need, &mut funds)?;
        let committing = std::time::Instant::now();
        let report = merge.commit()?;
        tracing::info!("committed: {:.2?}", committing.elapsed());
        Ok(Merged {
            report,
            orders: self.groups.planned,
            converted_rows: self.groups.converted_rows,
            balance_lines,
            balance_warnings,
            noticed: Noticed::default(),
        })
    }
}

/// The second pass over the file (see [`scan`]): merges every row into the batch and plans
/// the rows to pay into orders, in one transaction. The intents `cancelling` (never sent,
/// holding a row the file no longer has: [`ledger::Ledger::orders_outside_file`]) are
/// cancelled in the same transaction, their rows still in the file planned again as they come.
/// The rows of `skipped` (reference -> why) are recorded SKIPPED, never planned. Nothing is
/// committed when a submitted row changed, when the balances cannot pay the new rows, or when
/// the file changed since it was checked.
pub fn merge_and_plan(
    ledger: &mut Ledger,
    batch: &ledger::BatchRecord,
    scanned: &scan::Scan,
    run: &RunContext,
    funds: funds::Funds,
    skipped: HashMap<String, String>,
    cancelling: &BTreeSet<i64>,
) -> Result<Merged, OpError> {
    let RunContext {
        opts,
        catalog: products,
        checks: options,
        ..
    } = run;
    let mut planning = Planning::new(
        opts,
        &batch.name,
        products,
        per_order(opts, scanned.valid_rows.saturating_sub(skipped.len())),
    );
    planning.skipped = skipped;
    let mut merge =
        ledger.merge_sized(batch.id, ledger::merge::Planning::Plan, scanned.valid_rows)?;
    merge.cancelling(cancelling)?;
    // The second pass finds the invalid rows again with the same checks as the first.
    let index = CatalogIndex::new(products.to_vec());
    let merging = std::time::Instant::now();
    scan::read_again_in_parallel(scanned, &opts.input, &index, options, |row, spec| {
        planning.take(&mut merge, row, spec)
    })?;
    tracing::info!(
        "second pass: rows read and recorded: {:.2?}",
        merging.elapsed()
    );
    planning.close(merge, &opts.input, |_, _| funds)
}

/// A batch new to the ledger, read once: its file is read, checked, merged and planned in
/// one pass and one transaction that also creates the batch (`new`); `expected_rows` is the
/// number of rows the file is thought to have (for `--items-per-order auto`). Returns `None`,
/// with nothing recorded, as soon as a row has a problem, the file changes while it is read,
/// or its number of rows gives another number of rows an order than `expected_rows` did: the
/// caller reads the file in two passes, which say every problem; so it does as soon as a row
/// may repeat what another batch of the ledger has, or the file is one another batch was made
/// from (`earlier`): the two passes say which and what to do. Rows that may pay what another
/// batch paid lately are noticed ([`Merged::noticed`]) and checked after the commit. `cells`, when given, is
/// handed each row's cells on the reading thread. `first_drawn` is told of each currency whose
/// balance the new rows draw on, the first time they do (its balance can be read meanwhile).
/// `read_balances` is given what the pass found
/// and the currencies its new rows draw on, with the merge still open; the pre-flight and the
/// commit follow.
pub fn plan_in_one_pass(
    ledger: &mut Ledger,
    new: &ledger::NewBatch<'_>,
    run: &RunContext,
    expected_rows: usize,
    cells: Option<&mut dyn scan::OnValidRow>,
    first_drawn: &dyn Fn(&str),
    read_funds: impl FnOnce(&scan::Scan, Vec<String>, Vec<funds::ConvertedKind>) -> funds::Funds,
) -> Result<Option<(scan::Scan, Merged)>, OpError> {
    let RunContext {
        opts,
        catalog: products,
        checks: options,
        earlier,
    } = run;
    /// Why the pass stopped before the end of the file.
    enum OnePassStop {
        Failed(OpError),
        /// More rows than expected already give another number of rows an order, or a row
        /// may repeat another batch's: the two passes go on.
        TwoPasses,
    }
    let per = per_order(opts, expected_rows);
    let mut planning = Planning::new(opts, new.name, products, per);
    planning.first_drawn = Some(first_drawn);
    let mut merge = ledger.merge_new(new, expected_rows)?;
    let index = CatalogIndex::new(products.to_vec());
    let merging = std::time::Instant::now();
    let (mut rows, mut noticed) = (0usize, Noticed::default());
    let mut unsure = Vec::new();
    let read = scan::read_once_in_parallel(
        &opts.input,
        &opts.input_options(),
        &index,
        options,
        expected_rows,
        cells,
        |row, spec| {
            rows += 1;
            // The rows an order takes never fall as the rows grow: past this, the pass
            // cannot end with the number it started with.
            if per_order(opts, rows) > per {
                return Err(OnePassStop::TwoPasses);
            }
            // A row another batch has is said by the two passes.
            if let Some(s) = &spec {
                if repeated(earlier, &merge, s, &mut unsure).map_err(OnePassStop::Failed)? {
                    return Err(OnePassStop::TwoPasses);
                }
                noticed.note(earlier, s);
            }
            planning
                .take(&mut merge, row, spec)
                .map_err(OnePassStop::Failed)
        },
    );
    let read = match read {
        Ok(read) => read,
        Err(OnePassStop::TwoPasses) => None,
        Err(OnePassStop::Failed(e)) => return Err(e),
    };
    tracing::info!(
        "one pass: rows read, checked and recorded: {:.2?}",
        merging.elapsed()
    );
    let Some(scanned) = read.filter(|s| {
        per_order(opts, s.valid_rows) == per && earlier.files_like(&s.file_hash).is_empty()
    }) else {
        return Ok(None);
    };
    if respelt(earlier, &merge, &unsure)? {
        return Ok(None);
    }
    record_file(&merge, &scanned, opts)?;
    let mut merged = planning.close(merge, &opts.input, |drawn, kinds| {
        read_funds(&scanned, drawn, kinds)
    })?;
    merged.noticed = noticed;
    Ok(Some((scanned, merged)))
}

/// Whether another batch has the row's reference as written (a repeat: the one pass stops), a
/// hash found being only a candidate, looked up; a reference another batch may have in another
/// spelling is kept in `unsure`, for [`respelt`].
fn repeated(
    earlier: &Earlier,
    merge: &ledger::merge::Merge<'_>,
    spec: &RowSpec,
    unsure: &mut Vec<(String, u64)>,
) -> Result<bool, OpError> {
    let found = earlier.repeat_of(&spec.reference, spec.line, |b| {
        merge.earlier_row(b, &spec.reference)
    })?;
    if found.is_none() && earlier.may_repeat(&spec.reference) {
        unsure.push((spec.reference.clone(), spec.line));
    }
    Ok(found.is_some())
}

/// Whether another batch has one of the `unsure` references in another spelling, or but for
/// `-`, `_` and spaces ([`Earlier::resolve`]): the two passes say it.
fn respelt(
    earlier: &Earlier,
    merge: &ledger::merge::Merge<'_>,
    unsure: &[(String, u64)],
) -> Result<bool, OpError> {
    if unsure.is_empty() {
        return Ok(false);
    }
    let found = earlier.resolve(
        unsure,
        |b, visit| merge.visit_references(b, visit),
        |b, reference| merge.earlier_row(b, reference),
    )?;
    Ok(!found.is_empty())
}

/// Records the file the one pass read in its merge: hash, headers and layouts (the batch is
/// new to the ledger: its result file is as `--out-format` says, else as the input).
fn record_file(
    merge: &ledger::merge::Merge<'_>,
    scanned: &scan::Scan,
    opts: &RunOptions,
) -> Result<(), OpError> {
    let formats = opts.formats(scanned.format, true);
    Ok(merge.record_input(&scanned.file_hash, &scanned.headers, formats)?)
}

/// The rows of the file that changed after they were submitted: a submitted payout cannot be
/// changed.
fn changed_after_submission(report: &ledger::MergeReport) -> crate::input::rules::Problems {
    report
        .changed_after_submission
        .iter()
        .map(|(reference, line, state)| {
            changed_after_submission_problem(reference, *line as u64, *state)
        })
        .collect()
}

/// The problem of row `reference` (at `line`) of the file, changed after it was submitted (it
/// is `state` in the ledger): what `run` refuses and `validate` lists, in the same words.
pub fn changed_after_submission_problem(
    reference: &str,
    line: u64,
    state: ledger::RowState,
) -> Problem {
    let mut p = Problem::file(
        line,
        format!(
            "row `{reference}` changed after it was submitted (it is {state}); a submitted payout cannot be changed"
        ),
    )
    .with_value(reference)
    .with_help("restore the row as it was, or give the new payout a new reference");
    p.column_name = Some("reference".into());
    p
}

/// The balance pre-flight of the rows about to be planned ([`funds::check`]): what each balance
/// has and what the new rows need (the converted ones at what they were priced), or why
/// nothing can be submitted. A balance that may be short for converted rows no one could price
/// is said plainly, and does not stop the run.
fn preflight(
    need: &funds::Need,
    funds: &mut funds::Funds,
) -> Result<(Vec<String>, Vec<String>), OpError> {
    let costs = funds
        .prices
        .costs(need.converted.iter().map(|(kind, rows)| (kind, *rows)));
    let checks = funds::check(&need.from_balance, &costs, &mut funds.balances)?;
    let mut lines: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for c in &checks {
        let converted = &c.converted;
        let h = |amount| crate::money::human_amount(amount, &c.currency);
        let mut line = format!(
            "balance {}: {} available, {} needed",
            c.currency,
            h(c.available),
            h(c.needed)
        );
        if converted.rows > converted.unpriced_rows {
            line.push_str(&format!(
                " (of it, {} for {} converted from other currencies, {})",
                h(converted.priced),
                crate::text::rows(converted.rows - converted.unpriced_rows),
                converted
                    .priced_by
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        lines.push(line);
        if let Some(warning) = c.may_be_short() {
            warnings.push(format!("the balance may be short: {warning}"));
        }
    }
    let short: Vec<String> = checks
        .iter()
        .filter(|c| !c.enough)
        .map(funds::BalanceCheck::short_words)
        .collect();
    if !short.is_empty() {
        return Err(OpError::Refused {
            message: format!(
                "the balance is too low; nothing was submitted:\n  {}",
                short.join("\n  ")
            ),
            help: "top up the account, or pay fewer rows (split the file), then run again".into(),
        });
    }
    Ok((lines, warnings))
}
