//! The main job: read and validate the input, merge it into the ledger, plan orders (intent
//! committed before any send), submit them, poll them to a terminal status, write the result
//! file. Running it again after any interruption resumes from the ledger.
//!
//! The windows where the process can die, and what the next run does about each:
//! 1. before the intent commit: nothing was sent and nothing of the file is recorded (rows and
//!    their orders' intents are one transaction); the next run plans the same orders with the
//!    same keys (a key depends only on environment, batch, reference and attempt);
//! 2. after the intent commit, before the send is marked: the order is an INTENT with
//!    `sends = 0`; it is sent with its recorded key and bytes;
//! 3. after the send is marked, before an answer is recorded (the answer may have been lost
//!    after the service created the order): the INTENT has `sends > 0` (in doubt); it is re-sent
//!    with the same key and bytes and the service replays the original answer;
//! 4. after the answer is recorded: the order is ACCEPTED and is polled;
//! 5. while polling: the order stays ACCEPTED and is polled again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::Rng;
use rust_decimal::Decimal;

use crate::api::models::{ExecutionMode, Order, OrderStatus, OrderView, Product};
use crate::api::{ApiError, Client, CreateOutcome};
use crate::catalog::{self, CatalogError};
use crate::environment::{ConfigError, Connection, Environment};
use crate::failpoint;
use crate::ledger::merge::ToPlan;
use crate::ledger::{
    self, IncomingRow, Ledger, LedgerError, OrderRecord, OrderState, PlannedOrder, RowState,
    Transition,
};

use super::lock::{LedgerLock, LockError};
use super::output::{self, ResultLine};
use super::pace::Pacer;
use super::plan;
use super::progress::Reporter;
use super::record;
use crate::input::rules::{CatalogIndex, Problem, Problems, RowSpec, ValidateOptions};
use crate::input::scan;

/// Orders in flight at once by default (`--concurrency`).
pub const DEFAULT_CONCURRENCY: usize = 8;
/// How long a run waits for the service by default (`--poll-timeout`), in seconds.
pub const DEFAULT_POLL_TIMEOUT_SECS: u64 = 30 * 60;
/// Sends of one order within one run by default (`--send-tries`).
pub const DEFAULT_SEND_TRIES: u32 = 8;
/// Hours an order may be in doubt before it is looked up at the service (`--in-doubt-hours`).
pub const DEFAULT_IN_DOUBT_HOURS: f64 = 24.0;

/// The longest `--poll-timeout`: a week.
pub const MAX_POLL_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// Default pace of order creation: the service's published limit, order creations in any
/// sliding minute (see [`Pacer`]).
pub const DEFAULT_ORDER_RATE: u32 = 300;

/// `--items-per-order`: `auto` (the default) or a number of rows, 1 to 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ItemsPerOrder {
    #[default]
    Auto,
    Fixed(usize),
}

impl std::str::FromStr for ItemsPerOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(ItemsPerOrder::Auto);
        }
        match s.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_ITEMS_PER_ORDER).contains(&n) => Ok(ItemsPerOrder::Fixed(n)),
            _ => Err(format!(
                "`{s}` is not `auto` or a number of rows from 1 to {MAX_ITEMS_PER_ORDER}"
            )),
        }
    }
}

impl std::fmt::Display for ItemsPerOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemsPerOrder::Auto => f.write_str("auto"),
            ItemsPerOrder::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// Orders a batch's sends fill at most, per request in flight: each round of concurrent sends
/// costs about one round trip, so a batch goes out in a few of them.
const AUTO_ROUNDS: usize = 4;

/// Rows per order for `--items-per-order auto`: enough that every order of the batch fits in
/// one window of the service's rate limit (⌈rows / rate⌉), and enough that the batch goes out in
/// a few rounds of the requests in flight (⌈rows / (4 × concurrency)⌉); no more, so that an
/// order that fails takes as few rows with it as that speed allows. At most 200.
pub fn auto_rows_per_order(rows: usize, rate: u32, concurrency: usize) -> usize {
    let by_window = rows.div_ceil(rate.max(1) as usize);
    let by_rounds = rows.div_ceil(AUTO_ROUNDS * concurrency.max(1));
    by_window.max(by_rounds).clamp(1, MAX_ITEMS_PER_ORDER)
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub input: PathBuf,
    pub batch: Option<String>,
    pub ledger: PathBuf,
    pub out: Option<PathBuf>,
    pub environment: Environment,
    pub api_key_file: Option<PathBuf>,
    pub delimiter: Option<u8>,
    pub skip_invalid: bool,
    pub allow_duplicates: bool,
    pub default_payment_currency: Option<String>,
    pub mode: ExecutionMode,
    /// Rows per order: a number (1..=200), or chosen from the batch ([`auto_rows_per_order`]).
    pub items_per_order: ItemsPerOrder,
    pub order_rate: u32,
    pub concurrency: usize,
    pub poll_timeout: Duration,
    pub catalog_ttl: Duration,
    /// Pay by this card instead of from the balance (a `card_id` column overrides it per row).
    pub card_id: Option<String>,
    /// Stop after the intents are committed: nothing is sent (the next run sends them).
    pub plan_only: bool,
    /// Sends of one order within one run before the run gives up on it (exit 5).
    pub max_send_tries: u32,
    /// An in-doubt intent first sent longer ago than this is not re-sent blindly.
    pub in_doubt_window: Duration,
    /// `--expect-digest`: the plan digest a person approved (`paybatch validate`); the run
    /// refuses a file whose digest differs.
    pub expect_digest: Option<String>,
}

impl RunOptions {
    pub fn new(input: impl Into<PathBuf>) -> Self {
        RunOptions {
            input: input.into(),
            batch: None,
            ledger: PathBuf::from(ledger::DEFAULT_PATH),
            out: None,
            environment: Environment::Sim,
            api_key_file: None,
            delimiter: None,
            skip_invalid: false,
            allow_duplicates: false,
            default_payment_currency: None,
            mode: ExecutionMode::Async,
            items_per_order: ItemsPerOrder::default(),
            order_rate: DEFAULT_ORDER_RATE,
            concurrency: DEFAULT_CONCURRENCY,
            poll_timeout: Duration::from_secs(DEFAULT_POLL_TIMEOUT_SECS),
            catalog_ttl: catalog::DEFAULT_TTL,
            card_id: None,
            plan_only: false,
            max_send_tries: DEFAULT_SEND_TRIES,
            in_doubt_window: Duration::from_secs_f64(DEFAULT_IN_DOUBT_HOURS * 3600.0),
            expect_digest: None,
        }
    }

    /// `--batch`, else the input file's stem.
    pub fn batch_name(&self) -> String {
        self.batch
            .clone()
            .unwrap_or_else(|| default_batch_name(&self.input))
    }
}

pub fn default_batch_name(input: &Path) -> String {
    input
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "batch".into())
}

/// Where the result file goes by default: beside the input, labelled when simulated.
pub fn default_result_path(input: &Path, environment: &Environment) -> PathBuf {
    let stem = default_batch_name(input);
    let name = if environment.is_simulated() {
        format!("{stem}.SIMULATED.result.csv")
    } else {
        format!("{stem}.result.csv")
    };
    input.with_file_name(name)
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("{} problem(s) in {}; nothing was submitted", .problems.len(), .input.display())]
    Invalid {
        input: PathBuf,
        /// The first of each kind, and how many of each.
        problems: Problems,
    },
    #[error("{message}")]
    Refused { message: String, help: String },
    #[error("{message}")]
    Binding { message: String, help: String },
    /// The service and the ledger disagree in a way only a person can settle.
    #[error("{message}")]
    Conflict { message: String, help: String },
    /// The service cannot tell yet whether rows are already ordered (a rebuilt batch with
    /// orders still processing): nothing was planned; the same command goes on later.
    #[error("{message}")]
    Unsettled { message: String, help: String },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("the service refused the credentials or version: {0}")]
    Auth(ApiError),
    #[error("{0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Reconcile(#[from] super::reconcile::ReconcileError),
    #[error("cannot write {path}: {message}")]
    Io { path: PathBuf, message: String },
}

