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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::api::Client;
use crate::api::models::Product;
use crate::batch::funds;
use crate::batch::ledger_thread::LedgerThread;
use crate::batch::options::{RunOptions, default_result_path};
use crate::batch::outcome::{LikelyPaid, RunSummary, summarize};
use crate::batch::output::ResultWriter;
use crate::batch::plan::{self, Merged, RunContext};
use crate::batch::progress::Reporter;
use crate::batch::repeats::{self, Earlier, Repeats};
use crate::batch::results::{PlannedLines, write_result_file};
use crate::batch::send_context::{Patience, SendContext, ServiceStop, deadline_in};
use crate::batch::watch::{READ_EVERY, ServiceWatch};
use crate::batch::{poll, reconcile, submit};
use crate::catalog;
use crate::environment::Connection;
use crate::failpoint;
use crate::input::rules::{CatalogIndex, Problems, ValidateOptions};
use crate::input::scan;
use crate::ledger::lock::LedgerLock;
use crate::ledger::{self, Ledger};
use crate::ops::error::OpError;

pub(super) mod approval;
mod digest;
mod tell;

use digest::check_digest;
use tell::{tell_plan, tell_repeats};

use super::start::{
    BatchOrigin, catalog_error, check_binding, check_input, open_batch, outside_file,
};

/// Runs a batch to the end (or as far as it can go), resuming whatever the ledger holds. An
/// unexpected error once orders of the batch went out is [`OpError::AfterSending`]: the same
/// command resumes.
pub async fn run(opts: &RunOptions, reporter: Reporter) -> Result<RunSummary, OpError> {
    let sent = Arc::new(AtomicU64::new(0));
    run_batch(opts, reporter, &sent).await.map_err(|e| {
        e.after_sending(
            sent.load(Ordering::SeqCst),
            &opts.ledger,
            &opts.batch_name(),
        )
    })
}

/// [`run`], counting the orders it sends in `sent`.
async fn run_batch(
    opts: &RunOptions,
    reporter: Reporter,
    sent: &Arc<AtomicU64>,
) -> Result<RunSummary, OpError> {
    let batch_name = opts.batch_name();
    reporter.line(format!(
        "paybatch run: {} | batch {batch_name} | ledger {}",
        opts.environment.banner(),
        opts.ledger.display()
    ));
    check_before(opts)?;
    let (lock, mut ledger, opened) = open_ledger(opts)?;
    let conn = connect(opts, &mut ledger).await?;

    // The batch binding is checked before anything else touches the service with this batch.
    let existing = ledger.batch(&batch_name)?;
    if let Some(b) = &existing {
        check_binding(b, &conn)?;
        if ledger.is_unsettled(b.id)? {
            settle_rebuilt(&mut ledger, &conn.client, b, opts, &reporter).await?;
        }
    }
    let counting = count_rows_aside(opts, existing.is_some());
    let (catalog, earlier) =
        catalog_and_earlier(&mut ledger, &conn, existing.as_ref(), opts, &reporter).await?;
    let run = Arc::new(RunContext {
        opts: opts.clone(),
        catalog,
        checks: validate_options(opts),
        earlier,
    });
    let (
        mut ledger,
        MergedFile {
            scanned,
            batch,
            written,
            likely,
            written_now,
            ..
        },
    ) = merge_file(ledger, existing, counting, &run, &conn, &reporter).await?;
    failpoint::hit("after_intent");
    reconcile_stale(&mut ledger, &conn.client, &batch, opts, &reporter).await?;

    let context = send_context(lock, ledger, &conn.client, reporter, opts, sent, batch.id)?;
    // Bound after the context, so dropped before it when the run stops early: the context's
    // connection is then the last to close, and checkpoints the log before the ledger's lock
    // is let go.
    // A run that only plans wrote its result file as it read the file: nothing to read beside.
    let aside = (!opts.plan_only)
        .then(|| open_aside(opts, opened))
        .flatten();
    let incomplete = send_and_poll(&context, batch.id, opts, written_now).await;
    // A send stopped midway may have left a step with the ledger's thread: it has run before
    // anything reads the ledger for the summary and the result file.
    context.steps.settle().await;
    let ending = Ending {
        incomplete: incomplete?,
        written,
        likely,
    };
    finish(
        &context,
        &conn.client,
        (&batch, aside),
        &run.catalog,
        &scanned,
        opts,
        ending,
    )
    .await
}

/// The rows of the input file being counted ([`scan::estimate_rows`]).
type Counting = tokio::task::JoinHandle<Option<usize>>;

/// Counts the rows of the input file on a thread of the blocking pool while the catalog is
/// read, for the one pass of a new batch ([`plan_once`]): none for a batch that exists or a
/// plan digest expected, which the file's two passes read.
fn count_rows_aside(opts: &RunOptions, exists: bool) -> Option<Counting> {
    if exists || opts.expect_digest.is_some() {
        return None;
    }
    let (input, delimiter) = (opts.input.clone(), opts.delimiter);
    Some(tokio::task::spawn_blocking(move || {
        scan::estimate_rows(&input, delimiter)
    }))
}

