//! The service's order list read again while a run sends ([`ServiceWatch`]): before a send is
//! tried again after a failure, and after every [`READ_EVERY`] orders sent for the first time.
//! An order another ledger made meanwhile is learned row by row (as before the run:
//! `repeats::sync_service`), and the orders of this run holding a row it pays are held back:
//! not sent in this run, left as they are for the next run's check, which refuses them as
//! repeats (or skips or pays them, as the person running it says).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::ledger::Ledger;
use crate::reference::fold_reference;

use super::progress::Reporter;
use super::repeats::{LedgerAccess, sync_service};
use crate::api::Client;
use crate::ops::error::OpError;

/// Orders sent for the first time in a run between two reads of the list, at most.
pub const READ_EVERY: u64 = 500;

/// What a read while sending uses of what the sending shares (`batch::send_context`).
pub struct Shared<'a> {
    pub ledger: &'a Mutex<Ledger>,
    pub client: &'a Client,
    pub reporter: &'a Reporter,
    /// Orders of this run sent so far (each counted at its first send).
    pub sent: &'a AtomicU64,
    /// How long the run waits for the service without an answer (`--poll-timeout`).
    pub patience: Duration,
}

/// A row of this run that an order of another ledger, learned while the run sent, pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRow {
    pub reference: String,
    /// The order at the service that pays it.
    pub service_order_id: String,
}

/// The reads of the order list made while a run sends, and the orders they held back.
pub struct ServiceWatch {
    base_url: String,
    batch_id: i64,
    /// `--allow-repeats`: a row another ledger paid is paid anyway; the list is still read.
    allow_repeats: bool,
    /// `--allow-untold-orders`: finished orders that say nothing of whose they are do not stop
    /// the sending.
    allow_untold: bool,
    every: u64,
    /// When the last read started, and after how many first sends the next is due. A send
    /// waits here while a read is made.
    gate: tokio::sync::Mutex<Gate>,
    reads: AtomicU64,
    /// This run's orders holding rows another ledger paid, sent anyway (`--allow-repeats`).
    allowed: AtomicU64,
    /// The ledger's orders held back, each with its first row another ledger pays.
    held: Mutex<HashMap<i64, HeldRow>>,
}

struct Gate {
    last_read: tokio::time::Instant,
    /// First sends of the run when the last read started.
    read_at: u64,
    next_at: u64,
}

impl Gate {
    /// A read starts now, `sent` first sends into the run: the next is due `every` after.
    fn read(&mut self, sent: u64, every: u64) {
        self.last_read = tokio::time::Instant::now();
        self.read_at = sent;
        self.next_at = sent + every;
    }

    /// Whether a read ahead of its turn is worth its cost: at least half of `every` first
    /// sends went since the last read (so that reads stay at most one per `every / 2`).
    fn worth_reading_ahead(&self, sent: u64, every: u64) -> bool {
        sent.saturating_sub(self.read_at) >= every.div_ceil(2)
    }
}

impl ServiceWatch {
    /// A watch of the run of batch `batch_id` against the service recorded as `base_url`,
    /// whose list was read just before the run planned its sends, reading it again after every
    /// `every` first sends ([`READ_EVERY`] by default).
    pub fn every(
        base_url: String,
        batch_id: i64,
        allow_repeats: bool,
        allow_untold: bool,
        every: u64,
    ) -> Self {
        ServiceWatch {
            base_url,
            batch_id,
            allow_repeats,
            allow_untold,
            every: every.max(1),
            gate: tokio::sync::Mutex::new(Gate {
                last_read: tokio::time::Instant::now(),
                read_at: 0,
                next_at: every.max(1),
            }),
            reads: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// Reads the list again when a send is due for it: a first send once [`READ_EVERY`] orders
    /// went out since the last read (`sent` is how many have), or a send tried again after a
    /// failure at `failed_at`, or that waited for the service's window and needs a read begun
    /// after `failed_at` (one read after that time serves every send waiting).
    pub async fn before_send(
        &self,
        context: &Shared<'_>,
        sent: u64,
        failed_at: Option<tokio::time::Instant>,
    ) -> Result<(), OpError> {
        let due = |gate: &Gate| match failed_at {
            Some(at) => gate.last_read <= at,
            None => sent >= gate.next_at,
        };
        let mut gate = self.gate.lock().await;
        if !due(&gate) {
            return Ok(());
        }
        gate.read(context.sent.load(Ordering::SeqCst).max(sent), self.every);
        self.read(context).await
    }

    /// Reads the list now, ahead of its turn, when at least half of [`READ_EVERY`] first sends
    /// went out since the last read: for a run about to wait for the service's window, whose
    /// next sends then go without a read in their way, and each of them after a read at most
    /// a second older than the window's wait. The next read is due [`READ_EVERY`] first sends
    /// after this one, so no send is further from a read than before. A read that fails makes
    /// the next first send read (and stop if it fails again, as any read before a send).
    /// Returns whether it read.
    pub async fn read_ahead(&self, context: &Shared<'_>) -> Result<bool, OpError> {
        let mut gate = self.gate.lock().await;
        let sent = context.sent.load(Ordering::SeqCst);
        if !gate.worth_reading_ahead(sent, self.every) {
            return Ok(false);
        }
        let before = gate.last_read;
        gate.read(sent, self.every);
        let read = self.read(context).await;
        if read.is_err() {
            gate.last_read = before;
            gate.next_at = sent;
        }
        read.map(|()| true)
    }

    /// One read of the list; the orders it learned hold back this run's orders of their rows.
    async fn read(&self, context: &Shared<'_>) -> Result<(), OpError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        // Never waits past the run's patience (`--poll-timeout`) for what it cannot name.
        let client = context
            .client
            .with_deadline(tokio::time::Instant::now().checked_add(context.patience));
        let sync = sync_service(context.ledger, &client, &self.base_url, self.allow_untold)
            .await
            .map_err(|e| while_sending(e, context.sent.load(Ordering::SeqCst)))?;
        if sync.learned.is_empty() {
            return Ok(());
        }
        let found = context
            .ledger
            .with(|l| rows_paid_elsewhere(l, &self.base_url, self.batch_id, &sync.learned))?;
        let learned = sync.learned.len();
        if self.allow_repeats {
            if !found.is_empty() {
                let orders: HashSet<&str> = found
                    .iter()
                    .map(|(_, r)| r.service_order_id.as_str())
                    .collect();
                context.reporter.warn(format!(
                    "orders of this run hold rows that {} orders of another ledger, seen while this run sent, pay ({} of this run's orders); sent anyway, as --allow-repeats says",
                    orders.len(),
                    found.len()
                ));
                self.allowed.fetch_add(found.len() as u64, Ordering::SeqCst);
            }
            return Ok(());
        }
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let before = held.len();
        for (order_id, row) in found {
            held.entry(order_id).or_insert(row);
        }
        if held.len() > before {
            context.reporter.warn(format!(
                "the service's order list, read again while sending, has {learned} orders of another ledger this run had not seen; {} of this run's orders hold rows they pay and are held back",
                held.len() - before
            ));
        }
        Ok(())
    }

    /// Whether the ledger's order `order_id` is held back.
    pub fn holds(&self, order_id: i64) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&order_id)
    }

