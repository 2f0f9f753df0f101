//! `status`: what the ledger says of its batches, without asking the service: every batch with
//! its rows per state ([`batches`]), or one batch in detail ([`batch`]: rows per state, what left
//! each balance, the orders in flight and how long they have been, the last events, named).
//! Reads the ledger only, and never creates one ([`open_existing`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rust_decimal::Decimal;

use crate::batch::in_doubt;
use crate::ledger::approvals::Approval;
use crate::ledger::{
    BatchRecord, EventRecord, Ledger, LedgerError, OrderRecord, OrderState, RowState,
};

/// Events kept of one batch, newest first.
pub const LAST_EVENTS: i64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// A read-only command never creates a ledger.
    #[error("no ledger at {}", .0.display())]
    NoLedger(PathBuf),
    #[error("no batch `{name}` in {}", .ledger.display())]
    NoBatch {
        name: String,
        ledger: PathBuf,
        /// The batches the ledger has.
        known: Vec<String>,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Opens a ledger that must exist already.
pub fn open_existing(path: &Path) -> Result<Ledger, StatusError> {
    if !path.exists() {
        return Err(StatusError::NoLedger(path.to_path_buf()));
    }
    Ok(Ledger::open(path)?)
}

/// The batch called `name`, or [`StatusError::NoBatch`] with the batches the ledger has.
pub fn find_batch(ledger: &Ledger, name: &str) -> Result<BatchRecord, StatusError> {
    if let Some(b) = ledger.batch(name)? {
        return Ok(b);
    }
    let known = ledger
        .batches()
        .map(|bs| bs.into_iter().map(|b| b.name).collect())
        .unwrap_or_default();
    Err(StatusError::NoBatch {
        name: name.to_string(),
        ledger: ledger.path().to_path_buf(),
        known,
    })
}

/// One batch of the ledger and its rows per state.
#[derive(Debug, Clone)]
pub struct BatchCounts {
    pub batch: BatchRecord,
    pub counts: Vec<(RowState, i64)>,
    /// What left the account per currency for the batch (balances and cards together, both
    /// attempts of a reissued row).
    pub charged: BTreeMap<String, Decimal>,
}

impl BatchCounts {
    pub fn rows(&self) -> i64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }
}

/// Every batch of the ledger, oldest first, with its rows per state.
pub fn batches(ledger: &Ledger) -> Result<Vec<BatchCounts>, LedgerError> {
    ledger
        .batches()?
        .into_iter()
        .map(|batch| {
            let counts = ledger.row_counts(batch.id)?;
            let mut charged: BTreeMap<String, Decimal> = BTreeMap::new();
            for ((_, currency), amount) in crate::batch::outcome::debited_totals(ledger, batch.id)?
            {
                *charged.entry(currency).or_default() += amount;
            }
            Ok(BatchCounts {
                batch,
                counts,
                charged,
            })
        })
        .collect()
}

/// What the ledger says of one batch.
#[derive(Debug, Clone)]
pub struct Detail {
    pub batch: BatchRecord,
    pub counts: Vec<(RowState, i64)>,
    pub orders: Vec<OrderRecord>,
    /// The last [`LAST_EVENTS`] events, newest first.
    pub events: Vec<EventRecord>,
    /// What each of `events` is about, named (`row R-1`, `order O-123`).
    pub subjects: Vec<String>,
    /// What left each balance: (payer, currency) -> amount.
    pub charged: BTreeMap<(String, String), Decimal>,
    /// What a person decided about rows other batches have (`--allow-repeats`,
    /// `--skip-repeats`): (when, what).
    pub repeats: Vec<(String, String)>,
    /// The paid rows per payout link status as last read (`NOT_READ`: never read), and when
    /// `paybatch payouts` last read them.
    pub payouts: BTreeMap<String, i64>,
    pub payouts_read_at: Option<String>,
    /// An intent sent longer ago than this without an answer has been in doubt too long
    /// ([`crate::batch::in_doubt`]): it is for reconciliation.
    pub in_doubt_window: Duration,
    /// The first INVALID rows, named with their problems.
    pub invalid: Vec<String>,
    /// The first REJECTED and FAILED rows, named with the service's reasons.
    pub refused: Vec<String>,
    /// The runs held to an approved plan (`run --expect-digest`), oldest first.
    pub approvals: Vec<Approval>,
}

/// REJECTED and FAILED rows named in the detail of a batch, at most (the result file has every
/// one).
pub const REFUSED_NAMED: i64 = 10;

/// The batch called `name` in detail, its orders in doubt too long by the default window
/// ([`crate::batch::in_doubt::DEFAULT_IN_DOUBT_HOURS`]).
pub fn batch(ledger: &Ledger, name: &str) -> Result<Detail, StatusError> {
    batch_with_window(ledger, name, in_doubt::default_window())
}

/// The batch called `name` in detail, its orders in doubt too long once first sent longer
/// than `in_doubt_window` ago (`status --in-doubt-hours`).
pub fn batch_with_window(
    ledger: &Ledger,
    name: &str,
    in_doubt_window: Duration,
) -> Result<Detail, StatusError> {
    let b = find_batch(ledger, name)?;
    let counts = ledger.row_counts(b.id)?;
    let orders = ledger.order_heads(b.id)?;
    let events = ledger.events(b.id, LAST_EVENTS)?;
    let subjects = event_subjects(ledger, &events, &orders)?;
    let charged = crate::batch::outcome::debited_totals(ledger, b.id)?;
    let repeats = ledger.batch_notes(b.id, "repeats ")?;
    let mut payouts = BTreeMap::new();
    for (status, n) in ledger.payout_counts(b.id)? {
        let name = status.map_or_else(
            || crate::ops::payouts::NOT_READ.to_string(),
            |s| s.as_str().to_string(),
        );
        *payouts.entry(name).or_default() += n;
    }
    let payouts_read_at = ledger.payouts_read_at(b.id)?;
    let invalid = ledger.first_invalid_rows(b.id, crate::batch::outcome::INVALID_NAMED)?;
    let approvals = ledger.approvals(b.id)?;
    let refused = ledger.first_refused_rows(b.id, REFUSED_NAMED)?;
    Ok(Detail {
        refused,
        batch: b,
        counts,
        orders,
        events,
        subjects,
        charged,
        repeats,
        payouts,
        payouts_read_at,
        in_doubt_window,
        invalid,
        approvals,
    })
}

