//! Reconciliation: compares the ledger with what the service itself holds. Every order paybatch
//! creates carries its batch and row references in `metadata` (and `description`), so the
//! service's order list answers "was this row already ordered?" even when the ledger was lost,
//! restored from an old backup, or holds an intent whose outcome is unknown.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::api::client::{PageQuery, is_loopback_host, read_retrying_until};
use crate::api::models::{OrderStatus, OrderSummary, OrderView};
use crate::api::{ApiError, Client};
use crate::ledger::{
    self, BatchRecord, Ledger, LedgerError, OrderRecord, OrderState, RowState, Transition,
};

use super::plan;

/// Longest walk through the order list.
const MAX_PAGES: usize = 10_000;

/// How long after its last send an intent's key may be given up (see [`key_is_spent`]): far
/// longer than the service needs to finish a request it is still working on (a gateway may
/// answer 502 or 504 while the service goes on and creates the order). Not shortened by a short
/// in-doubt window; only rehearsals and tests on the simulator shorten it, with
/// `PAYBATCH_SETTLE_SECONDS`.
pub const SETTLE: Duration = Duration::from_secs(10 * 60);

/// [`SETTLE`], or `shorter` (the seconds `PAYBATCH_SETTLE_SECONDS` gives,
/// [`crate::settings::settle_override`]) when `batch` runs on a simulator (the embedded one, or
/// a service on this machine's loopback address); never for a service elsewhere, whatever the
/// variable says.
pub fn settle_time(batch: &BatchRecord, shorter: Option<Duration>) -> Duration {
    let local = batch.environment == "sim"
        || url::Url::parse(&batch.base_url).is_ok_and(|u| is_loopback_host(&u));
    if !local {
        return SETTLE;
    }
    shorter.unwrap_or(SETTLE)
}

