//! The service as the ledger every machine shares, row by row: before a run sends anything,
//! the order list is read since this ledger last read it ([`sync_service`]), every finished
//! order of paybatch's that the ledger does not know is read whole once (its metadata names
//! every row) and kept in the ledger for ever (`ledger::service_orders`); then
//! [`check_service`] refuses orders of this batch another ledger made, and hands the rows of
//! other batches' orders to the check of the file's rows ([`super::Earlier::with_service`]).
//!
//! A read that did not reach one of the list's documented ends has proved nothing: it refuses
//! to send (exit 5), saying how far it got and what was odd.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use super::findings::short_date;
use crate::api::Client;
use crate::api::client::read_retrying_until;
use crate::api::models::{Order, OrderView};
use crate::batch::{order_body, window};
use crate::ledger::Ledger;
use crate::ledger::service_orders::LearnedOrder;
use crate::ops::error::{self, OpError};

/// Full orders read at once.
const FULL_READS_AT_ONCE: usize = 16;

/// A later read starts this far before where the last one ended: an order the list shows a
/// little late is not missed.
pub const READ_OVERLAP_MINUTES: i64 = 60;

/// How long a read waits, at most (and never past `--poll-timeout`), for orders of the account
/// that are still processing and that this ledger does not know (the list shows nothing of
/// them but their id) to finish.
pub const PROCESSING_WAIT: Duration = Duration::from_secs(60);

/// A refused key or version (exit 2) apart from a service that could not be read (exit 5: the
/// check proved nothing, nothing was sent).
fn refused_or_unread(e: crate::api::ApiError, what: &str) -> OpError {
    if error::is_auth_error(&e) {
        OpError::Auth(e)
    } else {
        OpError::Unsettled {
            message: format!(
                "cannot read {what}: {e}; without it no row can be checked against what other ledgers paid, so nothing was submitted"
            ),
            help: "run the same command again once the service answers".into(),
        }
    }
}

/// What one read of the service's order list did ([`sync_service`]).
#[derive(Debug, Clone, Default)]
pub struct ServiceSync {
    /// Pages of the order list read.
    pub pages: usize,
    /// How far back this read went (RFC 3339); whether it was the first of this ledger (30
    /// days and a margin back) or went back to where the last one ended.
    pub since: String,
    pub first_read: bool,
    /// The orders of other ledgers read whole (and kept) by this read.
    pub learned: Vec<String>,
    /// Orders of other ledgers this ledger knows in all, and of them those known only by the
    /// first row their description names (the service gave no metadata).
    pub foreign_orders: i64,
    pub first_rows_only: i64,
    /// Finished orders at the service answered with neither description nor metadata, in the
    /// list and whole: whose they are cannot be told, and rows they may hold are not checked.
    pub untold: i64,
}

