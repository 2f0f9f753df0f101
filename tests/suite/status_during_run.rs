//! `paybatch status` is documented as safe while a run is going on (docs/operations.md, "Where a
//! batch stands"): a person looks at the ledger from another terminal while a large batch is
//! merged. Through the real binary: a run merging a file of 60,000 rows, and `status` started
//! several times while the merge writes; the run must end as it would alone.

use std::time::{Duration, Instant};

use crate::support::*;
use crate::support::{paybatch_in as paybatch, stderr_of as stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_while_a_run_merges_a_large_file_leaves_the_run_alive() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.balances = ["USD", "EUR", "GBP", "CAD"]
        .iter()
        .map(|c| (c.to_string(), "100000000.00".parse().expect("amount")))
        .collect();
    let sim = start_sim(config).await;
    let mut file = String::from("reference,product_code,face_value,currency,email\n");
    for i in 0..60_000 {
        let email = if i % 2 == 0 {
            format!("p{i}@example.com")
        } else {
            String::new()
        };
        file.push_str(&format!("P-{i:06},AMZ-US,10.00,USD,{email}\n"));
    }
    ws.write("p.csv", &file);
    let key = ws.key_file();
    let ledger = ws.ledger();
    let wal = ws.path("ledger.db-wal");
    let journal = ws.path("ledger.db-journal");
    let mut runner = tokio::process::Command::new(BIN);
    runner
        .current_dir(ws.dir.path())
        .args([
            "run",
            "p.csv",
            "--plan-only",
            "--base-url",
            &sim.base_url(),
            "--api-key-file",
            key.to_str().expect("utf-8"),
            "--ledger",
            ledger.to_str().expect("utf-8"),
        ])
        .env_remove("PAYBATCH_FAILPOINT")
        .env_remove("PAYBATCH_API_KEY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = runner.spawn().expect("run starts");
    // The merge is one transaction. A merge this large is written with a rollback journal
    // (docs/ledger.md), which exists while it writes; a merge in the WAL spills pages to it as
    // it goes: once the WAL has grown past what the batch and catalog wrote before, the merge
    // is writing. `status` then waits for the merge's commit (the ledger's busy timeout).
    let started = Instant::now();
    let mut looked = 0;
    let status = loop {
        assert!(
            started.elapsed() < Duration::from_secs(100),
            "the run did not finish within 100 s"
        );
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        let merging = journal.exists() || std::fs::metadata(&wal).is_ok_and(|m| m.len() > 2 << 20);
        if merging && looked < 20 {
            let out = paybatch(
                ws.dir.path(),
                &["status", "--ledger", ledger.to_str().expect("utf-8")],
                &[],
            )
            .await;
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            looked += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = e.read_to_string(&mut err).await;
    }
    assert!(looked > 0, "status was never started during the merge");
    // --plan-only: the orders are committed and nothing is sent (exit 5); a run killed by a
    // signal has no exit code.
    assert_eq!(
        status.code(),
        Some(5),
        "the run ended with {status:?} after {looked} status commands: {err}"
    );
    let conn = rusqlite::Connection::open(&ledger).expect("ledger");
    let rows: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM rows WHERE state = 'PLANNED'",
            [],
            |r| r.get(0),
        )
        .expect("rows");
    assert_eq!(rows, 60_000);
}
