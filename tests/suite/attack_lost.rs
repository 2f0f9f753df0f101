//! A run's own orders whose answers were lost (a 504 or a closed connection after the service
//! made them, an answer garbled on the way back, a run killed right after a send): while they
//! process the service shows only their id, so a read before a send stops the run (exit 5)
//! without sending again; the refusal says they may be the ledger's own only when it has sends
//! in doubt; once they finish, the next run knows them by their key and records them. Against
//! another ledger paying the same rows, a service that FAILS such an order or answers it bare,
//! many rows an order, several orders in flight, and `reconcile` meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::Method;
use paybatch::sim::{SimConfig, SimHandle};

use crate::support::*;

/// How many `EMP-` references the service holds in an order that is not FAILED.
fn rows_paid(sim: &SimHandle) -> usize {
    live_orders_of_emp_rows(sim)
        .values()
        .filter(|&&n| n > 0)
        .count()
}

/// How long the orders of these tests process: minutes, so that no run's wait can outlast
/// them by chance on a loaded machine; [`finish_orders`] moves the simulator's clock past it.
const PROCESSING: Duration = Duration::from_secs(600);

/// How long orders process once the tests' waits are over: the runs after them finish theirs.
const QUICK: Duration = Duration::from_millis(200);

/// Moves the simulator's clock past every order's processing ([`PROCESSING`]) and waits until
/// the simulator says they finished.
async fn finish_orders(sim: &SimHandle) {
    sim.advance_clock(PROCESSING + Duration::from_secs(1))
        .expect("the simulator's clock moves");
    until_orders_finish(sim, Duration::from_secs(10)).await;
}

/// Simulator settings with every order processing for `processing`, on the state file of
/// `state`.
fn slow(state: &Workspace, processing: Duration) -> SimConfig {
    let mut config = fast_config(Some(state.sim_state()));
    config.processing_min = processing;
    config.processing_max = processing;
    config
}

/// Every row paid at most once, `paid` of them in all.
fn assert_paid_once(sim: &SimHandle, paid: usize, text: &str) {
    let twice = paid_twice(sim);
    assert!(twice.is_empty(), "rows paid twice {twice:?}: {text}");
    assert_eq!(rows_paid(sim), paid, "{text}");
}

/// The words of a refusal that says the unknown orders may be the ledger's own sends in doubt.
const MAYBE_OWN: &str = "they may be this ledger's own (";

/// The run ended with an exit code the README documents for it, and without a panic.
fn assert_documented(out: &std::process::Output, text: &str) {
    assert!(
        matches!(out.status.code(), Some(0 | 2 | 3 | 4 | 5 | 6)),
        "{:?}: {text}",
        out.status
    );
    assert!(!text.contains("panicked"), "{text}");
}

/// A proxy in front of `sim` whose answers to the `POST /order` requests numbered in `lose`
/// (counted from 1, in the order the simulator answers them) are replaced by an error shape
/// under the simulator's status (not a 504: an answer garbled on the way back, which names no
/// order): the order was made, its answer lost. Every other answer passes unchanged.
async fn losing_answers(sim: &SimHandle, lose: &'static [usize]) -> String {
    let posts = Arc::new(AtomicUsize::new(0));
    let rewrite: rewriting::Rewrite = Arc::new(move |method, path, status, json| {
        if *method != Method::POST || path != "/order" || !(200..300).contains(&status) {
            return;
        }
        let n = posts.fetch_add(1, Ordering::SeqCst) + 1;
        if lose.contains(&n) {
            *json = serde_json::json!({"type": "timeout", "message": "The request timed out."});
        }
    });
    rewriting::start(sim, rewrite).await
}

