//! What a batch will do, before it does it: every check of `paybatch run` (file, rows, catalog,
//! binding of an existing batch, balance), the totals per payment currency and per product, and
//! the plan digest that a person approves and `paybatch run --expect-digest` insists on.
//!
//! A preview writes nothing but the catalog cache and, for a payable plan, the plan itself
//! among the approved plans (`ledger::approved`, so that a run refusing a changed file can say
//! what changed): it never creates a batch or a row.

use std::collections::{BTreeMap, HashMap};

use rust_decimal::Decimal;
use serde::Serialize;

use crate::api::Client;
use crate::api::models::Product;
use crate::batch::approved::{PlanContext, PlanRows};
use crate::batch::funds::{self, ConvertedKind, row_card, row_price};
use crate::batch::options::RunOptions;
use crate::batch::plan::changed_after_submission_problem;
use crate::batch::repeats::{self, OnRepeat, Repeats};
use crate::catalog::CatalogSource;
use crate::environment::Connection;
use crate::input::rules::content_hash;
use crate::input::rules::{CatalogIndex, Problem, Problems, RowSpec, ValidateOptions};
use crate::input::scan;
use crate::ledger::approved::NewApprovedPlan;
use crate::ledger::attempts::LaterAttempt;
use crate::ledger::lock::LedgerLock;
use crate::ledger::{Conversion, Ledger, LedgerError, RowState, SeenRow};
use crate::money::in_currency;
use crate::ops::error::OpError;

use super::start::{
    attempts_in_file, check_binding, check_input, load_catalog, outside_file, plan_and_context,
};

pub use crate::batch::funds::BalanceCheck;

/// What the rows still to pay cost, from one payment currency's balance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CurrencyTotal {
    pub rows: usize,
    /// Prices of the rows whose product is in this currency: checked against the balance.
    pub price: Decimal,
    /// Prices in other product currencies, converted by the service at order time: product
    /// currency -> price in that currency. Not part of the balance check.
    pub converted: BTreeMap<String, Decimal>,
    /// Converted rows (embedded FX), by what each orders -> rows.
    #[serde(skip)]
    pub converted_rows: BTreeMap<ConvertedKind, usize>,
    /// What the converted rows will cost from this balance, when every one of them could be
    /// priced: estimated by the service (`POST /order/estimate`), else at the rate of the
    /// ledger's latest converted order of the pair plus a margin ([`funds::estimate`]).
    pub converted_estimate: Option<Decimal>,
    /// How the converted rows were priced, or why some are not.
    pub converted_note: Option<String>,
}

/// The rows still to pay of one product (or `|` choice of products).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProductTotal {
    pub currency: String,
    pub rows: usize,
    pub face_value: Decimal,
    pub price: Decimal,
}

/// Totals of the rows still to pay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub per_payment_currency: BTreeMap<String, CurrencyTotal>,
    pub per_product: BTreeMap<String, ProductTotal>,
    /// Rows paid by card, per card id: (rows, price per product currency). Never checked against
    /// the balance.
    pub per_card: BTreeMap<String, (usize, BTreeMap<String, Decimal>)>,
    /// Valid rows the ledger already has beyond PENDING (in an order, paid, failed): not
    /// paid again by the next run, so not counted.
    pub already_submitted: usize,
    /// The rows to pay per delivery (`EMAIL`, `PAYOUT_LINK`).
    pub per_delivery: BTreeMap<String, usize>,
}

