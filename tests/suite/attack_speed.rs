//! Exactly once and the service's limits under the sending's speed changes: a send frees its
//! request slot when its answer comes (before the answer is recorded), orders moved as a whole
//! in two statements, and the pacer's margin of 25 ms. Real binary, real simulator, real
//! ledger. (The simulator's state migration 2 is tested in its crate: `store::tests`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::http::{Method, StatusCode};

use super::attack_thread::{hold_the_ledger, spawn_run};
use crate::support::rewriting::{self, Rules};
use crate::support::*;
use paybatch::sim::SimHandle;

/// The exit codes a run may end with after a fault of the service (README: 0 paid, 4 rows
/// failed, 5 incomplete).
const DOCUMENTED: [i32; 3] = [0, 4, 5];

/// Rows of `EMP-` references with at least one order that is not FAILED.
fn rows_paid(sim: &SimHandle) -> usize {
    live_orders_of_emp_rows(sim)
        .values()
        .filter(|&&n| n > 0)
        .count()
}

/// No panic, and an exit code that README documents.
fn ended_well(out: &std::process::Output, what: &str) {
    let text = output_of(out);
    assert!(!text.contains("panicked"), "{what}: a panic:\n{text}");
    let code = out.status.code();
    assert!(
        code.is_some_and(|c| DOCUMENTED.contains(&c)),
        "{what}: exit {code:?}:\n{text}"
    );
}

/// A simulator with the faults of a send at `rate` (a 504 after the order was made, a dropped
/// connection, a 5xx; no 429 burst: after a 429 the pacer keeps the run under 90% of the sends
/// its window held, a wait of up to a minute) and a 500 kept under the key at `stored`, `latency`
/// on every request.
async fn faulty_sim(rate: f64, stored: f64, latency: Duration) -> SimHandle {
    let mut config = fast_config(None);
    config.faults.latency = latency;
    config.faults.timeout_rate = rate;
    config.faults.drop_rate = rate;
    config.faults.stored_error_rate = stored;
    config.faults.error_rate = rate;
    start_sim(config).await
}

/// The same command (and `retry` after rows failed) until a run pays everything (at most 4
/// runs): no row paid twice after any of them, each ends well.
async fn until_all_paid(ws: &Workspace, sim: &SimHandle, file: &str, flags: &[&str], rows: usize) {
    let batch = file.trim_end_matches(".csv");
    let mut last = String::new();
    for attempt in 0..4 {
        let out = run_file(ws, sim, file, flags, &[]).await;
        last = output_of(&out);
        let what = format!("{flags:?}, run {attempt}");
        ended_well(&out, &what);
        assert_eq!(paid_twice(sim), Vec::<String>::new(), "{what}");
        if out.status.code() == Some(0) {
            assert_eq!(rows_paid(sim), rows, "{what}:\n{last}");
            return;
        }
        if out.status.code() == Some(4) {
            let retried = retry_batch(ws, batch).await;
            assert!(!output_of(&retried).contains("panicked"));
        }
    }
    panic!(
        "{flags:?}: not every row paid after 4 runs ({} of {rows}); the last:\n{last}",
        rows_paid(sim)
    );
}

/// Many orders at `--concurrency` 1, 4 and 64, one row an order and 200 rows an order, against
/// a service that times out after making the order, drops answers and answers 5xx: every
/// row is paid once, each run ends with a documented code and no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_at_concurrency_1_4_and_64_pay_each_row_once() {
    let cases: [(&str, &str, usize); 5] = [
        ("4", "1", 40),
        ("64", "200", 1000),
        ("1", "1", 12),
        ("64", "1", 160),
        ("4", "200", 800),
    ];
    // The deep tier takes every case; the fast one, a case of each size of order.
    let taken = if deep() { cases.len() } else { 2 };
    for (concurrency, per_order, rows) in cases.into_iter().take(taken) {
        let sim = faulty_sim(0.04, 0.0, Duration::from_millis(20)).await;
        let ws = Workspace::new();
        rows_file(&ws, "pay.csv", "EMP", 1..=rows);
        let flags = ["--concurrency", concurrency, "--items-per-order", per_order];
        until_all_paid(&ws, &sim, "pay.csv", &flags, rows).await;
    }
}

/// With 500s kept under their keys as well (their rows stay in doubt until the in-doubt window
/// passes, exit 5), two runs at 64 in flight: no row paid twice, documented exit codes, no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_errors_at_64_in_flight_pay_no_row_twice() {
    if !deep() {
        eprintln!("stored errors at 64 in flight: deep tier only ({DEEP_VAR}=1)");
        return;
    }
    let sim = faulty_sim(0.04, 0.05, Duration::from_millis(20)).await;
    let ws = Workspace::new();
    rows_file(&ws, "pay.csv", "EMP", 1..=200);
    let flags = ["--concurrency", "64", "--items-per-order", "1"];
    for attempt in 0..2 {
        let out = run_file(&ws, &sim, "pay.csv", &flags, &[]).await;
        let what = format!("run {attempt}");
        ended_well(&out, &what);
        assert_eq!(paid_twice(&sim), Vec::<String>::new(), "{what}");
    }
    assert!(sim.stats().stored_errors > 0, "a 500 was kept under a key");
    assert!(rows_paid(&sim) >= 150, "{} of 200 paid", rows_paid(&sim));
}