/// Concurrency 1, four orders of one row: the second's answer is lost while it processes. The
/// read before its send is tried again stops the run (exit 5) without sending it again; the
/// refusal says the order may be the ledger's own, and, orders of the run having gone out, does
/// not say that nothing was submitted. Once the orders finish, the same command completes the
/// batch: one order a row, each row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_mid_run_stops_it_saying_what_went_out_and_the_next_run_pays_the_rest_once() {
    let state = Workspace::new();
    let sim = start_sim(slow(&state, PROCESSING)).await;
    let via = losing_answers(&sim, &[2]).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=4);
    let grouping = ["--items-per-order", "1", "--concurrency", "1"];
    let args = [&grouping[..], &["--poll-timeout", "1"]].concat();
    let first = run_at(&a, &via, "payroll.csv", &args, &[]).await;
    let text = output_of(&first);
    assert_eq!(first.status.code(), Some(5), "{text}");
    assert_eq!(
        sim.orders().len(),
        2,
        "the run stopped at the lost answer: {text}"
    );
    assert_eq!(order_posts(&sim), 2, "the lost one not sent again: {text}");
    assert!(text.contains(MAYBE_OWN), "{text}");
    assert!(!text.contains("nothing was submitted"), "{text}");

    finish_orders(&sim).await;
    let sim = restart_sim(sim, slow(&state, QUICK)).await;
    let out = run_at(&a, &via, "payroll.csv", &grouping, &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(sim.orders().len(), 4, "{text}");
    assert_paid_once(&sim, 4, &text);
}

/// Runs `file` of `a` with `grouping` and the process killed right after its first send
/// (`after_send`): that send's answer is never recorded. Returns the run's output.
async fn killed_after_send(
    a: &Workspace,
    sim: &SimHandle,
    file: &str,
    grouping: &[&str],
) -> String {
    let killed = run_file(
        a,
        sim,
        file,
        grouping,
        &[("PAYBATCH_FAILPOINT", "after_send")],
    )
    .await;
    let text = output_of(&killed);
    assert!(text.contains("fail point after_send"), "{text}");
    text
}

/// A lost-answer case after its first run: the ledger's workspace `a`, the simulator's state,
/// the simulator restarted without faults (its orders processing quickly) once every order
/// finished ([`finish_orders`]), and the first run's output.
struct AfterLoss {
    state: Workspace,
    a: Workspace,
    sim: SimHandle,
    first: String,
}

/// Runs rows `rows` of `payroll.csv` with `grouping` and a poll timeout of 1 s against a
/// simulator whose orders process for [`PROCESSING`] and whose answers to orders `lose` sets
/// lose (504s or closed connections after the order was made): the run stops (exit 5) on its
/// own orders still processing, sends none of them twice, and says they may be its own.
async fn lose_every_answer(
    rows: std::ops::RangeInclusive<usize>,
    grouping: &[&str],
    lose: impl FnOnce(&mut SimConfig),
) -> AfterLoss {
    let state = Workspace::new();
    let mut config = slow(&state, PROCESSING);
    lose(&mut config);
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", rows);
    let args = [grouping, &["--poll-timeout", "1"]].concat();
    let first = run_file(&a, &sim, "payroll.csv", &args, &[]).await;
    let text = output_of(&first);
    assert_eq!(first.status.code(), Some(5), "{text}");
    let made = sim.orders().len();
    assert!(made >= 1, "{text}");
    assert_eq!(order_posts(&sim) as usize, made, "none sent twice: {text}");
    assert!(text.contains(MAYBE_OWN), "{text}");
    assert!(!text.contains("nothing was submitted"), "{text}");
    finish_orders(&sim).await;
    let sim = restart_sim(sim, slow(&state, QUICK)).await;
    AfterLoss {
        state,
        a,
        sim,
        first: text,
    }
}

/// The same command after the loss records every order whose answer was lost and pays the
/// rest: exit 0, `orders` orders at the service, `paid` rows each paid once.
async fn the_next_run_completes(after: &AfterLoss, grouping: &[&str], orders: usize, paid: usize) {
    let out = run_file(&after.a, &after.sim, "payroll.csv", grouping, &[]).await;
    let text = output_of(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "first: {}\nthen: {text}",
        after.first
    );
    assert_eq!(after.sim.orders().len(), orders, "{text}");
    assert_paid_once(&after.sim, paid, &text);
}

/// Eight orders of one row at four in flight, every answer a 504 after the service made the
/// order: the run stops on them, sends none twice; after they finish the same command records
/// them and pays the rest, each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_lost_answers_at_four_in_flight_are_recorded_by_the_next_run_each_row_once() {
    let grouping = ["--items-per-order", "1", "--concurrency", "4"];
    let after = lose_every_answer(1..=8, &grouping, |c| c.faults.timeout_rate = 1.0).await;
    the_next_run_completes(&after, &grouping, 8, 8).await;
}

