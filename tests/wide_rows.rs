//! Very wide rows (tens of thousands of columns carried through) cost memory for a few rows at
//! a time, not for the batch: `validate` and `run`, of a file paid or refused, stay under a
//! bound that does not grow with the number of rows. Each run of the real binary is measured by
//! its own peak resident set (`wait4`), against a real simulator on a loopback port.

mod support;

use std::path::Path;
use std::time::Duration;

use support::*;

/// Rows and columns of the generated file: 160 rows of 40,000 columns (6.6 MB), 6.4 million
/// cells. Held as a batch (a string of 24 bytes for each cell of every row, empty or not) they
/// take 154 MB, more than once over; a few rows at a time, a few MB.
const ROWS: usize = 160;
const COLUMNS: usize = 40_000;

/// The peak resident set a run of this file may reach. The debug build's reaches 45 MB in
/// `validate`, 85 to 105 MB in `run` and 100 to 160 MB in `run --skip-invalid` (SQLite's page
/// cache, the header, a few rows at a time); held a batch at a time, the rows took 330 MB in
/// `run` and 280 MB in `run --skip-invalid`.
const PEAK_LIMIT_KB: i64 = 220 * 1024;

/// A batch of `ROWS` rows of `COLUMNS` columns: the five paybatch reads, then carried-through
/// ones (empty but for the last). Every row is valid, or (`bad`) has an amount that is not one.
fn wide_file(path: &Path, bad: bool) {
    use std::io::Write;
    let file = std::fs::File::create(path).expect("create the wide file");
    let mut out = std::io::BufWriter::new(file);
    let mut header = String::from("reference,product_code,face_value,currency,email");
    for c in 5..COLUMNS {
        header.push_str(&format!(",x{c}"));
    }
    writeln!(out, "{header}").expect("write");
    let carried = ",".repeat(COLUMNS - 6);
    let amount = if bad { "ten" } else { "10" };
    for r in 0..ROWS {
        writeln!(
            out,
            "W-{r},AMZ-US,{amount},USD,w{r}@example.com{carried},last-{r}"
        )
        .expect("write");
    }
    out.flush().expect("flush");
}