impl From<scan::FileChanged> for RunError {
    fn from(e: scan::FileChanged) -> Self {
        RunError::Refused {
            message: e.to_string(),
            help: "run again once nothing writes to the file".into(),
        }
    }
}

/// What stopped a run, for the command line to turn into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A flag, a setting, the key, or a batch bound elsewhere: nothing was sent.
    Usage,
    /// Another process holds the ledger.
    Locked,
    /// The file (or the balance, or the approved digest) refused the plan: nothing was sent.
    Invalid,
    /// The service failed for a moment: the same command resumes.
    Incomplete,
    /// Anything else.
    Unexpected,
}

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

impl RunError {
    pub fn failure(&self) -> Failure {
        match self {
            RunError::Config(_) | RunError::Binding { .. } | RunError::Auth(_) => Failure::Usage,
            RunError::Locked(LockError::Held { .. }) => Failure::Locked,
            RunError::Invalid { .. } | RunError::Refused { .. } => Failure::Invalid,
            RunError::Unsettled { .. } => Failure::Incomplete,
            _ if self.is_transient() => Failure::Incomplete,
            _ => Failure::Unexpected,
        }
    }

    /// The service failed for a moment (a 5xx, a 429, a dropped connection) even after the
    /// reads were tried again: nothing is lost, and the same command resumes.
    pub fn is_transient(&self) -> bool {
        use super::reconcile::ReconcileError;
        match self {
            RunError::Api(e)
            | RunError::Catalog(CatalogError::Api(e))
            | RunError::Reconcile(ReconcileError::Api(e)) => e.is_transient(),
            _ => false,
        }
    }

