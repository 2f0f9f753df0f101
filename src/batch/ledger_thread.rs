//! The thread the sending's ledger steps run on: the tasks of the sends and the polling hand
//! their steps to it and wait for the answer without holding a thread, so no fsync and no wait
//! for the ledger's lock ever runs on an async worker, however many orders are in flight.
//!
//! The steps run one at a time, in the order they came, except that a step given with
//! [`LedgerThread::run_first`] (the mark before a send, which the send waits for) runs before
//! the steps still waiting their turn (the records of answers and finished orders, which no
//! request waits for). The ledger stays behind its lock (the rare steps outside the sending,
//! and the steps after it, take the lock themselves).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::ledger::Ledger;

type Job = Box<dyn FnOnce(&mut Ledger) + Send>;

/// The steps waiting for the thread.
#[derive(Default)]
struct Queues {
    /// Steps a request waits for: before any of `in_turn`.
    first: VecDeque<Job>,
    in_turn: VecDeque<Job>,
    /// No step is taken any more: the owner let go of the thread, or the thread ended.
    closed: bool,
}

#[derive(Default)]
struct Waiting {
    queues: Mutex<Queues>,
    given: Condvar,
}

impl Waiting {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // Only this module's short sections hold it; none panics while holding it.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next step, once one is given; none once closed and every step given has run.
    fn next(&self) -> Option<Job> {
        let mut queues = self.lock();
        loop {
            if let Some(job) = queues
                .first
                .pop_front()
                .or_else(|| queues.in_turn.pop_front())
            {
                return Some(job);
            }
            if queues.closed {
                return None;
            }
            queues = self.given.wait(queues).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Closes the queues when the thread ends, however it ends: the steps still queued are
/// dropped, so the tasks waiting for them learn that the thread ended.
struct Ending(Arc<Waiting>);

impl Drop for Ending {
    fn drop(&mut self) {
        let mut queues = self.0.lock();
        queues.closed = true;
        queues.first.clear();
        queues.in_turn.clear();
    }
}

/// The ledger's own thread (see the module).
pub struct LedgerThread {
    waiting: Arc<Waiting>,
    thread: Option<JoinHandle<()>>,
}

impl LedgerThread {
    /// Starts the thread for the ledger behind `ledger`. The thread keeps `held` (the ledger's
    /// lock, which tells another paybatch the ledger is in use) until its last step has run:
    /// however the run ends, no other run takes the ledger while this thread may still write.
    pub fn start(ledger: Arc<Mutex<Ledger>>, held: impl Send + 'static) -> std::io::Result<Self> {
        let waiting = Arc::new(Waiting::default());
        let ending = Ending(Arc::clone(&waiting));
        let thread = std::thread::Builder::new()
            .name("paybatch-ledger".into())
            .spawn(move || {
                while let Some(job) = ending.0.next() {
                    // A panic while holding the lock leaves the SQLite state consistent
                    // (transactions are atomic), so a poisoned lock is still usable.
                    job(&mut ledger.lock().unwrap_or_else(|p| p.into_inner()));
                }
                drop(ending);
                // The ledger closes (its log checkpointed) before its lock is let go.
                drop(ledger);
                drop(held);
            })?;
        Ok(LedgerThread {
            waiting,
            thread: Some(thread),
        })
    }

    /// Runs `step` on the ledger's thread, in its turn, and waits for it without holding a
    /// thread. A step that panics panics here, in the task that gave it. The step has run when
    /// this returns: a write recording an intent is committed before the request acting on it
    /// is sent. A task that stops waiting (dropped, aborted) before its step's turn leaves it
    /// undone.
    pub async fn run<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Ledger) -> R + Send + 'static,
    ) -> R {
        self.give(step, false).await
    }

    /// As [`LedgerThread::run`], before the steps waiting their turn: for a step a request
    /// waits for (the mark before a send), so that a send goes as soon as its slot comes
    /// rather than after the records queued before it.
    pub async fn run_first<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Ledger) -> R + Send + 'static,
    ) -> R {
        self.give(step, true).await
    }

    async fn give<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut Ledger) -> R + Send + 'static,
        first: bool,
    ) -> R {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |ledger: &mut Ledger| {
            // The task stopped waiting before its step's turn came (the run is stopping: its
            // sends were called off): the step is left undone, as if the process had stopped
            // then, and the next step's turn comes at once (a ledger another process holds
            // locked is waited for by the step that met it, not by each step queued behind).
            if answer.is_closed() {
                return;
            }
            let result = catch_unwind(AssertUnwindSafe(|| step(ledger)));
            // The task may have stopped waiting (its run is ending): the step ran all the same.
            let _ = answer.send(result);
        });
        {
            let mut queues = self.waiting.lock();
            // The queues close only when this is dropped, or when a step the thread could not
            // catch ended it: both are bugs, not input.
            assert!(!queues.closed, "the ledger's thread has ended");
            if first {
                queues.first.push_back(job);
            } else {
                queues.in_turn.push_back(job);
            }
        }
        self.waiting.given.notify_one();
        match answered.await {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => panic!("the ledger's thread ended before answering"),
        }
    }

    /// Waits until every step given before has run.
    pub async fn settle(&self) {
        self.run(|_| ()).await
    }
}

