//! Exactly once while a run sends: the service's order list read again before a send tried
//! again and after every `PAYBATCH_SERVICE_READ_EVERY` first sends, against two machines of one
//! team, orders that FAIL, answers lost on the way back and the runs that follow a hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::*;

/// How many `EMP-` references the service holds in an order that is not FAILED.
fn rows_paid(sim: &paybatch::sim::SimHandle) -> usize {
    live_orders_of_emp_rows(sim)
        .values()
        .filter(|&&n| n > 0)
        .count()
}

/// A proxy whose first answer to the order list shows nothing ([`rewriting::first_list_read_empty`]).
async fn first_read_sees_nothing(sim: &paybatch::sim::SimHandle) -> String {
    rewriting::first_list_read_empty(sim).await
}

/// Machine B pays `bonus` (rows `range`) and every order of it FAILS: nothing is paid.
async fn b_fails_bonus(
    state: &Workspace,
    sim: paybatch::sim::SimHandle,
    range: std::ops::RangeInclusive<usize>,
) -> paybatch::sim::SimHandle {
    let mut failing = fast_config(Some(state.sim_state()));
    failing.failure_rate = 1.0;
    let sim = restart_sim(sim, failing).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", range);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    assert!(
        live_orders_of_emp_rows(&sim).values().all(|&n| n == 0),
        "nothing paid"
    );
    restart_sim(sim, fast_config(Some(state.sim_state()))).await
}

/// Machine A plans payroll at five rows an order; machine B pays rows 8 to 10 under another
/// batch name just after A's first read. A's read while sending holds back its second order
/// (rows 6 to 10): right. The next run refuses rows 8 to 10 as repeats: right. Then
/// `--skip-repeats` is what that refusal offers: it should pay rows 6 and 7 and none of 8 to 10
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_order_of_several_rows_skipped_as_repeats_pays_none_of_them_again() {
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 8..=10);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    let via = first_read_sees_nothing(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let every = [("PAYBATCH_SERVICE_READ_EVERY", "1")];
    let grouping = ["--items-per-order", "5", "--concurrency", "1"];
    let out = run_at(&a, &via, "payroll.csv", &grouping, &every).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("held back"), "{text}");
    assert!(paid_twice(&sim).is_empty(), "{text}");

    let posts = order_posts(&sim);
    let out = run_at(&a, &via, "payroll.csv", &grouping, &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");

    let skip = ["--items-per-order", "5", "--skip-repeats"];
    let out = run_at(&a, &via, "payroll.csv", &skip, &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; the run with --skip-repeats exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(rows_paid(&sim), 10, "every row paid");
}

/// Machine B's run of `bonus` FAILS in full (nothing paid) just after machine A's first read.
/// A's read while sending learns B's FAILED orders; a FAILED order pays nothing, so it holds
/// nothing back: A pays every row once and ends as a run with nothing wrong does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_orders_learned_while_sending_hold_nothing_back() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let sim = b_fails_bonus(&state, sim, 5..=10).await;

    let via = first_read_sees_nothing(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--concurrency", "1"],
        &[("PAYBATCH_SERVICE_READ_EVERY", "3")],
    )
    .await;
    let text = output_of(&out);
    assert!(paid_twice(&sim).is_empty(), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("held back"), "{text}");
    assert_eq!(rows_paid(&sim), 10, "{text}");
}

/// The same before the first send: another ledger's `bonus`, every order of it FAILED, is no
/// repeat of A's `payroll` (a FAILED order paid nothing), as it is not for a run of the same
/// batch (`attack_service::failed_orders_of_another_ledger_do_not_hold_rows_planned_here`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_orders_of_another_batch_are_no_repeats() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let sim = b_fails_bonus(&state, sim, 1..=10).await;

    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(rows_paid(&sim), 10, "{text}");
    assert!(paid_twice(&sim).is_empty(), "{text}");
}