/// Whether an in-doubt intent that the service holds no order for has a key that can never
/// create one. The service keeps every answer under its key, server errors too, and replays it
/// for the same key and body: an intent whose last answer was a server error and that has been
/// in doubt for longer than `window` keeps getting that answer. Its last send must also be older
/// than `settle` ([`settle_time`]), so that no request of it can still be at work at the service.
/// Such a key is given up: its rows are REJECTED, and `paybatch retry` sends them under a new
/// key. Any other intent the service never created is sent again with its key.
pub fn key_is_spent(order: &OrderRecord, window: Duration, settle: Duration) -> bool {
    order.state == OrderState::Intent
        && order.sends > 0
        && order
            .last_http_status
            .is_some_and(|s| (500..=599).contains(&s))
        && ledger::older_than(order.first_sent_at.as_deref(), window)
        && ledger::older_than(order.last_sent_at.as_deref(), settle)
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot read the service's orders: {0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// One service order of the batch, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundOrder {
    pub id: String,
    pub status: OrderStatus,
    /// (row reference, attempt) per item.
    pub rows: Vec<(String, i64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Orders of this batch at the service.
    pub found: usize,
    /// Service orders the ledger did not know, now attached to their rows: (reference, order id).
    pub adopted: Vec<(String, String)>,
    /// In-doubt intents the service never turned into an order: cleared to be sent again.
    pub absent: Vec<String>,
    /// In-doubt intents the service never turned into an order and whose key only gets a server
    /// error back ([`key_is_spent`]): marked REJECTED, their rows left to `paybatch retry` (keys).
    pub retired: Vec<String>,
    /// Orders of this batch at the service whose rows could not be read (an order of several
    /// rows still PROCESSING, whose list entry and partial body do not name them): while there
    /// are any, no key is given up (service order ids).
    pub unattributed: Vec<String>,
    /// Orders whose status the ledger had behind the service's: (order id, from, to).
    pub updated: Vec<(String, String, String)>,
    /// Service orders for rows the ledger does not have: (reference, order id).
    pub unknown_rows: Vec<(String, String)>,
    /// Rows with more than one live service order: (reference, order ids). Needs a person.
    pub duplicates: Vec<(String, Vec<String>)>,
    /// Service orders of a row's latest attempt that its ledger row cannot take (the row is
    /// INVALID or REMOVED, or has another order): (reference, order id). Needs a person.
    pub unattached: Vec<(String, String)>,
    /// Intents of an earlier attempt than one the service has an order for, never answered:
    /// marked REJECTED, never to be sent (keys).
    pub superseded: Vec<String>,
}

impl ReconcileReport {
    pub fn is_clean(&self) -> bool {
        self.adopted.is_empty()
            && self.absent.is_empty()
            && self.retired.is_empty()
            && self.unattributed.is_empty()
            && self.updated.is_empty()
            && self.unknown_rows.is_empty()
            && self.duplicates.is_empty()
            && self.superseded.is_empty()
            && self.unattached.is_empty()
    }

    /// Findings only a person can settle: duplicate payments, orders for rows the ledger does
    /// not have or cannot take.
    pub fn needs_a_person(&self) -> bool {
        !self.duplicates.is_empty() || !self.unknown_rows.is_empty() || !self.unattached.is_empty()
    }
}

/// What the ledger knows of a batch's orders, to name the rows of the orders the service lists:
/// the service's list shows a finished order's `description` (which starts with its idempotency
/// key) and nothing of a PROCESSING order but its id.
#[derive(Debug, Clone, Default)]
pub struct KnownOrders {
    /// The rows (reference, attempt) of each of the ledger's orders, by idempotency key.
    pub by_key: HashMap<String, Vec<(String, i64)>>,
    /// The same, by service order id.
    pub by_service_id: HashMap<String, Vec<(String, i64)>>,
}

/// Whose an order of the service's list is, as far as its list entry tells.
enum Owner {
    /// This batch's, with its rows.
    Rows(Vec<(String, i64)>),
    /// Paybatch's for this batch (or perhaps: a description cut inside the batch name), rows
    /// not named: the full order tells.
    Look,
    /// Perhaps this batch's: a PROCESSING order shows only its id and status.
    Unknown,
    /// Another batch's, or not paybatch's.
    Foreign,
}

/// Reads (reference, attempt) pairs from paybatch's older `description`, written before orders
/// named their idempotency key: `paybatch batch=NAME row=REF` (single-row orders; attempt
/// unknown, 0).
fn rows_in_old_description(batch: &str, description: &str) -> Option<Vec<(String, i64)>> {
    let rest = description.strip_prefix(&format!("paybatch batch={batch} row="))?;
    if rest.contains(" (+") {
        return None;
    }
    Some(vec![(rest.to_string(), 0)])
}

/// What a list entry (or a full order's `metadata` and `description`) says of its owner.
fn owner_of(
    batch: &str,
    status: OrderStatus,
    metadata: Option<&std::collections::BTreeMap<String, String>>,
    description: Option<&str>,
) -> Owner {
    if let Some(m) = metadata
        && plan::batch_in_metadata(m).is_some()
    {
        return match plan::rows_in_metadata(batch, m) {
            Some(rows) => Owner::Rows(rows),
            None if plan::batch_in_metadata(m) == Some(plan::batch_tag(batch).as_str()) => {
                Owner::Look
            }
            None => Owner::Foreign,
        };
    }
    let Some(d) = description else {
        // paybatch always writes a description, but the list need not show it (the published
        // list does not promise it), and a PROCESSING order shows nothing: a finished order is
        // read whole, one still processing cannot be told.
        return if status.is_terminal() {
            Owner::Look
        } else {
            Owner::Unknown
        };
    };
    // The older description names its one row (a keyed one never starts `paybatch batch=`).
    if let Some(rows) = rows_in_old_description(batch, d) {
        return Owner::Rows(rows);
    }
    match plan::batch_named_by(d, batch) {
        plan::BatchNaming::Names | plan::BatchNaming::MayName => Owner::Look,
        plan::BatchNaming::Other => Owner::Foreign,
    }
}

/// Every order of `batch` at the service, and the ids of those that may be of `batch` but whose
/// rows cannot be read yet (a PROCESSING order the ledger does not know: the service shows
/// nothing of it but its id and status).
///
/// An order's rows come from the ledger when its description names a key the ledger holds (or
/// its id is one the ledger recorded), else from the full order's `metadata` once it is
/// finished.
pub async fn find_orders(
    client: &Client,
    batch: &str,
    known: &KnownOrders,
) -> Result<(Vec<FoundOrder>, Vec<String>), ReconcileError> {
    let mut query = PageQuery {
        limit: Some(500),
        ..Default::default()
    };
    let mut summaries: Vec<OrderSummary> = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = read_retrying_until(client.deadline(), || client.orders(&query)).await?;
        let empty = page.items.is_empty();
        summaries.extend(page.items);
        match page.pagination.cursors.after {
            Some(after) if !empty && Some(&after) != query.after.as_ref() => {
                query.after = Some(after)
            }
            _ => break,
        }
    }
    let mut found = Vec::new();
    let mut unattributed = Vec::new();
    for s in summaries {
        let by_key = s
            .description
            .as_deref()
            .and_then(plan::key_in_description)
            .and_then(|k| known.by_key.get(k));
        if let Some(rows) = by_key.or_else(|| known.by_service_id.get(&s.id)) {
            found.push(FoundOrder {
                id: s.id,
                status: s.status,
                rows: rows.clone(),
            });
            continue;
        }
        let mut owner = owner_of(
            batch,
            s.status,
            s.metadata.as_ref(),
            s.description.as_deref(),
        );
        let unknown_attempt = matches!(&owner, Owner::Rows(r) if r.iter().any(|(_, a)| *a == 0));
        if (matches!(owner, Owner::Look) || unknown_attempt) && s.status.is_terminal() {
            // The list did not say enough: the full order carries the metadata.
            if let OrderView::Done(full) =
                read_retrying_until(client.deadline(), || client.order(&s.id)).await?
            {
                match owner_of(
                    batch,
                    full.status,
                    full.metadata.as_ref(),
                    full.description.as_deref(),
                ) {
                    Owner::Foreign => continue,
                    Owner::Rows(rows) => owner = Owner::Rows(rows),
                    _ => {}
                }
            }
        }
        match owner {
            Owner::Rows(rows) => found.push(FoundOrder {
                id: s.id,
                status: s.status,
                rows,
            }),
            Owner::Look | Owner::Unknown => unattributed.push(s.id),
            Owner::Foreign => {}
        }
    }
    Ok((found, unattributed))
}