/// A run of 120 rows, one an order, at `concurrency` against a slow service: once 10 orders
/// went out the ledger's write lock is taken by another connection, every request sent is
/// answered (the answers wait for their records), SIGKILL; the lock let go, the same command
/// pays every row once.
async fn killed_while_answers_wait_for_the_ledger(concurrency: &str) {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(300);
    let sim = start_sim(config).await;
    rows_file(&ws, "burst.csv", "EMP", 1..=120);
    let flags = ["--concurrency", concurrency, "--items-per-order", "1"];
    let (mut child, mut lines) = spawn_run(&ws, &sim, "burst.csv", &flags, &[]);
    wait_for_line(&mut lines, "submitting 120 orders", Duration::from_secs(60)).await;
    until("10 orders sent", Duration::from_secs(30), || {
        order_posts(&sim) >= 10
    })
    .await;
    let (release, holder) = hold_the_ledger(ws.ledger(), Duration::from_secs(60));
    until("the sends answered", Duration::from_secs(30), || {
        sim.orders().len() as u64 == order_posts(&sim)
    })
    .await;
    child.start_kill().expect("SIGKILL");
    let killed = child.wait().await.expect("wait");
    assert_eq!(killed.code(), None, "killed");
    release.send(()).expect("the holder waits");
    holder.join().expect("the holder ends");
    assert!(order_posts(&sim) < 120, "killed mid-burst");
    let out = run_file(&ws, &sim, "burst.csv", &flags, &[]).await;
    let what = format!("--concurrency {concurrency}, the same command after the kill");
    ended_well(&out, &what);
    assert_eq!(out.status.code(), Some(0), "{what}:\n{}", output_of(&out));
    assert_eq!(paid_twice(&sim), Vec::<String>::new(), "{what}");
    assert_eq!(rows_paid(&sim), 120, "{what}");
}

/// SIGKILL while the answers of up to 4 x `--concurrency` sends wait for their records (the
/// ledger held by another program), at 4 and 64 in flight: the resume pays every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_answers_wait_for_their_records_then_the_resume_pays_once() {
    for concurrency in ["4", "64"] {
        killed_while_answers_wait_for_the_ledger(concurrency).await;
    }
}

/// A proxy in front of `sim` that counts the `POST` requests it forwards at once; returns its
/// base URL and the most seen in flight.
async fn counting_proxy(sim: &SimHandle) -> (String, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let (now_in, most_in, now_out) = (Arc::clone(&now), Arc::clone(&most), Arc::clone(&now));
    let base = rewriting::start_with(
        sim,
        Rules {
            rewrite: Arc::new(move |method, _, _, _| {
                if *method == Method::POST {
                    now_out.fetch_sub(1, Ordering::SeqCst);
                }
            }),
            answer: Some(Arc::new(move |method, _| {
                if *method == Method::POST {
                    let n = now_in.fetch_add(1, Ordering::SeqCst) + 1;
                    most_in.fetch_max(n, Ordering::SeqCst);
                }
                None::<(StatusCode, serde_json::Value)>
            })),
            cut_path_at: None,
        },
    )
    .await;
    (base, most)
}

/// The `POST` requests in flight at the service never exceed `--concurrency` (1, 4, 16), though
/// a send's slot is freed before its answer is recorded; at 4 and 16 more than one goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_never_exceed_the_concurrency() {
    for (concurrency, rows) in [(1_i64, 20), (4, 60), (16, 120)] {
        let mut config = fast_config(None);
        config.faults.latency = Duration::from_millis(60);
        config.faults.latency_jitter = Duration::from_millis(60);
        let sim = start_sim(config).await;
        let (base, most) = counting_proxy(&sim).await;
        let ws = Workspace::new();
        rows_file(&ws, "pay.csv", "EMP", 1..=rows);
        let c = concurrency.to_string();
        let flags = ["--concurrency", c.as_str(), "--items-per-order", "1"];
        let out = run_at(&ws, &base, "pay.csv", &flags, &[]).await;
        assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= concurrency,
            "{most} requests at once at --concurrency {concurrency}"
        );
        if concurrency > 1 {
            assert!(
                most > 1,
                "never more than one request at once at {concurrency}"
            );
        }
        assert_eq!(rows_paid(&sim), rows);
    }
}