/// The same with connections closed after the service made each order, two orders of 200 rows
/// at one in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_of_orders_of_200_rows_are_recorded_by_the_next_run_each_row_once() {
    let grouping = ["--items-per-order", "200", "--concurrency", "1"];
    let after = lose_every_answer(1..=400, &grouping, |c| c.faults.drop_rate = 1.0).await;
    the_next_run_completes(&after, &grouping, 2, 400).await;
}

/// A's order of three rows: its answer lost (504) while it processes, A stops (exit 5) saying
/// it may be its own. Another ledger, B, then runs the same rows as another batch: A's order is
/// truly another ledger's for B, and B has no send in doubt, so B's refusal (exit 5, nothing
/// sent) says only that they may be being paid from another ledger. Once A's order finishes,
/// B is refused its rows as repeats (exit 3, nothing sent) and A's next run records its order:
/// each row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_ledger_paying_the_rows_of_an_order_whose_answer_was_lost_is_not_told_it_is_its_own()
 {
    let state = Workspace::new();
    let mut config = slow(&state, PROCESSING);
    config.faults.timeout_rate = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let first = run_file(
        &a,
        &sim,
        "payroll.csv",
        &["--items-per-order", "3", "--poll-timeout", "1"],
        &[],
    )
    .await;
    let text = output_of(&first);
    assert_eq!(first.status.code(), Some(5), "{text}");
    assert!(text.contains(MAYBE_OWN), "{text}");

    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 1..=3);
    let out = run_file(
        &b,
        &sim,
        "bonus.csv",
        &["--items-per-order", "3", "--poll-timeout", "1"],
        &[],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(!text.contains(MAYBE_OWN), "B has no send in doubt: {text}");
    assert!(
        text.contains("being paid from another ledger now"),
        "{text}"
    );
    assert!(text.contains("nothing was submitted"), "{text}");
    assert_eq!(order_posts(&sim), 1, "B sent nothing: {text}");

    finish_orders(&sim).await;
    let sim = restart_sim(sim, slow(&state, QUICK)).await;
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert_eq!(sim.orders().len(), 1, "{text}");
    let out = run_file(&a, &sim, "payroll.csv", &[], &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(sim.orders().len(), 1, "{text}");
    assert_paid_once(&sim, 3, &text);
}

/// A proxy in front of `sim` that answers every `POST /order` with a 504 itself, never
/// forwarding it, while `swallow` holds: a send the service never received, its answer lost
/// as far as the run can tell. Everything else passes unchanged.
async fn swallowing_sends(sim: &SimHandle, swallow: Arc<std::sync::atomic::AtomicBool>) -> String {
    let answer: rewriting::Answer = Arc::new(move |method, _body| {
        (*method == Method::POST && swallow.load(Ordering::SeqCst)).then(|| {
            (
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                serde_json::json!({"type": "timeout", "message": "The request timed out."}),
            )
        })
    });
    rewriting::start_with(
        sim,
        rewriting::Rules {
            rewrite: Arc::new(|_, _, _, _| {}),
            answer: Some(answer),
            cut_path_at: None,
        },
    )
    .await
}

/// A's send of three rows never reached the service (504s from a gateway), so it is in doubt;
/// then another ledger, B, pays the same rows as another batch, and A runs again while B's
/// order processes. A's refusal says the order may be A's own (A has a send in doubt) or
/// another ledger's: it is B's. Nothing A is told to do pays a row twice: its next runs, a
/// reconcile, a run after it; B completes its batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_in_doubt_the_service_never_got_beside_another_ledgers_order_pays_nothing_twice() {
    let state = Workspace::new();
    let sim = start_sim(slow(&state, PROCESSING)).await;
    let swallow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let via = swallowing_sends(&sim, swallow.clone()).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "3", "--poll-timeout", "2"],
        &[],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(sim.orders().is_empty(), "{text}");
    swallow.store(false, Ordering::SeqCst);

    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 1..=3);
    let out = run_file(
        &b,
        &sim,
        "bonus.csv",
        &["--items-per-order", "3", "--poll-timeout", "1"],
        &[],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(
        out.status.code(),
        Some(5),
        "B's order still processing: {text}"
    );
    assert_eq!(sim.orders().len(), 1, "{text}");

    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "3", "--poll-timeout", "1"],
        &[],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains(MAYBE_OWN), "{text}");
    assert_eq!(sim.orders().len(), 1, "A sent nothing: {text}");

    finish_orders(&sim).await;
    let sim = restart_sim(sim, slow(&state, QUICK)).await;
    let mut all = String::new();
    for args in [
        vec!["run", "payroll.csv"],
        vec!["reconcile", "--batch", "payroll"],
        vec!["run", "payroll.csv"],
    ] {
        let out = against_url(&a, &via, &args).await;
        let text = output_of(&out);
        all.push_str(&format!("A {args:?} exit {:?}:\n", out.status.code()));
        all.push_str(&text);
        assert_documented(&out, &all);
        assert!(paid_twice(&sim).is_empty(), "{all}");
    }
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_paid_once(&sim, 3, &format!("{all}{text}"));
}