/// What reconciliation knows of a row while it works: the ledger's row as this reconciliation
/// has changed it so far (in a dry run too, where nothing is written), so that each decision
/// sees the outcome of the ones before it.
#[derive(Debug, Clone)]
struct RowView {
    id: i64,
    state: RowState,
    attempt: i64,
    order_id: Option<i64>,
    spec: Option<String>,
}

/// The references of the rows each ledger order holds, as this reconciliation sees them now
/// (read once: a batch can hold a million rows and as many intents).
fn members_by_order(views: &HashMap<String, RowView>) -> HashMap<i64, Vec<String>> {
    let mut by_order: HashMap<i64, Vec<String>> = HashMap::new();
    for (reference, v) in views {
        if let Some(id) = v.order_id {
            by_order.entry(id).or_default().push(reference.clone());
        }
    }
    by_order
}

/// The rows of each of the ledger's orders that still holds rows, by key and by service id.
fn known_orders(views: &HashMap<String, RowView>, orders: &[OrderRecord]) -> KnownOrders {
    let by_order = members_by_order(views);
    let mut known = KnownOrders::default();
    for o in orders {
        let rows: Vec<(String, i64)> = members_of(views, &by_order, o.id)
            .into_iter()
            .map(|(r, v)| (r.clone(), v.attempt))
            .collect();
        if rows.is_empty() {
            continue;
        }
        if let Some(id) = &o.service_order_id {
            known.by_service_id.insert(id.clone(), rows.clone());
        }
        known.by_key.insert(o.idempotency_key.clone(), rows);
    }
    known
}

/// The rows (reference, view) of the ledger's order `order_id`, from [`members_by_order`].
fn members_of<'a>(
    views: &'a HashMap<String, RowView>,
    by_order: &'a HashMap<i64, Vec<String>>,
    order_id: i64,
) -> Vec<(&'a String, &'a RowView)> {
    by_order
        .get(&order_id)
        .into_iter()
        .flatten()
        .filter_map(|r| views.get(r).map(|v| (r, v)))
        .collect()
}

/// The ledger state a service order's status stands for.
fn order_state_of(status: OrderStatus) -> OrderState {
    match status {
        OrderStatus::Completed => OrderState::Completed,
        OrderStatus::Failed => OrderState::Failed,
        _ => OrderState::Accepted,
    }
}