/// Runs the binary in `dir` with `args` (no paybatch setting inherited), its output to files;
/// returns its exit code, its stderr and its peak resident set in KiB. Bounded: killed after
/// 300 s.
// The child is reaped by `wait4` (which gives its peak), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn peak_of(dir: &Path, args: &[String]) -> (Option<i32>, String, i64) {
    use std::os::unix::process::ExitStatusExt;
    let err_path = dir.join("stderr.txt");
    let mut cmd = std::process::Command::new(BIN);
    cmd.current_dir(dir)
        .args(args)
        .stdout(std::fs::File::create(dir.join("stdout.txt")).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"));
    for var in [
        "PAYBATCH_API_KEY",
        "PAYBATCH_API_KEY_FILE",
        "PAYBATCH_ENV",
        "PAYBATCH_BASE_URL",
        "PAYBATCH_LEDGER",
        "PAYBATCH_CONFIG",
        "PAYBATCH_FAILPOINT",
        "RUST_LOG",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(var);
    }
    let mut child = cmd.spawn().expect("paybatch starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data, filled by `wait4`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut waited = 0;
    for _ in 0..3000 {
        // SAFETY: waits for our own child, with pointers to locals that outlive the call.
        waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if waited != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if waited == 0 {
        let _ = child.kill();
        let _ = child.wait();
        panic!("paybatch {args:?} did not finish within 300 s");
    }
    assert_eq!(waited, pid, "wait4 failed");
    let code = std::process::ExitStatus::from_raw(status).code();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    // Linux gives ru_maxrss in KiB.
    eprintln!("paybatch {}: peak {} MB", args[0], usage.ru_maxrss / 1024);
    (code, stderr, usage.ru_maxrss)
}

/// `paybatch COMMAND FILE` against `base` with the workspace's key file and ledger.
fn args(ws: &Workspace, base: &str, command: &str, file: &str, extra: &[&str]) -> Vec<String> {
    let mut all = run_args(ws, base, file, extra);
    all[0] = command.to_string();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_batch_is_paid_and_carried_through_in_bounded_memory() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    wide_file(&ws.path("wide.csv"), false);
    let dir = ws.dir.path().to_path_buf();
    let base = sim.base_url();

    let validate = args(&ws, &base, "validate", "wide.csv", &[]);
    let (code, stderr, peak) = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || peak_of(&dir, &validate)
    })
    .await
    .expect("validate");
    assert_eq!(code, Some(0), "validate: {stderr}");
    assert!(
        peak < PEAK_LIMIT_KB,
        "validate of {ROWS} rows of {COLUMNS} columns peaked at {} MB",
        peak / 1024
    );

    let run = args(&ws, &base, "run", "wide.csv", &["--out", "result.csv"]);
    let (code, stderr, peak) = tokio::task::spawn_blocking(move || peak_of(&dir, &run))
        .await
        .expect("run");
    assert_eq!(code, Some(0), "run: {stderr}");
    assert!(
        peak < PEAK_LIMIT_KB,
        "run of {ROWS} rows of {COLUMNS} columns peaked at {} MB",
        peak / 1024
    );

    // Every row paid once, and every one of its cells carried through to the result file.
    let result = read_csv(&ws.path("result.csv"));
    assert_eq!(result.len(), ROWS + 1);
    let header = &result[0];
    let status = col(header, "status");
    assert_eq!(header[COLUMNS - 1], format!("x{}", COLUMNS - 1));
    for (r, line) in result[1..].iter().enumerate() {
        assert_eq!(line[0], format!("W-{r}"));
        assert_eq!(line[COLUMNS - 1], format!("last-{r}"));
        assert_eq!(line[status], "COMPLETED");
    }
    let orders = service_orders_per_reference(&sim);
    assert_eq!(orders.len(), ROWS);
    assert!(orders.values().all(|o| o.len() == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_batch_with_a_problem_in_every_row_is_refused_in_bounded_memory() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    wide_file(&ws.path("wide.csv"), true);
    let dir = ws.dir.path().to_path_buf();
    let base = sim.base_url();

    for command in ["validate", "run"] {
        let argv = args(&ws, &base, command, "wide.csv", &[]);
        let (code, stderr, peak) = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || peak_of(&dir, &argv)
        })
        .await
        .expect(command);
        assert_eq!(code, Some(3), "{command}: {stderr}");
        assert!(stderr.contains("line 2, column 3 (face_value)"), "{stderr}");
        assert!(
            peak < PEAK_LIMIT_KB,
            "{command} of {ROWS} bad rows of {COLUMNS} columns peaked at {} MB",
            peak / 1024
        );
    }

    // Recorded INVALID, every row with its cells in the result file.
    let run = args(
        &ws,
        &base,
        "run",
        "wide.csv",
        &["--skip-invalid", "--out", "result.csv"],
    );
    let (code, stderr, peak) = tokio::task::spawn_blocking(move || peak_of(&dir, &run))
        .await
        .expect("run --skip-invalid");
    assert_eq!(code, Some(4), "run --skip-invalid: {stderr}");
    assert!(
        peak < PEAK_LIMIT_KB,
        "run --skip-invalid of {ROWS} bad rows of {COLUMNS} columns peaked at {} MB",
        peak / 1024
    );
    let result = read_csv(&ws.path("result.csv"));
    assert_eq!(result.len(), ROWS + 1);
    let status = col(&result[0], "status");
    for (r, line) in result[1..].iter().enumerate() {
        assert_eq!(line[COLUMNS - 1], format!("last-{r}"));
        assert_eq!(line[status], "INVALID");
    }
    assert_eq!(order_posts(&sim), 0);
}
