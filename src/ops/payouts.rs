//! `payouts`: the life of each payout link after its order COMPLETED. Each finished order of a
//! batch whose links are not all final (CLAIMED, CANCELLED, EXPIRED) is read again, once per
//! call, paced ([`ReadPace`]) and retried as the run's polls are (429, 5xx, a deadline); what
//! each item's `payout` says is recorded in the ledger (`payouts`, a change being an event), and
//! the batch is summed up: rows per status, value outstanding and expired per currency, links
//! expiring soon. An answer is believed only for the order and the links the ledger recorded,
//! and only when it agrees with itself and with the final statuses read before; a read that
//! fails or is not believed leaves the last known status and is said.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use rust_decimal::Decimal;
use serde::Serialize;
use tokio::time::Instant;

use crate::api::ApiError;
use crate::api::models::{Order, OrderStatus, OrderView};
use crate::batch::progress::Reporter;
use crate::batch::record::payout_life;
use crate::environment::{Connection, Environment, UsageError};
use crate::ledger::lock::LedgerLock;
use crate::ledger::payouts::{FollowedOrder, FollowedRow, PayoutRow};
use crate::ledger::{BatchRecord, Ledger, PayoutLife, PayoutStatus};
use crate::ops::error::{OpError, is_auth_error};
use crate::report::unclaimed::Unclaimed;

/// Reads of `GET /order/{id}` in flight at once (as the run's polls).
pub const READS_AT_ONCE: usize = 16;

/// Reads a second by default. The service publishes no limit on reading orders; its only
/// published limit is on creating them (300 a minute, 180 in older pages). Reading a month's
/// orders is not urgent, so the pace stays at five times that limit: 25 reads a second, 1,500 a
/// minute (500 orders in 20 s, 100,000 one-row orders in about 67 minutes). A 429 halves it.
pub const DEFAULT_READS_PER_SECOND: u32 = 25;

/// How long a call waits for the service by default: reads that are tried again never wait past
/// it; the orders not read keep their last known status (exit 5, run again).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30 * 60;

/// Links expiring within this many days are listed by default.
pub const DEFAULT_EXPIRING_DAYS: u32 = 14;

/// What to read, and how.
#[derive(Debug, Clone)]
pub struct PayoutsOptions {
    pub ledger: PathBuf,
    pub environment: Environment,
    pub api_key_file: Option<PathBuf>,
    /// One batch, or `None` for every batch of the environment with links to follow.
    pub batch: Option<String>,
    pub reads_per_second: u32,
    pub timeout: Duration,
    /// Record nothing, read nothing: sum up what the ledger knows.
    pub offline: bool,
}

/// An order read that was not believed or did not succeed: the service's id and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRead {
    pub order_id: String,
    pub reason: String,
}

/// What one call did for one batch.
#[derive(Debug, Clone, Default)]
pub struct BatchRead {
    /// Orders read (answered and recorded).
    pub orders_read: usize,
    /// Links whose status changed.
    pub changed: usize,
    /// Orders whose read failed or was not believed: their links keep their last known status.
    pub not_read: Vec<NotRead>,
}

/// A batch's links as the ledger knows them after a call ([`summarize`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PayoutSummary {
    pub batch: String,
    pub environment: String,
    /// When `paybatch payouts` last read the batch's orders.
    pub read_at: Option<String>,
    /// COMPLETED rows per payout status (`ACTIVE`, `CLAIMED`, `CANCELLED`, `EXPIRED`, others
    /// under their own names, `NOT_READ` before a first read).
    pub payouts: BTreeMap<String, i64>,
    /// Links ACTIVE whose expiry falls within the window (already past included).
    pub expiring: usize,
    /// The window, in days.
    pub expiring_within_days: u32,
    /// Value not claimed yet (ACTIVE), per currency of the rows.
    pub outstanding: BTreeMap<String, Value>,
    /// Value whose link expired (and was not reissued yet), per currency.
    pub expired: BTreeMap<String, Value>,
    /// Rows whose expired link was reissued (`retry --expired`).
    pub reissued: i64,
    /// What the links not claimed (ACTIVE), expired and cancelled cost the paying balances,
    /// per paying currency, and its ageing since payment.
    #[serde(flatten)]
    pub unclaimed: Unclaimed,
    /// Orders read by this call.
    pub orders_read: usize,
    /// Orders whose read failed or was not believed.
    pub not_read: Vec<NotRead>,
    /// The links expiring within the window, soonest first.
    #[serde(rename = "expiring_links")]
    pub expiring_rows: Vec<Expiring>,
}