/// A's own order: the service made it but its answer was lost (504, as the contract allows),
/// and it is still processing when the send is to be tried again. A processing order shows only
/// its id, so whose it is cannot be told until it finishes, and sending the intent again would
/// pay its rows twice were the order another ledger's. The run stops there (exit 5) without
/// sending again, and says the order may be its own send whose answer was lost (it used to
/// say only "another ledger's"). Once the order has finished, the next run knows it by the key
/// its description names and records it: one order, the row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_own_order_whose_answer_was_lost_is_named_as_maybe_its_own_and_paid_once() {
    use std::time::Duration;
    let state = Workspace::new();
    // Minutes: no wait of the run can outlast it by chance; the clock is moved past it below.
    let processing = Duration::from_secs(600);
    let mut config = fast_config(Some(state.sim_state()));
    config.processing_min = processing;
    config.processing_max = processing;
    config.faults.timeout_rate = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=1);
    let first = run_file(&a, &sim, "payroll.csv", &["--poll-timeout", "1"], &[]).await;
    let text = output_of(&first);
    assert_eq!(first.status.code(), Some(5), "{text}");
    assert_eq!(sim.orders().len(), 1, "{text}");
    assert_eq!(order_posts(&sim), 1, "not sent again while unknown: {text}");
    assert!(
        text.contains("they may be this ledger's own (1 of its sends have no answer recorded"),
        "{text}"
    );

    sim.advance_clock(processing + Duration::from_secs(1))
        .expect("the simulator's clock moves");
    until_orders_finish(&sim, Duration::from_secs(10)).await;
    let sim = restart_sim(sim, fast_config(Some(state.sim_state()))).await;
    let out = run_file(&a, &sim, "payroll.csv", &[], &[]).await;
    let text = output_of(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "first run: {}\nthen: {text}",
        output_of(&first)
    );
    assert_eq!(sim.orders().len(), 1, "{text}");
    assert_eq!(rows_paid(&sim), 1, "{text}");
    assert!(paid_twice(&sim).is_empty(), "{text}");
}

/// Machine B runs the same batch with another grouping just after machine A's first read. A's
/// read while sending learns B's orders and holds back the orders of their rows; its next run
/// is refused with the advice to adopt them (`reconcile --rebuild`); after the adoption the
/// run pays what is missing: every row once, the held-back intents of rows B paid never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_orders_of_the_same_batch_adopted_then_resumed_pay_each_row_once() {
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 5..=10);
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "3"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    let via = first_read_sees_nothing(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let grouping = ["--items-per-order", "1", "--concurrency", "1"];
    let every = [("PAYBATCH_SERVICE_READ_EVERY", "3")];
    let out = run_at(&a, &via, "payroll.csv", &grouping, &every).await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("held back"), "{text}");
    assert!(paid_twice(&sim).is_empty(), "{text}");

    let posts = order_posts(&sim);
    let out = run_at(&a, &via, "payroll.csv", &grouping, &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(output_of(&out).contains("--rebuild"), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    let adopt = rebuild_at(&a, &via, "payroll", "payroll.csv").await;
    let out = run_at(&a, &via, "payroll.csv", &grouping, &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; reconcile exited {:?}: {}\nthen the run exited {:?}: {}",
        adopt.status.code(),
        output_of(&adopt),
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(rows_paid(&sim), 10, "{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
}

/// A proxy in front of `sim` that answers the first `POST /order` whose body contains `marker`
/// itself with `answer` (the service never sees it), and shows the order list as one empty last
/// page until `shown_after` has passed since that answer (as reads made before another
/// machine's orders would be).
async fn answering_once_then_showing_the_list(
    sim: &paybatch::sim::SimHandle,
    marker: &'static str,
    answer: (axum::http::StatusCode, serde_json::Value),
    shown_after: std::time::Duration,
) -> String {
    use std::sync::Mutex;
    use std::time::Instant;
    let answered: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (s, r) = (Arc::clone(&answered), Arc::clone(&answered));
    let answer: rewriting::Answer = Arc::new(move |method, body| {
        let order =
            *method == axum::http::Method::POST && String::from_utf8_lossy(body).contains(marker);
        let mut at = s.lock().unwrap_or_else(|e| e.into_inner());
        if !order || at.is_some() {
            return None;
        }
        *at = Some(Instant::now());
        Some(answer.clone())
    });
    let rewrite: rewriting::Rewrite = Arc::new(move |method, path, status, json| {
        let at = *r.lock().unwrap_or_else(|e| e.into_inner());
        let shown = at.is_some_and(|t| t.elapsed() >= shown_after);
        if *method == axum::http::Method::GET && path == "/order" && status == 200 && !shown {
            rewriting::empty_last_page(json);
        }
    });
    rewriting::start_with(
        sim,
        rewriting::Rules {
            rewrite,
            answer: Some(answer),
            cut_path_at: None,
        },
    )
    .await
}

/// Two sends of machine A under way at once, at one order a minute (`--order-rate 1`): the
/// second waits for its slot. The first is answered 503, and the read before it is tried again
/// shows machine B's orders of both rows (made just after A's first read): it holds back both
/// of A's orders. The first is held; the second, already past the hold check and waiting for
/// its slot, is sent when the slot comes: its row is paid twice although a read saw B's order
/// before it went. Deep tier: the second send waits a minute for its slot;
/// `a_send_waiting_out_a_429_pause_reads_again_and_is_held` is its counterpart after
/// a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_for_its_slot_when_a_read_holds_it_is_not_sent() {
    if !deep() {
        eprintln!("a send waiting for its slot: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 1..=2);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    // The list shows B's orders only once A's first send was made (and answered 503).
    let via = answering_once_then_showing_the_list(
        &sim,
        "\"metadata\"",
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"type": "internal_server_error", "message": "unavailable", "help": null}),
        ),
        std::time::Duration::ZERO,
    )
    .await;

    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=2);
    let extra = [
        "--items-per-order",
        "1",
        "--concurrency",
        "2",
        "--order-rate",
        "1",
    ];
    let out = run_at(&a, &via, "payroll.csv", &extra, &[]).await;
    let text = output_of(&out);
    assert!(text.contains("held back"), "{text}");
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {text}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(5), "{text}");
}

