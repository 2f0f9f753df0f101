//! Polling: the accepted orders are read until each is finished (or the run's patience ends),
//! their statuses many at a time from the order list, each finished order fetched whole once,
//! checked against what was sent and recorded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::api::models::OrderView;
use crate::api::{ApiError, Client, retry};
use crate::failpoint;
use crate::ledger::OrderState;

use super::options::RunOptions;
use super::progress::Phase;
use super::record;
use super::send_context::{SendContext, ToPoll};
use crate::ops::error::{OpError, is_auth_error};

/// How long the newest order counts as young: the waits between looks grow as
/// [`retry::POLLING_YOUNG`] until then (most orders finish within seconds: each is seen within
/// half a second of it), then as [`retry::POLLING`].
const POLL_YOUNG: Duration = Duration::from_secs(60);
/// Pages of the order list read per round at most.
const LIST_PAGES_PER_ROUND: usize = 4;
/// Full orders fetched at once (reads are not rate limited; a burst of large orders finishes
/// within seconds).
const FETCH_CONCURRENCY: usize = 32;
/// How long after the newest waiting order is expected to have finished the look for it is
/// made ([`Poller::expected_end`]): the service's times are in milliseconds.
const EXPECTED_END_MARGIN: Duration = Duration::from_millis(20);

/// Orders accepted while the polling goes on, as the sending records them. The sending closes
/// it when it ends.
pub type Accepted = mpsc::UnboundedReceiver<ToPoll>;

/// The orders being polled and when to look at them next.
struct Poller {
    context: Arc<SendContext>,
    /// Service order id -> ledger order id.
    waiting: HashMap<String, i64>,
    /// The newest (highest) ledger order id polled in this run.
    newest: i64,
    /// Rounds in a row the order list did not show an order.
    unseen_rounds: HashMap<String, u32>,
    interval: Duration,
    /// While the newest order is young, the interval stays short.
    young_until: Instant,
    /// When the service's answer accepting the newest waiting order came (the start of the
    /// polling for those the ledger held).
    last_added: Instant,
    /// The longest an order of this run took to finish, as the service's own times say
    /// (`completed_at - created_at` in the order list), once one has been seen.
    longest: Option<Duration>,
    /// The one early look ([`Poller::expected_end`]) was made, or given up after a 429.
    early_look_done: bool,
    /// The sending has ended: no order joins the waiting ones any more.
    sending_ended: bool,
    /// Orders of this run seen finished (their records handed over).
    finished: usize,
    /// The records of the finished orders handed to the ledger's thread, which go on while the
    /// next look is made.
    recording: tokio::task::JoinSet<Result<(), OpError>>,
    phase: Phase,
}

impl Poller {
    /// The polling of `waiting` (service order id -> ledger order id), and of the orders the
    /// sending brings unless it has ended.
    fn new(context: &Arc<SendContext>, waiting: HashMap<String, i64>, sending_ended: bool) -> Self {
        Poller {
            context: Arc::clone(context),
            phase: context.reporter.phase(waiting.len() as u64, "poll"),
            newest: waiting.values().copied().max().unwrap_or(0),
            waiting,
            unseen_rounds: HashMap::new(),
            interval: retry::POLLING.first,
            young_until: Instant::now() + POLL_YOUNG,
            last_added: Instant::now(),
            longest: None,
            early_look_done: false,
            sending_ended,
            finished: 0,
            recording: tokio::task::JoinSet::new(),
        }
    }

    fn add(&mut self, accepted: ToPoll) {
        let ToPoll {
            service_id,
            order_id,
            accepted_at,
        } = accepted;
        self.newest = self.newest.max(order_id);
        if self.waiting.insert(service_id, order_id).is_none() {
            self.phase.grow(1);
            self.last_added = self.last_added.max(accepted_at);
            self.young_until = Instant::now() + POLL_YOUNG;
            self.interval = self.interval.min(retry::POLLING.first);
        }
    }

    /// The wait before the next round, and the one after it.
    fn next_wait(&mut self) -> Duration {
        let wait = self.interval;
        let growth = if Instant::now() < self.young_until {
            retry::POLLING_YOUNG
        } else {
            retry::POLLING
        };
        self.interval = growth.after(self.interval);
        wait
    }