/// Face value and price of rows in one currency.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Value {
    pub rows: i64,
    #[serde(with = "rust_decimal::serde::str")]
    pub face_value: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    pub price: Decimal,
}

/// A link that expires within the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expiring {
    pub reference: String,
    pub expires_at: String,
}

/// The batches a call reads: the one named, or every batch of the environment.
fn batches_to_read(ledger: &Ledger, opts: &PayoutsOptions) -> Result<Vec<BatchRecord>, OpError> {
    match &opts.batch {
        Some(name) => match ledger.batch(name)? {
            Some(b) => Ok(vec![b]),
            None => Err(OpError::Usage(UsageError::new(
                format!("no batch `{name}` in {}", opts.ledger.display()),
                "`paybatch status` lists the ledger's batches",
            ))),
        },
        None => {
            let env = &opts.environment;
            let base = env.recorded_base_url();
            Ok(ledger
                .batches()?
                .into_iter()
                .filter(|b| b.environment == env.name() && b.base_url == base)
                .collect())
        }
    }
}

/// The now links are compared with: the wall clock, or on the embedded simulator its simulated
/// clock (`paybatch sim clock --advance` moves it, for a rehearsal of the months after payment).
pub fn clock_now(opts: &PayoutsOptions) -> DateTime<Utc> {
    clock_of(opts.environment.is_simulated(), &opts.ledger)
}

/// The now of the ledger at `ledger`: the wall clock, or when `simulated`, the embedded
/// simulator's clock kept beside it.
pub fn clock_of(simulated: bool, ledger: &Path) -> DateTime<Utc> {
    let now = Utc::now();
    if !simulated {
        return now;
    }
    let state = crate::environment::embedded_state_path(ledger);
    if !state.exists() {
        return now;
    }
    let config = crate::environment::embedded_sim_config(Some(state));
    let offset = crate::sim::SimState::open(config)
        .and_then(|s| s.clock_offset())
        .ok()
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .unwrap_or_default();
    now + offset
}

/// Reads the links of the batch (or of every batch with links to follow) and sums each up.
/// `within` is the window of links expiring soon.
pub async fn payouts(
    opts: &PayoutsOptions,
    within_days: u32,
    reporter: &Reporter,
) -> Result<Vec<PayoutSummary>, OpError> {
    if !opts.ledger.exists() {
        return Err(OpError::Usage(UsageError::new(
            format!("no ledger at {}", opts.ledger.display()),
            "pass --ledger PATH, the ledger the batch was run with",
        )));
    }
    let _lock = LedgerLock::acquire(&opts.ledger)?;
    let mut ledger = Ledger::open(&opts.ledger)?;
    let batches = batches_to_read(&ledger, opts)?;
    let now = clock_now(opts);
    let mut reads: HashMap<i64, BatchRead> = HashMap::new();
    if !opts.offline {
        // Each batch's orders with links to follow, asked once: they are what is read.
        let mut to_read: Vec<(&BatchRecord, Vec<FollowedOrder>)> = Vec::new();
        for b in &batches {
            let orders = ledger.orders_to_follow(b.id)?;
            if !orders.is_empty() {
                to_read.push((b, orders));
            }
        }
        if !to_read.is_empty() {
            let conn = Connection::open_for_reading(
                opts.environment.clone(),
                opts.api_key_file.as_deref(),
                &opts.ledger,
            )
            .await?;
            reporter.line(format!("paybatch payouts: {}", conn.environment.banner()));
            let client = conn
                .client
                .with_deadline(Instant::now().checked_add(opts.timeout));
            let pace = ReadPace::new(opts.reads_per_second);
            for (b, orders) in to_read {
                if opts.batch.is_some() {
                    crate::ops::start::check_binding(b, &conn)?;
                } else if crate::ops::start::check_binding(b, &conn).is_err() {
                    reporter.warn(format!(
                        "batch {}: started with another API key; its links are not read",
                        crate::text::shown(&b.name)
                    ));
                    continue;
                }
                let read =
                    read_batch(&mut ledger, &client, b, orders, &pace, now, reporter).await?;
                reads.insert(b.id, read);
            }
        }
    }
    let mut out = Vec::new();
    for b in &batches {
        let read = reads.remove(&b.id).unwrap_or_default();
        let mut summary = summarize(&ledger, b, within_days, now)?;
        summary.orders_read = read.orders_read;
        summary.not_read = read.not_read;
        if opts.batch.is_none() && summary.payouts.is_empty() {
            continue; // a batch that paid nothing yet
        }
        out.push(summary);
    }
    Ok(out)
}