/// `paybatch ARGS` on the workspace's ledger (no service).
async fn on_ledger(ws: &Workspace, args: &[&str]) -> std::process::Output {
    let ledger = ws.ledger();
    let mut all = args.to_vec();
    all.extend_from_slice(&["--ledger", ledger.to_str().expect("utf-8 path")]);
    paybatch_in(ws.dir.path(), &all, &[]).await
}

/// A run killed right after a send whose answer was lost (a 504, then the process dies before
/// anything more is recorded). While the order processes: `status` and `reconcile` say what
/// they can, a resume stops (exit 5) without sending, says the order may be the ledger's own
/// and, having sent nothing itself, that nothing was submitted. Once it finished the same
/// command records it: one order, each row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_a_lost_answer_resumes_while_it_processes_and_after() {
    let state = Workspace::new();
    let mut config = slow(&state, PROCESSING);
    config.faults.timeout_rate = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let grouping = ["--items-per-order", "3"];
    let text = killed_after_send(&a, &sim, "payroll.csv", &grouping).await;
    assert_eq!(sim.orders().len(), 1, "{text}");
    let sim = restart_sim(sim, slow(&state, PROCESSING)).await;

    let mut all = text;
    let status = on_ledger(&a, &["status", "--batch", "payroll"]).await;
    let text = output_of(&status);
    all.push_str(&text);
    assert_eq!(status.status.code(), Some(0), "{all}");
    assert!(
        text.contains("sent, no answer recorded (in doubt)"),
        "{all}"
    );
    let out = run_file(
        &a,
        &sim,
        "payroll.csv",
        &[&grouping[..], &["--poll-timeout", "1"]].concat(),
        &[],
    )
    .await;
    let text = output_of(&out);
    all.push_str(&text);
    assert_eq!(out.status.code(), Some(5), "{all}");
    assert!(text.contains(MAYBE_OWN), "{all}");
    assert!(text.contains("nothing was submitted"), "{all}");
    assert_eq!(order_posts(&sim), 0, "nothing sent: {all}");
    let out = against_url(&a, &sim.base_url(), &["reconcile", "--batch", "payroll"]).await;
    let text = output_of(&out);
    all.push_str(&text);
    assert!(paid_twice(&sim).is_empty(), "{all}");
    assert_eq!(sim.orders().len(), 1, "{all}");

    finish_orders(&sim).await;
    let sim = restart_sim(sim, slow(&state, QUICK)).await;
    let status = on_ledger(&a, &["status", "--batch", "payroll"]).await;
    let text = output_of(&status);
    all.push_str(&text);
    let out = run_file(&a, &sim, "payroll.csv", &grouping, &[]).await;
    let text = output_of(&out);
    all.push_str(&text);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(sim.orders().len(), 1, "{all}");
    assert_paid_once(&sim, 3, &all);
}

/// An order whose answer was lost (504) and which the service then FAILS: the run stops on
/// it while it processes; after it, the next run records it as FAILED (exit 4, nothing paid,
/// nothing sent under a new key); `retry` and a run pay each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_answer_was_lost_and_that_failed_is_recorded_failed_then_retried_once() {
    let grouping = ["--items-per-order", "3"];
    let AfterLoss { a, sim, first, .. } = lose_every_answer(1..=3, &grouping, |c| {
        c.faults.timeout_rate = 1.0;
        c.failure_rate = 1.0;
    })
    .await;
    assert_eq!(rows_paid(&sim), 0, "the order FAILED");

    let out = run_file(&a, &sim, "payroll.csv", &grouping, &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(4), "first: {first}\nthen: {text}");
    assert_eq!(sim.orders().len(), 1, "no new order: {text}");
    assert_eq!(rows_paid(&sim), 0, "{text}");

    let out = retry_batch(&a, "payroll").await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let out = run_file(&a, &sim, "payroll.csv", &grouping, &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_paid_once(&sim, 3, &text);
}