    /// When every waiting order is expected to have finished, once the sending has ended (no
    /// order joins the waiting ones then, so `last_added` stays): the newest one's acceptance,
    /// the longest an order of the run took, and a margin. None while orders may still join
    /// (each would bring a look of its own), while fewer orders of the run have finished than
    /// wait (the longest seen is then likely short of theirs), before an order has finished
    /// with both of the service's times, and once the early look was made or given up.
    fn expected_end(&self) -> Option<Instant> {
        if !self.sending_ended || self.finished < self.waiting.len() || self.early_look_done {
            return None;
        }
        let longest = self.longest?;
        self.last_added.checked_add(longest + EXPECTED_END_MARGIN)
    }

    /// Hands the record of finished order `order_id` (`full`) to the ledger's thread; it is
    /// recorded while the polling goes on.
    fn record(&mut self, id: &str, order_id: i64, full: Box<crate::api::models::Order>) {
        let context = Arc::clone(&self.context);
        self.recording.spawn(async move {
            // The look is counted with the record, in one step.
            context
                .record_with_ledger(move |l| -> Result<(), OpError> {
                    l.count_poll(order_id)?;
                    record::record_terminal_in(l, order_id, &full, 200)?;
                    Ok(())
                })
                .await
        });
        self.waiting.remove(id);
        self.unseen_rounds.remove(id);
        self.finished += 1;
        self.phase.inc(1);
    }

    /// The records handed over that have ended: the first that failed, if one did.
    fn recorded(&mut self) -> Result<(), OpError> {
        while let Some(joined) = self.recording.try_join_next() {
            settled(joined)?;
        }
        Ok(())
    }

    /// Waits for every record handed over.
    async fn all_recorded(&mut self) -> Result<(), OpError> {
        while let Some(joined) = self.recording.join_next().await {
            settled(joined)?;
        }
        Ok(())
    }

    fn slow_down(&mut self, e: &ApiError) {
        if e.is_rate_limited() {
            self.interval = self.interval.max(retry::RATE_LIMITED_FLOOR);
            // No early look sooner than the service asked for.
            self.early_look_done = true;
        }
    }
}

/// Polls the accepted orders until each is terminal: those the ledger holds as accepted, and
/// those `incoming` brings while the sending goes on. The polling ends when every order is
/// terminal and the sending has ended (`incoming` closed, or none), or `--poll-timeout` after
/// the sending ended. Statuses are read many at a time from the order list (`GET /order`); the
/// full order (items, payout links) is fetched once, when it is terminal. An order the list does
/// not show is asked for directly every other round. Once the sending has ended, one look more
/// is made when every waiting order is expected to have finished ([`Poller::expected_end`]).
/// The records of finished orders are made on the ledger's thread while the next look goes on,
/// every one before this returns. Returns why the run is incomplete, if it is.
pub async fn poll_all(
    context: &Arc<SendContext>,
    batch_id: i64,
    opts: &RunOptions,
    mut incoming: Option<Accepted>,
) -> Result<Option<String>, OpError> {
    let accepted = context
        .with_ledger(move |l| l.order_heads_in_state(batch_id, OrderState::Accepted))
        .await?;
    let waiting: HashMap<String, i64> = accepted
        .into_iter()
        .filter_map(|o| o.service_order_id.clone().map(|id| (id, o.id)))
        .collect();
    if waiting.is_empty() && incoming.is_none() {
        return Ok(None);
    }
    if !waiting.is_empty() {
        context.reporter.line(format!(
            "polling {} orders until they complete",
            waiting.len()
        ));
    }
    let mut poller = Poller::new(context, waiting, incoming.is_none());
    // Set when the sending ends: a timeout too long to add to the clock (only a library caller
    // can give one) never ends.
    let mut deadline = incoming
        .is_none()
        .then(|| Instant::now().checked_add(opts.poll_timeout));
    let mut last_look: Option<Instant> = None;
    loop {
        if let Some(rx) = incoming.as_mut()
            && take_incoming(rx, &mut poller).await?
        {
            incoming = None;
            poller.sending_ended = true;
            deadline = Some(Instant::now().checked_add(opts.poll_timeout));
        }
        if poller.waiting.is_empty() {
            if incoming.is_none() {
                break;
            }
            continue;
        }
        let left = deadline
            .flatten()
            .map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            break;
        }
        // The wait counts from the start of the last look: a look that took long (many
        // finished orders read and recorded) is followed by the next one sooner.
        let wait = poller
            .next_wait()
            .saturating_sub(last_look.map_or(Duration::ZERO, |t| t.elapsed()));
        let now = Instant::now();
        let early = sooner_at(wait, poller.expected_end(), now);
        poller.early_look_done |= early < wait;
        tokio::time::sleep(left.map_or(early, |l| early.min(l))).await;
        failpoint::hit("while_polling");
        poller.recorded()?;
        last_look = Some(Instant::now());
        round(&mut poller).await?;
    }
    poller.all_recorded().await?;
    poller.phase.finish();
    if poller.waiting.is_empty() {
        Ok(None)
    } else {
        Ok(Some(format!(
            "{} orders still processing after --poll-timeout {}s",
            poller.waiting.len(),
            opts.poll_timeout.as_secs()
        )))
    }
}

