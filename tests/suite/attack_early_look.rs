//! Attacks on the polling's early look (a look when every waiting order is expected to have
//! finished) and on the records of finished orders handed to the ledger's thread while the next
//! look goes on: how often the list is read while orders are accepted one after the other, a
//! ledger that fails the records, and Ctrl-C while records wait for the ledger.

use std::time::{Duration, Instant};

use super::attack_thread::{
    HeldRun, Holding, each_row_once, looks_within_cadence, requests, rest_of, spawn_run,
};
use crate::support::*;
use paybatch::sim::SimHandle;

/// Orders accepted one after the other (one in flight, 20 ms an answer) that the service
/// finishes within 10 ms: the early look comes 20 to 30 ms after each newest acceptance, so the
/// list would be read about once an order rather than once a half second. The pinned bound of
/// `attack_thread::the_polling_reads_each_finished_order_once_and_the_list_once_a_look`: at
/// most one list read each half second of the run, and a few more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_accepted_one_by_one_that_finish_at_once_read_the_list_once_a_half_second() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    // ATTACK_LATENCY_MS (default 20): the service's latency on every request.
    let latency = std::env::var("ATTACK_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    config.faults.latency = Duration::from_millis(latency);
    config.processing_min = Duration::from_millis(5);
    config.processing_max = Duration::from_millis(10);
    let sim = start_sim(config).await;
    rows_file(&ws, "s.csv", "EMP", 1..=150);
    let started = Instant::now();
    let flags = ["--concurrency", "1", "--items-per-order", "1"];
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        run_file(&ws, &sim, "s.csv", &flags, &[]),
    )
    .await
    .expect("the run ends within 120 s");
    let took = started.elapsed();
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(&sim, &ws, "s.csv", &text);
    looks_within_cadence(&sim, took, "one order accepted at a time");
}

/// A simulator whose orders all take `processing`, answering at once.
async fn even_sim(processing: Duration) -> SimHandle {
    let mut config = fast_config(None);
    config.processing_min = processing;
    config.processing_max = processing;
    start_sim(config).await
}

/// The run of 6 rows has sent its orders and recorded them accepted; while the service still
/// processes them (3 s), another connection takes the ledger's write lock (at most `most`): the
/// records of the finished orders the looks hand over wait for the ledger, however soon the
/// polling looks.
async fn held_while_recording(most: Duration) -> HeldRun {
    let ws = Workspace::new();
    let sim = even_sim(Duration::from_secs(3)).await;
    rows_file(&ws, "h.csv", "EMP", 1..=6);
    let (child, lines) = spawn_run(&ws, &sim, "h.csv", &["--items-per-order", "1"], &[]);
    until("6 orders sent", Duration::from_secs(60), || {
        sim.orders().len() == 6
    })
    .await;
    let ledger = ws.ledger();
    until(
        "6 orders recorded accepted",
        Duration::from_secs(30),
        || accepted_orders(&ledger) == 6,
    )
    .await;
    let holding = Holding::ledger(ws.ledger(), most);
    HeldRun {
        ws,
        sim,
        child,
        lines,
        holding,
    }
}

/// Orders the ledger at `path` holds ACCEPTED (none while it cannot be read).
fn accepted_orders(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .and_then(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM orders WHERE state = 'ACCEPTED'",
                [],
                |r| r.get(0),
            )
        })
        .unwrap_or(0)
}

