//! The service's recent orders, as its order list shows them: what a batch new to a ledger
//! checks before it sends anything, so that a batch already paid (from another ledger, another
//! machine, or under another batch name) is not paid again.
//!
//! The service keeps an order's idempotency key for 30 days; within them the same key replays
//! the first answer, after them it places a new order. [`read_window`] reads the order list
//! newest first back to a given time ([`window_since`]: at least those 30 days), and keeps, of
//! each entry, only what names paybatch's orders: the key, the batch and the first row of its
//! `description` (the list shows nothing else of an order: no `metadata`, no items). A
//! PROCESSING order shows only `{id, status, message}`: it is kept as such, to be counted as
//! one that cannot be told. Whose an order is, the check of a run against the service
//! (`repeats/service.rs`) reads from the whole order.

use chrono::{DateTime, Utc};

use crate::api::client::{PageQuery, read_retrying_until};
use crate::api::models::{OrderStatus, OrderSummary};
use crate::api::{ApiError, Client};

use super::order_body;

/// Pages of the list read at most: 400 pages of [`PAGE_SIZE`], 200,000 orders. A window that
/// holds more is read as far as that and marked incomplete ([`ServiceWindow::complete`]).
pub const MAX_WINDOW_PAGES: usize = 400;

/// Orders asked for per page: the most the service gives.
pub const PAGE_SIZE: u32 = 500;

/// How long the service keeps an idempotency key and its answer.
pub const IDEMPOTENCY_DAYS: i64 = 30;

/// Read further back than the idempotency window by this much, for a clock of this machine
/// behind the service's.
pub const CLOCK_MARGIN_HOURS: i64 = 24;

/// How much newer than an entry listed before it an entry may be and still be in order: orders
/// created at once (a batch sends many in parallel) may be listed a moment apart from their
/// `created_at`. Far less than any read's overlap ([`CLOCK_MARGIN_HOURS`], and the hour a later
/// read starts before the last one ended).
pub const ORDER_SLACK_SECONDS: i64 = 300;

/// Where a read of the window stops: the service's idempotency window (plus
/// [`CLOCK_MARGIN_HOURS`]) before `now`, or `start` when that is earlier.
pub fn window_since(now: DateTime<Utc>, start: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let window =
        chrono::Duration::days(IDEMPOTENCY_DAYS) + chrono::Duration::hours(CLOCK_MARGIN_HOURS);
    let edge = now
        .checked_sub_signed(window)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    match start {
        Some(s) if s < edge => s,
        _ => edge,
    }
}

/// One entry of the order list that is paybatch's (its `description` starts with `paybatch `),
/// or that shows nothing but `{id, status, message}` (an order still PROCESSING).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOrder {
    /// The service's order id.
    pub id: String,
    pub status: OrderStatus,
    /// When the service created it (none for a PROCESSING entry, or a time it could not read).
    pub created_at: Option<DateTime<Utc>>,
    /// The idempotency key the description starts with (none in the older form).
    pub key: Option<String>,
    /// The batch name as the description writes it, possibly cut.
    pub batch: Option<String>,
    /// The first row's reference as the description writes it, possibly cut
    /// ([`ListedOrder::first_reference_cut`]).
    pub first_reference: Option<String>,
    /// The description is as long as the service keeps one: it may have been cut.
    pub description_cut: bool,
    /// The first reference may not be whole (the description may have been cut inside or
    /// before it).
    pub first_reference_cut: bool,
    /// The description as listed (none for an entry that shows none).
    description: Option<String>,
}