    pub fn help(&self) -> Option<String> {
        match self {
            RunError::Config(c) => Some(c.help().to_string()).filter(|h| !h.is_empty()),
            RunError::Locked(LockError::Held { .. }) => Some(
                "wait for the other run to finish; a killed run releases the lock by itself".into(),
            ),
            RunError::Refused { help, .. }
            | RunError::Binding { help, .. }
            | RunError::Conflict { help, .. }
            | RunError::Unsettled { help, .. } => Some(help.clone()),
            RunError::Auth(e) if e.kind() == "version_removed" || e.status() == Some(410) => {
                Some(format!(
                    "paybatch asks for the service's API version {}, which the service has switched off: nothing more was sent; install a paybatch release that speaks a current version, then run the same command again",
                    crate::api::models::API_VERSION
                ))
            }
            RunError::Auth(e) if e.kind() == "invalid_version" => Some(format!(
                "the service does not know the API version {} that paybatch asks for: check the base URL, or update paybatch",
                crate::api::models::API_VERSION
            )),
            RunError::Auth(_) => Some(
                "check that the key was copied completely, that it belongs to this environment, and that it was not revoked (paybatch ping)".into(),
            ),
            RunError::Invalid { problems, .. } if problems.all_file_level() => {
                Some("fix the file as said above (encoding, header row, rows) and run again".into())
            }
            RunError::Invalid { .. } => Some(
                "fix the rows above and run again; --skip-invalid pays the valid rows and marks the others INVALID".into(),
            ),
            _ if self.is_transient() => Some(
                "nothing is lost: check the service's address and the network (paybatch ping), then run the same command again to resume".into(),
            ),
            _ => None,
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub batch: String,
    pub environment: Environment,
    pub result_path: PathBuf,
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
    pub held: Vec<String>,
    /// The batch's valid rows per delivery (`EMAIL`, `PAYOUT_LINK`).
    pub per_delivery: BTreeMap<String, i64>,
}

impl RunSummary {
    pub fn count(&self, state: RowState) -> i64 {
        self.counts.get(&state).copied().unwrap_or(0)
    }

    /// Completed when every row is; needs a person when rows failed, were rejected, invalid or
    /// mismatched, or the service stopped a balance or the account ([`RunSummary::held`]);
    /// incomplete while rows are not finished.
    pub fn outcome(&self) -> Outcome {
        let unfinished = self.count(RowState::Pending)
            + self.count(RowState::Planned)
            + self.count(RowState::Submitted);
        if !self.held.is_empty() {
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

/// Shared state of the submit and poll stages.
struct Stage {
    ledger: Mutex<Ledger>,
    client: Client,
    reporter: Reporter,
    /// What the service stopped: `balance CUR` (insufficient funds) or `account` (ordering
    /// restricted), with the service's words. Orders it covers are not sent in this run.
    held: Mutex<BTreeMap<String, String>>,
    patience: Patience,
}

/// What a refusal of one order stops for the rest of the run: `account` when the service
/// restricts ordering (its spending limit), `balance CUR` when a balance is too low.
fn holds(e: &ApiError, order: &OrderRecord) -> Option<String> {
    match e.kind() {
        "ordering_restricted" => Some("account".into()),
        "insufficient_funds" | "insufficient_balance" if order.card_id.is_none() => {
            Some(format!("balance {}", order.payment_currency))
        }
        _ => None,
    }
}

/// How long the sending waits for the service without getting anywhere: a pause the service
/// asks for (a 429 and its `Retry-After`, the backoff after a server error or a dropped
/// connection) is taken only if it ends within `--poll-timeout` of the last answer recorded
/// (or of the start of the sending). Past that, the run stops sending and ends incomplete
/// (exit 5): the next run resumes.
struct Patience {
    timeout: Duration,
    last_progress: Mutex<tokio::time::Instant>,
    exhausted: std::sync::atomic::AtomicBool,
}

impl Patience {
    fn new(timeout: Duration) -> Self {
        Patience {
            timeout,
            last_progress: Mutex::new(tokio::time::Instant::now()),
            exhausted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An answer was recorded.
    fn progress(&self) {
        *self.last_progress.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// Whether a pause of `wait` from now ends within the timeout; when it does not, the
    /// patience is exhausted for the rest of the run.
    fn allows(&self, wait: Duration) -> bool {
        let last = *self.last_progress.lock().unwrap_or_else(|p| p.into_inner());
        let ok = match (
            tokio::time::Instant::now().checked_add(wait),
            last.checked_add(self.timeout),
        ) {
            (Some(until), Some(deadline)) => until <= deadline,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if !ok {
            self.exhausted
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        ok
    }

    fn is_exhausted(&self) -> bool {
        self.exhausted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A deadline `timeout` from now (none when it is too far to be represented).
fn deadline_in(timeout: Duration) -> Option<tokio::time::Instant> {
    tokio::time::Instant::now().checked_add(timeout)
}

impl Stage {
    /// Whether the service stopped what `order` is paid by, earlier in this run.
    fn is_held(&self, order: &OrderRecord) -> bool {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.contains_key("account")
            || (order.card_id.is_none()
                && held.contains_key(&format!("balance {}", order.payment_currency)))
    }

    fn hold(&self, what: String, why: String) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.entry(what).or_insert(why);
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // A panic while holding the lock leaves the SQLite state consistent (transactions are
        // atomic), so a poisoned lock is still usable.
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs a batch to the end (or as far as it can go), resuming whatever the ledger holds.
pub async fn run(opts: &RunOptions, reporter: Reporter) -> Result<RunSummary, RunError> {
    let batch_name = opts.batch_name();
    reporter.line(format!(
        "paybatch run: {} | batch {batch_name} | ledger {}",
        opts.environment.banner(),
        opts.ledger.display()
    ));
    let _lock = LedgerLock::acquire(&opts.ledger)?;
    let mut ledger = Ledger::open(&opts.ledger)?;
    let mut conn = Connection::open(
        opts.environment.clone(),
        opts.api_key_file.as_deref(),
        &opts.ledger,
    )
    .await?;
    // The reads before the sending (catalog, reconciliation) wait for the service at most
    // --poll-timeout, whatever it asks for.
    conn.client = conn.client.with_deadline(deadline_in(opts.poll_timeout));

    // The batch binding is checked before anything else touches the service with this batch.
    let existing = ledger.batch(&batch_name)?;
    if let Some(b) = &existing {
        check_binding(b, &conn)?;
        if ledger.is_unsettled(b.id)? {
            settle_rebuilt(&mut ledger, &conn.client, b, opts, &reporter).await?;
        }
    }

    let (products, source) = load_catalog(&mut ledger, &conn, opts).await?;
    reporter.line(format!(
        "catalog: {} products ({})",
        products.len(),
        match source {
            catalog::CatalogSource::Cache => "cached",
            catalog::CatalogSource::Service => "fetched from the service",
        }
    ));

    let options = ValidateOptions {
        allow_duplicates: opts.allow_duplicates,
        default_payment_currency: opts.default_payment_currency.clone(),
    };
    let index = CatalogIndex::new(products.clone());
    // The balances the file draws on (card-paid rows and converted prices do not count).
    let mut balances_drawn: BTreeSet<String> = BTreeSet::new();
    let digest_of = opts
        .expect_digest
        .as_ref()
        .map(|_| (batch_name.as_str(), opts.environment.name()));
    let started = Instant::now();
    let scanned = scan::scan(
        &opts.input,
        opts.delimiter,
        &index,
        &options,
        digest_of,
        |spec| {
            if row_card(spec, opts.card_id.as_deref()).is_none()
                && spec.currency == spec.payment_currency
            {
                balances_drawn.insert(spec.payment_currency.clone());
            }
        },
    )
    .map_err(|p| RunError::Invalid {
        input: opts.input.clone(),
        problems: Problems::from_iter([p]),
    })?;
    tracing::info!("first pass (read and check): {:.2?}", started.elapsed());
    reporter.line(format!(
        "validated: {} rows, {} valid, {} with problems",
        scanned.rows,
        scanned.valid_rows,
        scanned.rows - scanned.valid_rows
    ));
    if !scanned.problems.is_empty() && !opts.skip_invalid {
        return Err(RunError::Invalid {
            input: opts.input.clone(),
            problems: scanned.problems,
        });
    }

    // --- expect-digest: only the plan a person approved is paid (before the ledger batch). ---
    if let (Some(expected), Some(actual)) = (&opts.expect_digest, &scanned.digest) {
        if !scan::digests_match(expected, actual) {
            return Err(RunError::Refused {
                message: format!(
                    "the file no longer matches the approved plan: expected {expected}, the file gives {actual}; nothing was submitted"
                ),
                help: "run `paybatch validate` on the file, check what changed, and approve the new digest".into(),
            });
        }
        reporter.line(format!(
            "plan digest: {actual} (matches the approved digest)"
        ));
    }
    // --- end of expect-digest ---

    // The balances are read before the ledger is written (no request while the merge is
    // open); whether they are enough is decided once the merge knows what is new to pay.
    let mut balances = BTreeMap::new();
    for currency in balances_drawn {
        let balance = conn.client.balance(&currency).await.map(|b| b.balance);
        balances.insert(currency, balance);
    }

    let input_path = opts.input.display().to_string();
    let batch = match existing {
        Some(b) => {
            ledger.update_batch_input(b.id, &input_path, &scanned.file_hash, &scanned.headers)?;
            reporter.line(format!(
                "resuming batch {batch_name} (created {})",
                b.created_at
            ));
            b
        }
        None => ledger.create_batch(&ledger::NewBatch {
            name: &batch_name,
            input_path: &input_path,
            input_hash: &scanned.file_hash,
            headers: &scanned.headers,
            environment: opts.environment.name(),
            base_url: &opts.environment.recorded_base_url(),
            key_fingerprint: &conn.key_fingerprint,
        })?,
    };

    // Merge the file into the ledger and plan its new rows into orders: one transaction,
    // committed (durably) before any order is sent.
    failpoint::hit("before_intent");
    let merging = Instant::now();
    let merged = merge_and_plan(
        &mut ledger,
        &batch,
        &scanned,
        &options,
        &products,
        balances,
        opts,
    )?;
    for line in &merged.balance_lines {
        reporter.line(line.clone());
    }
    for reference in &merged.report.removed {
        reporter.alert(format!(
            "row `{reference}` is no longer in the input file and was never submitted: marked REMOVED"
        ));
    }
    for (reference, state) in &merged.report.missing_but_submitted {
        reporter.alert(format!(
            "row `{reference}` is no longer in the input file but was already submitted ({state}): it is still followed"
        ));
    }
    if merged.orders > 0 {
        let per = per_order(opts, scanned.valid_rows);
        let how = match opts.items_per_order {
            ItemsPerOrder::Auto if opts.mode != ExecutionMode::Sync => format!(
                " (--items-per-order auto: {} valid rows, {} orders a minute, {} in flight)",
                scanned.valid_rows, opts.order_rate, opts.concurrency
            ),
            _ => String::new(),
        };
        let rate = opts.order_rate.max(1) as usize;
        let takes = if merged.orders <= rate {
            "in one burst".to_string()
        } else {
            format!(
                "over about {} minutes",
                (merged.orders - rate).div_ceil(rate)
            )
        };
        reporter.line(format!(
            "planned: {} new orders, up to {per} {} each{how}, intents committed; at most {rate} orders a minute: sent {takes}",
            merged.orders,
            if per == 1 { "row" } else { "rows" }
        ));
    }
    if merged.converted_rows > 0 {
        reporter.line(match merged.converted_rows {
            1 => "1 row is paid from another currency's balance: it goes alone in a sync order (the service converts currencies only in one-item sync orders)".to_string(),
            n => format!("{n} rows are paid from another currency's balance: each goes alone in a sync order (the service converts currencies only in one-item sync orders)"),
        });
    }
    tracing::info!(
        "second pass (merge and plan, committed): {:.2?}",
        merging.elapsed()
    );
    failpoint::hit("after_intent");

    // In-doubt intents older than the window are looked up at the service before any re-send.
    let (_, stale) = count_intents(&ledger, batch.id, opts.in_doubt_window)?;
    if stale > 0 {
        reporter.line(format!(
            "{stale} in-doubt orders are older than the in-doubt window: reconciling with the service first"
        ));
        let r = super::reconcile::reconcile(
            &mut ledger,
            &conn.client.with_deadline(deadline_in(opts.poll_timeout)),
            &batch,
            opts.in_doubt_window,
            false,
        )
        .await?;
        reporter.line(format!(
            "reconciled: {} found at the service and recorded, {} never created (will be sent)",
            r.adopted.len(),
            r.absent.len()
        ));
        if !r.retired.is_empty() {
            reporter.alert(format!(
                "{} in-doubt orders were never created and the service answers their keys only with the server error it keeps for them: their rows are REJECTED; `paybatch retry --batch {}`, then this command again, sends them under new keys",
                r.retired.len(),
                crate::text::shell_word(&batch.name)
            ));
        }
    }

    let stage = Arc::new(Stage {
        ledger: Mutex::new(ledger),
        client: conn.client.with_deadline(None),
        reporter,
        held: Mutex::new(BTreeMap::new()),
        patience: Patience::new(opts.poll_timeout),
    });
    let incomplete = if opts.plan_only {
        Some("--plan-only: the orders are planned, not sent".to_string())
    } else {
        match submit_all(&stage, batch.id, opts).await? {
            // The service keeps the run waiting: polling would wait the same way.
            Some(reason) => Some(reason),
            None => poll_all(&stage, batch.id, opts).await?,
        }
    };

    let held_by_service = stage.held.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // The balances the service found too low, as they are now (read before the ledger is
    // taken: no lock is held across a request).
    let mut balances_now = BTreeMap::new();
    for what in held_by_service.keys() {
        if let Some(currency) = what.strip_prefix("balance ") {
            let balance = conn.client.balance(currency).await.map(|b| b.balance);
            balances_now.insert(currency.to_string(), balance.ok());
        }
    }
    let ledger = stage.ledger();
    let held = if held_by_service.is_empty() {
        Vec::new()
    } else {
        held_lines(&ledger, &batch, &products, &held_by_service, &balances_now)?
    };
    let result_path = opts
        .out
        .clone()
        .unwrap_or_else(|| default_result_path(&opts.input, &opts.environment));
    let writing = Instant::now();
    write_result_file(&ledger, batch.id, &scanned.headers, &result_path)?;
    tracing::info!("result file: {:.2?}", writing.elapsed());
    let summary = summarize(
        &ledger,
        batch.id,
        &batch_name,
        &opts.environment,
        result_path,
        incomplete,
    )?;
    Ok(RunSummary { held, ..summary })
}

/// A batch rebuilt while orders it could not attribute were still processing: its rows without
/// an order may be in one of them, and planning them now could pay them again under other
/// keys. Reconciles first; while an order of the account still cannot be told, nothing is
/// planned or sent (exit 5: run again once the orders finish).
async fn settle_rebuilt(
    ledger: &mut Ledger,
    client: &Client,
    batch: &ledger::BatchRecord,
    opts: &RunOptions,
    reporter: &Reporter,
) -> Result<(), RunError> {
    reporter.line(format!(
        "batch {} was rebuilt while some orders were still processing: reconciling before anything is planned",
        batch.name
    ));
    let r = super::reconcile::reconcile(ledger, client, batch, opts.in_doubt_window, false).await?;
    if r.unattributed.is_empty() {
        return Ok(());
    }
    Err(RunError::Unsettled {
        message: format!(
            "{} orders of the account are still processing and cannot be attributed yet; they may hold rows of batch {} that the rebuilt ledger has without an order, so nothing was planned or sent",
            r.unattributed.len(),
            batch.name
        ),
        help: "run the same command again once those orders finish (paybatch reconcile shows them as unattributed)".into(),
    })
}

/// The catalog of the run's environment, cached in the ledger (fetched when older than
/// `--catalog-ttl`); a refused key is reported as such.
pub async fn load_catalog(
    ledger: &mut Ledger,
    conn: &Connection,
    opts: &RunOptions,
) -> Result<(Vec<Product>, catalog::CatalogSource), RunError> {
    catalog::load(
        ledger,
        &conn.client,
        &opts.environment.identity(),
        opts.catalog_ttl,
        false,
    )
    .await
    .map_err(|e| match e {
        CatalogError::Api(api) if is_auth_error(&api) => RunError::Auth(api),
        other => RunError::Catalog(other),
    })
}

/// Errors that say the key, environment or version is wrong: no row is at fault.
pub fn is_auth_error(e: &ApiError) -> bool {
    // `ordering_restricted` (403) is the account's spending limit, not its credentials.
    e.kind() != "ordering_restricted"
        && (matches!(
            e.kind(),
            "unauthorized"
                | "invalid_api_key"
                | "forbidden"
                | "invalid_version"
                | "version_removed"
        ) || matches!(e.status(), Some(401) | Some(403) | Some(410)))
}

pub fn check_binding(b: &ledger::BatchRecord, conn: &Connection) -> Result<(), RunError> {
    let env = &conn.environment;
    let base = env.recorded_base_url();
    if b.environment != env.name() || b.base_url != base {
        return Err(RunError::Binding {
            message: format!(
                "batch `{}` belongs to environment {} ({}), not {} ({})",
                b.name,
                b.environment,
                b.base_url,
                env.name(),
                base
            ),
            help: "resume it with the environment it was started in, or give this run another --batch name (a rehearsal and a real payout must not share a batch)".into(),
        });
    }
    if b.key_fingerprint != conn.key_fingerprint {
        return Err(RunError::Binding {
            message: format!(
                "batch `{}` was started with another API key ({}; this run uses {})",
                b.name, b.key_fingerprint, conn.key_fingerprint
            ),
            help: "orders are visible only to the key that created them: resume with the same key, or reconcile the batch first".into(),
        });
    }
    Ok(())
}

/// Price of a row in its product's currency: face value less discount. For a choice of
/// products the smallest discount counts (the highest price the recipient's choice can cost).
pub fn row_price(spec: &RowSpec, products: &HashMap<&str, &Product>) -> Decimal {
    let discount = spec
        .product_codes
        .iter()
        .filter_map(|c| products.get(c.as_str()))
        .map(|p| p.discount())
        .min()
        .unwrap_or(Decimal::ZERO);
    let places = crate::money::minor_units(&spec.currency);
    (spec.face_value * (Decimal::ONE - discount)).round_dp(places)
}

/// Most items the service takes in one order.
pub const MAX_ITEMS_PER_ORDER: usize = 200;

/// What merging and planning the file did.
struct Merged {
    report: ledger::MergeReport,
    /// New orders planned.
    orders: usize,
    /// New rows planned alone in sync orders because the service converts their currency.
    converted_rows: usize,
    /// What the new rows draw on each balance, for the person running the batch.
    balance_lines: Vec<String>,
}

/// How a group of rows is paid and priced: payment currency, the card (or `None`: the
/// balance), and the currency the products are priced in. Every item of an order is priced in
/// one currency, the payment currency, except an order of one row paid from the balance of
/// another currency (embedded FX).
type PaidBy = (String, Option<String>, String);
/// A row waiting for its order: as the ledger records it, how it is planned, what it pays.
type Waiting = (IncomingRow, ToPlan, RowSpec);

/// Whether a row is paid from the balance of another currency than its product's: the service
/// converts it (embedded FX) only in an order of one item, sent in sync mode.
pub fn is_converted(spec: &RowSpec, card: Option<&str>) -> bool {
    card.is_none() && spec.currency != spec.payment_currency
}

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

/// Rows per order of this run: `--items-per-order` as given, or chosen from the batch's valid
/// rows; one in sync mode.
fn per_order(opts: &RunOptions, valid_rows: usize) -> usize {
    if opts.mode == ExecutionMode::Sync {
        return 1;
    }
    match opts.items_per_order {
        ItemsPerOrder::Fixed(n) => n.clamp(1, MAX_ITEMS_PER_ORDER),
        ItemsPerOrder::Auto => auto_rows_per_order(valid_rows, opts.order_rate, opts.concurrency),
    }
}

/// The second pass over the file (see [`scan`]): merges every row into the batch and plans
/// the rows to pay into orders, in one transaction. Nothing is committed when a submitted row
/// changed, when the balances cannot pay the new rows, or when the file changed since it was
/// checked.
fn merge_and_plan(
    ledger: &mut Ledger,
    batch: &ledger::BatchRecord,
    scanned: &scan::Scan,
    options: &ValidateOptions,
    products: &[Product],
    mut balances: BTreeMap<String, Result<Decimal, ApiError>>,
    opts: &RunOptions,
) -> Result<Merged, RunError> {
    let by_code: HashMap<&str, &Product> = products.iter().map(|p| (p.code.as_str(), p)).collect();
    let mut need: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut converted: BTreeMap<(String, String), Decimal> = BTreeMap::new();
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
        if card.is_none() {
            let price = row_price(&spec, &by_code);
            if spec.currency == spec.payment_currency {
                *need.entry(spec.payment_currency.clone()).or_default() += price;
            } else {
                *converted
                    .entry((spec.payment_currency.clone(), spec.currency.clone()))
                    .or_default() += price;
            }
        }
        let key = (spec.payment_currency.clone(), card, spec.currency.clone());
        groups.push(&mut merge, key, (row, to_plan, spec))
    })?;
    groups.finish(&mut merge)?;
    let report = merge.close()?.clone();
    if !report.changed_after_submission.is_empty() {
        let problems = report
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
                help: Some(
                    "restore the row as it was, or give the new payout a new reference".into(),
                ),
            })
            .collect();
        return Err(RunError::Invalid {
            input: opts.input.clone(),
            problems,
        });
    }

    // Balance pre-flight for the rows about to be planned.
    let mut balance_lines = Vec::new();
    let mut short = Vec::new();
    for (currency, amount) in &need {
        let available = match balances.remove(currency) {
            Some(Ok(available)) => available,
            Some(Err(e)) if is_auth_error(&e) => return Err(RunError::Auth(e)),
            Some(Err(e)) => return Err(RunError::Api(e)),
            None => {
                return Err(RunError::Ledger(LedgerError::Corrupt(format!(
                    "the balance of {currency} was not read"
                ))));
            }
        };
        balance_lines.push(format!(
            "balance {currency}: {available} available, {amount} needed"
        ));
        if available < *amount {
            short.push(format!(
                "{currency}: need {amount}, available {available}, short by {}",
                amount - available
            ));
        }
    }
    for ((pay, product_currency), amount) in &converted {
        balance_lines.push(format!(
            "balance {pay}: plus {amount} {product_currency} converted by the service at order time (not checked here)"
        ));
    }
    if !short.is_empty() {
        return Err(RunError::Refused {
            message: format!(
                "the balance is too low; nothing was submitted:\n  {}",
                short.join("\n  ")
            ),
            help: "top up the account, or pay fewer rows (split the file), then run again".into(),
        });
    }
    let report = merge.commit()?;
    Ok(Merged {
        report,
        orders: groups.planned,
        converted_rows: groups.converted_rows,
        balance_lines,
    })
}

/// The card a row is paid by: its own `card_id` cell, else `--card-id`, else none (balance).
pub fn row_card<'a>(spec: &'a RowSpec, default_card: Option<&'a str>) -> Option<&'a str> {
    spec.card_id
        .as_deref()
        .filter(|c| !c.is_empty())
        .or(default_card)
}

/// An intent sent (in doubt) longer than `window` ago: not re-sent before reconciling.
fn stale(sends: i64, first_sent_at: Option<&str>, window: Duration) -> bool {
    sends > 0 && ledger::older_than(first_sent_at, window)
}

/// Intents read from the ledger at a time (a batch can hold a million).
const INTENT_CHUNK: i64 = 4096;

/// Visits the batch's intents a chunk at a time, in id order.
fn each_intent(
    ledger: &Ledger,
    batch_id: i64,
    mut visit: impl FnMut(ledger::IntentHead) -> Result<(), RunError>,
) -> Result<(), RunError> {
    let mut after = 0;
    loop {
        let chunk = ledger.intent_heads(batch_id, after, INTENT_CHUNK)?;
        let Some(last) = chunk.last().map(|h| h.id) else {
            return Ok(());
        };
        after = last;
        for head in chunk {
            visit(head)?;
        }
    }
}

/// Counts the intents: all of them, and those in doubt for longer than `window`.
fn count_intents(
    ledger: &Ledger,
    batch_id: i64,
    window: Duration,
) -> Result<(usize, usize), RunError> {
    let (mut all, mut stale_ones) = (0, 0);
    each_intent(ledger, batch_id, |head| {
        all += 1;
        if stale(head.sends, head.first_sent_at.as_deref(), window) {
            stale_ones += 1;
        }
        Ok(())
    })?;
    Ok((all, stale_ones))
}

/// When this ledger's orders were sent within the service's rate window, as instants of this
/// process: they count against the window of this run.
fn recent_sends(ledger: &Ledger) -> Result<Vec<tokio::time::Instant>, RunError> {
    let window = chrono::Duration::from_std(super::pace::WINDOW + Duration::from_secs(1))
        .unwrap_or_else(|_| chrono::Duration::seconds(61));
    let now = chrono::Utc::now();
    let since = (now - window).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let here = tokio::time::Instant::now();
    Ok(ledger
        .sends_since(&since)?
        .iter()
        .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .filter_map(|t| (now - t.with_timezone(&chrono::Utc)).to_std().ok())
        .filter_map(|ago| here.checked_sub(ago))
        .collect())
}

/// Exponential backoff with full jitter, at least `floor`.
fn backoff(attempt: u32, floor: Duration) -> Duration {
    let base = Duration::from_millis(250);
    let cap = Duration::from_secs(30);
    let exp = base.saturating_mul(1u32 << attempt.min(10)).min(cap);
    let jitter = rand::thread_rng().gen_range(0..=exp.as_millis() as u64);
    floor.max(Duration::from_millis(jitter))
}

/// What one order's submission came to in this run.
enum Sent {
    Recorded,
    GaveUp(String),
    /// Not sent: the service stopped what it is paid by earlier in this run.
    Held,
    Stop(RunError),
}

/// Sends every intent of the batch. Returns why the run is incomplete when the service kept it
/// waiting past its patience ([`Patience`]): the orders not sent stay intents for the next run.
async fn submit_all(
    stage: &Arc<Stage>,
    batch_id: i64,
    opts: &RunOptions,
) -> Result<Option<String>, RunError> {
    let (intents, stale_ones) = count_intents(&stage.ledger(), batch_id, opts.in_doubt_window)?;
    if intents == 0 {
        return Ok(None);
    }
    let earlier = recent_sends(&stage.ledger())?;
    let limiter = Arc::new(Pacer::new(opts.order_rate, &earlier));
    let count = intents - stale_ones;
    let bar = stage.reporter.bar(count as u64, "submit");
    stage.reporter.line(format!("submitting {count} orders"));
    let mut tasks = tokio::task::JoinSet::new();
    let concurrency = opts.concurrency.max(1);
    let tries = opts.max_send_tries.max(1);
    // Intents are read a chunk at a time (only ids and send records: each order's body is read
    // when it is sent).
    let mut waiting: std::collections::VecDeque<i64> = std::collections::VecDeque::new();
    let mut after = 0;
    let mut read_all = false;
    let mut stop = None;
    let mut gave_up = 0;
    let mut held_back = 0;
    loop {
        // At most `concurrency` orders in flight, each read from the ledger as it starts; none
        // once the service has kept the run waiting too long.
        while stop.is_none() && !stage.patience.is_exhausted() && tasks.len() < concurrency {
            if waiting.is_empty() && !read_all {
                let chunk = stage.ledger().intent_heads(batch_id, after, INTENT_CHUNK)?;
                read_all = chunk.is_empty();
                for head in chunk {
                    after = head.id;
                    if stale(
                        head.sends,
                        head.first_sent_at.as_deref(),
                        opts.in_doubt_window,
                    ) {
                        stage.reporter.warn(format!(
                            "order {} (key {}) was first sent at {} and its outcome is unknown; it is older than the in-doubt window and is not re-sent blindly: run `paybatch reconcile`",
                            head.id,
                            head.idempotency_key,
                            head.first_sent_at.as_deref().unwrap_or("?")
                        ));
                        continue;
                    }
                    waiting.push_back(head.id);
                }
                continue;
            }
            let Some(id) = waiting.pop_front() else { break };
            let stage = stage.clone();
            let limiter = limiter.clone();
            tasks.spawn(async move {
                let order = match stage.ledger().order(id) {
                    Ok(Some(order)) => order,
                    Ok(None) => {
                        return Sent::Stop(RunError::Ledger(LedgerError::Corrupt(format!(
                            "order {id} vanished from the ledger"
                        ))));
                    }
                    Err(e) => return Sent::Stop(e.into()),
                };
                submit_one(&stage, &limiter, order, tries).await
            });
        }
        let Some(joined) = tasks.join_next().await else {
            break;
        };
        bar.inc(1);
        match joined {
            Ok(Sent::Recorded) => {}
            Ok(Sent::Held) => held_back += 1,
            Ok(Sent::GaveUp(why)) => {
                gave_up += 1;
                stage.reporter.warn(why);
            }
            Ok(Sent::Stop(e)) => {
                if stop.is_none() {
                    stop = Some(e);
                    tasks.abort_all();
                }
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                return Err(RunError::Refused {
                    message: format!("a submission task failed: {e}"),
                    help: String::new(),
                });
            }
        }
    }
    bar.finish_and_clear();
    if let Some(e) = stop {
        return Err(e);
    }
    if stage.patience.is_exhausted() {
        return Ok(Some(format!(
            "the service kept asking to wait (429, server errors, no answer) for longer than --poll-timeout {}s without an answer recorded; {gave_up} orders were sent without an answer, the others not yet",
            opts.poll_timeout.as_secs()
        )));
    }
    stage.reporter.line(format!(
        "submitted: {} orders answered, {gave_up} without an answer yet{}",
        count - gave_up - held_back,
        if held_back > 0 {
            format!(", {held_back} not sent (see below)")
        } else {
            String::new()
        }
    ));
    Ok(None)
}

async fn submit_one(stage: &Stage, limiter: &Pacer, order: OrderRecord, tries: u32) -> Sent {
    let mode = if order.mode == "sync" {
        ExecutionMode::Sync
    } else {
        ExecutionMode::Async
    };
    let mut last = String::new();
    let mut server_error = false;
    for attempt in 0..tries {
        limiter.ready().await;
        if stage.is_held(&order) {
            return Sent::Held;
        }
        if let Err(e) = stage.ledger().mark_sending(order.id) {
            return Sent::Stop(e.into());
        }
        failpoint::hit("after_mark_sending");
        let result = stage
            .client
            .create_order(&order.idempotency_key, &order.body, mode)
            .await;
        failpoint::hit("after_send");
        match result {
            Ok(outcome) => {
                let recorded = record_created(stage, &order, outcome);
                failpoint::hit("after_record");
                return match recorded {
                    Ok(()) => {
                        stage.patience.progress();
                        Sent::Recorded
                    }
                    Err(e) => Sent::Stop(e),
                };
            }
            Err(e) if e.is_transient() => {
                last = format!("{}: {}", e.kind(), e.message());
                server_error = e.status().is_some_and(|s| (500..=599).contains(&s));
                if let Err(le) =
                    stage
                        .ledger()
                        .record_send_error(order.id, e.status(), e.kind(), &e.message())
                {
                    return Sent::Stop(le.into());
                }
                // The service's Retry-After is at most MAX_RETRY_AFTER (the client reads it so).
                let floor = if e.is_rate_limited() {
                    e.retry_after()
                        .unwrap_or_default()
                        .max(Duration::from_secs(5))
                } else {
                    e.retry_after().unwrap_or_default()
                };
                let pause = (attempt + 1 < tries).then(|| backoff(attempt, floor));
                let longest = pause.unwrap_or_default().max(if e.is_rate_limited() {
                    floor
                } else {
                    Duration::ZERO
                });
                if !stage.patience.allows(longest) {
                    return Sent::GaveUp(format!(
                        "order {} (key {}): the service asks to wait {}s more ({last}), longer than the run waits without an answer (--poll-timeout {}s); it stays in doubt and is re-sent with the same key on the next run",
                        order.id,
                        order.idempotency_key,
                        longest.as_secs(),
                        stage.patience.timeout.as_secs()
                    ));
                }
                if e.is_rate_limited() {
                    limiter.throttled(floor);
                }
                if let Some(pause) = pause {
                    tokio::time::sleep(pause).await;
                }
            }
            Err(e) if is_auth_error(&e) => return Sent::Stop(RunError::Auth(e)),
            Err(e) if e.kind() == "idempotency_validation_error" => {
                // The service holds another body under this key: whatever it created must be
                // looked at by a person; marking the rows REJECTED could lead to paying twice.
                return Sent::Stop(RunError::Conflict {
                    message: format!(
                        "the service holds a different request under idempotency key {} (order {} of the ledger): {}",
                        order.idempotency_key,
                        order.id,
                        e.message()
                    ),
                    help: "nothing was marked; run `paybatch reconcile --batch NAME --dry-run` to see what the service has for this batch".into(),
                });
            }
            Err(e) => {
                let mut message = e.message();
                if e.kind() == "payment_method_unavailable" && order.card_id.is_some() {
                    message.push_str(
                        "; the service no longer lists card payments (its published API takes ACCOUNT_BALANCE only): pay these rows from a balance (drop --card-id or the card_id cell), then `paybatch retry`",
                    );
                }
                if let Some(what) = holds(&e, &order) {
                    stage.hold(what, format!("{}: {}", e.kind(), e.message()));
                }
                let cause = format!("service refused the order: {}", e.kind());
                let recorded = stage.ledger().transition_order(
                    order.id,
                    Transition {
                        http_status: e.status(),
                        error: Some((e.kind(), &message)),
                        ..Transition::to(OrderState::Rejected, &cause)
                    },
                );
                return match recorded {
                    Ok(()) => {
                        stage.patience.progress();
                        Sent::Recorded
                    }
                    Err(le) => Sent::Stop(le.into()),
                };
            }
        }
    }
    let kept = if server_error {
        "; if the service keeps that server error under the key, every send gets it back: once the order is older than the in-doubt window, reconciliation finds no order for it and gives the key up, and `paybatch retry` sends its rows under a new one"
    } else {
        ""
    };
    Sent::GaveUp(format!(
        "order {} (key {}) got no usable answer after {tries} tries ({last}); it stays in doubt and is re-sent with the same key on the next run{kept}",
        order.id, order.idempotency_key
    ))
}

fn record_created(
    stage: &Stage,
    order: &OrderRecord,
    outcome: CreateOutcome,
) -> Result<(), RunError> {
    match outcome {
        CreateOutcome::Accepted(a) => {
            let response = serde_json::to_string(&a).ok();
            let mut ledger = stage.ledger();
            if let Some(why) = record::id_of_another_order(&ledger, order.id, &a.id)? {
                record::record_mismatch(
                    &mut ledger,
                    order.id,
                    None,
                    response.as_deref(),
                    202,
                    &[why],
                )?;
                return Ok(());
            }
            ledger.transition_order(
                order.id,
                Transition {
                    service_order_id: Some(&a.id),
                    http_status: Some(202),
                    response: response.as_deref(),
                    ..Transition::to(OrderState::Accepted, "service accepted the order")
                },
            )?;
            Ok(())
        }
        CreateOutcome::Order(full) => {
            // A sync answer is COMPLETED in the published contract; one that says FAILED is
            // read again (`GET /order/{id}`) before its rows are marked FAILED, for `retry`
            // would pay them again under a new key.
            if full.status == OrderStatus::Completed {
                record_terminal(stage, order.id, &full, 200)
            } else {
                let mut ledger = stage.ledger();
                if let Some(why) = record::id_of_another_order(&ledger, order.id, &full.id)? {
                    let response = serde_json::to_string(&full).ok();
                    record::record_mismatch(
                        &mut ledger,
                        order.id,
                        None,
                        response.as_deref(),
                        200,
                        &[why],
                    )?;
                    return Ok(());
                }
                ledger.transition_order(
                    order.id,
                    Transition {
                        service_order_id: Some(&full.id),
                        http_status: Some(200),
                        ..Transition::to(OrderState::Accepted, "service accepted the order")
                    },
                )?;
                Ok(())
            }
        }
    }
}

fn record_terminal(stage: &Stage, order_id: i64, order: &Order, http: u16) -> Result<(), RunError> {
    record::record_terminal_in(&mut stage.ledger(), order_id, order, http)?;
    Ok(())
}

/// First wait before the first look at the order statuses; each later wait is 1.5 times longer,
/// up to [`POLL_YOUNG_MAX`] while the polling is younger than [`POLL_YOUNG`] (most orders
/// finish within seconds: each is seen within about a second of it), then up to [`POLL_MAX`].
const POLL_FIRST: Duration = Duration::from_millis(500);
const POLL_YOUNG: Duration = Duration::from_secs(60);
const POLL_YOUNG_MAX: Duration = Duration::from_secs(1);
const POLL_MAX: Duration = Duration::from_secs(10);
/// Pages of the order list read per round at most.
const LIST_PAGES_PER_ROUND: usize = 4;
/// Full orders fetched at once.
const FETCH_CONCURRENCY: usize = 8;

/// Polls the accepted orders until each is terminal or the deadline passes. Statuses are read
/// many at a time from the order list (`GET /order`); the full order (items, payout links) is
/// fetched once, when it is terminal. An order the list does not show is asked for directly
/// every other round. Returns why the run is incomplete, if it is.
async fn poll_all(
    stage: &Arc<Stage>,
    batch_id: i64,
    opts: &RunOptions,
) -> Result<Option<String>, RunError> {
    let accepted = stage
        .ledger()
        .orders_in_state(batch_id, OrderState::Accepted)?;
    let mut waiting: HashMap<String, OrderRecord> = accepted
        .into_iter()
        .filter_map(|o| o.service_order_id.clone().map(|id| (id, o)))
        .collect();
    if waiting.is_empty() {
        return Ok(None);
    }
    stage.reporter.line(format!(
        "polling {} orders until they complete",
        waiting.len()
    ));
    // A timeout too long to add to the clock (only a library caller can give one) never ends.
    let deadline = Instant::now().checked_add(opts.poll_timeout);
    let bar = stage.reporter.bar(waiting.len() as u64, "poll");
    let polling = Instant::now();
    let mut interval = POLL_FIRST;
    let mut unseen_rounds: HashMap<String, u32> = HashMap::new();
    while !waiting.is_empty() {
        let now = Instant::now();
        let left = deadline.map(|d| d.saturating_duration_since(now));
        if left.is_some_and(|l| l.is_zero()) {
            break;
        }
        tokio::time::sleep(left.map_or(interval, |l| interval.min(l))).await;
        let longest = if polling.elapsed() < POLL_YOUNG {
            POLL_YOUNG_MAX
        } else {
            POLL_MAX
        };
        interval = interval.mul_f64(1.5).min(longest);
        failpoint::hit("while_polling");

        let (mut to_fetch, seen) = match list_statuses(&stage.client, &waiting).await {
            Ok(found) => found,
            Err(e) if is_auth_error(&e) => return Err(RunError::Auth(e)),
            Err(e) => {
                if e.is_rate_limited() {
                    interval = interval.max(Duration::from_secs(5));
                }
                stage.reporter.warn(format!(
                    "cannot read the order list ({e}); asking order by order"
                ));
                (Vec::new(), std::collections::HashSet::new())
            }
        };
        for id in waiting.keys() {
            if seen.contains(id) {
                unseen_rounds.remove(id);
                continue;
            }
            let rounds = unseen_rounds.entry(id.clone()).or_default();
            *rounds += 1;
            if *rounds >= 2 {
                *rounds = 0;
                to_fetch.push(id.clone());
            }
        }
        let client = &stage.client;
        let fetched: Vec<(String, Result<OrderView, ApiError>)> =
            futures::stream::iter(to_fetch.into_iter().map(|id| async move {
                let result = client.order(&id).await;
                (id, result)
            }))
            .buffer_unordered(FETCH_CONCURRENCY)
            .collect()
            .await;
        for (id, result) in fetched {
            let Some(order) = waiting.get(&id) else {
                continue;
            };
            stage.ledger().count_poll(order.id)?;
            match result {
                Ok(OrderView::Done(full)) => {
                    record_terminal(stage, order.id, &full, 200)?;
                    waiting.remove(&id);
                    bar.inc(1);
                }
                Ok(OrderView::Processing(_)) => {}
                Err(e) if is_auth_error(&e) => return Err(RunError::Auth(e)),
                Err(e) => {
                    if e.is_rate_limited() {
                        interval = interval.max(Duration::from_secs(5));
                    }
                    if !e.is_transient() {
                        stage
                            .reporter
                            .warn(format!("order {id}: {e}; it will be asked again"));
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    if waiting.is_empty() {
        Ok(None)
    } else {
        Ok(Some(format!(
            "{} orders still processing after --poll-timeout {}s",
            waiting.len(),
            opts.poll_timeout.as_secs()
        )))
    }
}

/// Reads the newest pages of the order list: which of the `waiting` orders are terminal, and
/// which the list showed at all.
async fn list_statuses(
    client: &Client,
    waiting: &HashMap<String, OrderRecord>,
) -> Result<(Vec<String>, std::collections::HashSet<String>), ApiError> {
    let limit = (waiting.len() + 50).min(500) as u32;
    let mut query = crate::api::client::PageQuery {
        limit: Some(limit),
        ..Default::default()
    };
    let mut seen = std::collections::HashSet::new();
    let mut terminal = Vec::new();
    for _ in 0..LIST_PAGES_PER_ROUND {
        let page = client.orders(&query).await?;
        for item in &page.items {
            if waiting.contains_key(&item.id)
                && seen.insert(item.id.clone())
                && item.status.is_terminal()
            {
                terminal.push(item.id.clone());
            }
        }
        if seen.len() == waiting.len() || page.items.is_empty() {
            break;
        }
        match page.pagination.cursors.after {
            Some(after) if Some(&after) != query.after.as_ref() => query.after = Some(after),
            _ => break,
        }
    }
    Ok((terminal, seen))
}

/// Writes the result file from the ledger: one line per row of the current input file, in
/// input order, streamed from the ledger.
pub fn write_result_file(
    ledger: &Ledger,
    batch_id: i64,
    headers: &[String],
    path: &Path,
) -> Result<(), RunError> {
    let io_error = |e: std::io::Error| RunError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut out = output::ResultWriter::create(path, headers).map_err(io_error)?;
    ledger.visit_result_rows(batch_id, |r, order| {
        let status = match r.state {
            RowState::Planned => "PLANNED".to_string(),
            RowState::Submitted => "PROCESSING".to_string(),
            other => other.to_string(),
        };
        let line = ResultLine {
            fields: r.fields,
            status,
            order_id: order.as_ref().and_then(|o| o.service_order_id.clone()),
            item_id: r.item_id,
            payout_url: r.payout_url,
            price: r.price,
            discount: r.discount,
            error_type: r.error_type,
            error_message: r.error_message,
            completed_at: r.completed_at,
            payment_method: order.map(|o| match &o.card_id {
                Some(card) => format!("CARD:{card}"),
                None => format!("{}:{}", o.payment_method, o.payment_currency),
            }),
            debited_amount: r.debited_amount,
            debited_currency: r.debited_currency,
        };
        out.write(&line).map_err(io_error)
    })?;
    out.finish().map_err(io_error)
}

fn summarize(
    ledger: &Ledger,
    batch_id: i64,
    batch: &str,
    environment: &Environment,
    result_path: PathBuf,
    incomplete_reason: Option<String>,
) -> Result<RunSummary, RunError> {
    let counts: BTreeMap<RowState, i64> = ledger.row_counts(batch_id)?.into_iter().collect();
    let mut totals: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
    for (currency, face, price) in ledger.completed_amounts(batch_id)? {
        let parse = |t: &str| crate::api::decimal::parse_decimal_text(t).unwrap_or_default();
        let entry = totals.entry(currency).or_default();
        entry.0 += parse(&face);
        entry.1 += parse(&price);
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
    let per_delivery = ledger.rows_per_delivery(batch_id)?.into_iter().collect();
    Ok(RunSummary {
        paid_by,
        debited,
        per_delivery,
        batch: batch.to_string(),
        environment: environment.clone(),
        result_path,
        counts,
        totals,
        incomplete_reason,
        held: Vec::new(),
    })
}

/// What left each paying balance (or card) for the completed rows of a batch: (`balance CUR`
/// or `card ID`, currency) -> amount.
pub fn debited_totals(
    ledger: &Ledger,
    batch_id: i64,
) -> Result<BTreeMap<(String, String), Decimal>, LedgerError> {
    let mut out: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    for (card, currency, amount) in ledger.debited_amounts(batch_id)? {
        let payer = match card {
            Some(card) => format!("card {card}"),
            None => format!("balance {currency}"),
        };
        let amount = crate::api::decimal::parse_decimal_text(&amount).unwrap_or_default();
        *out.entry((payer, currency)).or_default() += amount;
    }
    Ok(out)
}

/// What the service stopped in this run, for a person: per balance too low, the rows it left
/// unpaid, what they need, what the balance has and how much is missing; for the account's
/// spending limit, the rows left unpaid. With what to do next.
fn held_lines(
    ledger: &Ledger,
    batch: &ledger::BatchRecord,
    products: &[Product],
    held: &BTreeMap<String, String>,
    balances: &BTreeMap<String, Option<Decimal>>,
) -> Result<Vec<String>, RunError> {
    let by_code: HashMap<&str, &Product> = products.iter().map(|p| (p.code.as_str(), p)).collect();
    let orders: HashMap<i64, OrderRecord> = ledger
        .orders(batch.id)?
        .into_iter()
        .map(|o| (o.id, o))
        .collect();
    // Rows the stop left unpaid: not sent, or refused for it.
    let mut unpaid: BTreeMap<String, (usize, usize, Decimal)> = BTreeMap::new();
    let mut refused = 0usize;
    let mut all_unpaid = 0usize;
    for row in ledger.rows(batch.id)? {
        let Some(order) = row.order_id.and_then(|id| orders.get(&id)) else {
            continue;
        };
        let stopped = match row.state {
            RowState::Planned => order.state == OrderState::Intent,
            RowState::Rejected => matches!(
                row.error_type.as_deref(),
                Some("insufficient_funds" | "insufficient_balance" | "ordering_restricted")
            ),
            _ => false,
        };
        if !stopped {
            continue;
        }
        all_unpaid += 1;
        if row.state == RowState::Rejected {
            refused += 1;
        }
        if order.card_id.is_some() {
            continue;
        }
        let entry = unpaid.entry(order.payment_currency.clone()).or_default();
        entry.0 += 1;
        match row
            .spec
            .as_deref()
            .and_then(|s| serde_json::from_str::<StoredPrice>(s).ok())
        {
            Some(spec) if spec.currency == order.payment_currency => {
                let discount = spec
                    .product_codes
                    .iter()
                    .filter_map(|c| by_code.get(c.as_str()))
                    .map(|p| p.discount())
                    .min()
                    .unwrap_or(Decimal::ZERO);
                let places = crate::money::minor_units(&spec.currency);
                entry.2 += (spec.face_value * (Decimal::ONE - discount)).round_dp(places);
            }
            _ => entry.1 += 1,
        }
    }
    let then = if refused > 0 {
        format!(
            "then `paybatch retry --batch {}` (for the {refused} rows the service refused) and run the same command again",
            batch.name
        )
    } else {
        "then run the same command again".to_string()
    };
    let mut lines = Vec::new();
    if let Some(why) = held.get("account") {
        lines.push(format!(
            "the service stopped ordering for this account ({why}): {all_unpaid} rows not paid; ask the account's owner to raise its spending limit, {then}"
        ));
    }
    for (what, why) in held {
        let Some(currency) = what.strip_prefix("balance ") else {
            continue;
        };
        let (rows, converted, need) = unpaid.get(currency).cloned().unwrap_or_default();
        let available = balances.get(currency).copied().flatten();
        let has = match &available {
            Some(available) => format!("the balance has {available} {currency}"),
            None => "the balance could not be read".to_string(),
        };
        let money = match (&available, rows - converted) {
            (_, 0) => has,
            (Some(available), _) if *available < need => format!(
                "those priced in {currency} need {need} {currency}, {has}: {} {currency} missing",
                need - available
            ),
            (_, _) => format!("those priced in {currency} need {need} {currency}, {has}"),
        };
        let fx = if converted > 0 {
            format!(
                "; {converted} of them are converted from other currencies, priced in {currency} only when ordered"
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "the {currency} balance is too low ({why}): {rows} rows not paid; {money}{fx}; top up the {currency} balance, {then}"
        ));
    }
    Ok(lines)
}

/// What [`held_lines`] reads of a stored row (`rows.spec`).
#[derive(serde::Deserialize)]
struct StoredPrice {
    product_codes: Vec<String>,
    #[serde(with = "rust_decimal::serde::str")]
    face_value: Decimal,
    currency: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_rows_per_order_fill_one_window_in_few_rounds() {
        // 300 rows at the published rate, 8 in flight: 30 orders of 10.
        assert_eq!(auto_rows_per_order(300, 300, 8), 10);
        // A small batch: one row an order.
        assert_eq!(auto_rows_per_order(20, 300, 8), 1);
        assert_eq!(auto_rows_per_order(0, 300, 8), 1);
        // A large batch: the service's largest order, 500 orders in two windows.
        assert_eq!(auto_rows_per_order(100_000, 300, 8), 200);
        // Every order of the batch fits one window while 200 rows an order allow it.
        for rows in [1_000, 9_999, 60_000] {
            let per = auto_rows_per_order(rows, 300, 8);
            assert!(rows.div_ceil(per) <= 300, "{rows} rows: {per} an order");
        }
        // More in flight: smaller orders.
        assert!(auto_rows_per_order(3_000, 300, 32) < auto_rows_per_order(3_000, 300, 8));
    }

    #[test]
    fn items_per_order_reads_auto_or_a_number() {
        assert_eq!("auto".parse::<ItemsPerOrder>(), Ok(ItemsPerOrder::Auto));
        assert_eq!("AUTO".parse::<ItemsPerOrder>(), Ok(ItemsPerOrder::Auto));
        assert_eq!(
            "200".parse::<ItemsPerOrder>(),
            Ok(ItemsPerOrder::Fixed(200))
        );
        for bad in ["0", "201", "-1", "many", ""] {
            assert!(bad.parse::<ItemsPerOrder>().is_err(), "{bad}");
        }
    }
}