/// Machine A sends three one-row orders, two at a time, each sent once in this run
/// (`--send-tries 1`). Its send of EMP-1 is answered 429 (the published body, no `Retry-After`):
/// every sender pauses at least 5 s, and EMP-1's order is left in doubt for the next run. EMP-2
/// is paid, answered 0.3 s later (the service's latency); the send of EMP-3 then passes the hold
/// check and waits out the pause. Machine B's orders of EMP-1 and EMP-3 show in the list from
/// 1.5 s after the 429, after the read made as it came back. The send of EMP-3 waited more than
/// 3 s for the pacer, so it goes only after a read begun within the last 2 s: it is held back
/// (exit 5). Before that read (`5f97b6f`), it went as the pause ended, on the older view, and
/// paid EMP-3 twice. The pause's counterpart of
/// `a_send_waiting_for_its_slot_when_a_read_holds_it_is_not_sent` (the window, deep tier).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_out_a_429_pause_reads_again_and_is_held() {
    use std::time::Duration;
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(300);
    let sim = start_sim(config).await;
    let b = Workspace::new();
    // B's rows as `rows_file` writes them: EMP-1 and EMP-3 only.
    b.write(
        "bonus.csv",
        "reference,product_code,face_value,currency,distribution,email,payment_currency,country,department\n\
         EMP-1,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n\
         EMP-3,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n",
    );
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    // EMP-1's order is answered 429, whichever of the two sends reaches the service first; the
    // list shows B's orders from 1.5 s after it.
    let via = answering_once_then_showing_the_list(
        &sim,
        "\"EMP-1\"",
        (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({"error": "rate exceeded"}),
        ),
        Duration::from_millis(1500),
    )
    .await;

    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let extra = [
        "--items-per-order",
        "1",
        "--concurrency",
        "2",
        "--send-tries",
        "1",
    ];
    let out = run_at(&a, &via, "payroll.csv", &extra, &[]).await;
    let text = output_of(&out);
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {text}",
        out.status.code()
    );
    assert!(text.contains("held back"), "{text}");
    assert!(text.contains("EMP-3 (order"), "EMP-3's order held: {text}");
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert_eq!(rows_paid(&sim), 3, "B's two and A's EMP-2: {text}");
}