impl ListedOrder {
    /// The entry as kept, or `None` when it is not paybatch's: a finished order whose
    /// description does not start with `paybatch ` (or that shows none).
    pub fn from_entry(entry: OrderSummary) -> Option<ListedOrder> {
        let created_at = entry
            .created_at
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        let Some(description) = entry.description else {
            if entry.status.is_terminal() {
                return None;
            }
            return Some(ListedOrder {
                id: entry.id,
                status: entry.status,
                created_at,
                key: None,
                batch: None,
                first_reference: None,
                description_cut: false,
                first_reference_cut: false,
                description: None,
            });
        };
        let parts = order_body::read_description(&description)?;
        Some(ListedOrder {
            id: entry.id,
            status: entry.status,
            created_at,
            key: parts.key.map(str::to_string),
            batch: parts.batch.map(str::to_string),
            first_reference: parts.first_reference.map(str::to_string),
            description_cut: parts.cut,
            first_reference_cut: parts.first_reference_cut,
            description: Some(description),
        })
    }

    /// The description as listed.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// An entry that shows nothing of its order but `{id, status, message}`: a PROCESSING
    /// order, which may be anyone's.
    pub fn is_unnamed(&self) -> bool {
        self.description.is_none()
    }
}

/// The service's orders back to a time, as far as they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceWindow {
    /// paybatch's orders (description starting `paybatch `), and the PROCESSING entries that
    /// show only `{id, status, message}`; newest first, as listed.
    pub orders: Vec<ListedOrder>,
    /// Pages read.
    pub pages: usize,
    /// How far back the window was to be read.
    pub since: DateTime<Utc>,
    /// The list was read to one of its documented ends: back past `since`, or its last page.
    /// False when the read stopped anywhere else ([`ServiceWindow::odd`] says why).
    pub complete: bool,
    /// Finished entries listed without a description (never paybatch's, which always writes
    /// one, unless the list leaves it out), and their ids: only the whole order tells whose
    /// they are.
    pub undescribed: usize,
    pub undescribed_ids: Vec<String>,
    /// Why the read stopped before a documented end: an entry out of order, a cursor given
    /// twice, the page cap ([`MAX_WINDOW_PAGES`]) reached.
    pub odd: Option<String>,
    /// The newest `created_at` listed, and the oldest read so far.
    pub newest: Option<DateTime<Utc>>,
    pub oldest: Option<DateTime<Utc>>,
}

/// [`read_window_pages`] with at most [`MAX_WINDOW_PAGES`] pages (200,000 orders).
pub async fn read_window(client: &Client, since: DateTime<Utc>) -> Result<ServiceWindow, ApiError> {
    read_window_pages(client, since, MAX_WINDOW_PAGES).await
}

/// Reads the order list newest first, [`PAGE_SIZE`] orders a page following the `after`
/// cursor, until one of its documented ends: the last page (no `after` cursor), or a page
/// holding an entry created before `since` whose entries are all in the documented order
/// (newest first, within [`ORDER_SLACK_SECONDS`]). An empty page with a cursor is read on. Anything else ends the read
/// without reaching an end, and the window says why ([`ServiceWindow::odd`]): an entry listed
/// after a newer one, a finished entry whose `created_at` cannot be read, a cursor given
/// twice, `max_pages` pages read. A read the service answers with a transient error is tried
/// again ([`read_retrying_until`], within the client's deadline). Only paybatch's entries and
/// the PROCESSING ones are kept, parsed.
pub async fn read_window_pages(
    client: &Client,
    since: DateTime<Utc>,
    max_pages: usize,
) -> Result<ServiceWindow, ApiError> {
    let mut window = ServiceWindow {
        orders: Vec::new(),
        pages: 0,
        since,
        complete: false,
        undescribed: 0,
        undescribed_ids: Vec::new(),
        odd: None,
        newest: None,
        oldest: None,
    };
    let mut query = PageQuery {
        limit: Some(PAGE_SIZE),
        ..Default::default()
    };
    let mut cursors = std::collections::HashSet::new();
    loop {
        if window.pages >= max_pages {
            window.odd = Some(format!(
                "{} pages read, the most one read takes (at most {} orders a page)",
                window.pages, PAGE_SIZE
            ));
            break;
        }
        let page = read_retrying_until(client.deadline(), || client.orders(&query)).await?;
        window.pages += 1;
        let older = match window.take_page(page.items) {
            Ok(older) => older,
            Err(odd) => {
                window.odd = Some(odd);
                break;
            }
        };
        if older {
            window.complete = true;
            break;
        }
        match page.pagination.cursors.after {
            None => {
                window.complete = true;
                break;
            }
            Some(after) => {
                if !cursors.insert(after.clone()) {
                    window.odd = Some(format!(
                        "page {} gave a cursor it had given before: the list does not move on",
                        window.pages
                    ));
                    break;
                }
                query.after = Some(after);
            }
        }
    }
    Ok(window)
}

