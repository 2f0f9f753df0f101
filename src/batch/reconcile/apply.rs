//! Applying what the service holds to the ledger: the ledger's view of the batch as
//! reconciliation changes it ([`Reconciliation`]), the service's orders oldest attempt first
//! ([`AtService`]), and each decision: a status brought up to date, an order recorded on the
//! intent it answers or adopted for its rows, an intent superseded, retired or cleared.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::api::Client;
use crate::api::client::read_retrying_until;
use crate::api::models::{OrderStatus, OrderView};
use crate::batch::order_body;
use crate::ledger::{BatchRecord, Ledger, OrderRecord, OrderState, RowKey, RowState, Transition};
use crate::row::RowContent;

use super::ReconcileError;
use super::find::{FoundOrder, KnownOrders, find_orders};
use super::policy::key_is_spent;
use super::report::ReconcileReport;

/// What reconciliation knows of a row while it works: the ledger's row as this reconciliation
/// has changed it so far (in a dry run too, where nothing is written), so that each decision
/// sees the outcome of the ones before it.
#[derive(Debug, Clone)]
struct RowSoFar {
    id: i64,
    state: RowState,
    attempt: i64,
    order_id: Option<i64>,
    spec: Option<RowContent>,
}

/// The references of the rows each ledger order holds, as this reconciliation sees them now
/// (read once: a batch can hold a million rows and as many intents).
fn members_by_order(views: &HashMap<String, RowSoFar>) -> HashMap<i64, Vec<String>> {
    let mut by_order: HashMap<i64, Vec<String>> = HashMap::new();
    for (reference, v) in views {
        if let Some(id) = v.order_id {
            by_order.entry(id).or_default().push(reference.clone());
        }
    }
    by_order
}