/// Compares the ledger's view of `batch` with the service's and, unless `dry_run`, repairs it.
///
/// The service's orders are taken oldest attempt first. An order answering an intent of the
/// same attempt is recorded on that intent. Otherwise an order is recorded only when it is the
/// latest attempt the service has for each of its rows, and only for rows the ledger has not
/// ordered yet (PENDING: a lost ledger, or a backup from before planning) or has as FAILED or
/// REJECTED at an earlier attempt (a backup from before a retry): the row moves to the
/// service's attempt, so that its next key is never one the service already used. An intent of
/// an earlier attempt than one the service has, with no order of its own there, is superseded:
/// it is marked REJECTED and never sent. An in-doubt intent the service has no order for is
/// cleared to be sent again with its key, unless its key is spent ([`key_is_spent`], with the
/// in-doubt `window` and [`settle_time`] of `shorter_settle`), none of its rows is in an order
/// the service lists, and every order of the batch that the service lists could be read and
/// needs no person.
///
/// `shorter_settle` is the settling time `PAYBATCH_SETTLE_SECONDS` gives, read by the caller
/// ([`crate::settings::settle_override`]); only a simulator's batch takes it.
pub async fn reconcile(
    ledger: &mut Ledger,
    client: &Client,
    batch: &BatchRecord,
    window: Duration,
    shorter_settle: Option<Duration>,
    dry_run: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let mut work = Reconciliation::read(ledger, client, batch, dry_run)?;
    let service = work.list_service_orders().await?;
    work.report_duplicates(&service);
    work.supersede_intents(&service)?;
    for f in &service.found {
        work.take_order(f, &service).await?;
    }
    work.settle_in_doubt(&service, window, settle_time(batch, shorter_settle))?;
    work.finish()
}

/// The orders of the batch at the service, oldest attempt first, and what they hold.
struct AtService {
    found: Vec<FoundOrder>,
    /// The latest attempt of each row at the service (0: not known).
    latest: HashMap<String, i64>,
    /// Every (row, attempt) the service has an order for.
    ordered: HashSet<(String, i64)>,
}

impl AtService {
    /// The service's orders as [`find_orders`] lists them (newest first), taken oldest attempt
    /// first.
    fn new(mut found: Vec<FoundOrder>) -> Self {
        // The service lists newest first; the sort is stable.
        found.reverse();
        found.sort_by_key(|f| f.rows.iter().map(|(_, a)| *a).max().unwrap_or(0));
        let mut latest: HashMap<String, i64> = HashMap::new();
        let mut ordered: HashSet<(String, i64)> = HashSet::new();
        for f in &found {
            for (r, a) in &f.rows {
                ordered.insert((r.clone(), *a));
                let e = latest.entry(r.clone()).or_insert(0);
                *e = (*e).max(*a);
            }
        }
        AtService {
            found,
            latest,
            ordered,
        }
    }

    /// The latest attempt of row `reference` at the service (0: not known).
    fn latest_of(&self, reference: &str) -> i64 {
        self.latest.get(reference).copied().unwrap_or(0)
    }

    /// Whether the service has an order for row `reference` at `attempt`.
    fn has(&self, reference: &str, attempt: i64) -> bool {
        self.ordered.contains(&(reference.to_string(), attempt))
    }

    /// Whether `f` is the latest attempt the service has for each of its rows.
    fn is_latest(&self, f: &FoundOrder) -> bool {
        f.rows
            .iter()
            .all(|(r, a)| *a == 0 || *a >= self.latest_of(r))
    }
}

/// A reconciliation at work: the ledger's view of the batch as it has changed it so far (in a
/// dry run too, where nothing is written), and its findings.
struct Reconciliation<'a> {
    ledger: &'a mut Ledger,
    client: &'a Client,
    batch: &'a BatchRecord,
    dry_run: bool,
    /// The batch's rows, by reference.
    views: HashMap<String, RowView>,
    /// The batch's orders, as the ledger held them when reconciliation began.
    orders: Vec<OrderRecord>,
    /// The state of each of the ledger's orders, as reconciliation has changed it.
    order_states: HashMap<i64, OrderState>,
    /// The ledger's orders that have a service order id: (ledger id, state when read).
    by_service_id: HashMap<String, (i64, OrderState)>,
    /// The ledger's orders that reconciliation has settled: they are no longer in doubt.
    claimed_orders: HashSet<i64>,
    report: ReconcileReport,
}

