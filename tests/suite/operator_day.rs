//! The operator's day through the real binary: interruptions (SIGINT, SIGTERM), a missing input
//! file, the split of output (stdout) and messages (stderr), `run --json`, `retry --json`,
//! progress lines without a terminal, and warnings that name rows.

use std::process::Output;
use std::time::Duration;

use crate::support::*;
use crate::support::{stderr_of as stderr, stdout_of as stdout};
use paybatch::sim::SimHandle;
use tokio::io::AsyncBufReadExt;

fn rows(prefix: &str, n: usize) -> String {
    let mut csv = String::from("reference,product_code,face_value,currency,email\n");
    for i in 1..=n {
        csv.push_str(&format!("{prefix}-{i},AMZ-US,10.00,USD,\n"));
    }
    csv
}

fn with_service(ws: &Workspace, sim: &SimHandle, args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend([
        "--base-url".to_string(),
        sim.base_url(),
        "--api-key-file".to_string(),
        ws.key_file().to_string_lossy().to_string(),
        "--ledger".to_string(),
        ws.ledger().to_string_lossy().to_string(),
    ]);
    all
}

async fn paybatch(ws: &Workspace, sim: &SimHandle, args: &[&str]) -> Output {
    let all = with_service(ws, sim, args);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    paybatch_in(ws.dir.path(), &all, &[]).await
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {}", stdout(o)))
}

/// Sends `signal` (`-INT`, `-TERM`) to `child`; its exit status (within `within`) and the rest
/// of its stderr.
async fn stop(
    child: &mut tokio::process::Child,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    signal: &str,
    within: Duration,
) -> (std::process::ExitStatus, String) {
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = tokio::time::timeout(within, child.wait())
        .await
        .expect("the run stops soon after the signal")
        .expect("wait");
    let mut rest = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    (status, rest)
}