impl Totals {
    /// Counts a valid row: in `already_submitted` when the ledger has it beyond PENDING
    /// (`state`), else in what the next run would pay.
    pub fn add(
        &mut self,
        spec: &RowSpec,
        state: Option<RowState>,
        by_code: &HashMap<&str, &Product>,
        default_card: Option<&str>,
    ) {
        let to_pay = state
            .is_none_or(|s| matches!(s, RowState::Pending | RowState::Invalid | RowState::Removed));
        if !to_pay {
            self.already_submitted += 1;
            return;
        }
        *self
            .per_delivery
            .entry(spec.distribution.as_str().to_string())
            .or_default() += 1;
        let price = row_price(spec, by_code);
        if let Some(card) = row_card(spec, default_card) {
            let entry = self.per_card.entry(card.to_string()).or_default();
            entry.0 += 1;
            let sum = entry.1.entry(spec.currency.clone()).or_default();
            *sum = in_currency(*sum + price, &spec.currency);
        } else {
            let cur = self
                .per_payment_currency
                .entry(spec.payment_currency.clone())
                .or_default();
            cur.rows += 1;
            if spec.currency == spec.payment_currency {
                cur.price = in_currency(cur.price + price, &spec.currency);
            } else {
                let sum = cur.converted.entry(spec.currency.clone()).or_default();
                *sum = in_currency(*sum + price, &spec.currency);
                *cur.converted_rows
                    .entry(ConvertedKind::of(spec, by_code))
                    .or_default() += 1;
            }
        }
        let product = self
            .per_product
            .entry(spec.product_codes.join("|"))
            .or_insert_with(|| ProductTotal {
                currency: spec.currency.clone(),
                ..ProductTotal::default()
            });
        product.rows += 1;
        product.face_value = in_currency(product.face_value + spec.face_value, &spec.currency);
        product.price = in_currency(product.price + price, &spec.currency);
    }
}

/// The balance pre-flight ([`funds::check`]) of every payment currency that `totals` draws
/// on, its converted rows priced first ([`funds::estimate`], else from the ledger's `latest`
/// converted order of their pair: [`funds::ConvertedPrices::price_from_ledger`]); how they
/// were priced goes into `totals`.
pub async fn check_balances(
    client: &Client,
    totals: &mut Totals,
    latest: impl FnMut(&str, &str) -> Result<Option<Conversion>, LedgerError>,
) -> Result<Vec<BalanceCheck>, OpError> {
    let kinds = || {
        totals
            .per_payment_currency
            .values()
            .flat_map(|t| t.converted_rows.keys())
    };
    let mut prices = funds::estimate(client, kinds().cloned()).await;
    prices.price_from_ledger(kinds(), latest)?;
    let costs = prices.costs(
        totals
            .per_payment_currency
            .values()
            .flat_map(|t| t.converted_rows.iter().map(|(k, n)| (k, *n))),
    );
    for (currency, t) in totals.per_payment_currency.iter_mut() {
        let Some(cost) = costs.get(currency) else {
            continue;
        };
        if cost.unpriced_rows == 0 {
            t.converted_estimate = Some(in_currency(cost.priced, currency));
            t.converted_note = Some(
                cost.priced_by
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        } else {
            t.converted_note = cost.why_not.clone();
        }
    }
    let need: BTreeMap<String, Decimal> = totals
        .per_payment_currency
        .iter()
        .filter(|(_, t)| !t.price.is_zero())
        .map(|(currency, t)| (currency.clone(), t.price))
        .collect();
    let drawn: std::collections::BTreeSet<String> =
        need.keys().chain(costs.keys()).cloned().collect();
    let mut balances = funds::read_balances(client, drawn).await;
    funds::check(&need, &costs, &mut balances)
}

/// What the ledger holds of an existing batch for rows the file no longer has, and what the
/// run does with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TakenOut {
    /// Intents never sent that hold such rows: the run cancels them, and plans the rows of
    /// them still in the file again.
    pub intents_cancelled: usize,
    /// Those rows (REMOVED by the run, never sent): how many, and the first few.
    pub rows_removed: usize,
    pub rows_removed_named: Vec<String>,
    /// Orders already sent (in doubt, accepted or finished) that hold such rows: followed
    /// whatever the file says, and part of the plan digest.
    pub orders_followed: usize,
    /// Those rows: how many, and the first few.
    pub rows_sent: usize,
    pub rows_sent_named: Vec<String>,
}

impl TakenOut {
    fn of(outside: &crate::ledger::OutsideFile) -> Self {
        TakenOut {
            intents_cancelled: outside.to_cancel.len(),
            rows_removed: outside.unsent_rows.0,
            rows_removed_named: outside.unsent_rows.1.clone(),
            orders_followed: outside.followed.len(),
            rows_sent: outside.sent_rows.0,
            rows_sent_named: outside.sent_rows.1.clone(),
        }
    }
}