impl<'a> Reconciliation<'a> {
    /// Reads the batch's rows and orders from the ledger.
    fn read(
        ledger: &'a mut Ledger,
        client: &'a Client,
        batch: &'a BatchRecord,
        dry_run: bool,
    ) -> Result<Self, ReconcileError> {
        let views: HashMap<String, RowView> = ledger
            .rows(batch.id)?
            .into_iter()
            .map(|r| {
                let view = RowView {
                    id: r.id,
                    state: r.state,
                    attempt: r.attempt,
                    order_id: r.order_id,
                    spec: r.spec,
                };
                (r.reference, view)
            })
            .collect();
        let orders = ledger.orders(batch.id)?;
        let order_states = orders.iter().map(|o| (o.id, o.state)).collect();
        let by_service_id = orders
            .iter()
            .filter_map(|o| {
                let id = o.service_order_id.clone()?;
                Some((id, (o.id, o.state)))
            })
            .collect();
        Ok(Reconciliation {
            ledger,
            client,
            batch,
            dry_run,
            views,
            orders,
            order_states,
            by_service_id,
            claimed_orders: HashSet::new(),
            report: ReconcileReport::default(),
        })
    }

    /// Lists the batch's orders at the service, naming their rows by what the ledger knows.
    async fn list_service_orders(&mut self) -> Result<AtService, ReconcileError> {
        let known = known_orders(&self.views, &self.orders);
        let (found, unattributed) = find_orders(self.client, &self.batch.name, &known).await?;
        self.report.found = found.len();
        self.report.unattributed = unattributed;
        Ok(AtService::new(found))
    }

    /// Live service orders per reference: more than one is a duplicate payment.
    fn report_duplicates(&mut self, service: &AtService) {
        let mut live: HashMap<&str, Vec<&str>> = HashMap::new();
        for f in &service.found {
            if f.status != OrderStatus::Failed {
                for (r, _) in &f.rows {
                    live.entry(r.as_str()).or_default().push(f.id.as_str());
                }
            }
        }
        for (r, ids) in &live {
            if ids.len() > 1 {
                let mut ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
                ids.sort();
                self.report.duplicates.push((r.to_string(), ids));
            }
        }
    }

    /// Intents replaced by a later attempt at the service, with no order of their own there:
    /// marked REJECTED, never to be sent.
    fn supersede_intents(&mut self, service: &AtService) -> Result<(), ReconcileError> {
        let by_order = members_by_order(&self.views);
        for o in self.orders.iter().filter(|o| o.state == OrderState::Intent) {
            let members = members_of(&self.views, &by_order, o.id);
            let later = members
                .iter()
                .any(|(r, v)| service.latest_of(r) > v.attempt);
            let answered = members
                .iter()
                .all(|(r, v)| service.has(r, v.attempt) || service.has(r, 0));
            if members.is_empty() || !later || answered {
                continue;
            }
            self.claimed_orders.insert(o.id);
            self.report.superseded.push(o.idempotency_key.clone());
            let refs: Vec<String> = members.iter().map(|(r, _)| (*r).clone()).collect();
            if !self.dry_run {
                self.ledger.close_intent(
                    o.id,
                    "superseded",
                    "a later attempt of this row is at the service; this intent is never sent",
                    "reconcile: superseded by a later attempt at the service",
                )?;
            }
            self.order_states.insert(o.id, OrderState::Rejected);
            for r in refs {
                if let Some(v) = self.views.get_mut(&r) {
                    v.state = RowState::Rejected;
                }
            }
        }
        Ok(())
    }

    /// Takes the service's order `f` into the ledger: brings a known order's status up to
    /// date, records an order on the intent it answers, or adopts it for its rows when they can
    /// take it; reports what only a person can settle.
    async fn take_order(
        &mut self,
        f: &FoundOrder,
        service: &AtService,
    ) -> Result<(), ReconcileError> {
        if let Some(&(known_id, known_state)) = self.by_service_id.get(f.id.as_str()) {
            self.claimed_orders.insert(known_id);
            return self.update_status(f, known_id, known_state).await;
        }
        // Unknown to the ledger: find its rows.
        let Some(members) = self.rows_of(f) else {
            return Ok(());
        };
        let first_ref = f.rows[0].0.clone();
        // The attempt this order pays for each row (its own when the order does not say).
        let attempts: Vec<i64> = f
            .rows
            .iter()
            .zip(&members)
            .map(|((_, a), v)| if *a == 0 { v.attempt } else { *a })
            .collect();
        if let Some(intent_id) = self.intent_answered(&members, &attempts) {
            return self.record_on_intent(f, intent_id, first_ref).await;
        }
        if !service.is_latest(f) {
            // An earlier attempt (e.g. a failed one, retried since): history, not a repair.
            return Ok(());
        }
        if !rows_can_take(&members, &attempts) {
            if attempts.iter().zip(&members).all(|(a, v)| *a >= v.attempt) {
                // Not an earlier attempt, yet its rows cannot take it: the service paid rows
                // the ledger holds as INVALID or REMOVED, or that already have another order.
                self.report.unattached.push((first_ref, f.id.clone()));
            }
            return Ok(());
        }
        self.report.adopted.push((first_ref, f.id.clone()));
        self.adopt(f, &members, &attempts).await
    }