/// Sends in doubt of another batch of the ledger whose orders have finished (a run killed
/// right after its send): the list shows those orders, named by their keys, so an order still
/// processing that the ledger does not know cannot be theirs. Another ledger's order, still
/// processing, holds back a run of a third batch: the refusal should not say it may be this
/// ledger's own, nor count those sends as possibly its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_in_doubt_whose_orders_finished_are_not_counted_as_maybe_the_unknown_processing_order()
 {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let a = Workspace::new();
    rows_file(&a, "old.csv", "EMP", 1..=1);
    killed_after_send(&a, &sim, "old.csv", &[]).await;
    until_orders_finish(&sim, Duration::from_secs(5)).await;

    let sim = restart_sim(sim, slow(&state, PROCESSING)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 10..=10);
    let out = run_file(&b, &sim, "bonus.csv", &["--poll-timeout", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));

    rows_file(&a, "payroll.csv", "EMP", 20..=20);
    let out = run_file(&a, &sim, "payroll.csv", &["--poll-timeout", "1"], &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(
        !text.contains(MAYBE_OWN),
        "the ledger's only send in doubt has its order finished, in the list: {text}"
    );
}

/// A run killed right after a send whose answer was lost, its order still processing: the
/// reconciliation lists that order as one of the batch that does not say its rows yet, yet in
/// the same report says the intent in doubt was never created by the service, and clears it as
/// a send that never happened (exit 0). While an order that may be the intent's own is still
/// processing, the service may well have created it: the intent should stay in doubt, and the
/// report should not say it was never created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_while_a_lost_answers_order_processes_does_not_say_the_service_never_created_it()
{
    let state = Workspace::new();
    let mut config = slow(&state, PROCESSING);
    config.faults.timeout_rate = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let text = killed_after_send(&a, &sim, "payroll.csv", &["--items-per-order", "3"]).await;
    assert_eq!(sim.orders().len(), 1, "{text}");

    let out = against_url(&a, &sim.base_url(), &["reconcile", "--batch", "payroll"]).await;
    let text = output_of(&out);
    assert!(
        sim.orders()
            .iter()
            .all(|o| o.status.as_str() == "PROCESSING"),
        "the order still processed during the reconciliation: {text}"
    );
    assert!(text.contains("does not say its rows yet"), "{text}");
    assert!(text.contains("stays in doubt"), "{text}");
    assert!(
        !text.contains("the service never created it"),
        "the intent's own order is at the service, still processing: {text}"
    );
    let status = on_ledger(&a, &["status", "--batch", "payroll"]).await;
    let text = output_of(&status);
    assert!(
        text.contains("in doubt"),
        "the send is still in doubt: {text}"
    );
}

/// Six orders of two rows at three in flight, the answers to the first six sends lost, the
/// orders processing from 0.1 s to 3 s: when the run reads before sending again some of them
/// have finished (known by their key, sent again, recorded) and some still process (the run
/// stops, exit 5). After they finish the same command completes the batch, each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_some_finished_some_processing_are_each_recorded_once() {
    let state = Workspace::new();
    let mut config = fast_config(Some(state.sim_state()));
    config.processing_min = Duration::from_millis(100);
    config.processing_max = Duration::from_secs(3);
    let sim = start_sim(config).await;
    let via = losing_answers(&sim, &[1, 2, 3, 4, 5, 6]).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=12);
    let grouping = ["--items-per-order", "2", "--concurrency", "3"];
    let args = [&grouping[..], &["--poll-timeout", "1"]].concat();
    let first = run_at(&a, &via, "payroll.csv", &args, &[]).await;
    let text = output_of(&first);
    assert!(matches!(first.status.code(), Some(0 | 5)), "{text}");
    assert!(paid_twice(&sim).is_empty(), "{text}");
    if first.status.code() == Some(5) && text.contains("still processing at the service") {
        assert!(text.contains(MAYBE_OWN), "{text}");
        assert!(!text.contains("nothing was submitted"), "{text}");
    }

    until_orders_finish(&sim, Duration::from_secs(10)).await;
    let out = run_at(&a, &via, "payroll.csv", &grouping, &[]).await;
    let text = output_of(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "first: {}\nthen: {text}",
        output_of(&first)
    );
    assert_eq!(sim.orders().len(), 6, "{text}");
    assert_paid_once(&sim, 12, &text);
}

