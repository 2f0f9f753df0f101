//! The read of the order list ahead of the service's window, against a slow service: the
//! sends that waited for the window go after that read, not while it is still under way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::{Method, StatusCode};

use crate::support::rewriting::{self, Answer, Rules};
use crate::support::*;

/// The `EMP-` rows the simulator's orders pay so far.
fn paid_rows(sim: &paybatch::sim::SimHandle) -> Vec<String> {
    service_orders_per_reference(sim).into_keys().collect()
}

/// Machine A runs its ten one-row orders through `base` (`--order-rate 5`, with `extra`,
/// reading the list after every `read_every` orders) in the background; once its first five are at the service, machine B pays the five rows A has
/// not sent, straight at the simulator. Returns A's run, still going (waiting for the window).
async fn a_waits_while_b_pays(
    sim: &paybatch::sim::SimHandle,
    a: &Workspace,
    base: &str,
    extra: &[&str],
    read_every: &'static str,
) -> tokio::task::JoinHandle<std::process::Output> {
    rows_file(a, "payroll.csv", "EMP", 1..=10);
    let mut flags = vec!["--items-per-order", "1", "--order-rate", "5"];
    flags.extend_from_slice(extra);
    let args = run_args(a, base, "payroll.csv", &flags);
    let dir = a.dir.path().to_path_buf();
    let run_a = tokio::spawn(async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        paybatch_in(&dir, &args, &[("PAYBATCH_SERVICE_READ_EVERY", read_every)]).await
    });
    // A's first burst: five orders at the service (bounded wait).
    let started = std::time::Instant::now();
    while sim.orders().len() < 5 {
        assert!(started.elapsed() < Duration::from_secs(40), "A sends");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sent = paid_rows(sim);
    assert_eq!(sent.len(), 5, "{sent:?}");
    let b = Workspace::new();
    let mut text = String::from(
        "reference,product_code,face_value,currency,distribution,email,payment_currency,country,department\n",
    );
    for r in (1..=10)
        .map(|i| format!("EMP-{i}"))
        .filter(|r| !sent.contains(r))
    {
        text.push_str(&format!(
            "{r},AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n"
        ));
    }
    b.write("bonus.csv", &text);
    let out = run_file(&b, sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "B paid before A's window"
    );
    run_a
}

/// A's run ends with B's five rows held back (exit 5), and no row paid twice.
async fn held_back_and_paid_once(
    sim: &paybatch::sim::SimHandle,
    run_a: tokio::task::JoinHandle<std::process::Output>,
) {
    let out = run_a.await.expect("A's run");
    let twice = paid_twice(sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("5 orders held back"), "{text}");
}

/// A service that answers every request 1.2 s late. During A's wait for the window, B pays the
/// five rows A has not sent. The read ahead of the window (started a second before it) takes
/// longer than that second: the sends that waited must still go after it, held back, or B's
/// rows are paid twice, and silently (the read finds them sent, no longer to hold). Deep tier
/// only: it waits a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sends_that_waited_for_the_window_wait_for_a_slow_read_ahead() {
    if !deep() {
        eprintln!("the window's read ahead: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(1200);
    let sim = start_sim(config).await;
    let a = Workspace::new();
    let run_a = a_waits_while_b_pays(&sim, &a, &sim.base_url(), &[], "8").await;
    held_back_and_paid_once(&sim, run_a).await;
}

/// During A's wait for the window, B pays the five rows A has not sent, and from then on the
/// service answers every read 503. The read ahead of the window fails: the sends that waited
/// must not go without a read (the next first send reads again, and the run stops when that
/// read fails too), or B's rows are paid twice. Deep tier only: it waits a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sends_that_waited_for_the_window_read_again_after_a_failed_read_ahead() {
    if !deep() {
        eprintln!("the window's read ahead: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let sim = start_sim(fast_config(None)).await;
    let failing = Arc::new(AtomicBool::new(false));
    let fails = Arc::clone(&failing);
    let answer: Answer = Arc::new(move |method, _| {
        (*method == Method::GET && fails.load(Ordering::SeqCst)).then(|| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"type": "internal_server_error", "message": "down", "help": null}),
            )
        })
    });
    let via = rewriting::start_with(
        &sim,
        Rules {
            rewrite: Arc::new(|_, _, _, _| {}),
            answer: Some(answer),
            cut_path_at: None,
        },
    )
    .await;
    let a = Workspace::new();
    let run_a = a_waits_while_b_pays(&sim, &a, &via, &["--poll-timeout", "20"], "8").await;
    failing.store(true, Ordering::SeqCst);
    let out = run_a.await.expect("A's run");
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
}

/// During A's wait for the window, B pays the five rows A has not sent. A sent five orders,
/// far fewer than half of the 500 a read is due after: no read ahead of the window. The sends
/// that waited a minute must still go after a read made since their wait began, or B's rows
/// are paid twice. Deep tier only: it waits a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_that_waited_a_minute_read_again_though_no_read_ahead_was_due() {
    if !deep() {
        eprintln!("the read after a long wait: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    let run_a = a_waits_while_b_pays(&sim, &a, &sim.base_url(), &[], "500").await;
    held_back_and_paid_once(&sim, run_a).await;
}