    /// Known order: brings its status up to date.
    async fn update_status(
        &mut self,
        f: &FoundOrder,
        known_id: i64,
        known_state: OrderState,
    ) -> Result<(), ReconcileError> {
        if known_state == OrderState::Accepted && f.status.is_terminal() {
            self.report.updated.push((
                f.id.clone(),
                known_state.to_string(),
                f.status.as_str().to_string(),
            ));
            if !self.dry_run {
                self.apply_terminal(known_id, &f.id).await?;
            }
        }
        Ok(())
    }

    /// The ledger's rows of the service's order `f`, in its order; none when the ledger lacks
    /// some of them, which are reported as unknown rows.
    fn rows_of(&mut self, f: &FoundOrder) -> Option<Vec<RowView>> {
        let members: Vec<RowView> = f
            .rows
            .iter()
            .filter_map(|(r, _)| self.views.get(r).cloned())
            .collect();
        if members.len() == f.rows.len() {
            return Some(members);
        }
        for (r, _) in &f.rows {
            if !self.views.contains_key(r) {
                self.report.unknown_rows.push((r.clone(), f.id.clone()));
            }
        }
        None
    }

    /// The ledger's intent that an order of `members` at `attempts` answers: the intent holding
    /// all of them, at the same attempts.
    fn intent_answered(&self, members: &[RowView], attempts: &[i64]) -> Option<i64> {
        let intent = members[0].order_id.filter(|id| {
            self.order_states.get(id) == Some(&OrderState::Intent)
                && members.iter().all(|v| v.order_id == Some(*id))
        });
        let same_attempt = attempts.iter().zip(members).all(|(a, v)| *a == v.attempt);
        intent.filter(|_| same_attempt)
    }

    /// The answer to an intent of the ledger: records the service's order `f` on it.
    async fn record_on_intent(
        &mut self,
        f: &FoundOrder,
        intent_id: i64,
        first_ref: String,
    ) -> Result<(), ReconcileError> {
        self.claimed_orders.insert(intent_id);
        self.report.adopted.push((first_ref, f.id.clone()));
        if !self.dry_run {
            self.ledger.transition_order(
                intent_id,
                Transition {
                    service_order_id: Some(&f.id),
                    ..Transition::to(
                        OrderState::Accepted,
                        "reconcile: the service has this order",
                    )
                },
            )?;
            if f.status.is_terminal() {
                self.apply_terminal(intent_id, &f.id).await?;
            }
        }
        let to = order_state_of(f.status);
        self.order_states.insert(intent_id, to);
        for (r, _) in &f.rows {
            if let Some(v) = self.views.get_mut(r) {
                v.state = crate::ledger::row_state_for(to);
            }
        }
        Ok(())
    }

    /// Records the service's order `f` for its rows (`members`), which move to the attempts
    /// it pays for.
    async fn adopt(
        &mut self,
        f: &FoundOrder,
        members: &[RowView],
        attempts: &[i64],
    ) -> Result<(), ReconcileError> {
        let mut new_order = None;
        if !self.dry_run {
            let keyed: Vec<(&str, i64)> = f
                .rows
                .iter()
                .zip(attempts)
                .map(|((r, _), a)| (r.as_str(), *a))
                .collect();
            let key = plan::order_key(&self.batch.environment, &self.batch.name, &keyed);
            let currency = members[0]
                .spec
                .as_deref()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                .and_then(|v| v["payment_currency"].as_str().map(str::to_string))
                .unwrap_or_default();
            let ids: Vec<(i64, i64)> = members
                .iter()
                .zip(attempts)
                .map(|(v, a)| (v.id, *a))
                .collect();
            let order_id = self
                .ledger
                .adopt_order(self.batch.id, &key, &currency, &ids, &f.id)?;
            if f.status.is_terminal() {
                self.apply_terminal(order_id, &f.id).await?;
            }
            new_order = Some(order_id);
        }
        let to = order_state_of(f.status);
        for ((r, _), a) in f.rows.iter().zip(attempts) {
            if let Some(v) = self.views.get_mut(r) {
                v.state = crate::ledger::row_state_for(to);
                v.attempt = *a;
                v.order_id = new_order;
            }
        }
        Ok(())
    }