/// A run stopped by `signal` while its orders go out one at a time (each request takes
/// 200 ms): the line, the exit code, then the same command pays every row once.
async fn interrupted_then_resumed(signal: &str, code: i32, word: &str) {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(200);
    let sim = start_sim(config).await;
    let input = ws.write("i.csv", &rows("I", 30));
    let args = with_service(
        &ws,
        &sim,
        &[
            "run",
            "i.csv",
            "--items-per-order",
            "1",
            "--concurrency",
            "1",
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    wait_for_line(&mut lines, "submitting 30 orders", Duration::from_secs(60)).await;
    // One at a time: a second order on its way means the first was answered.
    until("an order answered", Duration::from_secs(30), || {
        order_posts(&sim) >= 2
    })
    .await;
    let (status, rest) = stop(&mut child, &mut lines, signal, Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(code), "{rest}");
    let said = rest
        .lines()
        .find(|l| l.starts_with(&format!("{word}: ")))
        .unwrap_or_else(|| panic!("no `{word}:` line in:\n{rest}"));
    assert!(said.contains("orders sent"), "{said}");
    assert!(said.contains("rows not sent yet"), "{said}");
    assert!(
        said.contains("nothing is lost; run the same command again to resume"),
        "{said}"
    );
    let sent_before = order_posts(&sim);
    assert!(
        sent_before > 0 && sent_before < 30,
        "stopped while sending: {sent_before} sent\n{rest}"
    );

    let out = paybatch(&ws, &sim, &["run", "i.csv", "--items-per-order", "1"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_one_live_order_per_row(&sim, &references(&input));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_run_with_130_and_the_next_run_pays_every_row_once() {
    interrupted_then_resumed("-INT", 130, "interrupted").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_run_with_143_and_the_next_run_pays_every_row_once() {
    interrupted_then_resumed("-TERM", 143, "terminated").await;
}

/// Every file in the workspace directory (the key file aside).
fn files_made(ws: &Workspace) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(ws.dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with("key"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_input_file_is_a_usage_error_that_creates_nothing() {
    let ws = Workspace::new();
    // The embedded simulator and the default ledger: nothing may be made.
    for command in ["run", "validate"] {
        let out = paybatch_in(ws.dir.path(), &[command, "missing.csv"], &[]).await;
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot read missing.csv"),
            "{command}: {}",
            stderr(&out)
        );
        assert_eq!(files_made(&ws), Vec::<String>::new(), "{command}");
    }
    // A directory is not an input file either.
    std::fs::create_dir(ws.path("dir.csv")).expect("mkdir");
    let out = paybatch_in(ws.dir.path(), &["run", "dir.csv"], &[]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(files_made(&ws), vec!["dir.csv".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_its_summary_on_stdout_and_its_progress_on_stderr() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("s.csv", &rows("S", 3));
    let out = paybatch(&ws, &sim, &["run", "s.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(o.contains("batch s"), "{o}");
    assert!(o.contains("result file:"), "{o}");
    assert!(o.contains("every row completed (exit 0)"), "{o}");
    assert!(e.contains("submitting 3 orders"), "{e}");
    assert!(
        !e.contains("result file:"),
        "the summary is output, not a message: {e}"
    );
    assert!(
        !o.contains("submitting"),
        "progress is a message, not output: {o}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_is_one_object_with_rows_totals_and_the_result_file() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write(
        "j.csv",
        "reference,product_code,face_value,currency,email\n\
         J-1,AMZ-US,10.00,USD,\n\
         J-2,AMZ-US,20.50,USD,\n\
         J-3,TESCO-GB,10,GBP,\n",
    );
    let out = paybatch(&ws, &sim, &["run", "j.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["batch"], "j");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["outcome"], "completed");
    assert_eq!(v["rows"]["COMPLETED"], 3);
    assert_eq!(
        v["totals"]["per_product_currency"]["USD"]["face_value"],
        "30.50"
    );
    assert_eq!(
        v["totals"]["per_product_currency"]["GBP"]["face_value"],
        "10.00"
    );
    let paid: Vec<&str> = v["totals"]["per_paying_balance"]
        .as_array()
        .expect("array")
        .iter()
        .map(|p| p["paid_by"].as_str().expect("paid_by"))
        .collect();
    assert_eq!(paid, ["balance GBP", "balance USD"]);
    assert!(
        v["result_file"]
            .as_str()
            .is_some_and(|f| f.ends_with("j.result.csv")),
        "{v}"
    );

    // A file that stops the run: still one object, with the exit code and the error.
    ws.write(
        "bad.csv",
        "reference,product_code,face_value,currency,email\nB-1,NOPE,1,USD,\n",
    );
    let out = paybatch(&ws, &sim, &["run", "bad.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["problems"], 1);
    assert!(v["error"]["message"].as_str().is_some(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_json_names_the_rows_made_payable_again() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.failure_rate = 1.0;
    let sim = start_sim(config).await;
    ws.write("r.csv", &rows("R", 2));
    let out = paybatch(&ws, &sim, &["run", "r.csv"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let out = paybatch(&ws, &sim, &["retry", "--batch", "r", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["batch"], "r");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["retried"], serde_json::json!(["R-1", "R-2"]));
    assert_eq!(v["rows"]["PENDING"], 2, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_a_long_phase_says_how_far_it_got_every_ten_seconds() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.processing_min = Duration::from_secs(12);
    config.processing_max = Duration::from_secs(12);
    let sim = start_sim(config).await;
    ws.write("slow.csv", &rows("W", 1));
    let out = paybatch(&ws, &sim, &["run", "slow.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("poll: 0/1 orders finished, 10 s"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_name_rows_by_reference_on_one_line() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.faults.error_rate = 1.0;
    let sim = start_sim(config).await;
    ws.write("w.csv", &rows("W", 8));
    let out = paybatch(
        &ws,
        &sim,
        &[
            "run",
            "w.csv",
            "--items-per-order",
            "1",
            "--send-tries",
            "1",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let e = stderr(&out);
    let warnings: Vec<&str> = e.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(!warnings.is_empty(), "{e}");
    assert!(
        warnings.len() <= 2,
        "one line per reason, not per order: {e}"
    );
    // One line per reason: the orders of each, named by their rows (the first five, then a
    // count).
    let mut orders = 0;
    for w in &warnings {
        assert!(w.contains("rows W-") || w.contains("row W-"), "{w}");
        orders += match w.find(" orders)") {
            Some(end) => {
                let start = w[..end].rfind('(').expect("(N orders)") + 1;
                w[start..end].parse::<usize>().expect("a count")
            }
            None => 1,
        };
    }
    assert_eq!(orders, 8, "{e}");
    assert!(
        !e.contains("(key "),
        "no internal keys or order numbers: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_of_invalid_rows_says_first_that_nothing_will_be_paid() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write(
        "v.csv",
        "reference,product_code,face_value,currency,email\n\
         V-1,AMZ-US,10.00,USD,\n\
         V-2,NOPE,10.00,USD,\n",
    );
    let out = paybatch(&ws, &sim, &["validate", "v.csv"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let o = stdout(&out);
    let first_total = o.find("to pay").unwrap_or(o.len());
    let nothing = o
        .find("NOTHING WILL BE PAID")
        .unwrap_or_else(|| panic!("{o}"));
    assert!(nothing < first_total, "said before any total: {o}");
    assert!(
        o.contains("--skip-invalid would pay the 1 valid rows"),
        "{o}"
    );
    assert!(!o.contains("balance: enough"), "{o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_accepted_before_the_service_kept_the_run_waiting_are_still_polled() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.rate_limit_per_minute = 15;
    let sim = start_sim(config).await;
    ws.write("w.csv", &rows("K", 40));
    // The 16th order meets a 429 whose pause is longer than the run waits: the sending gives up.
    let out = paybatch(
        &ws,
        &sim,
        &[
            "run",
            "w.csv",
            "--items-per-order",
            "1",
            "--poll-timeout",
            "3",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let result = read_csv(&ws.path("w.result.csv"));
    let status = col(&result[0], "status");
    let completed = result[1..]
        .iter()
        .filter(|r| r[status] == "COMPLETED")
        .count();
    assert_eq!(completed, 15, "the accepted orders were polled: {result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_the_file_is_read_stops_the_run_at_once() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("big.csv", &rows("B", 150_000));
    let args = with_service(&ws, &sim, &["run", "big.csv", "--json"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    wait_for_line(&mut lines, "catalog:", Duration::from_secs(60)).await;
    // Stopped within seconds, not at the end of the first pass.
    let (status, rest) = stop(&mut child, &mut lines, "-INT", Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(130));
    assert!(rest.contains("interrupted: "), "{rest}");
    assert_eq!(order_posts(&sim), 0, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_not_an_input_file() {
    let ws = Workspace::new();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path("pipe.csv"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    for command in ["run", "validate"] {
        let out = paybatch_in(ws.dir.path(), &[command, "pipe.csv"], &[]).await;
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(stderr(&out).contains("is not a file"), "{}", stderr(&out));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_says_why_a_run_was_refused_before_it_started() {
    let ws = Workspace::new();
    ws.write("c.csv", &rows("C", 1));
    let out = paybatch_in(
        ws.dir.path(),
        &["run", "c.csv", "--json", "--env", "playground"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["exit_code"], 2);
    assert_eq!(v["outcome"], "stopped");
    assert_eq!(v["environment"], "playground");
    assert!(v["error"]["message"].as_str().is_some(), "{v}");
}

/// A command line paybatch cannot use (an unknown flag, a missing argument, a bad settings
/// file) is one JSON object on stdout with `--json` too, and clap's own words on stderr; without
/// `--json`, stdout stays empty. Nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_answers_a_command_line_that_cannot_be_used() {
    let ws = Workspace::new();
    ws.write("bad.toml", "nonsense = [\n");
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "c.csv", "--json", "--no-such-flag"],
            "--no-such-flag",
        ),
        (&["run", "--json"], "<FILE>"),
        (&["retry", "--json", "--batch"], "--batch"),
        (
            &["--config", "bad.toml", "run", "c.csv", "--json"],
            "bad.toml",
        ),
    ];
    for (args, named) in cases {
        let out = paybatch_in(ws.dir.path(), args, &[]).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let v = json(&out);
        assert_eq!(v["exit_code"], 2, "{args:?}");
        assert_eq!(v["outcome"], "stopped", "{args:?}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{args:?}: {v}");
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    let out = paybatch_in(ws.dir.path(), &["run", "c.csv", "--no-such-flag"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no JSON without --json");
    let out = paybatch_in(ws.dir.path(), &["run", "--json", "--help"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    let mut left: Vec<String> = std::fs::read_dir(ws.dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert!(
        left.iter().all(|f| f == "bad.toml" || f.starts_with("key")),
        "{left:?}"
    );
}