/// Everything `paybatch validate` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub file: String,
    pub batch: String,
    pub environment: String,
    pub catalog_products: usize,
    pub catalog_cached: bool,
    pub rows: usize,
    pub valid_rows: usize,
    /// The first problems of each kind (see [`Problems`]), in file order.
    pub problems: Vec<Problem>,
    /// How many problems there are of each kind (the column they are in, or `row`).
    pub problems_per_kind: BTreeMap<String, usize>,
    /// How many problems there are in all.
    pub problems_total: usize,
    /// Whether every problem concerns the file as a whole.
    #[serde(skip)]
    pub file_level_only: bool,
    /// Rows of an existing batch changed after they were submitted (among the problems): `run`
    /// refuses them, `--skip-invalid` or not.
    pub changed_after_submission: usize,
    /// `--skip-invalid`: invalid rows would be marked INVALID instead of stopping the run.
    pub skip_invalid: bool,
    pub totals: Totals,
    pub balance: Vec<BalanceCheck>,
    /// The plan digest, when the plan is payable (see [`Preview::is_valid`]).
    pub digest: Option<String>,
    /// What other batches of the ledger already have of the file, and what a run does with it.
    pub repeats: Repeats,
    /// For a batch new to the ledger, what the read of the service's order list found: a line,
    /// then warnings.
    #[serde(skip)]
    pub service: Option<(String, Vec<String>)>,
    /// What the ledger holds for rows the file no longer has (an existing batch).
    pub taken_out: TakenOut,
    /// Why the plan of the digest could not be kept among the ledger's approved plans (a run
    /// refusing a changed file then cannot say what changed); `None` when it was kept, or
    /// when there is no digest.
    pub plan_not_kept: Option<String>,
}

impl Preview {
    /// A preview of `opts.input` before the file is read.
    fn new(opts: &RunOptions, catalog_products: usize, catalog_cached: bool) -> Self {
        Preview {
            file: opts.input.display().to_string(),
            batch: opts.batch_name(),
            environment: opts.environment.name().to_string(),
            catalog_products,
            catalog_cached,
            rows: 0,
            valid_rows: 0,
            problems: Vec::new(),
            problems_per_kind: BTreeMap::new(),
            problems_total: 0,
            file_level_only: false,
            changed_after_submission: 0,
            skip_invalid: opts.skip_invalid,
            totals: Totals::default(),
            balance: Vec::new(),
            digest: None,
            repeats: Repeats {
                decision: opts.on_repeat,
                ..Repeats::default()
            },
            service: None,
            taken_out: TakenOut::default(),
            plan_not_kept: None,
        }
    }

    /// Whether `paybatch run` would go ahead: rows to pay, no problem (or `--skip-invalid`),
    /// no row changed after it was submitted, enough balance.
    pub fn is_valid(&self) -> bool {
        self.valid_rows > 0
            && (self.problems_total == 0 || self.skip_invalid)
            && self.changed_after_submission == 0
            && self.balance.iter().all(|b| b.enough)
            && !self.repeats.refuses()
    }

    fn set_problems(&mut self, problems: Problems) {
        self.file_level_only = problems.all_file_level();
        self.problems_total = problems.total;
        self.problems_per_kind = problems.per_kind;
        self.problems = problems.shown;
    }

    /// The problems as kept: the first of each kind, and the counts.
    pub fn problem_report(&self) -> Problems {
        let mut p = Problems::default();
        p.shown = self.problems.clone();
        p.per_kind = self.problems_per_kind.clone();
        p.total = self.problems_total;
        p
    }

    /// The payment currencies whose balance is too low.
    pub fn short(&self) -> impl Iterator<Item = &BalanceCheck> {
        self.balance.iter().filter(|b| !b.enough)
    }
}

/// A row of an existing batch whose payable content changed since the ledger recorded it
/// beyond PENDING: (reference, line, what the ledger has, the new content hash).
type Changed = (String, u64, SeenRow, String);

