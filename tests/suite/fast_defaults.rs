//! Fast by default: orders are polled while later ones are still being sent, and the sends of
//! an earlier run on the same ledger count against the service's window.

use std::time::Duration;

use crate::support::*;
use crate::support::{paybatch_in as paybatch, stderr_of as stderr};
use paybatch::sim::SimHandle;
use tokio::io::AsyncBufReadExt;

fn rows(prefix: &str, n: usize) -> String {
    let mut csv = String::from("reference,product_code,face_value,currency,email\n");
    for i in 1..=n {
        csv.push_str(&format!("{prefix}-{i},AMZ-US,10.00,USD,\n"));
    }
    csv
}

fn run_args<'a>(
    ws: &'a Workspace,
    sim: &SimHandle,
    file: &'a str,
    extra: &[&'a str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        file.into(),
        "--base-url".into(),
        sim.base_url(),
        "--api-key-file".into(),
        ws.key_file().to_string_lossy().into(),
        "--ledger".into(),
        ws.ledger().to_string_lossy().into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// (first_sent_at, finished_at) of every order of the ledger.
fn order_times(ws: &Workspace) -> Vec<(Option<String>, Option<String>)> {
    let db = rusqlite::Connection::open(ws.ledger()).expect("ledger");
    let mut stmt = db
        .prepare("select first_sent_at, finished_at from orders order by id")
        .expect("query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_polled_while_later_ones_are_still_sent() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    // Each request takes 150 ms: ten orders sent one at a time take at least 1.5 s, while
    // each finishes within 100 ms of its creation.
    config.faults.latency = Duration::from_millis(150);
    config.processing_min = Duration::from_millis(20);
    config.processing_max = Duration::from_millis(100);
    let sim = start_sim(config).await;
    ws.write("p.csv", &rows("P", 10));
    let args = run_args(
        &ws,
        &sim,
        "p.csv",
        &["--items-per-order", "1", "--concurrency", "1"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch(ws.dir.path(), &args, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let times = order_times(&ws);
    assert_eq!(times.len(), 10);
    let last_sent = times
        .iter()
        .filter_map(|(sent, _)| sent.clone())
        .max()
        .expect("sent");
    let first_finished = times
        .iter()
        .filter_map(|(_, done)| done.clone())
        .min()
        .expect("finished");
    assert!(
        first_finished < last_sent,
        "an order finished early must be recorded before the last order is sent: first finished {first_finished}, last sent {last_sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_counts_the_first_runs_sends_against_the_window() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.rate_limit_per_minute = 20;
    let sim = start_sim(config).await;
    ws.write("a.csv", &rows("A", 20));
    ws.write("b.csv", &rows("B", 3));
    let first = run_args(
        &ws,
        &sim,
        "a.csv",
        &["--items-per-order", "1", "--order-rate", "20"],
    );
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let out = paybatch(ws.dir.path(), &first, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(order_posts(&sim), 20);

    // Right after, another batch on the same ledger: the window is full, so it waits instead
    // of drawing 429s.
    let second = run_args(
        &ws,
        &sim,
        "b.csv",
        &["--items-per-order", "1", "--order-rate", "20"],
    );
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &second, &[]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let said = wait_for_line(
        &mut lines,
        "orders sent from this ledger in the last minute",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        said.contains("20 orders sent from this ledger in the last minute"),
        "{said}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sim.stats().answered_429, 0, "{:?}", sim.stats());
    assert_eq!(
        order_posts(&sim),
        20,
        "nothing more sent while the window is full"
    );
    child.kill().await.expect("kill");
}