/// Reads each of `orders` (those of `batch` with links to follow, or whose links `retry
/// --expired` reads once more), once, and records what it says when it is believed ([`believed`],
/// against `now`).
pub(crate) async fn read_batch(
    ledger: &mut Ledger,
    client: &crate::api::Client,
    batch: &BatchRecord,
    orders: Vec<FollowedOrder>,
    pace: &ReadPace,
    now: DateTime<Utc>,
    reporter: &Reporter,
) -> Result<BatchRead, OpError> {
    let mut read = BatchRead::default();
    if orders.is_empty() {
        return Ok(read);
    }
    let phase = reporter.phase(orders.len() as u64, "orders read");
    let mut answers = futures::stream::iter(orders.into_iter().map(|o| async move {
        let answer = read_retrying(client, pace, &o.service_order_id).await;
        (o, answer)
    }))
    .buffer_unordered(READS_AT_ONCE);
    let mut any_read = false;
    while let Some((order, answer)) = answers.next().await {
        phase.inc(1);
        let order_view = match answer {
            Ok(view) => view,
            Err(e) if is_auth_error(&e) => return Err(OpError::Auth(e)),
            Err(e) => {
                read.not_read.push(NotRead {
                    order_id: order.service_order_id.clone(),
                    reason: format!("not read: {e}"),
                });
                continue;
            }
        };
        let rows = ledger.rows_to_follow(order.order_id)?;
        match believed(&order, &rows, &order_view, now) {
            Ok(lives) => {
                read.changed += ledger.record_payout_reads(batch.id, order.order_id, &lives)?;
                read.orders_read += 1;
                any_read = true;
            }
            Err(reason) => read.not_read.push(NotRead {
                order_id: order.service_order_id.clone(),
                reason,
            }),
        }
    }
    phase.finish();
    if any_read {
        ledger.mark_payouts_read(batch.id, &crate::ledger::now())?;
    }
    Ok(read)
}

/// One read of an order, paced, tried again as the run's polls are.
async fn read_retrying(
    client: &crate::api::Client,
    pace: &ReadPace,
    id: &str,
) -> Result<OrderView, ApiError> {
    crate::api::client::read_retrying_until(client.deadline(), || async {
        pace.ready().await;
        let answer = client.order(id).await;
        if let Err(e) = &answer
            && e.is_rate_limited()
        {
            pace.throttled(
                e.retry_after()
                    .unwrap_or(crate::api::retry::RATE_LIMITED_FLOOR),
            );
        }
        answer
    })
    .await
}

/// What an answer says of the rows of `order` the ledger recorded, when it can be believed:
/// the order the ledger holds (its id), still COMPLETED, each row's item found by the item id
/// the completion recorded (else by its position) with the same link and a payout status that
/// does not contradict itself or what was believed before ([`contradiction`], at `now`). Else
/// why it is not believed.
fn believed(
    order: &FollowedOrder,
    rows: &[FollowedRow],
    view: &OrderView,
    now: DateTime<Utc>,
) -> Result<Vec<(FollowedRow, PayoutLife)>, String> {
    let answer: &Order = match view {
        OrderView::Done(o) => o,
        OrderView::Processing(_) => {
            return Err(
                "the service answers the order as still processing; it COMPLETED before".into(),
            );
        }
    };
    if answer.id != order.service_order_id {
        return Err(format!(
            "the answer is order {}, not {}",
            crate::text::shown(&answer.id),
            order.service_order_id
        ));
    }
    if answer.status != OrderStatus::Completed {
        return Err(format!(
            "the answer says the order is {}; it COMPLETED before",
            answer.status.as_str()
        ));
    }
    let mut out = Vec::new();
    for row in rows {
        let item = match &row.item_id {
            Some(id) => answer.items.iter().find(|i| i.id.as_deref() == Some(id)),
            None => row
                .item_index
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| answer.items.get(i)),
        };
        let Some(item) = item else {
            return Err(format!(
                "the answer has no item for row {}",
                crate::text::shown(&row.reference)
            ));
        };
        if let (Some(known), Some(said)) = (&row.payout_url, item.payout_url())
            && known != said
        {
            return Err(format!(
                "the answer gives row {} another payout link than the one recorded",
                crate::text::shown(&row.reference)
            ));
        }
        let Some(life) = payout_life(item) else {
            return Err(format!(
                "the answer gives no payout status for row {}",
                crate::text::shown(&row.reference)
            ));
        };
        if let Some(why) = contradiction(row, &life, now) {
            return Err(why);
        }
        out.push((row.clone(), life));
    }
    Ok(out)
}