/// The connection to the service of the run, whose clock the ledger's books then follow.
async fn connect(opts: &RunOptions, ledger: &mut Ledger) -> Result<Connection, OpError> {
    let mut conn = Connection::open(
        opts.environment.clone(),
        opts.api_key_file.as_deref(),
        &opts.ledger,
    )
    .await?;
    ledger.set_books_clock(conn.books_clock());
    // The reads before the sending (catalog, reconciliation) wait for the service at most
    // --poll-timeout, whatever it asks for.
    conn.client = conn.client.with_deadline(deadline_in(opts.poll_timeout));
    Ok(conn)
}

/// The run's ledger, locked and open, and which file its path named once it was opened.
fn open_ledger(opts: &RunOptions) -> Result<(LedgerLock, Ledger, Option<FileId>), OpError> {
    let lock = LedgerLock::acquire(&opts.ledger)?;
    let ledger = Ledger::open(&opts.ledger)?;
    let opened = file_id(&opts.ledger);
    Ok((lock, ledger, opened))
}

/// A file told from any other on the machine (device and inode).
type FileId = (u64, u64);

/// The file `path` names now (through links); `None` when it cannot be told.
fn file_id(path: &std::path::Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// A second connection to the run's ledger, for the summary read while the result file is
/// written ([`finish`]); opened once the file is merged (a large merge leaves the write-ahead
/// log only where the ledger is open nowhere else), and only while the path still names the
/// file the run opened (`opened`): a ledger moved, or a link to it pointed elsewhere, since
/// gets none, and its summary is read after the result file on the run's own connection.
fn open_aside(opts: &RunOptions, opened: Option<FileId>) -> Option<Ledger> {
    let same = || opened.is_some() && file_id(&opts.ledger) == opened;
    if !same() {
        return None;
    }
    let aside = Ledger::open(&opts.ledger).ok()?;
    same().then_some(aside)
}

/// The context the sending and polling of batch `batch_id` share, its ledger's steps on a
/// thread of their own that keeps the ledger's `lock` until its last step has run.
fn send_context(
    lock: LedgerLock,
    ledger: Ledger,
    client: &Client,
    reporter: Reporter,
    opts: &RunOptions,
    sent: &Arc<AtomicU64>,
    batch_id: i64,
) -> Result<Arc<SendContext>, OpError> {
    let ledger = Arc::new(Mutex::new(ledger));
    let steps = LedgerThread::start(Arc::clone(&ledger), lock).map_err(|e| OpError::Io {
        path: opts.ledger.clone(),
        message: format!("cannot start the thread that writes it: {e}"),
    })?;
    Ok(Arc::new(SendContext {
        ledger,
        steps,
        client: client.with_deadline(None),
        reporter,
        stopped: Mutex::new(BTreeMap::new()),
        patience: Patience::new(opts.poll_timeout),
        accepted: Mutex::new(None),
        sent: Arc::clone(sent),
        watch: Some(watch_of(opts, batch_id)),
    }))
}

/// How the rows of a run are validated.
fn validate_options(opts: &RunOptions) -> ValidateOptions {
    ValidateOptions {
        allow_duplicates: opts.allow_duplicates,
        default_payment_currency: opts.default_payment_currency.clone(),
        decimal_comma: opts.decimal_comma,
    }
}

/// The reads of the service's order list while batch `batch_id` is sent.
fn watch_of(opts: &RunOptions, batch_id: i64) -> ServiceWatch {
    ServiceWatch::every(
        opts.environment.recorded_base_url(),
        batch_id,
        opts.on_repeat == repeats::OnRepeat::Allow,
        opts.allow_untold_orders,
        crate::settings::service_read_every().map_or(READ_EVERY, |n| n.min(READ_EVERY)),
    )
}

/// The catalog ([`catalog_for`]) and what the run is checked against ([`earlier_of`]): the two
/// reads of the service before the file is read go at once. The catalog's error comes first,
/// as when they went one after the other.
async fn catalog_and_earlier(
    ledger: &mut Ledger,
    conn: &Connection,
    existing: Option<&ledger::BatchRecord>,
    opts: &RunOptions,
    reporter: &Reporter,
) -> Result<(Vec<Product>, Earlier), OpError> {
    let environment = opts.environment.identity();
    let cached = catalog::fresh_cache(ledger, &environment, opts.catalog_ttl)
        .map_err(|e| catalog_error(e.into()))?;
    let base_url = opts.environment.recorded_base_url();
    let (products, sync) = {
        let shared = Mutex::new(&mut *ledger);
        let products = async {
            match cached {
                Some(products) => Ok((products, catalog::CatalogSource::Cache)),
                None => catalog::fetch_all(&conn.client)
                    .await
                    .map(|p| (p, catalog::CatalogSource::Service)),
            }
        };
        let sync =
            repeats::sync_service(&shared, &conn.client, &base_url, opts.allow_untold_orders);
        tokio::join!(products, sync)
    };
    let (products, source) = products.map_err(|e| catalog_error(e.into()))?;
    if source == catalog::CatalogSource::Service {
        catalog::store(ledger, &environment, &products).map_err(|e| catalog_error(e.into()))?;
    }
    catalog_for(&products, source, reporter);
    let earlier = earlier_of(ledger, sync?, existing, opts, reporter)?;
    Ok((products, earlier))
}

/// What the ledger's other batches hold, and what the service holds that the ledger does not
/// know, read since this ledger last read it (`sync`): before every run that may send (a new
/// batch, a resume, a retry, a reissue, rows appended), so that a row another ledger paid
/// meanwhile is never paid again unnoticed. Said to the person running the batch.
fn earlier_of(
    ledger: &mut Ledger,
    sync: repeats::ServiceSync,
    existing: Option<&ledger::BatchRecord>,
    opts: &RunOptions,
    reporter: &Reporter,
) -> Result<Earlier, OpError> {
    let (earlier, at) = repeats::against_read(
        sync,
        ledger,
        &opts.environment.recorded_base_url(),
        &opts.batch_name(),
        existing,
        &opts.input,
    )?;
    let (head, warnings) = at.lines();
    reporter.line(head);
    for w in warnings {
        reporter.warn(w);
    }
    failpoint::hit("after_service_check");
    Ok(earlier)
}

/// Merges the file into the ledger and plans its new rows into orders: one transaction,
/// committed (durably) before any order is sent. A new batch is read once when its file allows
/// ([`plan_once`]), otherwise in two passes. Says what was planned. Rows other batches of the
/// ledger have (`run.earlier`) are refused, allowed or skipped before the batch is touched.
async fn merge_file(
    ledger: Ledger,
    existing: Option<ledger::BatchRecord>,
    counting: Option<Counting>,
    run: &Arc<RunContext>,
    conn: &Connection,
    reporter: &Reporter,
) -> Result<(Ledger, MergedFile), OpError> {
    let opts = &run.opts;
    let merging = Instant::now();
    let counted = match counting {
        Some(counting) => counting.await.ok().flatten(),
        None => None,
    };
    let (mut ledger, once) = plan_once(ledger, counted, run, conn, reporter).await?;
    let merged_file = match once {
        Some(mut once) => {
            let noticed = std::mem::take(&mut once.merged.noticed);
            let likely =
                repeats::Checker::new(&ledger, &run.earlier, opts.on_repeat).likely_of(noticed)?;
            tell_repeats(&likely, reporter);
            once.likely = (likely.likely, likely.likely_total);
            once
        }
        None => two_passes(&mut ledger, existing, run, conn, reporter).await?,
    };
    let MergedFile {
        scanned, merged, ..
    } = &merged_file;
    tell_plan(merged, opts, scanned.valid_rows, reporter);
    tracing::info!("merge and plan, committed: {:.2?}", merging.elapsed());
    Ok((ledger, merged_file))
}

/// The two passes over the file of a batch the one pass could not plan: the first checks every
/// row (and the approved digest), the balances are read, then the second merges and plans.
async fn two_passes(
    ledger: &mut Ledger,
    existing: Option<ledger::BatchRecord>,
    run: &RunContext,
    conn: &Connection,
    reporter: &Reporter,
) -> Result<MergedFile, OpError> {
    let opts = &run.opts;
    let (scanned, (drawn, kinds), repeats) = first_pass(run, &*ledger, reporter)?;
    // What the ledger holds for rows the file does not have: intents never sent to
    // cancel, orders sent to follow (part of the plan digest).
    let mut outside = outside_file(&*ledger, existing.as_ref(), &scanned)?;
    // Rows planned but never sent that another ledger paid since, skipped by --skip-repeats:
    // their intents are cancelled, and their other rows planned again without them.
    if let Some(b) = &existing {
        for reference in repeats.skipped().keys() {
            if let Some(intent) = ledger.unsent_intent_of(b.id, reference)? {
                outside.to_cancel.insert(intent);
            }
        }
    }
    let approved = check_digest(
        run,
        ledger,
        (&scanned, existing.as_ref()),
        (&outside, &repeats),
        reporter,
    )?;
    if let Some(digest) = &approved {
        approval::check_second_person(opts, ledger, digest)?;
    }
    // The balances are read before the ledger is written (no request while the merge
    // is open); whether they are enough is decided once the merge knows what is new
    // to pay.
    // The converted rows are estimated meanwhile (those the service does not estimate
    // are priced from the ledger by the pre-flight).
    let (balances, prices) = tokio::join!(
        funds::read_balances(&conn.client, drawn),
        funds::estimate(&conn.client, kinds)
    );
    let batch = open_batch(ledger, existing, opts, &scanned, conn, reporter)?;
    // The approval this run is held to is on record before anything of the run is sent.
    if let Some(digest) = &approved {
        approval::record(ledger, &batch, digest, reporter)?;
    }
    // What a person decided about the repeats is on the batch before its rows are.
    if let Some(note) = repeats.note() {
        ledger.record_batch_note(batch.id, &note)?;
    }
    failpoint::hit("before_intent");
    let merged = plan::merge_and_plan(
        ledger,
        &batch,
        &scanned,
        run,
        funds::Funds { balances, prices },
        repeats.skipped(),
        &outside.to_cancel,
    )?;
    Ok(MergedFile {
        scanned,
        batch,
        merged,
        written: None,
        likely: (repeats.likely.clone(), repeats.likely_total),
        written_now: false,
    })
}

/// How a run ends: why it is incomplete, if it is, and the result file of a run that only
/// planned, written while its file was read (put in place by [`finish`]).
struct Ending {
    incomplete: Option<String>,
    written: Option<ResultWriter>,
    /// The first likely repeats the run paid, and how many there are.
    likely: (Vec<repeats::LikelyRepeat>, usize),
}

/// What is checked before the ledger is opened: the input file, the result file, and with
/// `--second-person` that the run is held to an approved digest.
fn check_before(opts: &RunOptions) -> Result<(), OpError> {
    check_input(&opts.input)?;
    check_out(opts)?;
    approval::require_digest(opts)
}

/// `--out` names a file the run may write: not stdout (the run's stdout is its summary), not the
/// ledger or one of its files, not the input. The result file (`--out` or the default beside
/// the input) is not a symbolic link or a special file, which its atomic write would replace.
fn check_out(opts: &RunOptions) -> Result<(), OpError> {
    if let Some(out) = &opts.out {
        let help = "give --out another file (the result file holds payout links: keep it private)";
        if out.as_os_str() == "-" {
            return Err(OpError::Usage(crate::environment::UsageError::new(
                "run writes its result file to a file, not to stdout (`--out -`)",
                "after the run, `paybatch report --batch NAME --out -` prints the result file on stdout",
            )));
        }
        if let Some(why) =
            crate::batch::output::output_clash(out, &opts.ledger, &[&opts.input], &[])
        {
            return Err(OpError::Usage(crate::environment::UsageError::new(
                format!("--out {why}: writing the result file there would destroy it"),
                help,
            )));
        }
    }
    let target = result_path(opts);
    match crate::batch::output::not_a_regular_file(&target) {
        Some(what) => Err(OpError::Usage(crate::environment::UsageError::new(
            format!(
                "the result file {} is {what}: writing it would replace that with a regular file",
                target.display()
            ),
            "give --out the path of a regular file",
        ))),
        None => Ok(()),
    }
}

/// Where the result file goes: `--out`, or beside the input.
fn result_path(opts: &RunOptions) -> std::path::PathBuf {
    opts.out
        .clone()
        .unwrap_or_else(|| default_result_path(&opts.input, &opts.environment))
}

/// The catalog of the run's environment, said where it came from.
fn catalog_for(products: &[Product], source: catalog::CatalogSource, reporter: &Reporter) {
    reporter.line(format!(
        "catalog: {} products ({})",
        products.len(),
        match source {
            catalog::CatalogSource::Cache => "cached",
            catalog::CatalogSource::Service => "fetched from the service",
        }
    ));
}

/// What a run merged and planned, in one pass or two.
struct MergedFile {
    /// The file as read.
    scanned: scan::Scan,
    batch: ledger::BatchRecord,
    merged: Merged,
    /// The result file of a run that only plans, written during the one pass (not yet in
    /// place).
    written: Option<ResultWriter>,
    /// The first likely repeats (rows paying a recipient what another batch paid them
    /// lately), and how many there are.
    likely: (Vec<repeats::LikelyRepeat>, usize),
    /// Whether the batch and every row of it were written by this run's one pass, from the
    /// rows as it read and checked them (none stored before it to be found damaged).
    written_now: bool,
}

/// A batch new to the ledger is read once ([`plan::plan_in_one_pass`]) when its file
/// turns out valid: checking, recording and planning in one pass, the batch created in the
/// same transaction, its tables sized by the rows `counted` ([`count_rows_aside`], none for a
/// batch that exists, a plan digest expected or a file that cannot be counted). `None`, with
/// nothing recorded, without a count, or when the file has a problem: the file is then read in
/// two passes.
///
/// The pass runs on a blocking thread of its own, which has the ledger meanwhile and gives it
/// back; it asks for the balances (read here, where a stop of the run cancels the request) and
/// waits for them before it commits. A run stopped during the pass leaves the thread to end
/// with the process, its transaction rolled back.
async fn plan_once(
    ledger: Ledger,
    counted: Option<usize>,
    run: &Arc<RunContext>,
    conn: &Connection,
    reporter: &Reporter,
) -> Result<(Ledger, Option<MergedFile>), OpError> {
    let Some(expected_rows) = counted else {
        return Ok((ledger, None));
    };
    failpoint::hit("before_intent");
    let (ask, asked) = tokio::sync::oneshot::channel::<Asked>();
    let (give, given) = std::sync::mpsc::channel::<funds::Funds>();
    let (early, mut drawing) = tokio::sync::mpsc::unbounded_channel::<String>();
    let job = {
        let pass = OnePass {
            run: Arc::clone(run),
            fingerprint: conn.key_fingerprint.clone(),
            expected_rows,
            early,
        };
        tokio::task::spawn_blocking(move || {
            let mut ledger = ledger;
            let once = pass.run(&mut ledger, ask, given);
            (ledger, once)
        })
    };
    let started = Instant::now();
    // Each balance is read as soon as the pass first draws on it, while the pass goes on: its
    // transaction (which, in a large merge, keeps even readers out of the ledger) then waits at
    // its end only for the balances not read yet, not for a round trip per currency.
    let mut reads = funds::BalanceReads::default();
    let mut asked = std::pin::pin!(asked);
    let asked = loop {
        tokio::select! {
            Some(currency) = drawing.recv() => reads.start(&conn.client, currency),
            asked = &mut asked => break asked,
        }
    };
    if let Ok(asked) = asked {
        let funds = fund_the_pass(asked, reads, conn, reporter).await;
        // The pass stops waiting (and rolls back) if the run is stopped meanwhile.
        let _ = give.send(funds);
    }
    let (ledger, once) = job.await.map_err(|e| {
        OpError::Ledger(ledger::LedgerError::Corrupt(format!(
            "the reading of the file stopped unexpectedly: {e}"
        )))
    })?;
    let once = once?;
    if once.is_none() {
        tracing::info!(
            "one pass stopped after {:.2?}: reading the file in two passes",
            started.elapsed()
        );
    }
    Ok((ledger, once))
}

/// What the one pass waits for before it commits, once it has `asked`: the balances its new
/// rows draw on (those not read yet read now) and the service's estimates of its converted
/// rows (those it does not estimate are priced from the ledger by the pass, which has it).
async fn fund_the_pass(
    Asked {
        rows,
        valid_rows,
        drawn,
        kinds,
    }: Asked,
    mut reads: funds::BalanceReads,
    conn: &Connection,
    reporter: &Reporter,
) -> funds::Funds {
    tell_validated(rows, valid_rows, reporter);
    // Those the pass drew on last may not have been started yet.
    for currency in &drawn {
        reads.start(&conn.client, currency.clone());
    }
    let (mut read, prices) = tokio::join!(reads.finish(), funds::estimate(&conn.client, kinds));
    let balances: plan::Balances = drawn
        .into_iter()
        .filter_map(|currency| read.remove(&currency).map(|b| (currency, b)))
        .collect();
    funds::Funds { balances, prices }
}

/// What the one pass tells the run before it commits.
struct Asked {
    rows: usize,
    valid_rows: usize,
    /// The currencies whose balances its new rows draw on.
    drawn: Vec<String>,
    /// The kinds of converted rows among them (to price).
    kinds: Vec<funds::ConvertedKind>,
}

/// What the one pass of [`plan_once`] needs on its blocking thread.
struct OnePass {
    /// The run (what the ledger's other batches hold among it: a row they may have sends the
    /// file to two passes).
    run: Arc<RunContext>,
    fingerprint: String,
    expected_rows: usize,
    /// Each currency the new rows draw on, the first time they do.
    early: tokio::sync::mpsc::UnboundedSender<String>,
}

impl OnePass {
    /// `ask` tells the run what the file holds and which balances it draws on; `given`
    /// brings the balances back.
    fn run(
        self,
        ledger: &mut Ledger,
        ask: tokio::sync::oneshot::Sender<Asked>,
        given: std::sync::mpsc::Receiver<funds::Funds>,
    ) -> Result<Option<MergedFile>, OpError> {
        let opts = &self.run.opts;
        let name = opts.batch_name();
        let origin = BatchOrigin::of(opts);
        // The file's hash and headers are recorded at the end of the pass.
        let new = origin.new_batch(opts, &self.fingerprint, "", &[], None);
        // A run that only plans writes its result file while it reads.
        let mut lines = opts.plan_only.then(|| {
            PlannedLines::new(&result_path(opts), opts.card_id.as_deref(), opts.out_format)
        });
        let once = plan::plan_in_one_pass(
            ledger,
            &new,
            &self.run,
            self.expected_rows,
            lines.as_mut().map(|l| l as &mut dyn scan::OnValidRow),
            &|currency| {
                // The run reads the balance meanwhile (unless it was stopped).
                let _ = self.early.send(currency.to_string());
            },
            |scanned, drawn, kinds| {
                // Without an answer (the run was stopped), no balance is read and nothing is
                // committed.
                let asked = Asked {
                    rows: scanned.rows,
                    valid_rows: scanned.valid_rows,
                    drawn,
                    kinds,
                };
                if ask.send(asked).is_err() {
                    return funds::Funds::default();
                }
                given.recv().unwrap_or_default()
            },
        )?;
        let Some((scanned, merged)) = once else {
            return Ok(None);
        };
        let batch = ledger.batch(&name)?.ok_or_else(|| {
            OpError::Ledger(ledger::LedgerError::Corrupt(format!(
                "batch {name} vanished after it was committed"
            )))
        })?;
        let written = lines.and_then(|l| l.finish(scanned.rows));
        Ok(Some(MergedFile {
            scanned,
            batch,
            merged,
            written,
            likely: (Vec::new(), 0),
            written_now: true,
        }))
    }
}

/// Says how many rows the file has, and how many are valid.
fn tell_validated(rows: usize, valid_rows: usize, reporter: &Reporter) {
    reporter.line(format!(
        "validated: {rows} rows, {valid_rows} valid, {} with problems",
        rows - valid_rows
    ));
}

/// The first pass over the file: every row checked, nothing written. Returns what it found, the
/// balances the file draws on (card-paid rows draw on none) and the kinds of its converted
/// rows (to price before the pre-flight). An
/// invalid file stops here (unless `--skip-invalid`), and so does a file whose rows other
/// batches of the ledger have (unless `--allow-repeats` or `--skip-repeats`: [`repeats`]).
fn first_pass(
    run: &RunContext,
    ledger: &Ledger,
    reporter: &Reporter,
) -> Result<(scan::Scan, Drawn, Repeats), OpError> {
    let RunContext {
        opts,
        catalog: products,
        checks: options,
        earlier,
    } = run;
    let batch_name = opts.batch_name();
    let index = CatalogIndex::new(products.to_vec());
    let by_code: std::collections::HashMap<&str, &Product> =
        products.iter().map(|p| (p.code.as_str(), p)).collect();
    let mut drawn = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    let digest_of = opts
        .expect_digest
        .as_ref()
        .map(|_| (batch_name.as_str(), opts.environment.name()));
    let started = Instant::now();
    let mut checker = repeats::Checker::new(ledger, earlier, opts.on_repeat);
    let mut lookup_error = None;
    let scanned = scan::scan(
        &opts.input,
        &opts.input_options(),
        &index,
        options,
        digest_of,
        |spec| {
            let card = funds::row_card(spec, opts.card_id.as_deref());
            if card.is_none() && !drawn.contains(&spec.payment_currency) {
                drawn.insert(spec.payment_currency.clone());
            }
            if funds::is_converted(spec, card) {
                kinds.insert(funds::ConvertedKind::of(spec, &by_code));
            }
            if lookup_error.is_none()
                && let Err(e) = checker.see(spec)
            {
                lookup_error = Some(e);
            }
        },
    )
    .map_err(|p| OpError::Invalid {
        input: opts.input.clone(),
        problems: Problems::from_iter([p]),
    })?;
    if let Some(e) = lookup_error {
        return Err(e.into());
    }
    tracing::info!("first pass (read and check): {:.2?}", started.elapsed());
    tell_validated(scanned.rows, scanned.valid_rows, reporter);
    if !scanned.problems.is_empty() && !opts.skip_invalid {
        return Err(OpError::Invalid {
            input: opts.input.clone(),
            problems: scanned.problems,
        });
    }
    let repeats = checker.finish(&scanned.file_hash)?;
    tell_repeats(&repeats, reporter);
    if repeats.refuses() {
        return Err(repeats.refusal(&batch_name));
    }
    Ok((
        scanned,
        (drawn.into_iter().collect(), kinds.into_iter().collect()),
        repeats,
    ))
}

/// The balances a file draws on, and the kinds of its converted rows.
type Drawn = (Vec<String>, Vec<funds::ConvertedKind>);

/// In-doubt intents older than the window are looked up at the service before any re-send.
async fn reconcile_stale(
    ledger: &mut Ledger,
    client: &Client,
    batch: &ledger::BatchRecord,
    opts: &RunOptions,
    reporter: &Reporter,
) -> Result<(), OpError> {
    let (_, stale) = submit::count_intents(ledger, batch.id, opts.in_doubt_window)?;
    if stale == 0 {
        return Ok(());
    }
    reporter.line(format!(
        "{stale} in-doubt orders are older than the in-doubt window: reconciling with the service first"
    ));
    let r = reconcile::reconcile(
        ledger,
        &client.with_deadline(deadline_in(opts.poll_timeout)),
        batch,
        opts.in_doubt_window,
        crate::settings::settle_override(),
        reconcile::Apply::Repair,
    )
    .await?;
    let kept = if r.kept_in_doubt.is_empty() {
        String::new()
    } else {
        format!(
            ", {} kept in doubt (orders of the account still processing cannot be attributed yet)",
            r.kept_in_doubt.len()
        )
    };
    reporter.line(format!(
        "reconciled: {} found at the service and recorded, {} never created (will be sent){kept}",
        r.adopted.len(),
        r.absent.len()
    ));
    if !r.retired.is_empty() {
        reporter.alert(format!(
            "{} in-doubt orders were never created and the service answers their keys only with the server error it keeps for them: their rows are REJECTED; `paybatch retry --batch {}{}`, then this command again, sends them under new keys",
            r.retired.len(),
            crate::text::shell_word(&batch.name),
            opts.repeated_flags()
        ));
    }
    Ok(())
}

/// Sends the intents while polling the accepted orders: each order is looked at from the
/// moment the service accepts it, so a batch sent in one burst is known seconds after its last
/// order finishes. Returns why the run is incomplete, if it is.
async fn send_and_poll(
    context: &Arc<SendContext>,
    batch_id: i64,
    opts: &RunOptions,
    written_now: bool,
) -> Result<Option<String>, OpError> {
    if opts.plan_only {
        return Ok(Some(
            "--plan-only: the orders are planned, not sent".to_string(),
        ));
    }
    // A damaged stored row of an order to send is met now, before anything is sent (a batch
    // this run's one pass wrote whole has no row stored before it, and the ledger's lock
    // kept every other writer out since).
    if !written_now {
        context
            .with_ledger(move |l| l.check_rows_to_send(batch_id))
            .await?;
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    *context.accepted.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    let polling = poll::poll_all(context, batch_id, opts, Some(rx));
    let sending = submit::submit_all(context, batch_id, opts);
    tokio::pin!(polling, sending);
    // The polling is polled first: it reads the orders the ledger already has as accepted
    // before the first send.
    let sent = tokio::select! {
        biased;
        polled = &mut polling => {
            // The polling ends before the sending only when it must stop the run (a refused
            // key): the sends in flight stay in doubt and the next run resolves them.
            context.sending_ended();
            return polled;
        }
        sent = &mut sending => sent,
    };
    context.sending_ended();
    match sent? {
        // The service kept the sending waiting past its patience: the orders it accepted are
        // still polled (the order list is not rate limited like creation), up to --poll-timeout,
        // and the run ends incomplete for the sending's reason.
        Some(reason) => polling.await.map(|_| Some(reason)),
        None => polling.await,
    }
}

/// After the sending and polling: what the service stopped, the result file, the summary.
async fn finish(
    context: &SendContext,
    client: &Client,
    (batch, aside): (&ledger::BatchRecord, Option<Ledger>),
    products: &[Product],
    scanned: &scan::Scan,
    opts: &RunOptions,
    Ending {
        incomplete,
        written,
        likely,
    }: Ending,
) -> Result<RunSummary, OpError> {
    let stopped_by_service = context
        .stopped
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    // The balances the service found too low, as they are now (read before the ledger is
    // taken: no lock is held across a request).
    let mut balances_now = BTreeMap::new();
    for what in stopped_by_service.keys() {
        if let ServiceStop::Balance(currency) = what {
            let balance = client.balance(currency).await.map(|b| b.balance);
            balances_now.insert(currency.clone(), balance.ok());
        }
    }
    // The ledger's lock is held while the result file and the summary are read (no step of the
    // ledger's thread runs in between: both read the run's end), not across a request.
    let (stopped, written, summary) = {
        let ledger = context.ledger();
        let stopped = if stopped_by_service.is_empty() {
            Vec::new()
        } else {
            let flags = opts.repeated_flags();
            let (stops, balances) = (&stopped_by_service, &balances_now);
            funds::stopped_lines(&ledger, batch, products, stops, balances, &flags)?
        };
        let result_path = result_path(opts);
        let result_format = ledger.result_format(batch.id)?;
        let summary_path = result_path.clone();
        let summarizing = move |ledger: &Ledger| {
            let summing = Instant::now();
            let summary = summarize(
                ledger,
                batch.id,
                &batch.name,
                &opts.environment,
                summary_path,
                incomplete,
            );
            tracing::info!("summary: {:.2?}", summing.elapsed());
            summary
        };
        let writing = || {
            let started = Instant::now();
            let written = match written {
                // Only planned, nothing changed since: the file written while the file was read.
                Some(out) if opts.plan_only && stopped.is_empty() => {
                    out.finish().map_err(|e| OpError::Io {
                        path: result_path.clone(),
                        message: e.to_string(),
                    })
                }
                _ => write_result_file(
                    &ledger,
                    batch.id,
                    &scanned.headers,
                    &result_path,
                    result_format.format,
                ),
            };
            tracing::info!("result file: {:.2?}", started.elapsed());
            written
        };
        let (written, summary) = match aside {
            Some(aside) => beside(writing, move || summarizing(&aside)),
            None => {
                let written = writing();
                (written, summarizing(&ledger))
            }
        };
        (stopped, written, summary)
    };
    written?;
    Ok(RunSummary {
        stopped,
        likely_repeats: likely.0.into_iter().map(LikelyPaid::from).collect(),
        likely_repeats_total: likely.1,
        ..summary?
    })
}

/// Runs `main` on this thread and `aside` on a thread of its own meanwhile (after `main` when
/// no thread can be started), and returns both results once both have run. A panic of either
/// is a panic here.
fn beside<A, B: Send>(main: impl FnOnce() -> A, aside: impl FnOnce() -> B + Send) -> (A, B) {
    let aside = Mutex::new(Some(aside));
    let take = || aside.lock().unwrap_or_else(|p| p.into_inner()).take();
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new()
            .name("paybatch-summary".into())
            .spawn_scoped(scope, || take().map(|f| f()));
        let a = main();
        let b = match started {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => None,
        };
        // The thread could not start: `aside` is still here to run.
        match b.or_else(|| take().map(|f| f())) {
            Some(b) => (a, b),
            None => unreachable!("`aside` runs on its thread or here"),
        }
    })
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
) -> Result<(), OpError> {
    reporter.line(format!(
        "batch {} was rebuilt while some orders were still processing: reconciling before anything is planned",
        batch.name
    ));
    let settle = crate::settings::settle_override();
    let window = opts.in_doubt_window;
    let repair = reconcile::Apply::Repair;
    let r = reconcile::reconcile(ledger, client, batch, window, settle, repair).await?;
    if r.unattributed.is_empty() {
        return Ok(());
    }
    Err(OpError::Unsettled {
        message: format!(
            "{} orders of the account are still processing, or were answered without naming their rows, and cannot be attributed yet; they may hold rows of batch {} that the rebuilt ledger has without an order, so nothing was planned or sent",
            r.unattributed.len(),
            batch.name
        ),
        help: "run the same command again once those orders finish or are answered whole (paybatch reconcile shows them as unattributed)".into(),
    })
}