    /// In-doubt intents with no order at the service: never created; safe to send again, with
    /// the same key unless that key can only get its server error back. A key is given up only
    /// when the service's list is fully read and none of the intent's rows is in an order there
    /// of its attempt or a later one (or of an unknown attempt): anything less, and the same
    /// key is sent again, which cannot pay twice. Orders of earlier attempts (failed, retried
    /// since) are history.
    fn settle_in_doubt(
        &mut self,
        service: &AtService,
        window: Duration,
        settle: Duration,
    ) -> Result<(), ReconcileError> {
        let list_is_whole = self.report.unattributed.is_empty() && !self.report.needs_a_person();
        let by_order = members_by_order(&self.views);
        for o in &self.orders {
            if o.state != OrderState::Intent || o.sends == 0 || self.claimed_orders.contains(&o.id)
            {
                continue;
            }
            let members = members_of(&self.views, &by_order, o.id);
            let rows_unordered = !members.is_empty()
                && members
                    .iter()
                    .all(|(r, v)| service.latest_of(r) < v.attempt && !service.has(r, 0));
            if list_is_whole && rows_unordered && key_is_spent(o, window, settle) {
                self.report.retired.push(o.idempotency_key.clone());
                if !self.dry_run {
                    retire_intent(self.ledger, o)?;
                }
                continue;
            }
            self.report.absent.push(o.idempotency_key.clone());
            if !self.dry_run {
                self.ledger
                    .clear_in_doubt(o.id, "reconcile: no order at the service for this intent")?;
            }
        }
        Ok(())
    }

    /// Marks the batch settled when every order of the account could be told, and returns the
    /// report, its lists in order.
    fn finish(self) -> Result<ReconcileReport, ReconcileError> {
        let mut report = self.report;
        if !self.dry_run
            && report.unattributed.is_empty()
            && self.ledger.is_unsettled(self.batch.id)?
        {
            // Every order of the account can be told now: the rows of a rebuilt batch that have
            // no order at the service have none.
            self.ledger.set_unsettled(self.batch.id, false)?;
        }
        report.adopted.sort();
        report.unknown_rows.sort();
        report.duplicates.sort();
        report.superseded.sort();
        report.retired.sort();
        report.unattributed.sort();
        report.unattached.sort();
        Ok(report)
    }

    /// Reads the service's order `service_id` whole and records it, once finished, on the
    /// ledger's order `order_id`.
    async fn apply_terminal(
        &mut self,
        order_id: i64,
        service_id: &str,
    ) -> Result<(), ReconcileError> {
        let client = self.client;
        if let OrderView::Done(full) =
            read_retrying_until(client.deadline(), || client.order(service_id)).await?
        {
            super::record::record_terminal_in(self.ledger, order_id, &full, 200)?;
        }
        Ok(())
    }
}

/// Whether rows (`members`) can take an order of theirs at `attempts`: rows not ordered yet,
/// or FAILED or REJECTED at an earlier attempt.
fn rows_can_take(members: &[RowView], attempts: &[i64]) -> bool {
    let fresh = members
        .iter()
        .zip(attempts)
        .all(|(v, a)| v.state == RowState::Pending && *a >= v.attempt);
    let behind = members
        .iter()
        .zip(attempts)
        .all(|(v, a)| matches!(v.state, RowState::Failed | RowState::Rejected) && *a > v.attempt);
    fresh || behind
}