/// The file read as `paybatch run` checks it, paying nothing: every row checked, against the
/// ledger's batch (`existing`) and other batches (`checker`), the totals of what a run would
/// pay, and the rows changed after they were submitted (which a run refuses). `Err` for a
/// ledger that cannot be read; the file's own problem in the first `Result`.
#[allow(clippy::type_complexity)]
fn read_file(
    opts: &RunOptions,
    (ledger, existing): (&Ledger, Option<&crate::ledger::BatchRecord>),
    index: &CatalogIndex,
    by_code: &HashMap<&str, &Product>,
    options: &ValidateOptions,
    checker: &mut repeats::Checker<'_>,
    plan: &mut PlanRows,
) -> Result<(Result<scan::Scan, Problem>, Totals, Vec<Changed>), OpError> {
    let batch_name = opts.batch_name();
    let mut totals = Totals::default();
    let mut lookup_error = None;
    let mut changed: Vec<Changed> = Vec::new();
    let scanned = scan::scan(
        &opts.input,
        &opts.input_options(),
        index,
        options,
        Some((batch_name.as_str(), opts.environment.name())),
        |spec| {
            let seen = match existing {
                Some(b) => match ledger.row_seen(b.id, &spec.reference) {
                    Ok(seen) => seen,
                    Err(e) => {
                        lookup_error.get_or_insert(e);
                        None
                    }
                },
                None => None,
            };
            // A row the ledger has beyond PENDING whose payable content changed: the merge of
            // `run` refuses it. Its hash is only made for such rows; the intents `run` would
            // cancel are known once the file is read.
            if let Some(seen) = &seen {
                let hash = content_hash(spec);
                if seen.refuses_change(&hash, |_| false) {
                    changed.push((spec.reference.clone(), spec.line, seen.clone(), hash));
                }
            }
            let state = seen.map(|s| s.state);
            plan.add(spec);
            let repeat = checker.see(spec).unwrap_or_else(|e| {
                lookup_error.get_or_insert(e);
                false
            });
            // A repeat that a run would leave out costs nothing.
            if !(repeat && opts.on_repeat == OnRepeat::Skip) {
                totals.add(spec, state, by_code, opts.card_id.as_deref());
            }
        },
    );
    if let Some(e) = lookup_error {
        return Err(e.into());
    }
    Ok((scanned, totals, changed))
}

/// Runs every check of `paybatch run` on `opts.input` without paying or recording anything but
/// the catalog cache. `Err` for what stops a run before the file is read (configuration, the
/// batch bound elsewhere, the service refusing the key, the ledger).
pub async fn preview(opts: &RunOptions) -> Result<Preview, OpError> {
    let batch_name = opts.batch_name();
    check_input(&opts.input)?;
    let mut ledger = Ledger::open(&opts.ledger)?;
    let conn = Connection::open_for_reading(
        opts.environment.clone(),
        opts.api_key_file.as_deref(),
        &opts.ledger,
    )
    .await?;
    let existing = ledger.batch(&batch_name)?;
    if let Some(b) = &existing {
        check_binding(b, &conn)?;
    }
    let (products, source) = load_catalog(&mut ledger, &conn, opts).await?;
    let mut preview = Preview::new(opts, products.len(), source == CatalogSource::Cache);
    let options = ValidateOptions {
        allow_duplicates: opts.allow_duplicates,
        default_payment_currency: opts.default_payment_currency.clone(),
        decimal_comma: opts.decimal_comma,
    };
    let index = CatalogIndex::new(products.clone());
    let by_code: HashMap<&str, &Product> = products.iter().map(|p| (p.code.as_str(), p)).collect();
    let (earlier, at) = repeats::against_service(
        &mut ledger,
        &conn.client,
        &opts.environment.recorded_base_url(),
        &batch_name,
        existing.as_ref(),
        &opts.input,
        opts.allow_untold_orders,
    )
    .await?;
    preview.service = Some(at.lines());
    let mut checker = repeats::Checker::new(&ledger, &earlier, opts.on_repeat);
    let mut plan = PlanRows::default();
    let (scanned, totals, changed) = read_file(
        opts,
        (&ledger, existing.as_ref()),
        &index,
        &by_code,
        &options,
        &mut checker,
        &mut plan,
    )?;
    let scanned = match scanned {
        Ok(s) => s,
        Err(problem) => {
            preview.set_problems(Problems::from_iter([problem]));
            return Ok(preview);
        }
    };
    preview.repeats = checker.finish(&scanned.file_hash)?;
    let outside = outside_file(&ledger, existing.as_ref(), &scanned)?;
    let attempts = attempts_in_file(&ledger, existing.as_ref(), &scanned)?;
    preview.taken_out = TakenOut::of(&outside);
    preview.rows = scanned.rows;
    preview.valid_rows = scanned.valid_rows;
    add_changed_rows(&mut preview, scanned.problems, changed, &outside);
    preview.totals = totals;
    let base_url = opts.environment.recorded_base_url();
    preview.balance = check_balances(&conn.client, &mut preview.totals, |pay, product| {
        ledger.latest_conversion(&base_url, pay, product)
    })
    .await?;
    approve(
        &mut preview,
        &mut ledger,
        opts,
        (&outside, scanned.digest, &scanned.file_hash, attempts),
        plan,
    )?;
    Ok(preview)
}