/// The records of finished orders fail (the ledger's write lock held past its busy timeout by
/// another program): the run fails with that error (exit 5, said once), and once the ledger is
/// free the same command records every order and pays each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_fail_for_a_locked_ledger_fail_the_run_and_the_resume_repairs() {
    let HeldRun {
        ws,
        sim,
        mut child,
        mut lines,
        mut holding,
    } = held_while_recording(Duration::from_secs(60)).await;
    let ended = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    if ended.is_err() {
        child.start_kill().expect("SIGKILL");
        let _ = child.wait().await;
    }
    let rest = rest_of(&mut lines, Duration::from_secs(5)).await;
    holding.let_go();
    let status = ended
        .unwrap_or_else(|_| panic!("no end within 60 s of the ledger locked:\n{rest}"))
        .expect("wait");
    assert_eq!(status.code(), Some(5), "{rest}");
    let errors = rest.lines().filter(|l| l.starts_with("error:")).count();
    assert_eq!(errors, 1, "the error said once: {rest}");
    assert!(rest.contains("database is locked"), "{rest}");

    let out = run_file(&ws, &sim, "h.csv", &["--items-per-order", "1"], &[]).await;
    let text = format!("{rest}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(&sim, &ws, "h.csv", &text);
    // Nothing left to poll: a third run sends and polls nothing.
    let again = run_file(&ws, &sim, "h.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_eq!(sim.orders().len(), 6, "{}", output_of(&again));
}

/// Ctrl-C while the records of finished orders wait for the ledger (held shorter than its busy
/// timeout): the run stops with 130, and once the ledger is free the same command records
/// every order and pays each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_records_wait_for_the_ledger_then_the_resume_records_each_order() {
    let HeldRun {
        ws,
        sim,
        mut child,
        mut lines,
        mut holding,
    } = held_while_recording(Duration::from_secs(8)).await;
    // The next look (within half a second) hands the records over.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(&child, "-INT");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the run stops soon after Ctrl-C")
        .expect("wait");
    let rest = rest_of(&mut lines, Duration::from_secs(5)).await;
    holding.let_go();
    assert_eq!(status.code(), Some(130), "{rest}");
    let gets = requests(&sim, "GET /order/{id}");

    let out = run_file(&ws, &sim, "h.csv", &["--items-per-order", "1"], &[]).await;
    let text = format!("{rest}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(&sim, &ws, "h.csv", &text);
    assert_eq!(sim.orders().len(), 6, "{text}");
    eprintln!(
        "GET /order/{{id}}: {gets} before the resume, {} after\n{text}",
        requests(&sim, "GET /order/{id}")
    );
}

/// --poll-timeout while some orders are finished and handed to the ledger's thread and others
/// still process: the run ends incomplete (exit 5), naming as still processing exactly the
/// orders it did not record (the summary's COMPLETED rows and those add up to the 12), and the
/// same command then records the rest and pays each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poll_timeout_names_the_orders_not_recorded_and_the_resume_records_them() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.processing_min = Duration::from_millis(100);
    config.processing_max = Duration::from_secs(5);
    let sim = start_sim(config).await;
    rows_file(&ws, "t.csv", "EMP", 1..=12);
    let flags = ["--items-per-order", "1", "--poll-timeout", "2"];
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        run_file(&ws, &sim, "t.csv", &flags, &[]),
    )
    .await
    .expect("the run ends within 60 s");
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    let processing: usize = text
        .split(" orders still processing after --poll-timeout")
        .next()
        .and_then(|before| before.rsplit(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of the orders still processing in:\n{text}"));
    let completed: usize = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("COMPLETED"))
        .map_or(0, |n| n.trim().parse().expect("a count"));
    assert_eq!(processing + completed, 12, "{text}");
    assert!(processing > 0 && completed > 0, "both kinds: {text}");

    let out = run_file(&ws, &sim, "t.csv", &["--items-per-order", "1"], &[]).await;
    let text = format!("{text}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(&sim, &ws, "t.csv", &text);
}

/// The order list's times of each order, rewritten for the `n`-th read of the list: left out,
/// unreadable, completed before created, nothing between them, a millisecond apart far in the
/// future and far in the past, growing by 37 ms at every read; from the 40th read, years apart
/// and 26 hours apart by their offsets.
fn hostile_times(n: usize, item: &mut serde_json::Value) {
    let Some(o) = item.as_object_mut() else {
        return;
    };
    let set = |o: &mut serde_json::Map<String, serde_json::Value>, c: &str, d: &str| {
        o.insert("created_at".into(), c.into());
        o.insert("completed_at".into(), d.into());
    };
    if n >= 40 {
        if n.is_multiple_of(2) {
            set(o, "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z");
        } else {
            set(o, "2026-11-28T15:32:50+14:00", "2026-11-28T15:32:50-12:00");
        }
        return;
    }
    match n % 7 {
        0 => {
            o.remove("created_at");
            o.remove("completed_at");
        }
        1 => set(o, "yesterday", "today"),
        2 => set(o, "2026-11-28T15:32:53Z", "2026-11-28T15:32:50Z"),
        3 => set(o, "2026-11-28T15:32:50Z", "2026-11-28T15:32:50Z"),
        4 => set(o, "9999-01-01T00:00:00Z", "9999-01-01T00:00:00.001Z"),
        5 => set(o, "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.002Z"),
        _ => {
            let ms = 37 * n as i64;
            let start = chrono::DateTime::parse_from_rfc3339("2026-11-28T15:00:00Z").unwrap();
            let end = start + chrono::Duration::milliseconds(ms);
            set(o, &start.to_rfc3339(), &end.to_rfc3339());
        }
    }
}

/// Whatever the list's times say (see [`hostile_times`]), a run of 20 orders sent in one burst
/// reads the list at most once a half second (and a few more), each finished order once, pays
/// each row once and ends well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_times_in_the_order_list_make_no_flood_of_looks() {
    for processing in [
        (Duration::from_millis(200), Duration::from_millis(400)),
        (Duration::from_secs(2), Duration::from_secs(6)),
    ] {
        let ws = Workspace::new();
        let mut config = fast_config(None);
        config.processing_min = processing.0;
        config.processing_max = processing.1;
        let sim = start_sim(config).await;
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let rewrite: rewriting::Rewrite = std::sync::Arc::new(move |method, path, status, json| {
            if *method != axum::http::Method::GET || path != "/order" || status != 200 {
                return;
            }
            let n = reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(items) = json.get_mut("items").and_then(|i| i.as_array_mut()) {
                for item in items {
                    hostile_times(n, item);
                }
            }
        });
        let base = rewriting::start(&sim, rewrite).await;
        rows_file(&ws, "x.csv", "EMP", 1..=20);
        let args = run_args(&ws, &base, "x.csv", &["--items-per-order", "1"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(90),
            paybatch_in(ws.dir.path(), &args, &[]),
        )
        .await
        .expect("the run ends within 90 s");
        let took = started.elapsed();
        let text = output_of(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        each_row_once(&sim, &ws, "x.csv", &text);
        let stats = sim.stats().requests;
        assert_eq!(requests(&sim, "GET /order/{id}"), 20, "{stats:?}");
        looks_within_cadence(&sim, took, &format!("{processing:?}"));
    }
}
