//! A run killed while the service is still creating its order (the request has left, the answer
//! has not come back), and the same command started again at once: the new run's request with
//! the same key meets the service's "still in progress" answer, waits, is answered with the
//! original order, and records that one order. Real binary, real simulator, real ledger.

use std::time::{Duration, Instant};

use crate::support::*;
use paybatch::ledger::{Ledger, RowState};
use paybatch::sim::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_request_and_restarted_at_once_records_the_one_order() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    // The service holds each new key for 3 s before it answers.
    config.faults = Faults {
        in_progress_delay: Duration::from_secs(3),
        ..Faults::default()
    };
    let sim = start_sim(config).await;
    let input = ws.write(
        "one.csv",
        "reference,product_code,face_value,currency,email\nR-1,AMZ-US,25.00,USD,ann@example.com\n",
    );
    let refs = references(&input);
    let key = ws.key_file();
    let base = sim.base_url();
    let ledger = ws.ledger();
    let args = [
        "run",
        "one.csv",
        "--base-url",
        base.as_str(),
        "--api-key-file",
        key.to_str().expect("path"),
        "--ledger",
        ledger.to_str().expect("path"),
    ];

    let mut first = tokio::process::Command::new(BIN)
        .current_dir(ws.dir.path())
        .args(args)
        .env_remove("PAYBATCH_FAILPOINT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("paybatch starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while order_posts(&sim) == 0 {
        assert!(Instant::now() < deadline, "the first run sent its order");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.start_kill().expect("SIGKILL");
    let killed = first.wait().await.expect("wait");
    assert_eq!(killed.code(), None, "killed while the service was working");
    assert!(sim.orders().is_empty(), "the service has not finished yet");

    let second = paybatch_in(ws.dir.path(), &args, &[]).await;
    assert_eq!(second.status.code(), Some(0), "{}", stderr_of(&second));
    let stats = sim.stats();
    assert!(
        stats.in_progress >= 1,
        "the second run met the in-progress answer: {stats:?}"
    );
    assert!(
        stats.replayed >= 1,
        "and then the original answer: {stats:?}"
    );
    let live = assert_one_live_order_per_row(&sim, &refs);
    assert_eq!(sim.orders().len(), 1);

    let ledger = Ledger::open(&ws.ledger()).expect("ledger");
    let batch = ledger.batch("one").expect("readable").expect("batch");
    let rows = ledger.rows(batch.id).expect("rows");
    let orders = ledger.orders(batch.id).expect("orders");
    assert_eq!(rows[0].state, RowState::Completed);
    assert_eq!(orders.len(), 1);
    assert_eq!(
        orders[0].service_order_id.as_deref(),
        Some(live["R-1"].as_str())
    );
}
