//! What the sending and polling stages share: the ledger, the client, the reporter, what the
//! service stopped during the run, and how long the run waits without an answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::api::models::Order;
use crate::api::{ApiError, Client};
use crate::ledger::{Ledger, OrderRecord};

use super::ledger_thread::LedgerThread;
use super::progress::Reporter;
use super::record;
use crate::ops::error::OpError;

/// The send context: the state the submit and poll stages share.
pub struct SendContext {
    pub ledger: Arc<Mutex<Ledger>>,
    /// The thread the steps of the sends and the polling run on ([`SendContext::with_ledger`]).
    pub steps: LedgerThread,
    pub client: Client,
    pub reporter: Reporter,
    /// What the service stopped ([`ServiceStop`]), with the service's words. Orders it covers
    /// are not sent in this run.
    pub stopped: Mutex<BTreeMap<ServiceStop, String>>,
    pub patience: Patience,
    /// Where the sending tells the polling of each order the service accepted (see
    /// [`super::poll::Accepted`]); none when nothing polls while sending.
    pub accepted: Mutex<Option<tokio::sync::mpsc::UnboundedSender<ToPoll>>>,
    /// The orders this run has sent (each counted at its first send in the run), shared with
    /// the operation that runs it: once one has, an error does not end the run as if nothing
    /// had happened ([`crate::ops::error::OpError::after_sending`]).
    pub sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The service's order list read again while sending ([`super::watch::ServiceWatch`]);
    /// none where the run did not read it before.
    pub watch: Option<super::watch::ServiceWatch>,
}

/// An order the service accepted while the sending goes on, for the polling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToPoll {
    /// The service's order id.
    pub service_id: String,
    /// The ledger's.
    pub order_id: i64,
    /// When the service's answer accepting it came.
    pub accepted_at: std::time::Instant,
}

/// What the service stopped for the rest of a run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceStop {
    /// The account (ordering restricted: its spending limit): every order.
    Account,
    /// The balance of this currency (too low): the orders paid from it.
    Balance(String),
}

impl ServiceStop {
    /// Whether this stop covers `order`.
    pub fn covers(&self, order: &OrderRecord) -> bool {
        match self {
            ServiceStop::Account => true,
            ServiceStop::Balance(currency) => {
                order.card_id.is_none() && order.payment_currency == *currency
            }
        }
    }
}

/// What a refusal of one order stops for the rest of the run: the account when the service
/// restricts ordering (its spending limit), a balance when it is too low.
pub fn service_stop(e: &ApiError, order: &OrderRecord) -> Option<ServiceStop> {
    match e.kind() {
        "ordering_restricted" => Some(ServiceStop::Account),
        "insufficient_funds" | "insufficient_balance" if order.card_id.is_none() => {
            Some(ServiceStop::Balance(order.payment_currency.clone()))
        }
        _ => None,
    }
}

/// How long the sending waits for the service without getting anywhere: a pause the service
/// asks for (a 429 and its `Retry-After`, the backoff after a server error or a dropped
/// connection) is taken only if it ends within `--poll-timeout` of the last answer recorded
/// (or of the start of the sending). Past that, the run stops sending and ends incomplete
/// (exit 5): the next run resumes.
pub struct Patience {
    pub timeout: Duration,
    last_progress: Mutex<tokio::time::Instant>,
    exhausted: std::sync::atomic::AtomicBool,
}