    /// How many of this run's orders hold rows another ledger paid and were sent anyway.
    pub fn allowed(&self) -> u64 {
        self.allowed.load(Ordering::SeqCst)
    }

    /// How many reads of the list were made while sending.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// The orders held back, with a row of each (in the ledger's order).
    pub fn held(&self) -> Vec<(i64, HeldRow)> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(i64, HeldRow)> = held.iter().map(|(k, v)| (*k, v.clone())).collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }
}

/// A read that stopped the sending, said as such: orders of this run may have gone out
/// before it (`sent`), which the words of a read before the run ("nothing was submitted") would
/// deny. The refusal's own advice (when to run again, which flag) is kept.
fn while_sending(e: OpError, sent: u64) -> OpError {
    match e {
        OpError::Unsettled { message, help } => OpError::Unsettled {
            message: message.replace(
                "nothing was submitted",
                &format!(
                    "the sending stopped there: {sent} orders of this run were sent before it, no more"
                ),
            ),
            help: format!(
                "{help}; the run resumes where it stopped, and reads the service's order list again before it sends"
            ),
        },
        other => other,
    }
}

/// The rows of batch `batch_id` in intents not answered yet that the orders `learned` (read
/// whole from the service at `base_url`) pay, as a person reads a reference: by order.
fn rows_paid_elsewhere(
    ledger: &Ledger,
    base_url: &str,
    batch_id: i64,
    learned: &[String],
) -> Result<Vec<(i64, HeldRow)>, crate::ledger::LedgerError> {
    let paid: HashMap<String, String> = ledger
        .service_rows_of(base_url, learned)?
        .into_iter()
        .map(|r| (fold_reference(&r.reference), r.service_order_id))
        .collect();
    if paid.is_empty() {
        return Ok(Vec::new());
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (reference, order_id) in ledger.rows_in_intents(batch_id)? {
        if seen.contains(&order_id) {
            continue;
        }
        if let Some(service_order_id) = paid.get(&fold_reference(&reference)) {
            seen.insert(order_id);
            out.push((
                order_id,
                HeldRow {
                    reference,
                    service_order_id: service_order_id.clone(),
                },
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(read_at: u64, every: u64) -> Gate {
        Gate {
            last_read: tokio::time::Instant::now(),
            read_at,
            next_at: read_at + every,
        }
    }

    /// A read ahead of its turn comes only after half the first sends a read is due after,
    /// and puts the next read due a whole `every` after it.
    #[test]
    fn a_read_ahead_waits_for_half_a_reads_sends_and_moves_the_next_read() {
        let mut g = gate(0, READ_EVERY);
        assert!(!g.worth_reading_ahead(249, READ_EVERY));
        assert!(g.worth_reading_ahead(250, READ_EVERY));
        g.read(300, READ_EVERY);
        assert_eq!((g.read_at, g.next_at), (300, 800));
        assert!(!g.worth_reading_ahead(549, READ_EVERY));
        assert!(g.worth_reading_ahead(550, READ_EVERY));
        // A read every order: ahead after one.
        let g = gate(4, 1);
        assert!(!g.worth_reading_ahead(4, 1));
        assert!(g.worth_reading_ahead(5, 1));
    }
}