/// Marks the in-doubt intent `o` REJECTED: its key only gets the server error the service
/// keeps for it, and the service holds no order for it.
fn retire_intent(ledger: &mut Ledger, o: &OrderRecord) -> Result<(), ReconcileError> {
    let message = format!(
        "the service answers this order's idempotency key with the server error it keeps for it (HTTP {}) and holds no order for it; `paybatch retry` sends its rows under a new key",
        o.last_http_status.unwrap_or(500)
    );
    ledger.close_intent(
        o.id,
        "idempotency_key_spent",
        &message,
        "reconcile: key spent (a kept server error, no order at the service)",
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished order the list shows without a description (the published list does not
    /// promise one) may be this batch's: it is read whole, never taken for another's.
    #[test]
    fn a_finished_order_listed_without_description_is_read_not_ignored() {
        let finished = owner_of("nov", OrderStatus::Completed, None, None);
        assert!(matches!(finished, Owner::Look));
        let processing = owner_of("nov", OrderStatus::Processing, None, None);
        assert!(matches!(processing, Owner::Unknown));
        let other = owner_of(
            "nov",
            OrderStatus::Completed,
            None,
            Some("December bonus for the sales team"),
        );
        assert!(matches!(other, Owner::Foreign));
    }

    fn ago(minutes: i64) -> Option<String> {
        Some(
            (chrono::Utc::now() - chrono::Duration::minutes(minutes))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
    }

    /// In doubt for two hours, last sent 20 minutes ago, last answered 500.
    fn in_doubt() -> OrderRecord {
        OrderRecord {
            id: 1,
            batch_id: 1,
            idempotency_key: "k".into(),
            body: Vec::new(),
            mode: "async".into(),
            payment_currency: "USD".into(),
            payment_method: "ACCOUNT_BALANCE".into(),
            card_id: None,
            state: OrderState::Intent,
            service_order_id: None,
            sends: 9,
            polls: 0,
            created_at: ledger::now(),
            first_sent_at: ago(120),
            last_sent_at: ago(20),
            last_http_status: Some(500),
            accepted_at: None,
            error_type: None,
            error_message: None,
        }
    }

    #[test]
    fn the_settling_time_is_shortened_only_for_a_simulator() {
        let settle_from = |batch: &BatchRecord, seconds: Option<&str>| {
            settle_time(batch, crate::settings::settle_seconds(seconds))
        };
        let batch = |environment: &str, base_url: &str| BatchRecord {
            id: 1,
            name: "b".into(),
            input_path: "b.csv".into(),
            input_hash: "h".into(),
            headers: Vec::new(),
            environment: environment.into(),
            base_url: base_url.into(),
            key_fingerprint: "sha256:0".into(),
            created_at: ledger::now(),
        };
        let one = Some("1");
        let second = Duration::from_secs(1);
        assert_eq!(
            settle_from(&batch("sim", "embedded-simulator"), one),
            second
        );
        for local in [
            "http://127.0.0.1:9/v2",
            "http://localhost:9/v2",
            "http://[::1]:9/v2",
        ] {
            assert_eq!(settle_from(&batch("custom", local), one), second, "{local}");
        }
        for remote in ["https://api.example.com/v2", "not a url"] {
            assert_eq!(
                settle_from(&batch("custom", remote), one),
                SETTLE,
                "{remote}"
            );
        }
        assert_eq!(
            settle_from(&batch("production", "https://x/v2"), one),
            SETTLE
        );
        let local = batch("sim", "embedded-simulator");
        for bad in ["1e20", "-1", "NaN", "soon"] {
            assert_eq!(settle_from(&local, Some(bad)), SETTLE, "{bad}");
        }
        assert_eq!(settle_from(&local, None), SETTLE);
    }

    #[test]
    fn a_key_is_spent_only_after_a_kept_server_error_past_the_window_and_the_settling_time() {
        let hour = Duration::from_secs(3600);
        assert!(key_is_spent(&in_doubt(), hour, SETTLE));
        let changed = |f: fn(&mut OrderRecord)| {
            let mut o = in_doubt();
            f(&mut o);
            key_is_spent(&o, hour, SETTLE)
        };
        assert!(changed(|o| o.last_http_status = Some(503)));
        assert!(!changed(|o| o.last_http_status = None), "no answer: resend");
        assert!(!changed(|o| o.last_http_status = Some(429)));
        assert!(!changed(|o| o.last_http_status = Some(400)));
        assert!(!changed(|o| o.first_sent_at = ago(30)), "inside the window");
        assert!(
            !changed(|o| o.last_sent_at = ago(5)),
            "may still be at work"
        );
        assert!(!changed(|o| o.last_sent_at = None));
        assert!(!changed(|o| o.sends = 0));
        assert!(!changed(|o| o.state = OrderState::Accepted));
        // A short window does not shorten the settling time.
        let mut o = in_doubt();
        o.first_sent_at = ago(3);
        o.last_sent_at = ago(2);
        let minute = Duration::from_secs(60);
        assert!(!key_is_spent(&o, minute, SETTLE));
        assert!(key_is_spent(&o, minute, minute));
    }
}