/// A run at `--order-rate 20` against a service that admits 20 orders a minute, over two
/// windows (40 orders): no 429. Deep tier: it takes over a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_at_the_service_rate_over_two_windows_gets_no_429() {
    if !deep() {
        eprintln!("the pacer over two windows: deep tier only ({DEEP_VAR}=1), over a minute");
        return;
    }
    let mut config = fast_config(None);
    config.rate_limit_per_minute = 20;
    config.faults.latency = Duration::from_millis(30);
    let sim = start_sim(config).await;
    let ws = Workspace::new();
    rows_file(&ws, "pay.csv", "EMP", 1..=40);
    let flags = [
        "--order-rate",
        "20",
        "--items-per-order",
        "1",
        "--concurrency",
        "4",
    ];
    let out = run_file(&ws, &sim, "pay.csv", &flags, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(sim.stats().answered_429, 0, "{}", output_of(&out));
    assert_eq!(rows_paid(&sim), 40);
}

/// A row event (reference, from, to).
type RowEvent = (String, String, String);

/// The row events of the ledger at `db` for rows moved to `to`: (reference, from, to), in the
/// order written, and the rows of the batch by item (reference, state).
fn moved_rows(db: &std::path::Path, to: &str) -> (Vec<RowEvent>, Vec<(String, String)>) {
    let conn = rusqlite::Connection::open(db).expect("the ledger opens");
    let mut st = conn
        .prepare(
            "SELECT r.reference, e.from_state, e.to_state FROM events e
               JOIN rows r ON r.id = e.subject_id
              WHERE e.subject = 'row' AND e.to_state = ?1 ORDER BY e.id",
        )
        .expect("events");
    let events = st
        .query_map([to], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("read")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    let mut st = conn
        .prepare("SELECT reference, state FROM rows ORDER BY order_id, item_index")
        .expect("rows");
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("read")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    (events, rows)
}

/// Rows of one order of five, in file order: `R-1` to `R-5`, one to `reject@`.
const FIVE: &str = "reference,product_code,face_value,currency,distribution,email\n\
R-1,AMZ-US,10,USD,email,r1@example.com\n\
R-2,AMZ-US,20,USD,email,r2@example.com\n\
R-3,AMZ-US,30,USD,email,reject@example.com\n\
R-4,AMZ-US,40,USD,email,r4@example.com\n\
R-5,AMZ-US,50,USD,email,r5@example.com\n";

/// Each row of the order: one event `from` -> `to`, in item order; `status` and `history`
/// read the row as `to`.
async fn each_row_moved_once(ws: &Workspace, base: &str, from: &str, to: &str) {
    let (events, rows) = moved_rows(&ws.ledger(), to);
    let expected: Vec<RowEvent> = rows
        .iter()
        .map(|(r, _)| (r.clone(), from.to_string(), to.to_string()))
        .collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(events, expected, "one event a row, in item order");
    assert!(rows.iter().all(|(_, s)| s == to), "{rows:?}");
    let status = against_url(ws, base, &["status", "--batch", "five", "--json"]).await;
    let text = stdout_of(&status);
    assert!(
        text.contains(to) || text.contains(&to.to_lowercase()),
        "{text}"
    );
    for (reference, _) in &rows {
        let history = against_url(ws, base, &["history", "--reference", reference]).await;
        let said = output_of(&history);
        assert!(
            said.contains(to) || said.contains(&to.to_lowercase()),
            "history of {reference}: {said}"
        );
    }
}

/// An order refused as a whole (422 with no item named): its five rows REJECTED, one event
/// each in item order, read so by `status` and `history`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_refused_as_a_whole_moves_each_row_once_in_item_order() {
    let sim = start_sim(fast_config(None)).await;
    let base = rewriting::start_with(
        &sim,
        Rules {
            rewrite: Arc::new(|_, _, _, _| {}),
            answer: Some(Arc::new(|method, body| {
                let reject =
                    *method == Method::POST && String::from_utf8_lossy(body).contains("reject@");
                reject.then(|| {
                    let answer = serde_json::json!({
                        "type": "validation_error",
                        "message": "refused",
                    });
                    (StatusCode::UNPROCESSABLE_ENTITY, answer)
                })
            })),
            cut_path_at: None,
        },
    )
    .await;
    let ws = Workspace::new();
    ws.write("five.csv", FIVE);
    let out = run_at(&ws, &base, "five.csv", &["--items-per-order", "5"], &[]).await;
    ended_well(&out, "refused as a whole");
    assert_eq!(sim.orders().len(), 0);
    each_row_moved_once(&ws, &base, "PLANNED", "REJECTED").await;
}

/// An order the service made FAILED: its five rows FAILED, one event each in item order, read
/// so by `status` and `history`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_order_moves_each_row_once_in_item_order() {
    let mut config = fast_config(None);
    config.failure_rate = 1.0;
    let sim = start_sim(config).await;
    let ws = Workspace::new();
    ws.write("five.csv", &FIVE.replace("reject@", "r3@"));
    let out = run_file(&ws, &sim, "five.csv", &["--items-per-order", "5"], &[]).await;
    ended_well(&out, "failed");
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    each_row_moved_once(&ws, &sim.base_url(), "SUBMITTED", "FAILED").await;
}