/// Reads the order list of the service `client` talks to (recorded as `base_url`) since this
/// ledger last read it (the first time: the service's idempotency window and a margin), reads
/// whole each finished order of paybatch's that the ledger does not know, waits a while for
/// unknown orders still processing, and keeps what it learned in the ledger (durably, before
/// anything is sent). Refused (exit 5): a read that stopped before a documented end, a page or
/// an order that could not be read, unknown orders still processing after the wait.
pub async fn sync_service(
    ledger: &impl LedgerAccess,
    client: &Client,
    base_url: &str,
    allow_untold: bool,
) -> Result<ServiceSync, OpError> {
    let mark = ledger.with(|l| l.service_read_mark(base_url))?;
    let since = mark
        .as_ref()
        .and_then(|m| DateTime::parse_from_rfc3339(&m.read_to).ok())
        .map(|t| t.with_timezone(&Utc) - chrono::Duration::minutes(READ_OVERLAP_MINUTES));
    let first_read = since.is_none();
    let since = since.unwrap_or_else(|| window::window_since(Utc::now(), None));
    let listed = window::read_window(client, since)
        .await
        .map_err(|e| refused_or_unread(e, "the service's order list"))?;
    if !listed.complete {
        return Err(incomplete(&listed));
    }
    let to_read = ledger.with(|l| unknown_orders(l, base_url, &listed))?;
    // What the list said of each order, for a whole answer that leaves its description out.
    let listed_descriptions: std::collections::HashMap<&str, &str> = listed
        .orders
        .iter()
        .filter_map(|o| Some((o.id.as_str(), o.description()?)))
        .collect();
    let learning = learn(
        ledger,
        client,
        base_url,
        allow_untold,
        to_read,
        &listed_descriptions,
    )
    .await?;
    // What was learned is kept even when the read refuses: a finished order never changes,
    // and is not read again. The mark moves only past a read that left nothing untold.
    if learning.processing.is_empty()
        && learning.untold.is_empty()
        && learning.unread.is_none()
        && let Some(newest) = listed.newest
    {
        // Never past this machine's clock: one `created_at` in the future would otherwise
        // move every later read past the orders made until then.
        let read_to = newest
            .min(Utc::now())
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        ledger
            .with(|l| l.record_read_mark(base_url, &read_to, listed.pages, learning.ids.len()))?;
    }
    if let Some((id, e)) = learning.unread {
        return Err(refused_or_unread(
            e,
            &format!("order {} at the service", crate::text::escape(&id)),
        ));
    }
    if !learning.processing.is_empty() {
        let in_doubt = ledger.with(|l| sends_maybe_processing(l, &listed, since))?;
        return Err(still_processing(&learning.processing, in_doubt));
    }
    if !learning.untold.is_empty() {
        return Err(untold(&learning.untold));
    }
    let (foreign_orders, first_rows_only, untold) =
        ledger.with(|l| l.service_order_counts(base_url))?;
    Ok(ServiceSync {
        pages: listed.pages,
        since: since.to_rfc3339(),
        first_read,
        learned: learning.ids,
        foreign_orders,
        first_rows_only,
        untold,
    })
}

/// The ledger, reached one short step at a time: by a run before it sends (`&mut Ledger`
/// held alone) and while it sends (the ledger the sending shares), so that no lock is held
/// while the service is read.
pub trait LedgerAccess: Sync {
    fn with<R>(&self, step: impl FnOnce(&mut Ledger) -> R) -> R;
}

impl LedgerAccess for std::sync::Mutex<Ledger> {
    fn with<R>(&self, step: impl FnOnce(&mut Ledger) -> R) -> R {
        // Off the async workers, like every ledger step of a run's sending.
        crate::batch::send_context::with_locked(self, step)
    }
}

impl LedgerAccess for std::sync::Mutex<&mut Ledger> {
    fn with<R>(&self, step: impl FnOnce(&mut Ledger) -> R) -> R {
        crate::batch::send_context::off_the_workers(|| {
            step(&mut self.lock().unwrap_or_else(|p| p.into_inner()))
        })
    }
}

/// The orders of the list that this ledger neither made nor learned: each is read whole.
fn unknown_orders(
    ledger: &Ledger,
    base_url: &str,
    listed: &window::ServiceWindow,
) -> Result<Vec<String>, crate::ledger::LedgerError> {
    let mut to_read = Vec::new();
    for o in &listed.orders {
        let known = if o.is_unnamed() {
            ledger.knows_order(None, &o.id)?
        } else {
            ledger.knows_order(o.key.as_deref(), &o.id)?
        };
        if !known && !ledger.learned_order(base_url, &o.id)? {
            to_read.push(o.id.clone());
        }
    }
    // Finished orders listed without a description (the published list may leave it out):
    // only the whole order says whether it is paybatch's.
    for id in &listed.undescribed_ids {
        if !ledger.knows_order(None, id)? && !ledger.learned_order(base_url, id)? {
            to_read.push(id.clone());
        }
    }
    Ok(to_read)
}

