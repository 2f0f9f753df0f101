//! A write that fails once orders went out (the ledger's or the result file's disk full: the
//! fail points of `paybatch::failpoint::FULL_DISK`) ends the command with exit 5, never 1, and
//! a `help:` line that says orders were sent and gives the exact command that resumes; that
//! command then pays each row once. For `run`, for the run after a `retry`, and for the orders
//! `reconcile --rebuild` adopts.

use std::process::Output;

use crate::support::*;

/// The command a test ran, as the help line must give it.
fn command_line(args: &[String]) -> String {
    format!("paybatch {}", args.join(" "))
}

/// The command ended with exit 5 and said that orders went out and how to resume: `line` (the
/// exact command). Returns its stderr.
fn resumable(out: &Output, said: &str, line: &str) -> String {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(5), "{}", output_of(out));
    let help = err
        .lines()
        .find(|l| l.starts_with("help: "))
        .unwrap_or_else(|| panic!("a help line in {err}"));
    assert!(help.contains(said), "{help}");
    assert!(
        help.contains("nothing is lost or paid twice") && help.contains("to resume"),
        "{help}"
    );
    assert!(help.ends_with(&format!(": {line}")), "{help}\n{line}");
    err
}

async fn run_with(ws: &Workspace, args: &[String], envs: &[(&str, &str)]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    paybatch_in(ws.dir.path(), &args, envs).await
}

#[tokio::test]
async fn a_full_ledger_after_orders_were_sent_exits_5_with_the_command_that_resumes() {
    let ws = Workspace::new();
    let input = ws.copy(SAMPLE, "nov.csv");
    let sim = start_sim(fast_config(None)).await;
    let args = run_args(&ws, &sim.base_url(), "nov.csv", &["--items-per-order", "1"]);
    let full = [("PAYBATCH_FAILPOINT", "record_answer")];
    let out = run_with(&ws, &args, &full).await;
    let err = resumable(
        &out,
        "sent to the service before this error",
        &command_line(&args),
    );
    assert!(err.contains("database or disk is full"), "{err}");
    assert!(order_posts(&sim) >= 1, "an order went out");

    let again = run_with(&ws, &args, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_one_live_order_per_row(&sim, &references(&input));
}

#[tokio::test]
async fn a_full_disk_for_the_result_file_after_orders_were_sent_exits_5() {
    let ws = Workspace::new();
    let input = ws.copy(SAMPLE, "nov.csv");
    let sim = start_sim(fast_config(None)).await;
    let args = run_args(&ws, &sim.base_url(), "nov.csv", &["--json"]);
    let out = run_with(&ws, &args, &[("PAYBATCH_FAILPOINT", "write_result")]).await;
    let err = resumable(
        &out,
        "sent to the service before this error",
        &command_line(&args),
    );
    assert!(err.contains("cannot write"), "{err}");
    // The JSON object says the same.
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&out)).expect("one object");
    assert_eq!(json["exit_code"], 5, "{json}");
    let posts = order_posts(&sim);
    assert!(posts >= 1, "orders went out");

    let again = run_with(&ws, &args, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_eq!(order_posts(&sim), posts, "nothing was sent again");
    assert_one_live_order_per_row(&sim, &references(&input));
}

#[tokio::test]
async fn the_run_after_a_retry_exits_5_when_its_ledger_fills_up() {
    let ws = Workspace::new();
    let input = ws.copy(SAMPLE, "nov.csv");
    let mut failing = fast_config(Some(ws.sim_state()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let args = run_args(&ws, &sim.base_url(), "nov.csv", &[]);
    let first = run_with(&ws, &args, &[]).await;
    assert_eq!(first.status.code(), Some(4), "{}", output_of(&first));
    let retried = retry_batch(&ws, "nov").await;
    assert!(retried.status.success(), "{}", output_of(&retried));

    let sim = restart_sim(sim, fast_config(Some(ws.sim_state()))).await;
    let full = [("PAYBATCH_FAILPOINT", "record_answer")];
    let out = run_with(&ws, &args, &full).await;
    resumable(
        &out,
        "sent to the service before this error",
        &command_line(&args),
    );

    let again = run_with(&ws, &args, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_one_live_order_per_row(&sim, &references(&input));
}

#[tokio::test]
async fn a_full_ledger_while_reconcile_adopts_the_services_orders_exits_5() {
    let ws = Workspace::new();
    let input = ws.copy(SAMPLE, "nov.csv");
    let sim = start_sim(fast_config(None)).await;
    let base = sim.base_url();
    let paid = run_with(&ws, &run_args(&ws, &base, "nov.csv", &[]), &[]).await;
    assert_eq!(paid.status.code(), Some(0), "{}", output_of(&paid));
    let posts = order_posts(&sim);
    // The ledger is lost; rebuilding it adopts the service's orders.
    for file in sqlite_files(&ws.ledger()) {
        let _ = std::fs::remove_file(file);
    }
    let key = ws.key_file();
    let ledger = ws.ledger();
    let args: Vec<String> = [
        "reconcile",
        "--batch",
        "nov",
        "--rebuild",
        "nov.csv",
        "--base-url",
        &base,
        "--api-key-file",
        key.to_str().expect("utf-8 path"),
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let out = run_with(&ws, &args, &[("PAYBATCH_FAILPOINT", "adopt_order")]).await;
    let err = resumable(
        &out,
        "orders of batch nov were being recorded in the ledger",
        &command_line(&args),
    );
    assert!(err.contains("database or disk is full"), "{err}");

    let again = run_with(&ws, &args, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    let resumed = run_with(&ws, &run_args(&ws, &base, "nov.csv", &[]), &[]).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", output_of(&resumed));
    assert_eq!(order_posts(&sim), posts, "nothing was paid again");
    assert_one_live_order_per_row(&sim, &references(&input));
}