impl From<repeats::LikelyRepeat> for LikelyPaid {
    fn from(r: repeats::LikelyRepeat) -> Self {
        LikelyPaid {
            reference: r.reference,
            line: r.line,
            batch: r.batch,
            earlier_reference: r.earlier_reference,
            completed_at: r.completed_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RunOptions, beside, file_id, open_aside};

    /// The summary's connection is opened only to the file the run opened: a ledger whose path
    /// names another file since (moved, or a link pointed elsewhere) gets none.
    #[cfg(unix)]
    #[test]
    fn the_summarys_connection_is_opened_only_to_the_file_the_run_opened() {
        let dir = tempfile::tempdir().expect("dir");
        let mut opts = RunOptions::new("rows.csv");
        opts.ledger = dir.path().join("ledger.db");
        let first = crate::ledger::Ledger::open(&opts.ledger).expect("ledger");
        let opened = file_id(&opts.ledger);
        assert!(opened.is_some());
        assert!(open_aside(&opts, opened).is_some(), "the same file");
        std::fs::rename(&opts.ledger, dir.path().join("moved.db")).expect("moved");
        assert!(open_aside(&opts, opened).is_none(), "moved away");
        assert!(!opts.ledger.exists(), "nothing made in its place");
        let other = dir.path().join("other.db");
        drop(crate::ledger::Ledger::open(&other).expect("other"));
        std::os::unix::fs::symlink(&other, &opts.ledger).expect("link");
        assert!(
            open_aside(&opts, opened).is_none(),
            "a link to another file"
        );
        assert!(
            open_aside(&opts, None).is_none(),
            "a file that could not be told"
        );
        drop(first);
    }

    /// The summary's side runs on a thread of its own while this one works, and both results
    /// come back: each side waits for the other before either returns.
    #[test]
    fn beside_runs_the_second_on_a_thread_of_its_own_and_returns_both() {
        let (tx, rx) = std::sync::mpsc::channel();
        let here = std::thread::current().id();
        let (a, b) = beside(
            || {
                // Waits for the other side: only a thread of its own can answer meanwhile.
                let seen = rx.recv_timeout(std::time::Duration::from_secs(10));
                seen.expect("the other side ran meanwhile")
            },
            move || {
                let there = std::thread::current();
                tx.send(there.id()).expect("sent");
                there.name().map(str::to_string)
            },
        );
        assert_ne!(a, here, "the second side ran on another thread");
        assert_eq!(b.as_deref(), Some("paybatch-summary"));
    }
}
