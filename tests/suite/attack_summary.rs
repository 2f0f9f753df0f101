//! Attacks on the end of `paybatch run` (99db090): the summary is read on a second connection
//! to the ledger (`Ledger::open` of the same path) while the result file is written on the
//! first. The summary must be the summary of the run's own batch in the ledger the run wrote,
//! whatever happened to the ledger's path since the run opened it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// The `--json` object a run printed on stdout.
fn json_line(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout_of(out).trim()).unwrap_or_else(|e| {
        panic!(
            "{e}: one JSON object on stdout\n{}\n{}",
            stdout_of(out),
            stderr_of(out)
        )
    })
}

/// A ledger given through a symbolic link that is pointed at another ledger while the run
/// polls (a backup restored, a "current" link moved by a deploy script): the run keeps the
/// ledger it opened (its result file is read from it), and so must its summary. With the
/// summary read on a connection opened again by path, it is the summary of the other ledger's
/// batch with the same id: wrong counts, wrong outcome, wrong exit code.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_is_of_the_ledger_the_run_opened_even_when_its_path_moves() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    // Long enough polling for the link to be moved while the run waits for its orders.
    config.processing_min = Duration::from_millis(1500);
    config.processing_max = Duration::from_millis(2000);
    let sim = start_sim(config).await;
    let base = sim.base_url();
    let key = ws.key_file();
    let key = key.to_str().expect("utf-8");
    std::fs::create_dir_all(ws.path("real")).expect("dir");
    std::fs::create_dir_all(ws.path("other")).expect("dir");

    // The other ledger: one batch (id 1 there too), planned only.
    rows_file(&ws, "o.csv", "O", 1..=4);
    let other = paybatch_in(
        ws.dir.path(),
        &[
            "run",
            "o.csv",
            "--plan-only",
            "--base-url",
            &base,
            "--api-key-file",
            key,
            "--ledger",
            "other/ledger.db",
            "-q",
        ],
        &[],
    )
    .await;
    assert_eq!(other.status.code(), Some(5), "{}", stderr_of(&other));

    rows_file(&ws, "b.csv", "B", 1..=6);
    std::os::unix::fs::symlink("real/ledger.db", ws.path("cur.db")).expect("link");
    // The link must name a file that exists (a link to nothing is refused).
    std::fs::write(ws.path("real/ledger.db"), b"").expect("empty ledger");
    let run = spawn_paybatch(
        ws.dir.path(),
        &[
            "run",
            "b.csv",
            "--batch",
            "b",
            "--base-url",
            &base,
            "--api-key-file",
            key,
            "--ledger",
            "cur.db",
            "--json",
        ],
        &[],
    );
    until("the run sends its orders", Duration::from_secs(60), || {
        order_posts(&sim) >= 1
    })
    .await;
    // Its orders stay PROCESSING 1.5 s at least from here: the run is still polling.
    let started = Instant::now();
    // Moved while the orders are still processing (1.5 s at least).
    std::fs::remove_file(ws.path("cur.db")).expect("unlink");
    std::os::unix::fs::symlink("other/ledger.db", ws.path("cur.db")).expect("relink");
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "moved before the orders finished"
    );
    let out = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the run ends within 60 s")
        .expect("run");

    let summary = json_line(&out);
    assert_eq!(
        summary["rows"],
        serde_json::json!({"COMPLETED": 6}),
        "the summary of batch b as the run left it: {summary}\n{}",
        stderr_of(&out)
    );
    assert_eq!(summary["batch"], "b");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let result = read_csv(&ws.path(summary["result_file"].as_str().expect("result file")));
    let status = col(&result[0], "status");
    assert_eq!(result.len(), 7, "{result:?}");
    assert!(result[1..].iter().all(|r| r[status] == "COMPLETED"));
}

/// The ledger moved away while the run polls (`mv`, as an operator tidying a directory would,
/// its `-wal` and `-shm` with it): the run goes on with the file it opened, and its summary must
/// be that file's. Opened again by path, the summary's connection created a new, empty ledger
/// there (mode 0644, where every ledger is 0600) and summed it: no row, "completed", exit 0.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_moved_away_during_the_run_is_not_replaced_by_an_empty_one_in_the_summary() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.processing_min = Duration::from_millis(1500);
    config.processing_max = Duration::from_millis(2000);
    let sim = start_sim(config).await;
    let base = sim.base_url();
    let key = ws.key_file();
    let key = key.to_str().expect("utf-8");
    std::fs::create_dir_all(ws.path("real")).expect("dir");
    rows_file(&ws, "b.csv", "B", 1..=6);
    let run = spawn_paybatch(
        ws.dir.path(),
        &[
            "run",
            "b.csv",
            "--batch",
            "b",
            "--base-url",
            &base,
            "--api-key-file",
            key,
            "--ledger",
            "real/ledger.db",
            "--json",
        ],
        &[],
    );
    until("the run sends its orders", Duration::from_secs(60), || {
        order_posts(&sim) >= 1
    })
    .await;
    // Its orders stay PROCESSING 1.5 s at least from here: the run is still polling.
    let started = Instant::now();
    for [from, to] in [
        ["ledger.db", "moved.db"],
        ["ledger.db-wal", "moved.db-wal"],
        ["ledger.db-shm", "moved.db-shm"],
    ] {
        let from = ws.path(&format!("real/{from}"));
        if from.exists() {
            std::fs::rename(&from, ws.path(&format!("real/{to}"))).expect("moved");
        }
    }
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "moved before the orders finished"
    );
    let out = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the run ends within 60 s")
        .expect("run");
    let summary = json_line(&out);
    assert_eq!(
        summary["rows"],
        serde_json::json!({"COMPLETED": 6}),
        "the summary of batch b as the run left it: {summary}\n{}",
        stderr_of(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    if let Ok(meta) = std::fs::metadata(ws.path("real/ledger.db")) {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "a ledger file created at the old path is private as every ledger"
        );
    }
}