/// Takes the orders accepted since the last look; when none is waiting, waits for the next
/// (once the records handed over are made: one that fails stops the run then, not at the
/// next acceptance). Returns true once the sending has ended (the channel is closed and
/// empty).
async fn take_incoming(rx: &mut Accepted, poller: &mut Poller) -> Result<bool, OpError> {
    if poller.waiting.is_empty() {
        poller.all_recorded().await?;
        match rx.recv().await {
            Some(accepted) => poller.add(accepted),
            None => return Ok(true),
        }
    }
    loop {
        match rx.try_recv() {
            Ok(accepted) => poller.add(accepted),
            Err(mpsc::error::TryRecvError::Empty) => return Ok(false),
            Err(mpsc::error::TryRecvError::Disconnected) => return Ok(true),
        }
    }
}

/// One look at the waiting orders: the order list, then the full orders that are terminal (or
/// that the list did not show for two rounds), each terminal one checked and recorded.
async fn round(poller: &mut Poller) -> Result<(), OpError> {
    let context = Arc::clone(&poller.context);
    let listed = list_statuses(&context.client, &poller.waiting, poller.newest).await;
    let (mut to_fetch, seen) = match listed {
        Ok(Listed {
            terminal,
            seen,
            longest,
        }) => {
            poller.longest = poller.longest.max(longest);
            (terminal, seen)
        }
        Err(e) if is_auth_error(&e) => return Err(OpError::Auth(e)),
        Err(e) => {
            poller.slow_down(&e);
            context.reporter.warn(format!(
                "cannot read the order list ({e}); asking order by order"
            ));
            (Vec::new(), std::collections::HashSet::new())
        }
    };
    for id in poller.waiting.keys() {
        if seen.contains(id) {
            poller.unseen_rounds.remove(id);
            continue;
        }
        let rounds = poller.unseen_rounds.entry(id.clone()).or_default();
        *rounds += 1;
        if *rounds >= 2 {
            *rounds = 0;
            to_fetch.push(id.clone());
        }
    }
    // Each full order is fetched in a task of its own and handed to the ledger's thread as it
    // comes, while the next ones are still being read.
    let mut fetched = fetch_all(&context.client, to_fetch);
    while let Some(joined) = fetched.join_next().await {
        let (id, result) = match joined {
            Ok(fetched) => fetched,
            // A fetch that panicked is a bug: it panics here, as it would have inline.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // None is cancelled while the set is held here.
            Err(_) => continue,
        };
        let Some(&order_id) = poller.waiting.get(&id) else {
            continue;
        };
        match result {
            Ok(OrderView::Done(full)) => poller.record(&id, order_id, full),
            Ok(OrderView::Processing(_)) => count_poll(&context, order_id).await?,
            Err(e) if is_auth_error(&e) => return Err(OpError::Auth(e)),
            Err(e) => {
                count_poll(&context, order_id).await?;
                poller.slow_down(&e);
                if !e.is_transient() {
                    context
                        .reporter
                        .warn(format!("order {id}: {e}; it will be asked again"));
                }
            }
        }
    }
    Ok(())
}