impl Patience {
    pub fn new(timeout: Duration) -> Self {
        Patience {
            timeout,
            last_progress: Mutex::new(tokio::time::Instant::now()),
            exhausted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An answer was recorded.
    pub fn progress(&self) {
        *self.last_progress.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// Whether a pause of `wait` from now ends within the timeout; when it does not, the
    /// patience is exhausted for the rest of the run.
    pub fn allows(&self, wait: Duration) -> bool {
        let last = *self.last_progress.lock().unwrap_or_else(|p| p.into_inner());
        let ok = match (
            tokio::time::Instant::now().checked_add(wait),
            last.checked_add(self.timeout),
        ) {
            (Some(until), Some(deadline)) => until <= deadline,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if !ok {
            self.exhausted
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        ok
    }

    pub fn is_exhausted(&self) -> bool {
        self.exhausted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A deadline `timeout` from now (none when it is too far to be represented).
pub fn deadline_in(timeout: Duration) -> Option<tokio::time::Instant> {
    tokio::time::Instant::now().checked_add(timeout)
}

impl SendContext {
    /// Whether the service stopped what `order` is paid by, earlier in this run.
    pub fn is_stopped(&self, order: &OrderRecord) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        stopped.keys().any(|stop| stop.covers(order))
    }

    /// The service accepted ledger order `order_id` as `service_id` (its answer came at
    /// `answered`): the polling looks at it.
    pub fn tell_accepted(&self, service_id: &str, order_id: i64, answered: std::time::Instant) {
        let accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = accepted.as_ref() {
            // The polling may have stopped (the run is ending): the order stays ACCEPTED in
            // the ledger and the next run polls it.
            let _ = tx.send(ToPoll {
                service_id: service_id.to_string(),
                order_id,
                accepted_at: answered,
            });
        }
    }

    /// The sending ended: the polling finishes what it has.
    pub fn sending_ended(&self) {
        self.accepted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    pub fn stop(&self, what: ServiceStop, why: String) {
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        stopped.entry(what).or_insert(why);
    }

    /// The ledger, for the steps after the sending and polling have ended (nothing in flight
    /// to hold up); while they go on, [`SendContext::with_ledger`].
    pub fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // A panic while holding the lock leaves the SQLite state consistent (transactions are
        // atomic), so a poisoned lock is still usable.
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `step` on the ledger's own thread ([`LedgerThread`]) and waits for it without
    /// holding a thread: however many sends wait for the ledger, no async worker waits for its
    /// lock or its fsync. The step has run when this returns.
    pub async fn with_ledger<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Ledger) -> R + Send + 'static,
    ) -> R {
        self.steps.run(step).await
    }

    /// As [`SendContext::with_ledger`], before the steps waiting their turn
    /// ([`LedgerThread::run_first`]): for what a send waits for, the read of its intent and
    /// the mark before it.
    pub async fn with_ledger_first<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Ledger) -> R + Send + 'static,
    ) -> R {
        self.steps.run_first(step).await
    }

    /// As [`SendContext::with_ledger`], for a rare step outside the sends' queue (a read of
    /// the next intents, a refusal of some items, a note at the end of the sending): the task
    /// waits for the ledger's lock on a thread the runtime sets aside ([`with_locked`]).
    pub fn with_ledger_blocking<R>(&self, step: impl FnOnce(&mut Ledger) -> R) -> R {
        with_locked(&self.ledger, step)
    }

    /// As [`SendContext::with_ledger`], for a step recording what already happened (an answer,
    /// a finished order, a poll): its commits wait for no fsync of their own
    /// ([`Ledger::relaxed`]). Never for a write recording an intent.
    pub async fn record_with_ledger<
        T: Send + 'static,
        E: From<crate::ledger::LedgerError> + Send + 'static,
    >(
        &self,
        step: impl FnOnce(&mut Ledger) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E> {
        self.with_ledger(move |l| l.relaxed(step)).await
    }
}

/// Runs `step` on the ledger behind `ledger` off the async workers: on a runtime with worker
/// threads, the thread that waits for the lock and for the write's fsync hands its other tasks
/// to another thread for that time ([`tokio::task::block_in_place`]), so the requests in flight
/// and the sends that are ready go on meanwhile. The caller still waits for the step: a write
/// recording an intent is committed before the request acting on it is sent. On a runtime of
/// one thread, or none, the step runs as it is.
pub fn with_locked<R>(ledger: &Mutex<Ledger>, step: impl FnOnce(&mut Ledger) -> R) -> R {
    // A panic while holding the lock leaves the SQLite state consistent (transactions are
    // atomic), so a poisoned lock is still usable.
    off_the_workers(|| step(&mut ledger.lock().unwrap_or_else(|p| p.into_inner())))
}

/// Runs `step`, which blocks (a ledger's lock, its fsync), off the async workers (see
/// [`with_locked`]).
pub fn off_the_workers<R>(step: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(step)
        }
        _ => step(),
    }
}

/// Checks a finished order against what was sent and records it.
pub async fn record_terminal(
    context: &SendContext,
    order_id: i64,
    order: Box<Order>,
    http: u16,
) -> Result<(), OpError> {
    context
        .record_with_ledger(move |l| record::record_terminal_in(l, order_id, &order, http))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::batch::repeats::LedgerAccess;

    /// A step waiting for the ledger (here its lock, held by another thread; in a run, the
    /// fsync of another write) leaves the worker to the other tasks: with one worker thread,
    /// a task spawned after it runs before the lock is let go. The step goes through
    /// [`LedgerAccess`] for a `Mutex<Ledger>`, which is [`with_locked`], as
    /// [`SendContext::with_ledger`] is.
    #[test]
    fn a_step_waiting_for_the_ledger_leaves_the_worker_to_other_tasks() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let (_dir, ledger, batch_id) = crate::ledger::with_a_batch();
        let ledger = std::sync::Arc::new(Mutex::new(ledger));
        let (held_tx, held_rx) = mpsc::channel();
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        let holder = {
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                let _guard = ledger.lock().unwrap_or_else(|p| p.into_inner());
                held_tx.send(()).expect("the test waits");
                // Bounded: on a blocked worker the other task never runs.
                ran_rx.recv_timeout(Duration::from_secs(10)).is_ok()
            })
        };
        held_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the lock is held");
        let ran_while_held = runtime.block_on(async {
            let (waiting_tx, waiting_rx) = mpsc::channel();
            let step = {
                let ledger = ledger.clone();
                tokio::spawn(async move {
                    waiting_tx.send(()).expect("the test waits");
                    // Nothing is awaited from the signal to the step: the worker is this
                    // task's until the step hands it over or ends.
                    ledger.with(|l| l.batch_by_id(batch_id).map(|b| b.is_some()))
                })
            };
            waiting_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the step started");
            let other = tokio::spawn(async move { ran_tx.send(()).is_ok() });
            let ran = holder.join().expect("the holder ends");
            let found = step.await.expect("the step ends");
            assert!(matches!(found, Ok(true)), "the step read the ledger");
            assert!(other.await.expect("the other task ends"));
            ran
        });
        assert!(
            ran_while_held,
            "a task spawned while a step waited for the ledger ran only after the step"
        );
    }
}