impl Drop for LedgerThread {
    /// Lets the thread finish the steps it was given, then waits for it.
    fn drop(&mut self) {
        self.waiting.lock().closed = true;
        self.waiting.given.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Many tasks waiting for the ledger at once hold no thread each: on a runtime of one
    /// worker, 64 steps queued behind a held lock leave the process with the worker, the
    /// ledger's thread and the test's own, and each step ran once, in turn.
    #[test]
    fn steps_queued_behind_the_ledger_hold_no_thread_and_each_runs_once() {
        let runtime = one_worker(RUNTIME_THREADS);
        let (_dir, ledger, batch_id) = crate::ledger::with_a_batch();
        let ledger = Arc::new(Mutex::new(ledger));
        let steps = Arc::new(LedgerThread::start(Arc::clone(&ledger), ()).expect("a thread"));
        let held = ledger.lock().unwrap_or_else(|p| p.into_inner());
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (steps, ran) = (Arc::clone(&steps), Arc::clone(&ran));
                runtime.spawn(async move {
                    steps
                        .run(move |l| {
                            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            l.batch_by_id(batch_id).map(|b| b.is_some())
                        })
                        .await
                })
            })
            .collect();
        // While the lock is held, every task waits; the runtime keeps its one worker.
        std::thread::sleep(Duration::from_millis(200));
        let threads = threads_named(RUNTIME_THREADS);
        drop(held);
        runtime.block_on(async {
            for task in tasks {
                let found = tokio::time::timeout(Duration::from_secs(10), task)
                    .await
                    .expect("each step ends")
                    .expect("the task ends");
                assert!(matches!(found, Ok(true)), "the step read the ledger");
            }
        });
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 64);
        // The worker alone; when each waiting step blocked a thread, the runtime had started
        // one for each (65).
        assert_eq!(
            threads,
            Some(1),
            "the runtime's threads while 64 steps waited"
        );
    }

    /// A runtime of one worker thread, its threads named `name` (a test counting its threads
    /// by name gives a name no other test's runtime has).
    fn one_worker(name: &str) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// The name of this test's runtime threads (the kernel keeps 15 bytes of it).
    const RUNTIME_THREADS: &str = "steps-waiting";

    /// How many threads of this process are named `name` (none where `/proc` cannot tell).
    fn threads_named(name: &str) -> Option<usize> {
        let tasks = std::fs::read_dir("/proc/self/task").ok()?;
        let named = tasks
            .filter_map(Result::ok)
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == name)
            .count();
        Some(named)
    }

    /// A ledger's thread on a runtime of one worker named `name`, and the names of the steps
    /// that ran, in turn.
    struct Queued {
        runtime: tokio::runtime::Runtime,
        _dir: tempfile::TempDir,
        ledger: Arc<Mutex<Ledger>>,
        steps: Arc<LedgerThread>,
        ran: Arc<Mutex<Vec<&'static str>>>,
    }

    fn queued(name: &str) -> Queued {
        let (dir, ledger, _batch_id) = crate::ledger::with_a_batch();
        let ledger = Arc::new(Mutex::new(ledger));
        let steps = Arc::new(LedgerThread::start(Arc::clone(&ledger), ()).expect("a thread"));
        Queued {
            runtime: one_worker(name),
            _dir: dir,
            ledger,
            steps,
            ran: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A task called off while its step waits its turn leaves the step undone; the steps still
    /// awaited, before and after it, run.
    #[test]
    fn a_step_whose_task_was_called_off_is_left_undone() {
        let Queued {
            runtime,
            _dir,
            ledger,
            steps,
            ran,
        } = queued("steps-called-off");
        let held = ledger.lock().unwrap_or_else(|p| p.into_inner());
        let step = |name: &'static str| {
            let (steps, ran) = (Arc::clone(&steps), Arc::clone(&ran));
            runtime.spawn(async move {
                steps
                    .run(move |_| ran.lock().unwrap_or_else(|p| p.into_inner()).push(name))
                    .await
            })
        };
        // The first step waits for the lock on the thread; the other two wait their turn.
        let (first, called_off, last) = (step("first"), step("called off"), step("last"));
        called_off.abort();
        let ended = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), called_off).await });
        assert!(
            matches!(ended, Ok(Err(e)) if e.is_cancelled()),
            "the task was called off"
        );
        drop(held);
        runtime.block_on(async {
            for task in [first, last] {
                tokio::time::timeout(Duration::from_secs(10), task)
                    .await
                    .expect("each step ends")
                    .expect("the task ends");
            }
        });
        let ran = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(ran, ["first", "last"]);
    }

    /// A step given first runs before the steps still waiting their turn, which then run in
    /// the order they came; the step already taken runs first.
    #[test]
    fn a_step_given_first_runs_before_the_steps_waiting_their_turn() {
        let Queued {
            runtime,
            _dir,
            ledger,
            steps,
            ran,
        } = queued("steps-first");
        let held = ledger.lock().unwrap_or_else(|p| p.into_inner());
        let step = |name: &'static str, first: bool| {
            let (steps, ran) = (Arc::clone(&steps), Arc::clone(&ran));
            let record =
                move |_: &mut Ledger| ran.lock().unwrap_or_else(|p| p.into_inner()).push(name);
            runtime.spawn(async move {
                if first {
                    steps.run_first(record).await
                } else {
                    steps.run(record).await
                }
            })
        };
        let taken = step("taken", false);
        // The thread has taken the first step and waits for the lock with it.
        let queued = || {
            let q = steps.waiting.lock();
            q.first.len() + q.in_turn.len()
        };
        let waited = wait_until(|| queued() == 0);
        assert!(waited, "the thread took the first step");
        let later = [step("second", false), step("third", false)];
        let waited = wait_until(|| queued() == 2);
        assert!(waited, "two steps wait their turn");
        let first = step("given first", true);
        let waited = wait_until(|| queued() == 3);
        assert!(waited, "the step given first waits too");
        drop(held);
        runtime.block_on(async {
            for task in [taken, first].into_iter().chain(later) {
                tokio::time::timeout(Duration::from_secs(10), task)
                    .await
                    .expect("each step ends")
                    .expect("the task ends");
            }
        });
        let ran = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(ran, ["taken", "given first", "second", "third"]);
    }

    /// Whether `done` came true within 10 s (looked at every 5 ms).
    fn wait_until(done: impl Fn() -> bool) -> bool {
        (0..2000).any(|_| {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
            false
        })
    }

    /// A step that panics panics in the task that gave it; the thread goes on with the next.
    #[test]
    fn a_step_that_panics_panics_in_its_task_and_the_thread_goes_on() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (_dir, ledger, batch_id) = crate::ledger::with_a_batch();
        let steps =
            Arc::new(LedgerThread::start(Arc::new(Mutex::new(ledger)), ()).expect("a thread"));
        let panicking = {
            let steps = Arc::clone(&steps);
            runtime.spawn(async move { steps.run(|_| panic!("a step's bug")).await })
        };
        let result = runtime.block_on(panicking);
        assert!(result.is_err_and(|e| e.is_panic()), "the task panicked");
        let found =
            runtime.block_on(steps.run(move |l| l.batch_by_id(batch_id).map(|b| b.is_some())));
        assert!(matches!(found, Ok(true)), "the next step ran");
    }
}