/// A's own order: made by the service, its answer lost (504) and answered bare since (neither
/// description nor metadata, as the published contract allows). The ledger holds its intent
/// and key, in doubt: sending it again (the same key) names the order as A's. Every run stops
/// before that (exit 5: finished orders whose they are cannot be told), and the advice is
/// `--allow-untold-orders`, for orders of another tool: the batch never ends by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_own_order_answered_bare_after_a_lost_answer_does_not_block_every_run() {
    let state = Workspace::new();
    let mut config = fast_config(Some(state.sim_state()));
    config.faults.timeout_rate = 1.0;
    config.minimal_answers = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=1);
    let first = run_file(&a, &sim, "payroll.csv", &[], &[]).await;
    assert_eq!(sim.orders().len(), 1, "{}", output_of(&first));
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 1.0;
    let sim = restart_sim(sim, config).await;
    let mut outs = Vec::new();
    for _ in 0..3 {
        let out = run_file(&a, &sim, "payroll.csv", &[], &[]).await;
        let done = out.status.code() == Some(0);
        outs.push(out);
        if done {
            break;
        }
    }
    let last = outs.last().expect("ran");
    assert!(paid_twice(&sim).is_empty());
    assert_eq!(
        last.status.code(),
        Some(0),
        "first run: {}\nlast run: {}",
        output_of(&first),
        output_of(last)
    );
}

/// A read of the list while sending that cannot reach a documented end (here its next page is
/// refused: a cursor the service does not know) stops the run (exit 5): right. It says "nothing was submitted", as before a run,
/// though orders of this run went out and are in the ledger: the operator is told the wrong
/// thing about money that moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_stops_while_sending_does_not_say_nothing_was_submitted() {
    let sim = start_sim(fast_config(None)).await;
    let reads = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&reads);
    let rewrite: rewriting::Rewrite = Arc::new(move |method, path, status, json| {
        if *method != axum::http::Method::GET || path != "/order" || status != 200 {
            return;
        }
        if n.fetch_add(1, Ordering::SeqCst) > 0 {
            json["pagination"]["cursors"]["after"] = serde_json::json!("the-same-cursor");
        }
    });
    let via = rewriting::start(&sim, rewrite).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=6);
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--concurrency", "1"],
        &[("PAYBATCH_SERVICE_READ_EVERY", "2")],
    )
    .await;
    let text = output_of(&out);
    assert!(order_posts(&sim) >= 2, "{text}");
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(!text.contains("nothing was submitted"), "{text}");
}

/// With `--allow-repeats`, rows another ledger paid while the run sent are paid again, as the
/// person said, and the run warns of them: right. Its closing line then says the reads found
/// "nothing of this batch paid elsewhere", which the warning above it contradicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_allowed_again_while_sending_are_not_said_to_be_paid_nowhere_else() {
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 5..=10);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    let via = first_read_sees_nothing(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &[
            "--items-per-order",
            "1",
            "--concurrency",
            "1",
            "--allow-repeats",
        ],
        &[("PAYBATCH_SERVICE_READ_EVERY", "3")],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("as --allow-repeats says"), "{text}");
    assert!(
        !text.contains("nothing of this batch paid elsewhere"),
        "{text}"
    );
}

/// The same order in doubt, and `paybatch reconcile --batch` as the way out: it says of the
/// in-doubt intent "the service never created it" (it did: the one order at the service, which
/// it names on the next line as not saying its rows yet). The next run with the same key is
/// answered with that order, so nothing is paid twice here; but the operator is told no order
/// exists, and is led to take the bare order for another tool's (`--allow-untold-orders`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_does_not_say_an_order_in_doubt_was_never_created_beside_a_bare_order() {
    let state = Workspace::new();
    let mut config = fast_config(Some(state.sim_state()));
    config.faults.timeout_rate = 1.0;
    config.minimal_answers = 1.0;
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=1);
    let first = run_file(&a, &sim, "payroll.csv", &[], &[]).await;
    assert_eq!(sim.orders().len(), 1, "{}", output_of(&first));
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 1.0;
    let sim = restart_sim(sim, config).await;
    let rec = against_url(&a, &sim.base_url(), &["reconcile", "--batch", "payroll"]).await;
    let said = output_of(&rec);
    assert!(!said.contains("never created it"), "{said}");
}