/// The rows of each of the ledger's orders that still holds rows, by key and by service id.
fn known_orders(views: &HashMap<String, RowSoFar>, orders: &[OrderRecord]) -> KnownOrders {
    let by_order = members_by_order(views);
    let mut known = KnownOrders::default();
    for o in orders {
        let rows: Vec<RowKey> = members_of(views, &by_order, o.id)
            .into_iter()
            .map(|(r, v)| RowKey::new(r.clone(), v.attempt))
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
    views: &'a HashMap<String, RowSoFar>,
    by_order: &'a HashMap<i64, Vec<String>>,
    order_id: i64,
) -> Vec<(&'a String, &'a RowSoFar)> {
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

/// Names the rows of the service's orders as the ledger spells them, where the service's
/// spelling is another of one reference as a person reads it (`EMP-1` for the file's `emp-1`:
/// [`crate::reference::fold_reference`]) and no other row of the batch reads the same.
/// Returns the service's spelling of the rows of each order so named: its key is made of them.
fn spell_as_the_ledger(
    found: &mut [FoundOrder],
    views: &HashMap<String, RowSoFar>,
) -> HashMap<String, Vec<String>> {
    let mut folded: HashMap<String, Option<&String>> = HashMap::new();
    for reference in views.keys() {
        folded
            .entry(crate::reference::fold_reference(reference))
            .and_modify(|r| *r = None)
            .or_insert(Some(reference));
    }
    let mut spelt = HashMap::new();
    for f in found.iter_mut() {
        let theirs: Vec<String> = f.rows.iter().map(|k| k.reference.clone()).collect();
        let mut renamed = false;
        for k in f.rows.iter_mut() {
            if views.contains_key(&k.reference) {
                continue;
            }
            let fold = crate::reference::fold_reference(&k.reference);
            if let Some(Some(ours)) = folded.get(&fold) {
                k.reference = (*ours).clone();
                renamed = true;
            }
        }
        if renamed {
            spelt.insert(f.id.clone(), theirs);
        }
    }
    spelt
}

/// The orders of the batch at the service, oldest attempt first, and what they hold.
pub(super) struct AtService {
    pub(super) found: Vec<FoundOrder>,
    /// The latest attempt of each row at the service (0: not known).
    latest: HashMap<String, i64>,
    /// Every row at an attempt the service has an order for.
    ordered: HashSet<RowKey>,
}

impl AtService {
    /// The service's orders as [`find_orders`] lists them (newest first), taken oldest attempt
    /// first.
    fn new(mut found: Vec<FoundOrder>) -> Self {
        // The service lists newest first; the sort is stable.
        found.reverse();
        found.sort_by_key(|f| f.rows.iter().map(|k| k.attempt).max().unwrap_or(0));
        let mut latest: HashMap<String, i64> = HashMap::new();
        let mut ordered: HashSet<RowKey> = HashSet::new();
        for f in &found {
            for k in &f.rows {
                ordered.insert(k.clone());
                let e = latest.entry(k.reference.clone()).or_insert(0);
                *e = (*e).max(k.attempt);
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
        self.ordered.contains(&RowKey::new(reference, attempt))
    }

    /// Whether `f` is the latest attempt the service has for each of its rows.
    fn is_latest(&self, f: &FoundOrder) -> bool {
        f.rows
            .iter()
            .all(|k| k.attempt == 0 || k.attempt >= self.latest_of(&k.reference))
    }
}

/// A reconciliation at work: the ledger's view of the batch as it has changed it so far (in a
/// dry run too, where nothing is written), and its findings.
pub(super) struct Reconciliation<'a> {
    ledger: &'a mut Ledger,
    client: &'a Client,
    batch: &'a BatchRecord,
    dry_run: bool,
    /// The batch's rows, by reference.
    views: HashMap<String, RowSoFar>,
    /// The batch's orders, as the ledger held them when reconciliation began.
    orders: Vec<OrderRecord>,
    /// The state of each of the ledger's orders, as reconciliation has changed it.
    order_states: HashMap<i64, OrderState>,
    /// The ledger's orders that have a service order id: (ledger id, state when read).
    by_service_id: HashMap<String, (i64, OrderState)>,
    /// The ledger's orders that reconciliation has settled: they are no longer in doubt.
    claimed_orders: HashSet<i64>,
    /// The orders of rows whose link was read EXPIRED and reissued: (reference, service id).
    reissued: HashSet<(String, String)>,
    /// The service's spelling of the rows of its orders whose rows the ledger spells another
    /// way, by service order id ([`spell_as_the_ledger`]).
    spelt: HashMap<String, Vec<String>>,
    /// Orders of the account still PROCESSING that cannot be attributed yet: an intent in
    /// doubt may be one of them, and stays in doubt.
    unattributed_processing: bool,
    report: ReconcileReport,
}

impl<'a> Reconciliation<'a> {
    /// Reads the batch's rows and orders from the ledger.
    pub(super) fn read(
        ledger: &'a mut Ledger,
        client: &'a Client,
        batch: &'a BatchRecord,
        dry_run: bool,
    ) -> Result<Self, ReconcileError> {
        let views: HashMap<String, RowSoFar> = ledger
            .rows(batch.id)?
            .into_iter()
            .map(|r| {
                let view = RowSoFar {
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
        let reissued = ledger.reissued_orders(batch.id)?.into_iter().collect();
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
            reissued,
            spelt: HashMap::new(),
            unattributed_processing: false,
            report: ReconcileReport::default(),
        })
    }

    /// Lists the batch's orders at the service, naming their rows by what the ledger knows.
    pub(super) async fn list_service_orders(&mut self) -> Result<AtService, ReconcileError> {
        let known = known_orders(&self.views, &self.orders);
        let (mut found, unattributed) = find_orders(self.client, &self.batch.name, &known).await?;
        self.spelt = spell_as_the_ledger(&mut found, &self.views);
        self.report.found = found.len();
        self.unattributed_processing = unattributed.iter().any(|u| u.processing);
        self.report.unattributed = unattributed.into_iter().map(|u| u.id).collect();
        Ok(AtService::new(found))
    }

    /// Live service orders per reference: more than one is a duplicate payment. An order whose
    /// link the ledger read EXPIRED and reissued is not live: it is listed as reissued.
    pub(super) fn report_duplicates(&mut self, service: &AtService) {
        let mut live: HashMap<&str, Vec<&str>> = HashMap::new();
        for f in &service.found {
            if f.status != OrderStatus::Failed {
                for k in &f.rows {
                    let pair = (k.reference.clone(), f.id.clone());
                    if self.reissued.contains(&pair) {
                        self.report.reissued.push(pair);
                        continue;
                    }
                    live.entry(k.reference.as_str())
                        .or_default()
                        .push(f.id.as_str());
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
    pub(super) fn supersede_intents(&mut self, service: &AtService) -> Result<(), ReconcileError> {
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

    /// Intents whose rows the service has, at their attempt, in orders the ledger does not
    /// know that do not answer them (another ledger's, which grouped the rows otherwise and so
    /// used other keys): cancelled, their rows back to PENDING, so that those orders are
    /// adopted for them ([`Reconciliation::take_order`]) and nothing is paid twice. An intent
    /// in doubt (marked sent, no answer recorded) is released only when every order of the
    /// batch at the service could be read: then none of them answers it, so its key created
    /// nothing, and sending it again would pay its rows twice.
    pub(super) fn release_unsent_intents(
        &mut self,
        service: &AtService,
    ) -> Result<(), ReconcileError> {
        let by_order = members_by_order(&self.views);
        // An intent that may have been sent is released only when the list showed every
        // order of the batch whole: none of them can be its own.
        let list_is_whole = self.report.unattributed.is_empty();
        for o in &self.orders {
            let never_sent = o.sends == 0 && o.last_sent_at.is_none();
            if o.state != OrderState::Intent
                || !(never_sent || list_is_whole)
                || self.order_states.get(&o.id) != Some(&OrderState::Intent)
            {
                continue;
            }
            let members = members_of(&self.views, &by_order, o.id);
            let mine: HashSet<RowKey> = members
                .iter()
                .map(|(r, v)| RowKey::new(r.as_str(), v.attempt))
                .collect();
            let unknown = |f: &&FoundOrder| !self.by_service_id.contains_key(f.id.as_str());
            let same_rows =
                |f: &&FoundOrder| f.rows.iter().cloned().collect::<HashSet<_>>() == mine;
            // An order of exactly its rows is its own answer (the same grouping gives the
            // same key): recorded on it, never released.
            let answered = service.found.iter().filter(unknown).any(|f| same_rows(&f));
            let elsewhere = service
                .found
                .iter()
                .filter(unknown)
                .any(|f| f.rows.iter().any(|k| mine.contains(k)));
            if members.is_empty() || answered || !elsewhere {
                continue;
            }
            self.claimed_orders.insert(o.id);
            self.report.released.push(o.idempotency_key.clone());
            let refs: Vec<String> = members.iter().map(|(r, _)| (*r).clone()).collect();
            if !self.dry_run {
                self.ledger.release_intent(
                    o.id,
                    "reconcile: its rows are in orders another ledger made; never sent",
                )?;
            }
            self.order_states.insert(o.id, OrderState::Cancelled);
            for r in refs {
                if let Some(v) = self.views.get_mut(&r) {
                    v.state = RowState::Pending;
                    v.order_id = None;
                }
            }
        }
        Ok(())
    }

    /// Takes the service's order `f` into the ledger: brings a known order's status up to
    /// date, records an order on the intent it answers, or adopts it for its rows when they can
    /// take it; reports what only a person can settle.
    pub(super) async fn take_order(
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
        let first_ref = f.rows[0].reference.clone();
        // The attempt this order pays for each row (its own when the order does not say).
        let attempts: Vec<i64> = f
            .rows
            .iter()
            .zip(&members)
            .map(|(k, v)| if k.attempt == 0 { v.attempt } else { k.attempt })
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
    fn rows_of(&mut self, f: &FoundOrder) -> Option<Vec<RowSoFar>> {
        let members: Vec<RowSoFar> = f
            .rows
            .iter()
            .filter_map(|k| self.views.get(&k.reference).cloned())
            .collect();
        if members.len() == f.rows.len() {
            return Some(members);
        }
        for k in &f.rows {
            if !self.views.contains_key(&k.reference) {
                self.report
                    .unknown_rows
                    .push((k.reference.clone(), f.id.clone()));
            }
        }
        None
    }

    /// The ledger's intent that an order of `members` at `attempts` answers: the intent holding
    /// all of them, at the same attempts.
    fn intent_answered(&self, members: &[RowSoFar], attempts: &[i64]) -> Option<i64> {
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
        for k in &f.rows {
            if let Some(v) = self.views.get_mut(&k.reference) {
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
        members: &[RowSoFar],
        attempts: &[i64],
    ) -> Result<(), ReconcileError> {
        let mut new_order = None;
        if !self.dry_run {
            // The key the service's order was sent under: of its rows as it spells them.
            let theirs = self.spelt.get(&f.id);
            let keyed: Vec<(&str, i64)> = f
                .rows
                .iter()
                .enumerate()
                .zip(attempts)
                .map(|((i, k), a)| {
                    let spelt = theirs.and_then(|t| t.get(i)).unwrap_or(&k.reference);
                    (spelt.as_str(), *a)
                })
                .collect();
            let key = order_body::order_key(&self.batch.environment, &self.batch.name, &keyed);
            let currency = members[0]
                .spec
                .as_ref()
                .map(|s| s.payment_currency.clone())
                .unwrap_or_default();
            let ids: Vec<(i64, i64)> = members
                .iter()
                .zip(attempts)
                .map(|(v, a)| (v.id, *a))
                .collect();
            if crate::failpoint::full("adopt_order") {
                return Err(crate::ledger::LedgerError::full_disk(self.ledger.path()).into());
            }
            let order_id = self
                .ledger
                .adopt_order(self.batch.id, &key, &currency, &ids, &f.id)?;
            if f.status.is_terminal() {
                self.apply_terminal(order_id, &f.id).await?;
            }
            new_order = Some(order_id);
        }
        let to = order_state_of(f.status);
        for (k, a) in f.rows.iter().zip(attempts) {
            if let Some(v) = self.views.get_mut(&k.reference) {
                v.state = crate::ledger::row_state_for(to);
                v.attempt = *a;
                v.order_id = new_order;
            }
        }
        Ok(())
    }

    /// In-doubt intents with no order at the service: never created; safe to send again, with
    /// the same key unless that key can only get its server error back; while an order of the
    /// account still processing cannot be attributed, it stays in doubt. A key is given up only
    /// when the service's list is fully read and none of the intent's rows is in an order there
    /// of its attempt or a later one (or of an unknown attempt): anything less, and the same
    /// key is sent again, which cannot pay twice. Orders of earlier attempts (failed, retried
    /// since) are history.
    pub(super) fn settle_in_doubt(
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
            if self.unattributed_processing {
                // An order still processing that cannot be attributed may be this intent's own
                // (its answer lost). A finished one answered bare names nothing by waiting: the
                // intent is cleared and its key sent again, whose answer names it.
                self.report.kept_in_doubt.push(o.idempotency_key.clone());
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
    pub(super) fn finish(self) -> Result<ReconcileReport, ReconcileError> {
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
        report.reissued.sort();
        report.superseded.sort();
        report.retired.sort();
        report.kept_in_doubt.sort();
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
            crate::batch::record::record_terminal_in(self.ledger, order_id, &full, 200)?;
        }
        Ok(())
    }
}

/// Whether rows (`members`) can take an order of theirs at `attempts`: rows not ordered yet,
/// or FAILED or REJECTED at an earlier attempt.
fn rows_can_take(members: &[RowSoFar], attempts: &[i64]) -> bool {
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