/// Why what an answer says of `row`'s link cannot be believed, if it cannot: a final status
/// (CLAIMED, CANCELLED, EXPIRED) believed before never changes again, and a link cannot have
/// expired before its `expiry_date`, so EXPIRED with an expiry date later than the time of the
/// answer (the later of `now` and the answer's own `status_updated_at`) contradicts itself.
fn contradiction(row: &FollowedRow, life: &PayoutLife, now: DateTime<Utc>) -> Option<String> {
    let reference = crate::text::shown(&row.reference);
    if let Some(known) = &row.status
        && known.is_final()
        && *known != life.status
    {
        return Some(format!(
            "the answer says the payout link of row {reference} is {}; it was read {known} before, a status that never changes",
            crate::text::shown(life.status.as_str())
        ));
    }
    crate::batch::record::expired_ahead(life, now).then(|| {
        format!(
            "the answer says the payout link of row {reference} EXPIRED, yet its expiry date {} is still ahead",
            crate::text::shown(life.expires_at.as_deref().unwrap_or_default())
        )
    })
}

/// Sums up what the ledger knows of the links of `batch` at `now`.
pub fn summarize(
    ledger: &Ledger,
    batch: &BatchRecord,
    within_days: u32,
    now: DateTime<Utc>,
) -> Result<PayoutSummary, OpError> {
    let mut s = PayoutSummary {
        batch: batch.name.clone(),
        environment: batch.environment.clone(),
        read_at: ledger.payouts_read_at(batch.id)?,
        expiring_within_days: within_days,
        ..PayoutSummary::default()
    };
    for (status, rows) in ledger.payout_counts(batch.id)? {
        let name = status.map_or_else(|| NOT_READ.to_string(), |s| s.as_str().to_string());
        *s.payouts.entry(name).or_default() += rows;
    }
    if !s.payouts.is_empty() {
        for status in PayoutStatus::PUBLISHED {
            s.payouts.entry(status.as_str().to_string()).or_default();
        }
    }
    s.reissued = ledger.reissued_rows(batch.id)?;
    let horizon = now + chrono::Duration::days(i64::from(within_days));
    ledger.visit_payout_rows::<OpError>(batch.id, false, |row| {
        s.unclaimed.add(&row, now);
        let value = match row.status {
            Some(PayoutStatus::Active) => {
                if expires_by(&row, horizon) {
                    s.expiring_rows.push(Expiring {
                        reference: row.reference.clone(),
                        expires_at: row.expires_at.clone().unwrap_or_default(),
                    });
                }
                Some(&mut s.outstanding)
            }
            Some(PayoutStatus::Expired) => Some(&mut s.expired),
            _ => None,
        };
        if let Some(values) = value {
            let (currency, face) = currency_and_face(&row);
            let v = values.entry(currency).or_default();
            v.rows += 1;
            v.face_value += face;
            v.price += row.price.unwrap_or_default();
        }
        Ok(())
    })?;
    s.unclaimed = std::mem::take(&mut s.unclaimed).rounded();
    for (currency, v) in s.outstanding.iter_mut().chain(s.expired.iter_mut()) {
        v.face_value = crate::money::in_currency(v.face_value, currency);
        v.price = crate::money::in_currency(v.price, currency);
    }
    s.expiring_rows.sort_by(|a, b| {
        a.expires_at
            .cmp(&b.expires_at)
            .then(a.reference.cmp(&b.reference))
    });
    s.expiring = s.expiring_rows.len();
    Ok(s)
}

/// The name under which rows never read are counted.
pub const NOT_READ: &str = "NOT_READ";

/// Whether an ACTIVE link expires by `horizon` (an expiry that cannot be read does not).
fn expires_by(row: &PayoutRow, horizon: DateTime<Utc>) -> bool {
    row.expires_at
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t.with_timezone(&Utc) <= horizon)
}