/// Two orders of 200 rows whose answers were lost (connections closed), then answered with
/// only what the published contract requires (no description, no metadata) once finished:
/// the next run tells them by what they ask, item for item, sends their keys again and
/// records them, each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_of_200_rows_answered_minimally_later_are_recorded_once() {
    let grouping = ["--items-per-order", "200", "--concurrency", "2"];
    let mut after = lose_every_answer(1..=400, &grouping, |c| c.faults.drop_rate = 1.0).await;
    let mut config = slow(&after.state, QUICK);
    config.minimal_answers = 1.0;
    after.sim = restart_sim(after.sim, config).await;
    the_next_run_completes(&after, &grouping, 2, 400).await;
}

/// A's send never reached the service (504s from a gateway); a reconciliation, the service's
/// list read whole with nothing of it, clears the doubt (the service never created it). Another
/// ledger's order then processes while A runs a second batch: A has no send in doubt any more,
/// so its refusal (exit 5, nothing sent) does not say the order may be its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_cleared_by_reconcile_is_not_counted_as_maybe_an_unknown_order() {
    let state = Workspace::new();
    let sim = start_sim(slow(&state, QUICK)).await;
    let swallow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let via = swallowing_sends(&sim, swallow.clone()).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=1);
    let out = run_at(&a, &via, "payroll.csv", &["--poll-timeout", "2"], &[]).await;
    let mut all = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{all}");
    assert!(sim.orders().is_empty(), "{all}");
    swallow.store(false, Ordering::SeqCst);
    let out = against_url(&a, &via, &["reconcile", "--batch", "payroll"]).await;
    all.push_str(&output_of(&out));
    assert!(all.contains("the service never created it"), "{all}");

    let sim = restart_sim(sim, slow(&state, PROCESSING)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 10..=10);
    let out = run_file(&b, &sim, "bonus.csv", &["--poll-timeout", "1"], &[]).await;
    all.push_str(&output_of(&out));
    assert_eq!(
        out.status.code(),
        Some(5),
        "B's order still processing: {all}"
    );

    rows_file(&a, "other.csv", "EMP", 20..=20);
    let out = run_file(&a, &sim, "other.csv", &["--poll-timeout", "1"], &[]).await;
    let text = output_of(&out);
    all.push_str(&text);
    assert_eq!(out.status.code(), Some(5), "{all}");
    assert!(text.contains("still processing"), "{all}");
    assert!(!text.contains(MAYBE_OWN), "the doubt was cleared: {all}");
}

/// A run killed right after its send: the order is made and finishes, and the service then
/// answers minimally. A later run with the intent older than the in-doubt window reconciles it
/// first: the finished bare order cannot be attributed, but it names nothing by waiting, so the
/// intent is cleared, not kept in doubt, and its key sent again, whose answer names the order.
/// Kept in doubt (as while an unattributed order still processes), every later run and
/// reconcile would say the same forever. One order, each row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_intent_whose_finished_order_is_answered_bare_is_not_kept_in_doubt_forever() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let grouping = ["--items-per-order", "3"];
    let mut all = killed_after_send(&a, &sim, "payroll.csv", &grouping).await;
    until_orders_finish(&sim, Duration::from_secs(10)).await;
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 1.0;
    let sim = restart_sim(sim, config).await;
    // In doubt for longer than the window: reconciled before any resend.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stale = [&grouping[..], &["--in-doubt-hours", "0.0001"]].concat();
    for _ in 0..2 {
        let out = run_file(&a, &sim, "payroll.csv", &stale, &[]).await;
        all.push_str(&format!("run exit {:?}:\n", out.status.code()));
        all.push_str(&output_of(&out));
        let out = against_url(&a, &sim.base_url(), &["reconcile", "--batch", "payroll"]).await;
        all.push_str(&format!("reconcile exit {:?}:\n", out.status.code()));
        all.push_str(&output_of(&out));
    }
    let out = run_file(&a, &sim, "payroll.csv", &stale, &[]).await;
    all.push_str(&format!("last run exit {:?}:\n", out.status.code()));
    all.push_str(&output_of(&out));
    assert!(paid_twice(&sim).is_empty(), "{all}");
    assert_eq!(sim.orders().len(), 1, "{all}");
    assert_eq!(out.status.code(), Some(0), "{all}");
}