/// Sends of this ledger in doubt (sent, no answer recorded, not cleared by a reconciliation)
/// that an unknown order still processing in the list `listed` may be: sent since the list's
/// read began (`since`; an order made before it is not in the list), their order not shown
/// finished under their key. A send whose time does not read is counted.
fn sends_maybe_processing(
    ledger: &Ledger,
    listed: &window::ServiceWindow,
    since: DateTime<Utc>,
) -> Result<usize, crate::ledger::LedgerError> {
    let finished: std::collections::HashSet<&str> = listed
        .orders
        .iter()
        .filter_map(|o| o.key.as_deref())
        .collect();
    Ok(ledger
        .in_doubt_sends()?
        .iter()
        .filter(|(key, _)| !finished.contains(key.as_str()))
        .filter(|(_, sent)| {
            sent.as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_none_or(|t| t.with_timezone(&Utc) >= since)
        })
        .count())
}

/// Orders read whole and kept at most at once: the rows of a few hundred orders are held in
/// memory, never those of every order of a large first read.
const LEARNED_AT_ONCE: usize = 250;

/// What [`learn`] did: orders of other ledgers kept, orders still processing after the wait,
/// and the first order that could not be read.
#[derive(Default)]
struct Learning {
    /// The orders read whole and kept.
    ids: Vec<String>,
    processing: Vec<String>,
    /// Finished orders answered with neither description nor metadata, or naming only part of
    /// their rows, not kept: read again by the next read (the service may answer them in full
    /// then).
    untold: Vec<String>,
    unread: Option<(String, crate::api::ApiError)>,
}

/// Reads the orders `ids` whole and keeps those that are not this ledger's own, a few hundred
/// to a transaction as they are answered.
async fn learn(
    ledger: &impl LedgerAccess,
    client: &Client,
    base_url: &str,
    allow_untold: bool,
    ids: Vec<String>,
    listed: &std::collections::HashMap<&str, &str>,
) -> Result<Learning, OpError> {
    let batches = ledger.with(|l| OwnBatches::of(l))?;
    // What this ledger sent without an answer: a bare answer may be one of them.
    let in_doubt = ledger.with(|l| l.in_doubt_bodies())?;
    let mut out = Learning::default();
    let mut chunk = Vec::new();
    // An order this run is sending shows in the list, unknown, until its answer is recorded:
    // it is not waited for once the ledger knows it.
    let ours = |id: &str| ledger.with(|l| l.knows_order(None, id)).unwrap_or(false);
    let mut reads = std::pin::pin!(read_whole(client, ids, &ours));
    while let Some((id, view)) = reads.next().await {
        let Some(view) = view else {
            continue;
        };
        match view {
            Ok(OrderView::Done(mut order)) => {
                if order.description.is_none() {
                    order.description = listed.get(order.id.as_str()).map(|d| d.to_string());
                }
                let key = order
                    .description
                    .as_deref()
                    .and_then(order_body::key_in_description)
                    .map(str::to_string)
                    .or_else(|| batches.key_of(&order));
                if ledger.with(|l| l.knows_order(key.as_deref(), &order.id))? {
                    continue;
                }
                if (is_bare(&order) || names_part_of_its_rows(&order)) && !allow_untold {
                    // Item for item what an intent of this ledger in doubt asked: most likely
                    // its answer, which sending its key again names (the same key cannot pay
                    // twice). Neither kept nor held against the run.
                    let ours = in_doubt
                        .iter()
                        .any(|body| crate::batch::verify::asks_the_same(body, &order));
                    if !ours {
                        out.untold.push(order.id);
                    }
                    continue;
                }
                out.ids.push(order.id.clone());
                chunk.push(learned_order(&order));
                if chunk.len() >= LEARNED_AT_ONCE {
                    ledger.with(|l| l.record_service_orders(base_url, &chunk))?;
                    chunk.clear();
                }
            }
            Ok(OrderView::Processing(_)) => out.processing.push(id),
            Err(e) if error::is_auth_error(&e) => return Err(OpError::Auth(e)),
            Err(e) => out.unread = out.unread.or(Some((id, e))),
        }
    }
    ledger.with(|l| l.record_service_orders(base_url, &chunk))?;
    Ok(out)
}