impl ServiceWindow {
    /// Takes one page's entries, newest first: whether it reached an entry created before
    /// `since` (the entries from there on are not kept), or why the page is not in the
    /// documented order.
    fn take_page(&mut self, items: Vec<OrderSummary>) -> Result<bool, String> {
        let mut older = false;
        for entry in items {
            let created = match entry.created_at.as_deref() {
                Some(t) => match DateTime::parse_from_rfc3339(t) {
                    Ok(at) => Some(at.with_timezone(&Utc)),
                    Err(_) => {
                        return Err(format!(
                            "order {} is listed with a created_at that cannot be read ({})",
                            crate::text::escape(&entry.id),
                            crate::text::escape(t)
                        ));
                    }
                },
                None if entry.status.is_terminal() => {
                    return Err(format!(
                        "finished order {} is listed without its created_at",
                        crate::text::escape(&entry.id)
                    ));
                }
                None => None,
            };
            if let Some(at) = created {
                if let Some(before) = self.oldest
                    && at > before + chrono::Duration::seconds(ORDER_SLACK_SECONDS)
                {
                    return Err(format!(
                        "order {} (created {}) is listed after an order created {}: the list is to be newest first",
                        crate::text::escape(&entry.id),
                        at.to_rfc3339(),
                        before.to_rfc3339()
                    ));
                }
                self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
                self.newest = Some(self.newest.map_or(at, |n| n.max(at)));
                if at < self.since {
                    older = true;
                }
            }
            // Past the read's start, only the entries that show no `created_at` (orders still
            // processing, whose place in the list nothing fixes) are still kept.
            if older && created.is_some() {
                continue;
            }
            if entry.description.is_none() && entry.status.is_terminal() {
                self.undescribed += 1;
                self.undescribed_ids.push(entry.id.clone());
            }
            if let Some(kept) = ListedOrder::from_entry(entry) {
                self.orders.push(kept);
            }
        }
        Ok(older)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const KEY: &str = "0b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c11";

    fn at(day: u32) -> String {
        Utc.with_ymd_and_hms(2026, 11, day, 12, 0, 0)
            .single()
            .map(|t| t.to_rfc3339())
            .unwrap_or_default()
    }

    fn finished(id: &str, day: u32, description: Option<&str>) -> OrderSummary {
        OrderSummary {
            id: id.to_string(),
            status: OrderStatus::Completed,
            created_at: Some(at(day)),
            completed_at: Some(at(day)),
            description: description.map(str::to_string),
            payment_method: None,
            currency: Some("USD".into()),
            total_price: None,
            total_discount: None,
            metadata: None,
        }
    }

    fn processing(id: &str) -> OrderSummary {
        OrderSummary {
            id: id.to_string(),
            status: OrderStatus::Processing,
            created_at: None,
            completed_at: None,
            description: None,
            payment_method: None,
            currency: None,
            total_price: None,
            total_discount: None,
            metadata: None,
        }
    }

    fn listed(entry: OrderSummary) -> ListedOrder {
        ListedOrder::from_entry(entry).expect("kept")
    }

    #[test]
    fn entries_are_read_in_every_form_paybatch_writes() {
        let one = listed(finished(
            "O-1",
            3,
            Some(&order_body::description(KEY, "nov", &["EMP-1"])),
        ));
        assert_eq!(one.key.as_deref(), Some(KEY));
        assert_eq!(one.batch.as_deref(), Some("nov"));
        assert_eq!(one.first_reference.as_deref(), Some("EMP-1"));
        assert!(!one.description_cut && !one.first_reference_cut);
        assert_eq!(one.created_at.map(|t| t.to_rfc3339()), Some(at(3)));

        let many = listed(finished(
            "O-2",
            3,
            Some(&order_body::description(
                KEY,
                "nov 2026",
                &["A 1", "B", "C"],
            )),
        ));
        assert_eq!(many.batch.as_deref(), Some("nov 2026"));
        assert_eq!(many.first_reference.as_deref(), Some("A 1"));
        assert!(!many.first_reference_cut);

        let old = listed(finished("O-3", 3, Some("paybatch batch=nov row=EMP-9")));
        assert_eq!(old.key, None);
        assert_eq!(old.batch.as_deref(), Some("nov"));
        assert_eq!(old.first_reference.as_deref(), Some("EMP-9"));

        // A batch name holding ` row=`: split at the last one.
        let odd = listed(finished(
            "O-4",
            3,
            Some(&order_body::description(KEY, "a row=b", &["R"])),
        ));
        assert_eq!(odd.batch.as_deref(), Some("a row=b"));
        assert_eq!(odd.first_reference.as_deref(), Some("R"));
    }

    #[test]
    fn cut_descriptions_say_what_they_may_have_lost() {
        // Cut inside the first reference of one row.
        let reference = "R".repeat(100);
        let d = order_body::description(KEY, "nov", &[&reference]);
        let o = listed(finished("O-1", 3, Some(&d)));
        assert!(o.description_cut && o.first_reference_cut);
        assert_eq!(
            o.first_reference.as_deref(),
            Some(&reference[..128 - 9 - 36 - " batch=nov row=".len()])
        );
        // Cut inside `(+N more)`: the first reference is whole.
        let first = "F".repeat(60);
        let d = order_body::description(KEY, "nov", &[&first, "x", "y"]);
        assert_eq!(d.chars().count(), 128);
        let o = listed(finished("O-2", 3, Some(&d)));
        assert!(o.description_cut && !o.first_reference_cut);
        assert_eq!(o.first_reference.as_deref(), Some(first.as_str()));
        // Cut inside the batch name: no reference at all.
        let long = "b".repeat(200);
        let d = order_body::description(KEY, &long, &["EMP-1"]);
        let o = listed(finished("O-3", 3, Some(&d)));
        assert!(o.first_reference_cut);
        assert_eq!(o.first_reference, None);
        assert_eq!(o.batch.as_deref(), Some(&long[..128 - 52]));
    }

    #[test]
    fn foreign_and_processing_entries() {
        assert_eq!(
            ListedOrder::from_entry(finished("O-1", 3, Some("Team lunch"))),
            None
        );
        assert_eq!(ListedOrder::from_entry(finished("O-2", 3, None)), None);
        assert_eq!(
            ListedOrder::from_entry(finished("O-3", 3, Some("paybatchx batch=nov row=1"))),
            None
        );
        let p = listed(processing("O-4"));
        assert!(p.is_unnamed());
        assert_eq!((p.description(), p.batch.as_deref()), (None, None));
        // A processing entry that shows its description (the older list) is read as any.
        let mut shown = processing("O-5");
        shown.description = Some(order_body::description(KEY, "nov", &["EMP-1"]));
        let shown = listed(shown);
        assert!(!shown.is_unnamed());
        assert_eq!(shown.batch.as_deref(), Some("nov"));
    }

    #[test]
    fn the_window_reaches_back_30_days_and_a_margin_or_to_an_earlier_start() {
        let now = Utc
            .with_ymd_and_hms(2026, 12, 31, 0, 0, 0)
            .single()
            .expect("time");
        let edge = now - chrono::Duration::days(31);
        assert_eq!(window_since(now, None), edge);
        assert_eq!(
            window_since(now, Some(now - chrono::Duration::days(2))),
            edge
        );
        let early = now - chrono::Duration::days(90);
        assert_eq!(window_since(now, Some(early)), early);
    }
}