/// The row's currency and face value, as validated (`?` and 0 for a row without them).
fn currency_and_face(row: &PayoutRow) -> (String, Decimal) {
    match &row.spec {
        Some(spec) => (spec.currency.clone(), spec.face_value),
        None => ("?".to_string(), Decimal::ZERO),
    }
}

/// Pacing of the reads: one every `1 / rate` seconds at most; a 429 stops every read for the
/// wait it asks for (at least 5 s) and halves the rate (down to one read a second).
#[derive(Debug)]
pub struct ReadPace {
    inner: std::sync::Mutex<PaceState>,
}

#[derive(Debug)]
struct PaceState {
    interval: Duration,
    next: Instant,
}

impl ReadPace {
    pub fn new(per_second: u32) -> Self {
        ReadPace {
            inner: std::sync::Mutex::new(PaceState {
                interval: Duration::from_secs(1) / per_second.max(1),
                next: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PaceState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for this read's turn.
    pub async fn ready(&self) {
        let slot = {
            let mut s = self.lock();
            let now = Instant::now();
            let slot = s.next.max(now);
            s.next = slot + s.interval;
            slot
        };
        tokio::time::sleep_until(slot).await;
    }

    /// The service answered 429: nobody reads for `wait` (at least 5 s), and the rate halves.
    pub fn throttled(&self, wait: Duration) {
        let mut s = self.lock();
        s.interval = (s.interval * 2).min(Duration::from_secs(1));
        let until = Instant::now() + wait.max(crate::api::retry::RATE_LIMITED_FLOOR);
        if until > s.next {
            s.next = until;
        }
    }

    /// The time between two reads now.
    pub fn interval(&self) -> Duration {
        self.lock().interval
    }
}

/// The rows of `batch` whose link is in one of `statuses` (or expiring within the window, with
/// `expiring`), in input order, for `--list`.
pub fn listed_rows(
    ledger: &Ledger,
    batch: &BatchRecord,
    statuses: &[PayoutStatus],
    expiring_within: Option<u32>,
    now: DateTime<Utc>,
    mut each: impl FnMut(PayoutRow) -> std::io::Result<()>,
) -> Result<usize, OpError> {
    let horizon = expiring_within.map(|d| now + chrono::Duration::days(i64::from(d)));
    let mut n = 0;
    let path: &Path = ledger.path();
    let path = path.to_path_buf();
    ledger.visit_payout_rows::<OpError>(batch.id, true, |row| {
        let by_status = row.status.as_ref().is_some_and(|s| statuses.contains(s));
        let by_expiry = horizon
            .is_some_and(|h| row.status == Some(PayoutStatus::Active) && expires_by(&row, h));
        if by_status || by_expiry {
            n += 1;
            each(row).map_err(|e| OpError::Io {
                path: path.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reads_are_paced_and_a_429_halves_the_rate() {
        let pace = ReadPace::new(20);
        let t0 = Instant::now();
        for _ in 0..21 {
            pace.ready().await;
        }
        // 21 reads at 20 a second: the last one a second after the first.
        assert_eq!(Instant::now() - t0, Duration::from_secs(1));
        pace.throttled(Duration::from_secs(1));
        assert_eq!(pace.interval(), Duration::from_millis(100));
        let t1 = Instant::now();
        pace.ready().await;
        assert!(
            Instant::now() - t1 >= Duration::from_secs(5),
            "a 429 waits 5 s at least"
        );
        for _ in 0..20 {
            pace.throttled(Duration::ZERO);
        }
        assert_eq!(
            pace.interval(),
            Duration::from_secs(1),
            "never slower than 1 a second"
        );
    }

    fn order_answer(items: serde_json::Value) -> OrderView {
        let order: Order = serde_json::from_value(serde_json::json!({
            "id": "ord_1", "status": "COMPLETED", "items": items,
        }))
        .expect("an order");
        OrderView::Done(Box::new(order))
    }

    fn item(id: &str, url: &str, status: &str) -> serde_json::Value {
        serde_json::json!({
            "id": id, "distribution_method": {"type": "PAYOUT_LINK"},
            "products": {"type": "SINGLE", "value": "P"}, "face_value": 10,
            "payout": {"status": status, "status_updated_at": "2026-11-01T00:00:00Z",
                       "url": url, "expiry_date": null},
        })
    }

    fn row(reference: &str, item_id: &str, url: &str) -> FollowedRow {
        FollowedRow {
            row_id: 1,
            attempt: 1,
            reference: reference.into(),
            item_index: Some(0),
            item_id: Some(item_id.into()),
            payout_url: Some(url.into()),
            status: Some(PayoutStatus::Active),
        }
    }

    #[test]
    fn an_answer_is_believed_only_for_the_order_and_links_recorded() {
        let order = FollowedOrder {
            order_id: 1,
            service_order_id: "ord_1".into(),
        };
        let rows = vec![
            row("R1", "it_1", "https://x/1"),
            row("R2", "it_2", "https://x/2"),
        ];
        // Items answered in another order are found by their ids.
        let answer = order_answer(serde_json::json!([
            item("it_2", "https://x/2", "CLAIMED"),
            item("it_1", "https://x/1", "ACTIVE")
        ]));
        let lives = believed(&order, &rows, &answer, Utc::now()).expect("believed");
        assert_eq!(lives[0].0.reference, "R1");
        assert_eq!(lives[0].1.status, PayoutStatus::Active);
        assert_eq!(lives[1].1.status, PayoutStatus::Claimed);
        // Another link for a row: not believed.
        let swapped = order_answer(serde_json::json!([
            item("it_1", "https://x/evil", "CLAIMED"),
            item("it_2", "https://x/2", "CLAIMED")
        ]));
        assert!(believed(&order, &rows, &swapped, Utc::now()).is_err());
        // Another order: not believed.
        let other = FollowedOrder {
            order_id: 1,
            service_order_id: "ord_2".into(),
        };
        assert!(believed(&other, &rows, &answer, Utc::now()).is_err());
        // A row's item missing: not believed.
        let short = order_answer(serde_json::json!([item("it_1", "https://x/1", "CLAIMED")]));
        assert!(believed(&order, &rows, &short, Utc::now()).is_err());
    }

    fn expired(expiry: &str, since: &str) -> PayoutLife {
        PayoutLife {
            status: PayoutStatus::Expired,
            since: Some(since.into()),
            expires_at: Some(expiry.into()),
        }
    }

    #[test]
    fn an_answer_against_itself_or_against_a_final_status_is_not_believed() {
        let now = DateTime::parse_from_rfc3339("2026-11-27T12:00:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        let active = row("R1", "it_1", "https://x/1");
        // EXPIRED with its expiry date a year ahead: against itself.
        let ahead = expired("2027-11-27T12:00:00Z", "2026-11-27T11:00:00Z");
        assert!(contradiction(&active, &ahead, now).is_some_and(|w| w.contains("still ahead")));
        // EXPIRED at or after its expiry date: believed, also when the answer's own time is
        // later than this clock (a service clock ahead of ours).
        let past = expired("2026-11-27T10:00:00Z", "2026-11-27T10:00:00Z");
        assert_eq!(contradiction(&active, &past, now), None);
        let later_clock = expired("2026-11-27T13:00:00Z", "2026-11-27T13:00:00Z");
        assert_eq!(contradiction(&active, &later_clock, now), None);
        // EXPIRED without an expiry date: nothing to contradict.
        let undated = PayoutLife {
            expires_at: None,
            ..ahead.clone()
        };
        assert_eq!(contradiction(&active, &undated, now), None);
        // A final status read before never changes: CLAIMED after EXPIRED, ACTIVE after
        // CLAIMED are not believed; the same final status again is.
        let was_expired = FollowedRow {
            status: Some(PayoutStatus::Expired),
            ..active.clone()
        };
        let claimed = PayoutLife {
            status: PayoutStatus::Claimed,
            since: None,
            expires_at: None,
        };
        assert!(contradiction(&was_expired, &claimed, now).is_some_and(|w| w.contains("EXPIRED")));
        assert_eq!(contradiction(&was_expired, &past, now), None);
        let was_claimed = FollowedRow {
            status: Some(PayoutStatus::Claimed),
            ..active.clone()
        };
        let live = PayoutLife {
            status: PayoutStatus::Active,
            ..claimed.clone()
        };
        assert!(contradiction(&was_claimed, &live, now).is_some());
        assert_eq!(contradiction(&was_claimed, &claimed, now), None);
        assert_eq!(contradiction(&active, &claimed, now), None);
    }
}