impl Detail {
    pub fn rows(&self) -> i64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// The digest the batch's latest run was held to, if its runs were held to one: a run
    /// that resumes the batch keeps it (`--expect-digest`).
    pub fn approved_digest(&self) -> Option<&str> {
        self.approvals.last().map(|a| a.digest.as_str())
    }

    /// Rows per state, by state.
    pub fn by_state(&self) -> BTreeMap<RowState, i64> {
        self.counts.iter().copied().collect()
    }

    /// Orders per state.
    pub fn order_counts(&self) -> BTreeMap<&str, i64> {
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for o in &self.orders {
            *counts.entry(o.state.as_str()).or_default() += 1;
        }
        counts
    }

    /// The orders still in flight.
    pub fn in_flight(&self) -> Vec<InFlight<'_>> {
        in_flight(&self.orders, self.in_doubt_window)
    }

    /// The service's ids of the batch's COMPLETED orders that could not be confirmed as the
    /// orders sent (their answer named neither key nor batch).
    pub fn unconfirmed(&self) -> Vec<String> {
        self.noted(|u| u.order)
    }

    /// The service's ids of the batch's COMPLETED orders whose total could not be checked
    /// (their answer left out the optional `transaction_detail` of a converted item).
    pub fn total_unconfirmed(&self) -> Vec<String> {
        self.noted(|u| u.total)
    }

    /// The service's ids of the batch's COMPLETED orders noted as not confirmed in `what`.
    fn noted(&self, what: impl Fn(crate::batch::record::Unconfirmed) -> bool) -> Vec<String> {
        self.orders
            .iter()
            .filter(|o| {
                o.state == OrderState::Completed
                    && what(crate::batch::record::Unconfirmed::of(
                        o.error_type.as_deref(),
                    ))
            })
            .map(|o| {
                o.service_order_id
                    .clone()
                    .unwrap_or_else(|| format!("#{}", o.id))
            })
            .collect()
    }
}

/// An order still in flight.
#[derive(Debug, Clone)]
pub struct InFlight<'a> {
    pub order: &'a OrderRecord,
    /// Where it stands, in words.
    pub what: &'static str,
    /// Since when (accepted, first sent, or committed).
    pub since: Option<&'a str>,
    /// Sent, without an answer, for longer than the in-doubt window
    /// ([`crate::batch::in_doubt::order_too_long`]).
    pub in_doubt_too_long: bool,
}

impl InFlight<'_> {
    /// How long it has been in flight, when its time can be read.
    pub fn age(&self) -> Option<chrono::Duration> {
        age(self.since)
    }
}

/// The orders of `orders` still in flight: accepted and not finished, sent without an answer,
/// or committed and not sent; those sent longer than `in_doubt_window` ago without an answer
/// are in doubt too long.
pub fn in_flight(orders: &[OrderRecord], in_doubt_window: Duration) -> Vec<InFlight<'_>> {
    orders
        .iter()
        .filter_map(|o| {
            let (what, since) = match o.state {
                OrderState::Accepted => (
                    "accepted by the service, not finished",
                    o.accepted_at.as_deref(),
                ),
                OrderState::Intent if o.sends > 0 => (
                    "sent, no answer recorded (in doubt)",
                    o.first_sent_at.as_deref(),
                ),
                OrderState::Intent => (
                    "intent committed, not sent yet",
                    Some(o.created_at.as_str()),
                ),
                _ => return None,
            };
            let in_doubt_too_long = in_doubt::order_too_long(o, in_doubt_window);
            Some(InFlight {
                order: o,
                what,
                since,
                in_doubt_too_long,
            })
        })
        .collect()
}

fn age(at: Option<&str>) -> Option<chrono::Duration> {
    let t = chrono::DateTime::parse_from_rfc3339(at?).ok()?;
    Some(chrono::Utc::now().signed_duration_since(t))
}

/// Names what each event is about. Only the rows the events name are looked up (a batch can
/// hold a million).
fn event_subjects(
    ledger: &Ledger,
    events: &[EventRecord],
    orders: &[OrderRecord],
) -> Result<Vec<String>, LedgerError> {
    let mut row_names: HashMap<i64, String> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e.subject == "row" || e.subject == "payout")
    {
        if let Some(reference) = ledger.row_reference(e.subject_id)? {
            row_names.insert(e.subject_id, reference);
        }
    }
    let order_names: HashMap<i64, String> = orders
        .iter()
        .map(|o| {
            let name = o
                .service_order_id
                .clone()
                .unwrap_or_else(|| format!("#{} (key {})", o.id, o.idempotency_key));
            (o.id, name)
        })
        .collect();
    Ok(events
        .iter()
        .map(|e| {
            let name = match e.subject.as_str() {
                "row" | "payout" => row_names.get(&e.subject_id),
                "order" => order_names.get(&e.subject_id),
                _ => None,
            };
            match name {
                Some(n) => format!("{} {n}", e.subject),
                None => e.subject.clone(),
            }
        })
        .collect())
}
