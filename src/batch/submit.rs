//! Sending: every intent of the batch goes out with its recorded key and exact bytes, as many
//! in flight as `--concurrency` allows and as fast as the pacer lets (the service's sliding
//! minute), each send marked in the ledger before it leaves; the answer is recorded, a refusal
//! recorded with its reason, and a transient failure retried with the same key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::models::OrderStatus;
use crate::api::retry;
use crate::api::{ApiError, CreateOutcome};
use crate::failpoint;
use crate::ledger::{self, Ledger, LedgerError, OrderRecord, OrderState, Transition};

use super::in_doubt;
use super::options::RunOptions;
use super::pace::{self, Pacer};
use super::record;
use super::send_context::{SendContext, record_terminal, service_stop};
use crate::ops::error::{OpError, is_auth_error};

/// Intents read from the ledger at a time (a batch can hold a million).
const INTENT_CHUNK: i64 = 4096;
/// Sends whose answers wait to be recorded (on the ledger's thread, behind each other), at
/// most, as a multiple of the requests in flight: a request is over when its answer comes, and
/// the next one starts while that answer is recorded; this bounds what waits meanwhile.
const RECORDS_BEHIND: usize = 4;

/// Visits the batch's intents a chunk at a time, in id order.
pub fn each_intent(
    ledger: &Ledger,
    batch_id: i64,
    mut visit: impl FnMut(ledger::IntentHead) -> Result<(), OpError>,
) -> Result<(), OpError> {
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
pub fn count_intents(
    ledger: &Ledger,
    batch_id: i64,
    window: Duration,
) -> Result<(usize, usize), OpError> {
    let (mut all, mut stale_ones) = (0, 0);
    each_intent(ledger, batch_id, |head| {
        all += 1;
        if in_doubt::too_long(head.sends, head.first_sent_at.as_deref(), window) {
            stale_ones += 1;
        }
        Ok(())
    })?;
    Ok((all, stale_ones))
}

/// When this ledger's orders were sent within the service's rate window, as instants of this
/// process: they count against the window of this run.
pub fn recent_sends(ledger: &Ledger) -> Result<Vec<tokio::time::Instant>, OpError> {
    let window = chrono::Duration::from_std(pace::WINDOW + Duration::from_secs(1))
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

/// What one order's submission came to in this run.
enum Sent {
    Recorded,
    /// No usable answer: the order stays in doubt. `why` follows the rows' names (` got no
    /// usable answer after 8 tries`), the same for every order it stops; `detail` is this
    /// order's last answer; `kept` when the service may keep its error under the key.
    GaveUp {
        why: String,
        detail: String,
        kept: bool,
    },
    /// Not sent: the service stopped what it is paid by earlier in this run.
    Stopped,
    /// Not sent: another ledger's order, learned while this run sent, pays one of its rows
    /// ([`super::watch::ServiceWatch`]).
    Held,
    /// Refused, naming some of its items: recorded, and its other rows planned again, by the
    /// sending ([`super::replan`]).
    ItemsRefused(ApiError),
    Stop(OpError),
}

/// Rows named in a warning at most; the others are counted.
const NAMED_ROWS: usize = 5;

/// The rows of some orders, for a person: `order of row R-1`, `orders of rows and 3
/// more (4 orders)`. `references` are the first rows (at most `NAMED_ROWS` are named), `rows`
/// how many there are in all.
pub fn orders_of_rows(references: &[String], rows: usize, orders: usize) -> String {
    let named: Vec<&str> = references
        .iter()
        .take(NAMED_ROWS)
        .map(String::as_str)
        .collect();
    let more = rows.saturating_sub(named.len());
    let rows = match (named.len(), more) {
        (0, _) => "rows not known to the ledger".to_string(),
        (1, 0) => format!("row {}", named[0]),
        (_, 0) => format!("rows {}", named.join(", ")),
        (_, more) => format!("rows {} and {more} more", named.join(", ")),
    };
    if orders == 1 {
        format!("order of {rows}")
    } else {
        format!("orders of {rows} ({orders} orders)")
    }
}

/// Orders of one kind the run could not finish sending, gathered into one warning.
#[derive(Default)]
struct Unsent {
    orders: usize,
    rows: usize,
    /// The first rows' references.
    references: Vec<String>,
    /// The first order's last answer.
    detail: String,
    kept: bool,
}

impl Unsent {
    fn add(&mut self, context: &SendContext, order_id: i64) {
        self.orders += 1;
        if let Ok(rows) = context.with_ledger_blocking(|l| l.rows_of_order(order_id)) {
            self.rows += rows.len();
            for row in rows {
                if self.references.len() < NAMED_ROWS {
                    self.references.push(row.reference);
                }
            }
        }
    }

    /// `order(s) of row(s) ...`.
    fn named(&self) -> String {
        orders_of_rows(&self.references, self.rows, self.orders)
    }
}

/// What the sending of a batch keeps track of.
struct Sending<'a> {
    context: &'a Arc<SendContext>,
    batch_id: i64,
    opts: &'a RunOptions,
    limiter: Arc<Pacer>,
    tasks: tokio::task::JoinSet<(i64, Sent)>,
    /// Requests in flight (`--concurrency`): a send holds a permit until its answer comes,
    /// not while the answer is recorded ([`RECORDS_BEHIND`]).
    requests: Arc<tokio::sync::Semaphore>,
    /// Intents read from the ledger (a chunk at a time: ids and send records only; each order's
    /// body is read when it is sent), not started yet.
    waiting: std::collections::VecDeque<i64>,
    after: i64,
    read_all: bool,
    stop: Option<OpError>,
    /// Orders without a usable answer, per reason.
    gave_up: BTreeMap<String, Unsent>,
    /// In-doubt orders older than the in-doubt window: not re-sent before reconciling.
    stale: Unsent,
    not_sent: usize,
    /// Orders held back, not sent: rows another ledger paid while this run sent.
    held: Vec<i64>,
    /// New orders of the rows of refused orders ([`super::replan`]), sent in this run too.
    replanned: usize,
}

impl<'a> Sending<'a> {
    /// Nothing sent yet, pacing its sends by `limiter`.
    fn new(
        context: &'a Arc<SendContext>,
        batch_id: i64,
        opts: &'a RunOptions,
        limiter: Arc<Pacer>,
    ) -> Self {
        Sending {
            context,
            batch_id,
            opts,
            limiter,
            tasks: tokio::task::JoinSet::new(),
            requests: Arc::new(tokio::sync::Semaphore::new(opts.in_flight())),
            waiting: std::collections::VecDeque::new(),
            after: 0,
            read_all: false,
            stop: None,
            gave_up: BTreeMap::new(),
            stale: Unsent::default(),
            not_sent: 0,
            held: Vec::new(),
            replanned: 0,
        }
    }

    /// Whether a send may start once a request's permit is free: the sending goes on, intents
    /// wait, and the answers not yet recorded are fewer than [`RECORDS_BEHIND`] times the
    /// requests in flight.
    fn may_start(&self) -> bool {
        self.stop.is_none()
            && !self.context.patience.is_exhausted()
            && (!self.waiting.is_empty() || !self.read_all)
            && self.tasks.len() < self.opts.in_flight() * RECORDS_BEHIND
    }

    /// Starts sends until `--concurrency` requests are in flight (none once the service has
    /// kept the run waiting too long, or the run must stop).
    fn fill(&mut self) -> Result<(), OpError> {
        let tries = self.opts.max_send_tries.max(1);
        while self.may_start() {
            if self.waiting.is_empty() {
                self.read_chunk()?;
                continue;
            }
            let Ok(request) = Arc::clone(&self.requests).try_acquire_owned() else {
                break;
            };
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            let context = self.context.clone();
            let limiter = self.limiter.clone();
            self.tasks.spawn(async move {
                // Ahead of the records waiting their turn, as the mark before the send: an
                // intent never changes once committed, and the send waits for it.
                let order = match context.with_ledger_first(move |l| l.order(id)).await {
                    Ok(Some(order)) => order,
                    Ok(None) => {
                        let e =
                            LedgerError::Corrupt(format!("order {id} vanished from the ledger"));
                        return (id, Sent::Stop(OpError::Ledger(e)));
                    }
                    Err(e) => return (id, Sent::Stop(e.into())),
                };
                (
                    id,
                    submit_one(&context, &limiter, (order, request), tries).await,
                )
            });
        }
        Ok(())
    }

    fn read_chunk(&mut self) -> Result<(), OpError> {
        let (batch_id, after) = (self.batch_id, self.after);
        let chunk = self
            .context
            .with_ledger_blocking(|l| l.intent_heads(batch_id, after, INTENT_CHUNK))?;
        // A chunk short of full is the last: no read waits for an empty one (a read that would
        // stop the sending for as long as the ledger's thread waits for a ledger another
        // program holds locked). An intent made later (the rows of a refused order planned
        // again) is queued where it is made.
        self.read_all = chunk.len() < INTENT_CHUNK as usize;
        for head in chunk {
            self.after = head.id;
            let window = self.opts.in_doubt_window;
            if in_doubt::too_long(head.sends, head.first_sent_at.as_deref(), window) {
                self.stale.add(self.context, head.id);
            } else {
                self.waiting.push_back(head.id);
            }
        }
        Ok(())
    }

    /// Takes the answer of one send.
    fn joined(
        &mut self,
        joined: Result<(i64, Sent), tokio::task::JoinError>,
    ) -> Result<(), OpError> {
        match joined {
            Ok((_, Sent::Recorded)) => {}
            Ok((_, Sent::Stopped)) => self.not_sent += 1,
            Ok((id, Sent::Held)) => self.held.push(id),
            Ok((id, Sent::ItemsRefused(e))) => self.items_refused(id, &e),
            Ok((id, Sent::GaveUp { why, detail, kept })) => {
                let unsent = self.gave_up.entry(why).or_default();
                unsent.kept |= kept;
                if unsent.detail.is_empty() {
                    unsent.detail = detail;
                }
                unsent.add(self.context, id);
            }
            Ok((_, Sent::Stop(e))) => {
                if self.stop.is_none() {
                    self.stop = Some(e);
                    self.tasks.abort_all();
                }
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                return Err(OpError::Refused {
                    message: format!("a submission task failed: {e}"),
                    help: String::new(),
                });
            }
        }
        Ok(())
    }

    /// Records a refusal that names items of order `id`, its other rows in a new order sent in
    /// this run ([`super::replan`]).
    fn items_refused(&mut self, id: i64, e: &ApiError) {
        match super::replan::record(self.context, id, e) {
            Ok(Some(new)) => {
                self.replanned += 1;
                // An intent read already is not read again: the new one is queued here.
                if self.read_all {
                    self.waiting.push_back(new);
                }
            }
            Ok(None) => {}
            Err(e) => {
                if self.stop.is_none() {
                    self.stop = Some(e);
                    self.tasks.abort_all();
                }
            }
        }
    }

    /// Sends every intent, as many at once as the options allow; returns what was done, or
    /// why the sending stopped.
    async fn run(mut self, phase: super::progress::Phase) -> Result<Self, OpError> {
        loop {
            self.fill()?;
            // A send that got its answer frees its request while the answer is recorded: the
            // next send starts then, not once the record is done.
            let joined = if self.may_start() {
                let requests = Arc::clone(&self.requests);
                tokio::select! {
                    joined = self.tasks.join_next() => joined,
                    // Never closed: a permit always comes; given back for `fill` to take.
                    _freed = requests.acquire_owned() => continue,
                }
            } else {
                self.tasks.join_next().await
            };
            let Some(joined) = joined else {
                break;
            };
            phase.inc(1);
            self.joined(joined)?;
        }
        phase.finish();
        match self.stop.take() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }

    /// One warning per reason the run could not finish sending some orders.
    fn warn_unsent(&self) {
        let reporter = &self.context.reporter;
        if self.stale.orders > 0 {
            reporter.warn(format!(
                "{} sent longer ago than the in-doubt window without an answer recorded: not re-sent blindly; run `paybatch reconcile --batch {}{}`",
                self.stale.named(),
                crate::text::shell_word(&self.opts.batch_name()),
                self.opts.repeated_flags()
            ));
        }
        for (why, unsent) in &self.gave_up {
            let (pronoun, verb, keys) = if unsent.orders == 1 {
                ("it", "stays", "the same key")
            } else {
                ("they", "stay", "their keys")
            };
            let kept = if unsent.kept {
                "; if the service keeps that error under a key, reconciliation gives the key up once the in-doubt window has passed, and `paybatch retry` sends its rows under a new one"
            } else {
                ""
            };
            reporter.warn(format!(
                "{}{why} ({}{}); {pronoun} {verb} in doubt and {} re-sent with {keys} on the next run{kept}",
                unsent.named(),
                if unsent.orders == 1 { "" } else { "the first: " },
                unsent.detail,
                if unsent.orders == 1 { "is" } else { "are" },
            ));
        }
    }
}

/// Sends every intent of the batch. Returns why the run is incomplete when the service kept it
/// waiting past its patience ([`super::send_context::Patience`]): the orders not sent stay intents for the next run.
pub async fn submit_all(
    context: &Arc<SendContext>,
    batch_id: i64,
    opts: &RunOptions,
) -> Result<Option<String>, OpError> {
    let window = opts.in_doubt_window;
    let (intents, stale_ones) = context
        .with_ledger(move |l| count_intents(l, batch_id, window))
        .await?;
    if intents == 0 {
        return Ok(None);
    }
    let earlier = context.with_ledger(|l| recent_sends(l)).await?;
    if !earlier.is_empty() {
        context.reporter.line(format!(
            "{} orders sent from this ledger in the last minute count against the service's limit of {} a minute",
            earlier.len(),
            opts.order_rate
        ));
    }
    let count = intents - stale_ones;
    let phase = context.reporter.phase(count as u64, "submit");
    let sent_before: Vec<std::time::Instant> = earlier.iter().map(|t| t.into_std()).collect();
    phase.limit(opts.order_rate, &sent_before);
    context.reporter.line(format!("submitting {count} orders"));
    let limiter = Pacer::new(opts.order_rate, &earlier);
    let ahead = read_ahead_while_sending(context, &limiter);
    let sending = Sending::new(context, batch_id, opts, limiter)
        .run(phase)
        .await?;
    drop(ahead);
    sending.warn_unsent();
    warn_sent_before_the_hold(context, &sending.held);
    let gave_up: usize = sending.gave_up.values().map(|u| u.orders).sum();
    if !sending.held.is_empty() {
        return Ok(Some(held_back(context, &sending.held, opts)));
    }
    if context.patience.is_exhausted() {
        return Ok(Some(format!(
            "the service kept asking to wait (429, server errors, no answer) for longer than --poll-timeout {}s without an answer recorded; {gave_up} orders were sent without an answer, the others not yet",
            opts.poll_timeout.as_secs()
        )));
    }
    let not_sent = sending.not_sent;
    tell_reads(context);
    let replanned = sending.replanned;
    context.reporter.line(format!(
        "submitted: {} orders answered{}, {gave_up} without an answer yet{}",
        count + replanned - gave_up - not_sent,
        if replanned > 0 {
            format!(" ({replanned} of them the rows of refused orders planned again)")
        } else {
            String::new()
        },
        if not_sent > 0 {
            format!(", {not_sent} not sent (see below)")
        } else {
            String::new()
        }
    ));
    Ok(None)
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The reads of the order list ahead of the service's window ([`read_ahead_of_the_window`]),
/// when the run reads the list while sending. They end with the sending, however it ends (the
/// task is dropped with it when the run is stopped).
fn read_ahead_while_sending(
    context: &Arc<SendContext>,
    limiter: &Arc<Pacer>,
) -> Option<AbortOnDrop> {
    context.watch.as_ref().map(|_| {
        AbortOnDrop(tokio::spawn(read_ahead_of_the_window(
            Arc::clone(context),
            Arc::clone(limiter),
        )))
    })
}

/// A wait for the service's window this long or longer has the order list read ahead of it.
const READ_AHEAD_OF: Duration = Duration::from_secs(3);
/// A send that waited [`READ_AHEAD_OF`] or longer goes after a read begun this recently: longer
/// than [`READ_AHEAD_BY`], so that the read ahead of the window serves the sends it lets go.
const READ_FRESH: Duration = Duration::from_secs(2);
/// How long before the window lets the next send go the read ahead starts.
const READ_AHEAD_BY: Duration = Duration::from_secs(1);

/// While the sending goes on: when the next send must wait for the service's window (a large
/// batch's second minute), reads the order list shortly before the window lets it go
/// ([`super::watch::ServiceWatch::read_ahead`]): the sends that waited then go after a read
/// at most a second older than their wait, and the read due after the next sends does not
/// hold them up. A read that fails is said at `-v`, and the next first send reads again.
async fn read_ahead_of_the_window(context: Arc<SendContext>, limiter: Arc<Pacer>) {
    let Some(watch) = context.watch.as_ref() else {
        return;
    };
    loop {
        let now = tokio::time::Instant::now();
        match limiter.free_at() {
            Some(free) if free >= now + READ_AHEAD_OF => {
                tokio::time::sleep_until(free - READ_AHEAD_BY).await;
                if let Err(e) = watch.read_ahead(&shared(&context)).await {
                    tracing::info!("the order list read ahead of the window: {e}");
                }
                // One read for this wait.
                tokio::time::sleep_until(free).await;
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// What the reads of the service's order list while sending found, when there were any.
fn tell_reads(context: &SendContext) {
    let Some(watch) = context.watch.as_ref().filter(|w| w.reads() > 0) else {
        return;
    };
    context.reporter.line(format!(
        "the service's order list was read {} more time{} while sending: {}",
        watch.reads(),
        if watch.reads() == 1 { "" } else { "s" },
        match watch.allowed() {
            0 => "nothing of this batch paid elsewhere".to_string(),
            n => format!(
                "{n} orders holding rows another ledger paid were sent anyway (--allow-repeats)"
            ),
        }
    ));
}

/// Orders a read found another ledger's orders paying after this run had sent them (two
/// machines sending the same rows between two reads): both were paid; said loudly, for a
/// person to settle.
fn warn_sent_before_the_hold(context: &SendContext, not_sent: &[i64]) {
    let Some(watch) = &context.watch else {
        return;
    };
    let not_sent: std::collections::HashSet<i64> = not_sent.iter().copied().collect();
    // Answered as made: neither still an intent nor refused or failed.
    let made = |id: i64| {
        let order = context.with_ledger_blocking(|l| l.order(id));
        order.ok().flatten().is_some_and(|o| {
            !matches!(
                o.state,
                OrderState::Intent
                    | OrderState::Rejected
                    | OrderState::Failed
                    | OrderState::Cancelled
            )
        })
    };
    let sent: Vec<super::watch::HeldRow> = watch
        .held()
        .into_iter()
        .filter(|(id, _)| !not_sent.contains(id) && made(*id))
        .map(|(_, r)| r)
        .collect();
    if let Some(first) = sent.first() {
        context.reporter.warn(format!(
            "ALERT: {} orders of this run were sent before the service's order list showed another ledger's orders paying their rows (e.g. {} in order {}): those rows may be paid twice; run `paybatch reconcile` for this batch and check with the other ledger's owner",
            sent.len(),
            crate::text::escape(&first.reference),
            crate::text::escape(&first.service_order_id)
        ));
    }
}

/// Why a run that held back orders ends incomplete: which rows, and what the next run does.
fn held_back(context: &SendContext, not_sent: &[i64], opts: &RunOptions) -> String {
    let orders = not_sent.len();
    let not_sent: std::collections::HashSet<i64> = not_sent.iter().copied().collect();
    let held: Vec<(i64, super::watch::HeldRow)> = context
        .watch
        .as_ref()
        .map(|w| w.held())
        .unwrap_or_default()
        .into_iter()
        .filter(|(id, _)| not_sent.contains(id))
        .collect();
    let named: Vec<String> = held
        .iter()
        .take(NAMED_ROWS)
        .map(|(_, r)| {
            format!(
                "{} (order {})",
                crate::text::escape(&r.reference),
                crate::text::escape(&r.service_order_id)
            )
        })
        .collect();
    format!(
        "{orders} orders held back, not sent: another ledger's orders, seen while this run sent, pay their rows: {}{}. The next run names them as repeats and pays none of them unless told (--skip-repeats pays the rest; `paybatch reconcile --batch {}` settles any sent before without an answer)",
        named.join(", "),
        if held.len() > named.len() {
            ", ..."
        } else {
            ""
        },
        crate::text::shell_word(&opts.batch_name())
    )
}

/// What a read of the service's order list while sending uses of the send context.
fn shared(context: &SendContext) -> super::watch::Shared<'_> {
    super::watch::Shared {
        ledger: &context.ledger,
        client: &context.client,
        reporter: &context.reporter,
        sent: &context.sent,
        patience: context.patience.timeout,
    }
}

/// The read of the service's order list due before a send (the first try of an order, or a
/// try after a failure at `failed_at`), and whether it holds the order back: what stops the
/// send, if anything does.
async fn read_before_send(
    context: &SendContext,
    order: &OrderRecord,
    attempt: u32,
    failed_at: Option<tokio::time::Instant>,
) -> Option<Sent> {
    let watch = context.watch.as_ref()?;
    let sent = context.sent.load(std::sync::atomic::Ordering::SeqCst);
    if (attempt == 0 || failed_at.is_some())
        && let Err(e) = watch.before_send(&shared(context), sent, failed_at).await
    {
        return Some(Sent::Stop(e));
    }
    watch.holds(order.id).then_some(Sent::Held)
}

/// The read of the service's order list due when the pacer lets a send go: the pacer may let
/// it go while the read ahead of the window is still under way (the send goes after that read),
/// or after that read failed (the send reads again, as the next first send does). A send that
/// waited [`READ_AHEAD_OF`] or longer (the window, a pause after a 429) would go on a view of
/// the list older than its wait: it reads again unless a read began in the last
/// [`READ_FRESH`] (one read serves every send that goes within that time, the read ahead of the
/// window included). What stops the send, if anything does: that read, or a stop of its order
/// asked for before or during it.
async fn read_after_the_wait(
    context: &SendContext,
    order: &OrderRecord,
    waited_from: tokio::time::Instant,
) -> Option<Sent> {
    if context.is_stopped(order) {
        return Some(Sent::Stopped);
    }
    let watch = context.watch.as_ref()?;
    let sent = context.sent.load(std::sync::atomic::Ordering::SeqCst);
    let shared = shared(context);
    let mut read = watch.before_send(&shared, sent, None).await;
    if read.is_ok() && waited_from.elapsed() >= READ_AHEAD_OF {
        let fresh_from = tokio::time::Instant::now()
            .checked_sub(READ_FRESH)
            .unwrap_or(waited_from);
        read = watch.before_send(&shared, sent, Some(fresh_from)).await;
    }
    if let Err(e) = read {
        return Some(Sent::Stop(e));
    }
    context.is_stopped(order).then_some(Sent::Stopped)
}

/// Sends one order (its recorded key and bytes) until the service answers it, refuses it, or
/// the tries or the run's patience run out.
async fn submit_one(
    context: &SendContext,
    limiter: &Arc<Pacer>,
    (order, request): (OrderRecord, tokio::sync::OwnedSemaphorePermit),
    tries: u32,
) -> Sent {
    let mode = order.mode.execution();
    let order_id = order.id;
    let mut last = String::new();
    let mut server_error = false;
    let mut failed_at = None;
    for attempt in 0..tries {
        if let Some(stop) = read_before_send(context, &order, attempt, failed_at.take()).await {
            return stop;
        }
        // Counted against the window until a minute after the request ends (`slot` dropped).
        let waited_from = tokio::time::Instant::now();
        let slot = limiter.ready().await;
        if let Some(stop) = read_after_the_wait(context, &order, waited_from).await {
            return stop;
        }
        // A read made by another send while this one waited for its slot may have held it:
        // looked at again with nothing awaited between here and the send.
        if context.watch.as_ref().is_some_and(|w| w.holds(order.id)) {
            return Sent::Held;
        }
        if let Err(e) = context
            .with_ledger_first(move |l| l.mark_sending(order_id))
            .await
        {
            return Sent::Stop(e.into());
        }
        if attempt == 0 {
            context
                .sent
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        failpoint::hit("after_mark_sending");
        let result = context
            .client
            .create_order(&order.idempotency_key, &order.body, mode)
            .await;
        slot.ended();
        failpoint::hit("after_send");
        match result {
            Ok(outcome) => {
                // The request is over: the next send may start while this answer is recorded.
                drop(request);
                let recorded = record_created(context, &order, outcome).await;
                failpoint::hit("after_record");
                return answered(context, recorded);
            }
            Err(e) if e.is_transient() => {
                failed_at = Some(tokio::time::Instant::now());
                last = format!("{}: {}", e.kind(), e.message());
                server_error = e.status().is_some_and(|s| (500..=599).contains(&s));
                let pause = Pause {
                    attempt,
                    last_try: attempt + 1 >= tries,
                };
                if let Some(sent) = wait_to_resend(context, limiter, &order, &e, pause, &last).await
                {
                    return sent;
                }
            }
            Err(e) if !super::replan::items_named(&e).is_empty() => {
                return Sent::ItemsRefused(e);
            }
            Err(e) => return refused(context, &order, e).await,
        }
    }
    Sent::GaveUp {
        why: format!(" got no usable answer after {tries} tries"),
        detail: last,
        kept: server_error,
    }
}

/// An answer recorded (or the ledger failing to record it).
fn answered(context: &SendContext, recorded: Result<(), OpError>) -> Sent {
    match recorded {
        Ok(()) => {
            context.patience.progress();
            Sent::Recorded
        }
        Err(e) => Sent::Stop(e),
    }
}

/// Which try of an order failed for a moment.
#[derive(Clone, Copy)]
struct Pause {
    attempt: u32,
    last_try: bool,
}

/// After a transient failure (5xx, 429, no answer): records it, then waits before the next try
/// (the service's `Retry-After`, at least 5 s after a 429, exponential backoff otherwise:
/// [`retry::SENDS`]).
/// Returns what the order came to when it must not be tried again in this run.
async fn wait_to_resend(
    context: &SendContext,
    limiter: &Pacer,
    order: &OrderRecord,
    e: &ApiError,
    pause: Pause,
    last: &str,
) -> Option<Sent> {
    if let Err(le) = context
        .record_with_ledger({
            let (id, status, kind, message) =
                (order.id, e.status(), e.kind().to_string(), e.message());
            move |l| l.record_send_error(id, status, &kind, &message)
        })
        .await
    {
        return Some(Sent::Stop(le.into()));
    }
    let floor = retry::floor(e);
    let wait = (!pause.last_try).then(|| retry::SENDS.wait(pause.attempt, e));
    let longest = wait.unwrap_or_default().max(if e.is_rate_limited() {
        floor
    } else {
        Duration::ZERO
    });
    if !context.patience.allows(longest) {
        return Some(Sent::GaveUp {
            why: format!(
                ": the service asks to wait longer than the run waits without an answer (--poll-timeout {}s)",
                context.patience.timeout.as_secs()
            ),
            detail: format!("{}s more, {last}", longest.as_secs()),
            kept: false,
        });
    }
    if e.is_rate_limited() {
        limiter.throttled(floor);
    }
    if let Some(wait) = wait {
        tokio::time::sleep(wait).await;
    }
    None
}

/// The service refused the order for good: a refused key stops the run; another body under
/// the key needs a person; any other refusal rejects the order's rows with the service's reason
/// (and a balance too low or the account's spending limit holds back what it covers).
async fn refused(context: &SendContext, order: &OrderRecord, e: ApiError) -> Sent {
    if is_auth_error(&e) {
        return Sent::Stop(OpError::Auth(e));
    }
    if e.kind() == "idempotency_validation_error" {
        // The service holds another body under this key: whatever it created must be looked
        // at by a person; marking the rows REJECTED could lead to paying twice.
        return Sent::Stop(OpError::Conflict {
            message: format!(
                "the service holds a different request under idempotency key {} (order {} of the ledger): {}",
                order.idempotency_key,
                order.id,
                e.message()
            ),
            help: "nothing was marked; run `paybatch reconcile --batch NAME --dry-run` to see what the service has for this batch".into(),
        });
    }
    let mut message = e.message();
    if e.kind() == "payment_method_unavailable" && order.card_id.is_some() {
        message.push_str(
            "; the service no longer lists card payments (its published API takes ACCOUNT_BALANCE only): pay these rows from a balance (drop --card-id or the card_id cell), then `paybatch retry`",
        );
    }
    if let Some(what) = service_stop(&e, order) {
        context.stop(what, format!("{}: {}", e.kind(), e.message()));
    }
    let cause = format!("service refused the order: {}", e.kind());
    let (id, status, kind) = (order.id, e.status(), e.kind().to_string());
    let recorded = context
        .record_with_ledger(move |l| {
            l.transition_order(
                id,
                Transition {
                    http_status: status,
                    error: Some((&kind, &message)),
                    ..Transition::to(OrderState::Rejected, &cause)
                },
            )
        })
        .await;
    answered(context, recorded.map_err(OpError::from))
}

async fn record_created(
    context: &SendContext,
    order: &OrderRecord,
    outcome: CreateOutcome,
) -> Result<(), OpError> {
    if failpoint::full("record_answer") {
        let full = context
            .with_ledger(|l| crate::ledger::LedgerError::full_disk(l.path()))
            .await;
        return Err(full.into());
    }
    match outcome {
        CreateOutcome::Accepted(a) => {
            let answer = Answer {
                http: 202,
                response: serde_json::to_string(&a).ok(),
                keep_response: true,
            };
            accept(context, order, &a.id, answer).await
        }
        // A sync answer is COMPLETED in the published contract; one that says FAILED is read
        // again (`GET /order/{id}`) before its rows are marked FAILED, for `retry` would pay
        // them again under a new key.
        CreateOutcome::Order(full) if full.status == OrderStatus::Completed => {
            record_terminal(context, order.id, full, 200).await
        }
        CreateOutcome::Order(full) => {
            let answer = Answer {
                http: 200,
                response: serde_json::to_string(&full).ok(),
                keep_response: false,
            };
            accept(context, order, &full.id, answer).await
        }
    }
}

/// The service's answer to a creation, as recorded.
struct Answer {
    http: u16,
    response: Option<String>,
    /// Whether the accepted order keeps the answer (a full order's is recorded when it
    /// finishes).
    keep_response: bool,
}

/// Records the order the service accepted as `service_id` (a MISMATCH when that id is already
/// another intent's) and hands it to the polling.
async fn accept(
    context: &SendContext,
    order: &OrderRecord,
    service_id: &str,
    answer: Answer,
) -> Result<(), OpError> {
    // When the service's answer came: the polling expects the order to finish from then.
    let answered = std::time::Instant::now();
    let (id, service) = (order.id, service_id.to_string());
    let accepted = context
        .record_with_ledger(move |ledger| -> Result<bool, OpError> {
            let response = answer.response.as_deref();
            if let Some(why) = record::id_of_another_order(ledger, id, &service)? {
                record::record_mismatch(ledger, id, None, response, answer.http, &[why])?;
                return Ok(false);
            }
            ledger.transition_order(
                id,
                Transition {
                    service_order_id: Some(&service),
                    http_status: Some(answer.http),
                    response: response.filter(|_| answer.keep_response),
                    ..Transition::to(OrderState::Accepted, "service accepted the order")
                },
            )?;
            Ok(true)
        })
        .await?;
    if !accepted {
        return Ok(());
    }
    context.tell_accepted(service_id, order.id, answered);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::orders_of_rows;

    #[test]
    fn warnings_name_the_first_rows_and_count_the_others() {
        let refs = |n: usize| (1..=n).map(|i| format!("R-{i}")).collect::<Vec<_>>();
        assert_eq!(orders_of_rows(&refs(1), 1, 1), "order of row R-1");
        assert_eq!(orders_of_rows(&refs(2), 2, 1), "order of rows R-1, R-2");
        assert_eq!(
            orders_of_rows(&refs(5), 40, 8),
            "orders of rows R-1, R-2, R-3, R-4, R-5 and 35 more (8 orders)"
        );
        assert_eq!(
            orders_of_rows(&[], 0, 1),
            "order of rows not known to the ledger"
        );
    }
}