/// Gives `preview` the file's `problems` and, as `run` refuses them, the rows of `changed` whose
/// payable content differs from what the ledger holds beyond PENDING (planned in an intent the
/// run keeps, submitted, paid, failed...).
fn add_changed_rows(
    preview: &mut Preview,
    mut problems: Problems,
    changed: Vec<Changed>,
    outside: &crate::ledger::OutsideFile,
) {
    for (reference, line, seen, hash) in changed {
        if seen.refuses_change(&hash, |order| outside.to_cancel.contains(&order)) {
            preview.changed_after_submission += 1;
            problems.push(changed_after_submission_problem(
                &reference, line, seen.state,
            ));
        }
    }
    problems.shown.sort_by_key(|p| p.line);
    preview.set_problems(problems);
}

/// Gives the preview of a payable plan ([`Preview::is_valid`]) its digest (made of the file's,
/// `file`), and keeps the plan among the ledger's approved plans ([`keep_plan`]; why not, in
/// the preview, when it cannot be kept).
fn approve(
    preview: &mut Preview,
    ledger: &mut Ledger,
    opts: &RunOptions,
    (outside, file, input_hash, attempts): (
        &crate::ledger::OutsideFile,
        Option<String>,
        &str,
        Vec<LaterAttempt>,
    ),
    plan: PlanRows,
) -> Result<(), OpError> {
    let Some(file) = file.filter(|_| preview.is_valid()) else {
        return Ok(());
    };
    let (digest, context) = plan_and_context(ledger, outside, file, &preview.repeats, attempts)?;
    let kept = Kept {
        digest: &digest,
        context: &context,
        input_hash,
    };
    preview.plan_not_kept = keep_plan(ledger, opts, &kept, plan).err();
    preview.digest = Some(digest);
    Ok(())
}

/// What an approved plan keeps besides its rows.
struct Kept<'a> {
    digest: &'a str,
    context: &'a PlanContext,
    input_hash: &'a str,
}

/// Keeps the plan whose digest the preview shows among the ledger's approved plans, under the
/// ledger's lock (a run going on with the ledger is not waited for: the plan is not kept);
/// why not, when it cannot be kept. Nothing a run reads as a batch's state is written.
fn keep_plan(
    ledger: &mut Ledger,
    opts: &RunOptions,
    kept: &Kept<'_>,
    rows: PlanRows,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let _lock = LedgerLock::acquire(&opts.ledger).map_err(|e| e.to_string())?;
    let context = serde_json::to_string(kept.context).map_err(|e| e.to_string())?;
    let count = i64::try_from(rows.rows()).unwrap_or(i64::MAX);
    let plan = rows.finish().map_err(|e| e.to_string())?;
    let input_path = opts.input.display().to_string();
    ledger
        .keep_approved_plan(&NewApprovedPlan {
            digest: kept.digest,
            batch: &opts.batch_name(),
            environment: opts.environment.name(),
            input_path: &input_path,
            input_hash: kept.input_hash,
            rows: count,
            context: &context,
            plan: &plan,
        })
        .map_err(|e| e.to_string())?;
    tracing::info!(
        "approved plan kept: {} rows in {} bytes, {:.2?}",
        count,
        plan.len(),
        started.elapsed()
    );
    Ok(())
}