/// Fetches the full orders `ids`, [`FETCH_CONCURRENCY`] at a time, each in a task of its own:
/// the reads go on while the orders already read are recorded.
fn fetch_all(
    client: &Client,
    ids: Vec<String>,
) -> tokio::task::JoinSet<(String, Result<OrderView, ApiError>)> {
    let permits = Arc::new(tokio::sync::Semaphore::new(FETCH_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for id in ids {
        let (client, permits) = (client.clone(), Arc::clone(&permits));
        tasks.spawn(async move {
            // The semaphore is never closed: a permit always comes.
            let _permit = permits.acquire_owned().await;
            let result = client.order(&id).await;
            (id, result)
        });
    }
    tasks
}

/// Counts a look at order `order_id` that did not find it finished.
async fn count_poll(context: &SendContext, order_id: i64) -> Result<(), OpError> {
    context
        .record_with_ledger(move |l| l.count_poll(order_id))
        .await?;
    Ok(())
}

/// Orders of the list's first page when `waiting` are polled and the newest order polled is
/// `newest` (ledger ids). The ledger numbers its orders in the order it sends them, and the list
/// shows the newest created first: the page reaches back to the oldest order still waiting
/// (with 50 more, for orders sent at once and answered out of turn), not only as many orders
/// as wait, which orders finished early would push onto a second page. At most 500 (the
/// list's default).
fn first_page(waiting: &HashMap<String, i64>, newest: i64) -> u32 {
    let oldest = waiting.values().copied().min().unwrap_or(newest);
    let back = usize::try_from(newest.saturating_sub(oldest)).unwrap_or(usize::MAX);
    (back.saturating_add(1).max(waiting.len()).saturating_add(50)).min(500) as u32
}

/// The wait before the next look: `regular`, or less when every waiting order is expected to
/// have finished (`expected_end`, [`Poller::expected_end`]) before it. A look at that moment
/// takes the place of the regular one (the next counts from it): the last orders of a run are
/// recorded about when they finish, not up to a whole interval later. A moment already passed
/// brings no look of its own: the longest seen was short of the orders still waiting (it
/// cannot be otherwise for orders sent in one burst), and a look now would only shift the
/// cadence.
fn sooner_at(regular: Duration, expected_end: Option<Instant>, now: Instant) -> Duration {
    match expected_end {
        Some(end) if end > now => regular.min(end - now),
        _ => regular,
    }
}

/// A record handed to the ledger's thread, ended: its error, or its panic (a bug) here.
fn settled(joined: Result<Result<(), OpError>, tokio::task::JoinError>) -> Result<(), OpError> {
    match joined {
        Ok(recorded) => recorded,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // None is cancelled while the set is held by the polling.
        Err(_) => Ok(()),
    }
}

/// What a look at the order list found.
struct Listed {
    /// The `waiting` orders it shows terminal.
    terminal: Vec<String>,
    /// The `waiting` orders it shows at all.
    seen: std::collections::HashSet<String>,
    /// The longest a terminal one took to finish, by the service's times, where it gives both.
    longest: Option<Duration>,
}

/// How long an order took to finish by the service's times (`completed_at - created_at`),
/// where it gives both and they are in order.
fn processing_time(created_at: Option<&str>, completed_at: Option<&str>) -> Option<Duration> {
    let at = |t: Option<&str>| t.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    (at(completed_at)? - at(created_at)?).to_std().ok()
}

/// Reads the newest pages of the order list: which of the `waiting` orders are terminal, and
/// which the list showed at all.
async fn list_statuses(
    client: &Client,
    waiting: &HashMap<String, i64>,
    newest: i64,
) -> Result<Listed, ApiError> {
    let limit = first_page(waiting, newest);
    let mut query = crate::api::client::PageQuery {
        limit: Some(limit),
        ..Default::default()
    };
    let mut seen = std::collections::HashSet::new();
    let mut terminal = Vec::new();
    let mut longest: Option<Duration> = None;
    for _ in 0..LIST_PAGES_PER_ROUND {
        let page = client.orders(&query).await?;
        for item in &page.items {
            if waiting.contains_key(&item.id)
                && seen.insert(item.id.clone())
                && item.status.is_terminal()
            {
                terminal.push(item.id.clone());
                let took =
                    processing_time(item.created_at.as_deref(), item.completed_at.as_deref());
                longest = longest.max(took);
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
    Ok(Listed {
        terminal,
        seen,
        longest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first page reaches back to the oldest order still waiting: 24 orders waiting among
    /// the newest 202 need a page of 252, not of 74.
    #[test]
    fn the_first_page_reaches_back_to_the_oldest_order_waiting() {
        let waiting: HashMap<String, i64> =
            (0..24).map(|i| (format!("O-{i}"), 301 + i * 8)).collect();
        assert_eq!(first_page(&waiting, 502), 202 + 50);
        // Waiting orders without a gap between them: as many as wait, and 50.
        let waiting: HashMap<String, i64> = (0..30).map(|i| (format!("O-{i}"), i + 1)).collect();
        assert_eq!(first_page(&waiting, 30), 30 + 50);
        // Never more than the list's default.
        assert_eq!(first_page(&waiting, 10_000), 500);
        assert_eq!(first_page(&HashMap::new(), 7), 51);
    }

    /// The look waits for the moment every waiting order is expected to have finished when it
    /// comes before the regular look; the regular wait when it has passed, or without one.
    #[test]
    fn a_look_is_made_when_the_waiting_orders_are_expected_to_have_finished() {
        let now = Instant::now();
        let half = Duration::from_millis(500);
        let soon = now + Duration::from_millis(120);
        assert_eq!(sooner_at(half, Some(soon), now), Duration::from_millis(120));
        // Later than the regular look: the regular one.
        assert_eq!(sooner_at(half, Some(now + 2 * half), now), half);
        assert_eq!(sooner_at(half, None, now), half);
        let passed = now - Duration::from_millis(50);
        assert_eq!(sooner_at(half, Some(passed), now), half);
    }

    /// How long an order took, by the service's two times: none without both, or out of order.
    #[test]
    fn the_processing_time_is_read_from_the_services_two_times() {
        let created = Some("2026-11-28T15:32:50.699Z");
        assert_eq!(
            processing_time(created, Some("2026-11-28T15:32:53.026Z")),
            Some(Duration::from_millis(2327))
        );
        assert_eq!(
            processing_time(
                Some("2026-11-28T16:32:50.699+01:00"),
                Some("2026-11-28T15:32:51Z")
            ),
            Some(Duration::from_millis(301))
        );
        assert_eq!(processing_time(created, None), None);
        assert_eq!(processing_time(None, Some("2026-11-28T15:32:53Z")), None);
        assert_eq!(processing_time(created, Some("2026-11-28T15:32:50Z")), None);
        assert_eq!(processing_time(created, Some("yesterday")), None);
    }

    /// Attack: the service's times at their extremes give no panic and no wait shorter than a
    /// margin past the newest acceptance: years apart (far future or past), a zero duration,
    /// offsets that put completed_at before created_at, leap seconds, lowercase separators.
    #[test]
    fn attack_the_processing_time_at_the_extremes() {
        let huge = processing_time(
            Some("0000-01-01T00:00:00Z"),
            Some("9999-12-31T23:59:59.999Z"),
        );
        assert!(huge.is_some_and(|d| d > Duration::from_secs(300_000_000_000)));
        let end = Instant::now().checked_add(huge.unwrap() + EXPECTED_END_MARGIN);
        // Too far for the clock (None) or far away: the regular wait either way.
        let half = Duration::from_millis(500);
        assert_eq!(sooner_at(half, end, Instant::now()), half);
        let zero = processing_time(Some("2026-11-28T15:32:50Z"), Some("2026-11-28T15:32:50Z"));
        assert_eq!(zero, Some(Duration::ZERO));
        assert_eq!(
            processing_time(
                Some("2026-11-28T15:32:50+14:00"),
                Some("2026-11-28T15:32:50-12:00")
            ),
            Some(Duration::from_secs(26 * 3600))
        );
        assert_eq!(
            processing_time(
                Some("2026-11-28T15:32:50-12:00"),
                Some("2026-11-28T15:32:50+14:00")
            ),
            None
        );
        assert!(
            processing_time(Some("2016-12-31T23:59:60Z"), Some("2017-01-01T00:00:00Z")).is_some()
        );
        assert!(
            processing_time(Some("2026-11-28t15:32:50z"), Some("2026-11-28t15:32:51z")).is_some()
        );
        assert_eq!(processing_time(Some(""), Some("")), None);
        assert_eq!(
            processing_time(
                Some("+275760-09-13T00:00:00Z"),
                Some("2026-11-28T15:32:51Z")
            ),
            None
        );
    }
}