/// An order's whole answer, or none when it turned out to be this ledger's own while it was
/// waited for.
type Whole = Option<Result<OrderView, crate::api::ApiError>>;

/// Reads each order whole, a few at a time, as a stream of answers; an order still processing
/// is read again, a little later each time, for at most [`PROCESSING_WAIT`], unless `ours`
/// says it is this ledger's own by then.
fn read_whole<'a>(
    client: &'a Client,
    ids: Vec<String>,
    ours: &'a (dyn Fn(&str) -> bool + Sync),
) -> impl futures::Stream<Item = (String, Whole)> + 'a {
    let wait = tokio::time::Instant::now() + PROCESSING_WAIT;
    // Never past the run's own patience (`--poll-timeout`).
    let until = client.deadline().map_or(wait, |d| d.min(wait));
    futures::stream::iter(ids.into_iter().map(move |id| async move {
        let mut pause = Duration::from_millis(250);
        loop {
            let view = read_retrying_until(client.deadline(), || client.order(&id)).await;
            let waiting = matches!(view, Ok(OrderView::Processing(_)));
            if waiting && ours(&id) {
                return (id, None);
            }
            if !waiting || tokio::time::Instant::now() + pause > until {
                return (id, Some(view));
            }
            tokio::time::sleep(pause).await;
            if ours(&id) {
                return (id, None);
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }))
    .buffer_unordered(FULL_READS_AT_ONCE)
}

/// The batches of this ledger, by the tag an order's metadata names them with: an order
/// answered without its description (which names its key) is this ledger's own when the key
/// its batch, rows and attempts make is one the ledger holds (an intent in doubt, answered).
struct OwnBatches(Vec<(String, String, String)>);

impl OwnBatches {
    fn of(ledger: &Ledger) -> Result<Self, crate::ledger::LedgerError> {
        Ok(OwnBatches(
            ledger
                .batches()?
                .into_iter()
                .map(|b| (order_body::batch_tag(&b.name), b.environment, b.name))
                .collect(),
        ))
    }

    /// The key this ledger would have given the order, from its metadata.
    fn key_of(&self, order: &Order) -> Option<String> {
        let meta = order.metadata.as_ref()?;
        let tag = order_body::batch_in_metadata(meta)?;
        let (_, environment, name) = self.0.iter().find(|(t, _, _)| t == tag)?;
        let references = order_body::references_in_metadata(meta);
        let attempts = order_body::attempts_in_metadata(meta, references.len())?;
        let rows: Vec<(&str, i64)> = references
            .iter()
            .map(String::as_str)
            .zip(attempts)
            .collect();
        (!rows.is_empty()).then(|| order_body::order_key(environment, name, &rows))
    }
}

/// A finished order as this ledger keeps it. One whose metadata and description (its whole
/// answer's, else the list's) name no batch is kept without a batch or rows, so that it is not
/// read again: another tool's order, or one the service answered with neither (both optional
/// in the published contract), which cannot be told apart; the run says how many there are.
fn learned_order(order: &Order) -> LearnedOrder {
    let meta = order.metadata.clone().unwrap_or_default();
    let described = order
        .description
        .as_deref()
        .and_then(order_body::read_description);
    let tag = order_body::batch_in_metadata(&meta).map(str::to_string);
    let references = order_body::references_in_metadata(&meta);
    let (rows, rows_whole) = if tag.is_some() && !references.is_empty() {
        // Kept when the run was told to pay past orders it cannot tell whole
        // (`--allow-untold-orders`): the rows it names, not as all of its rows.
        let whole = !names_part_of_its_rows(order);
        let attempts = order_body::attempts_in_metadata(&meta, references.len());
        let rows = references
            .into_iter()
            .enumerate()
            .map(|(i, r)| (r, attempts.as_ref().and_then(|a| a.get(i).copied())))
            .collect();
        (rows, whole)
    } else {
        let first = described
            .as_ref()
            .filter(|d| !d.first_reference_cut)
            .and_then(|d| d.first_reference)
            .map(|r| (r.to_string(), None));
        // Paybatch's description names its first row only. Without a description or
        // metadata, whose it is cannot be told: kept as such (`rows_whole` false, no batch),
        // counted and said by every run. Another tool's order says so by what it shows.
        let told = described.is_none()
            && (order.description.is_some()
                || order.metadata.as_ref().is_some_and(|m| !m.is_empty()));
        (first.into_iter().collect(), told)
    };
    let tag = tag.or_else(|| {
        described
            .as_ref()
            .filter(|d| d.first_reference.is_some() || !d.cut)
            .and_then(|d| d.batch)
            .map(order_body::batch_tag)
    });
    LearnedOrder {
        service_order_id: order.id.clone(),
        key: described.as_ref().and_then(|d| d.key).map(str::to_string),
        batch_tag: tag,
        status: order.status.as_str().to_string(),
        created_at: order.created_at.clone(),
        rows,
        rows_whole,
    }
}

/// The refusal of a read that stopped before a documented end of the list.
fn incomplete(listed: &window::ServiceWindow) -> OpError {
    let reached = listed
        .oldest
        .map(|t| format!(" back to orders created {}", t.to_rfc3339()))
        .unwrap_or_default();
    OpError::Unsettled {
        message: format!(
            "the service's order list was read {} page{}{reached} and stopped before its end: {}; a read that did not reach an end proves nothing, so nothing was submitted",
            listed.pages,
            if listed.pages == 1 { "" } else { "s" },
            listed.odd.as_deref().unwrap_or("no end was reached"),
        ),
        help: "run the same command again in a minute; if it stays, the service's order list is not as documented: ask the service's support".into(),
    }
}

/// Whether a finished order says nothing of whose it is: neither description (its whole
/// answer's, else the list's) nor metadata.
/// Whether a finished order of paybatch's (its metadata names a batch) names fewer or more
/// rows than it has items: an answer whose metadata lost a piece (or whose compact references
/// do not read) tells only part of the rows it pays. Whose the others are cannot be told, as
/// for a bare answer. An answer without items (which the published contract allows for no
/// finished order) is taken at its metadata's word.
fn names_part_of_its_rows(order: &Order) -> bool {
    let Some(meta) = order.metadata.as_ref() else {
        return false;
    };
    order_body::batch_in_metadata(meta).is_some()
        && !order.items.is_empty()
        && order_body::references_in_metadata(meta).len() != order.items.len()
}

fn is_bare(order: &Order) -> bool {
    order
        .description
        .as_deref()
        .is_none_or(|d| d.trim().is_empty())
        && order.metadata.as_ref().is_none_or(|m| m.is_empty())
}

/// The first few of `ids`, escaped, and `...` when there are more.
fn first_ids(ids: &[String]) -> String {
    let mut named: Vec<String> = ids
        .iter()
        .take(5)
        .map(|id| crate::text::escape(id).into_owned())
        .collect();
    if ids.len() > named.len() {
        named.push("...".into());
    }
    named.join(", ")
}

/// The refusal of finished orders that say nothing of whose they are, or name only part of
/// their rows.
fn untold(ids: &[String]) -> OpError {
    OpError::Unsettled {
        message: format!(
            "{} finished orders at the service were answered with neither description nor metadata, or with metadata naming fewer or more rows than their items ({}; both are optional in its published contract): whose they are or which rows they paid cannot be told, so they may hold this batch's rows, paid from another ledger; nothing was submitted",
            ids.len(),
            first_ids(ids)
        ),
        help: "run the same command again in a while: they are read again, and the service usually answers them in full; if they are not paybatch's (another tool's orders on this account), pay anyway with --allow-untold-orders (rows they may hold are then not checked)".into(),
    }
}

/// The refusal of orders still processing that this ledger does not know. With sends of this
/// ledger in doubt (`in_doubt`: sent, no answer recorded), they may be those sends' own orders,
/// made by the service and their answer lost: said so, since sending them again before the
/// orders show whose they are could pay another ledger's rows twice.
fn still_processing(ids: &[String], in_doubt: usize) -> OpError {
    let whose = if in_doubt == 0 {
        "they may hold this batch's rows, being paid from another ledger now".to_string()
    } else {
        format!(
            "they may be this ledger's own ({in_doubt} of its sends have no answer recorded: the service may have made those orders and the answer been lost), or hold this batch's rows, being paid from another ledger now; sending again before they show whose they are could pay rows twice"
        )
    };
    OpError::Unsettled {
        message: format!(
            "{} orders are still processing at the service after a wait, and this ledger does not know them ({}): the service shows nothing of them but their id, so {whose}; nothing was submitted",
            ids.len(),
            first_ids(ids)
        ),
        help: format!(
            "run the same command again once they finish (in a minute or two): the service then shows whose they are{}",
            if in_doubt == 0 {
                ""
            } else {
                ", and an order of this ledger's is known by its key and never paid again (if the service answers its key only with an error, `paybatch reconcile` records it)"
            }
        ),
    }
}

/// Refuses (exit 3) when the service holds orders of `batch` that this ledger does not know:
/// another ledger's run of it (a colleague's laptop, a second cron host, a lost ledger), with
/// how to adopt them. The rows of other batches' orders are checked row by row later
/// ([`super::Earlier::with_service`]).
pub fn check_service(
    sync: ServiceSync,
    ledger: &Ledger,
    base_url: &str,
    batch: &str,
    input: &std::path::Path,
) -> Result<ServiceSync, OpError> {
    let ours = ledger.service_orders_of_batch(base_url, &order_body::batch_tag(batch))?;
    if !ours.is_empty() {
        let first = ours
            .iter()
            .filter_map(|(_, at)| at.as_deref())
            .min()
            .map(|t| short_date(t).to_string())
            .unwrap_or_else(|| "unknown".into());
        return Err(OpError::Refused {
            message: format!(
                "batch {} already has {} orders at the service (first {first}, e.g. {}) that this ledger does not know; nothing was submitted",
                crate::text::escape(batch),
                ours.len(),
                crate::text::escape(&ours[0].0)
            ),
            help: format!(
                "adopt them with `paybatch reconcile --batch {} --rebuild {}`, then run the same command: it pays only what is missing; if this is another batch that shares the name, give it its own with --batch NAME",
                crate::text::shell_word(batch),
                crate::text::shell_word(&input.display().to_string())
            ),
        });
    }
    Ok(sync)
}

impl ServiceSync {
    /// What the read found, for the person running the batch: one line, then warnings.
    pub fn lines(&self) -> (String, Vec<String>) {
        let s = self;
        let head = format!(
            "service: {} page{} of its order list read back to {}{}; {} orders of other ledgers known row by row{}",
            s.pages,
            if s.pages == 1 { "" } else { "s" },
            short_date(&s.since),
            if s.first_read {
                " (no earlier read of this ledger to start from)"
            } else {
                " (where the last read ended)"
            },
            s.foreign_orders,
            if !s.learned.is_empty() {
                format!(", {} read whole now", s.learned.len())
            } else {
                String::new()
            }
        );
        let mut warnings = Vec::new();
        if s.first_rows_only > 0 {
            warnings.push(format!(
                "{} orders of other ledgers at the service were answered without their metadata, or with only part of it: only the rows they name (else their first rows) are known, which the file's rows are compared with",
                s.first_rows_only
            ));
        }
        if s.untold > 0 {
            warnings.push(format!(
                "{} orders at the service were answered with neither description nor metadata (both optional in the published contract): whose they are cannot be told, and rows of this file they may hold are not checked",
                s.untold
            ));
        }
        (head, warnings)
    }
}
