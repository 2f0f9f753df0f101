//! Polling: the accepted orders are read until each is finished (or the run's patience ends),
//! their statuses many at a time from the order list, each finished order fetched whole once,
//! checked against what was sent and recorded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::api::models::OrderView;
use crate::api::{ApiError, Client};
use crate::failpoint;
use crate::ledger::{OrderRecord, OrderState};

use super::options::RunOptions;
use super::outcome::{RunError, is_auth_error};
use super::stage::{Stage, record_terminal};

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
pub async fn poll_all(
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
    let bar = stage.reporter.phase(waiting.len() as u64, "poll");
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
    bar.finish();
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
