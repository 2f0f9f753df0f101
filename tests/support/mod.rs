//! Shared helpers of the integration tests: a real simulator on a loopback port, a real SQLite
//! ledger in a temporary directory, the real binary; a raw client of the simulator (`raw_api`), a
//! rewriting proxy in front of it (`rewriting`).
//! Used by the suite (`tests/suite`) and by `tests/wide_rows.rs`, which uses a few.
#![allow(dead_code)]

mod catalog_fixture;
pub mod raw_api;
pub mod rewriting;

#[allow(unused_imports)]
pub use catalog_fixture::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use paybatch::sim::{self, SimConfig, SimHandle};

pub const SAMPLE: &str = "samples/recipients.csv";
pub const SAMPLE_MISTAKES: &str = "samples/recipients-with-mistakes.csv";

/// A temporary working directory with a key file and a copy of the inputs.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn ledger(&self) -> PathBuf {
        self.path("ledger.db")
    }

    pub fn sim_state(&self) -> PathBuf {
        self.path("sim-state.db")
    }

    /// Copies a file of the repository into the workspace.
    pub fn copy(&self, repo_path: &str, name: &str) -> PathBuf {
        let target = self.path(name);
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(repo_path),
            &target,
        )
        .expect("copy sample");
        target
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let target = self.path(name);
        std::fs::write(&target, content).expect("write file");
        target
    }

    /// A key file of mode 0600 holding the simulator's key.
    pub fn key_file(&self) -> PathBuf {
        let path = self.path("api.key");
        std::fs::write(&path, format!("{}\n", sim::DEFAULT_KEY)).expect("key file");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        path
    }
}

/// The environment variable that selects the deep tier of the tests: set to `1`, every chaos
/// scenario runs (`.ci/run` sets it). Unset, `cargo test` runs the fast tier: each chaos test
/// checks a fixed, smaller share of the same scenarios.
pub const DEEP_VAR: &str = "PAYBATCH_DEEP_TESTS";

/// Whether the deep tier runs (`PAYBATCH_DEEP_TESTS=1`).
pub fn deep() -> bool {
    std::env::var(DEEP_VAR).is_ok_and(|v| v == "1")
}

/// `fast` in the fast tier, `deep` in the deep tier; says on stderr which one, and how to run
/// the other (so a shortened test does not pass for the whole of it).
pub fn tiered(what: &str, fast: u64, deep: u64) -> u64 {
    if self::deep() {
        eprintln!("{what}: deep tier, {deep}");
        deep
    } else {
        eprintln!("{what}: fast tier, {fast} of {deep} ({DEEP_VAR}=1 runs them all)");
        fast
    }
}

/// Waits until `done` holds, checking every 20 ms; panics after `limit` naming `what`. The
/// condition wait of the tests, in place of a fixed sleep.
pub async fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every order the simulator holds has finished (COMPLETED or FAILED), bounded by
/// `limit`.
pub async fn until_orders_finish(sim: &SimHandle, limit: Duration) {
    until("every order finished", limit, || {
        sim.orders().iter().all(|o| {
            use paybatch::api::OrderStatus::{Completed, Failed};
            matches!(o.status, Completed | Failed)
        })
    })
    .await;
}

/// The help `paybatch ARGS` prints, rendered in-process by the command line the binary parses
/// (clap's own `--help` and `-h`).
pub fn help_of(args: &[&str]) -> String {
    let argv = std::iter::once("paybatch").chain(args.iter().copied());
    match <paybatch::cli::Cli as clap::CommandFactory>::command().try_get_matches_from(argv) {
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
        other => panic!("{args:?} is not a help: {other:?}"),
    }
}

/// The `EMP-` references the service holds in more than one order that is not FAILED.
pub fn paid_twice(sim: &paybatch::sim::SimHandle) -> Vec<String> {
    live_orders_of_emp_rows(sim)
        .into_iter()
        .filter(|(_, live)| *live > 1)
        .map(|(r, _)| r)
        .collect()
}

/// `paybatch run FILE` against `base` with the workspace's key file and ledger.
pub async fn run_at(
    ws: &Workspace,
    base: &str,
    file: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> std::process::Output {
    let args = run_args(ws, base, file, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    paybatch_in(ws.dir.path(), &args, envs).await
}

/// Simulator settings for fast tests: short processing, no rate limit surprises.
pub fn fast_config(state: Option<PathBuf>) -> SimConfig {
    SimConfig {
        state,
        seed: 7,
        processing_min: Duration::from_millis(50),
        processing_max: Duration::from_millis(300),
        ..SimConfig::default()
    }
}

pub async fn start_sim(config: SimConfig) -> SimHandle {
    // Up to 50 ports of the tests' own range, then one the system picks.
    for _ in 0..50 {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], next_sim_port()));
        match sim::start(config.clone(), addr).await {
            Ok(sim) => return sim,
            Err(sim::SimError::Bind { .. }) => continue,
            Err(e) => panic!("simulator starts: {e}"),
        }
    }
    sim::start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("simulator starts")
}

/// A port for a test's simulator, below the system's range of ports for the local end of
/// connections (32768 and up on Linux): a port a simulator lets go of to restart on the same
/// address ([`restart_sim`]) is never taken meanwhile by a connection of another test, as one
/// the system picked could be. Each test process counts through its own 1,500 ports.
fn next_sim_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = 20_000 + (std::process::id() % 8) * 1_500;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 1_500;
    u16::try_from(base + n).unwrap_or(20_000)
}

/// Stops the simulator and starts it again on the same address (a batch is bound to its
/// service address) with `config`, e.g. the same state file and other faults. The address or
/// the state file can stay held for a moment after the shutdown (a connection the client has
/// not closed yet): tried again for up to 5 s.
pub async fn restart_sim(sim: SimHandle, config: SimConfig) -> SimHandle {
    let addr = sim.addr();
    sim.shutdown().await;
    let mut tries = 0;
    loop {
        match sim::start(config.clone(), addr).await {
            Ok(sim) => return sim,
            Err(e) if tries < 100 => {
                tries += 1;
                eprintln!("simulator restart on {addr}: {e}; trying again");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("simulator restarts on the same address {addr}: {e}"),
        }
    }
}

/// `paybatch reconcile --batch BATCH --rebuild FILE` against BASE: a batch whose orders another
/// ledger made, adopted into this one from the file it was made of.
pub async fn rebuild_at(
    ws: &Workspace,
    base: &str,
    batch: &str,
    file: &str,
) -> std::process::Output {
    against_url(
        ws,
        base,
        &["reconcile", "--batch", batch, "--rebuild", file],
    )
    .await
}

/// `paybatch ARGS... --base-url BASE` with the workspace's key file and ledger.
pub async fn against_url(ws: &Workspace, base: &str, args: &[&str]) -> std::process::Output {
    let key = ws.key_file();
    let ledger = ws.ledger();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&[
        "--base-url",
        base,
        "--api-key-file",
        key.to_str().expect("utf-8 path"),
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ]);
    paybatch_in(ws.dir.path(), &all, &[]).await
}

/// The plan digest `paybatch validate FILE` prints against `base` (with the workspace's key
/// file and ledger).
pub async fn plan_digest(ws: &Workspace, base: &str, file: &str) -> String {
    let out = against_url(ws, base, &["validate", file]).await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap_or_else(|| panic!("a digest in {text}{}", String::from_utf8_lossy(&out.stderr)))
        .to_string()
}

/// `paybatch retry --batch BATCH` on the workspace's ledger.
pub async fn retry_batch(ws: &Workspace, batch: &str) -> std::process::Output {
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8 path");
    paybatch_in(
        ws.dir.path(),
        &["retry", "--batch", batch, "--ledger", ledger],
        &[],
    )
    .await
}

/// Reads a CSV file into rows of cells (header first).
pub fn read_csv(path: &Path) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .expect("open csv");
    reader
        .records()
        .map(|r| r.expect("record").iter().map(str::to_string).collect())
        .collect()
}

/// The index of a column in a header row.
pub fn col(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

/// Rows of an input CSV file (excluding the header).
pub fn input_rows(path: &Path) -> usize {
    read_csv(path).len() - 1
}

/// The paybatch binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_paybatch");

/// Runs the paybatch binary in `dir` with `args`, without any paybatch setting inherited from
/// the caller's environment (key, environment, ledger, fail point, proxies), plus `envs`.
/// Bounded: a run that takes longer than 120 s fails the test.
pub async fn paybatch_in(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = command(dir, args, envs);
    cmd.kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("paybatch finished within 120 s")
        .expect("paybatch ran")
}

/// `paybatch ARGS` in the workspace's directory: the embedded simulator and the default ledger
/// there, unless `args` say otherwise.
pub async fn paybatch_ws(ws: &Workspace, args: &[&str]) -> std::process::Output {
    paybatch_in(ws.dir.path(), args, &[]).await
}

/// The embedded simulator's account of the workspace: payout links expire `days` days after
/// their order finished, and `claim_share` of them are claimed before.
pub async fn links_expire_after(ws: &Workspace, days: &str, claim_share: &str) {
    let setup = paybatch_ws(
        ws,
        &[
            "sim",
            "account",
            "--link-expiry-days",
            days,
            "--claim-share",
            claim_share,
        ],
    )
    .await;
    assert!(setup.status.success(), "{}", stderr_of(&setup));
}

/// The paybatch binary in `dir` with `args`, the caller's paybatch settings (key, environment,
/// ledger, fail point, proxies) removed, plus `envs`.
fn command(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.current_dir(dir).args(args);
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
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// The arguments of `paybatch run FILE` against `base`, with the workspace's key file and
/// ledger, plus `extra`.
pub fn run_args(ws: &Workspace, base: &str, file: &str, extra: &[&str]) -> Vec<String> {
    let key = ws.key_file();
    let ledger = ws.ledger();
    let mut args: Vec<String> = [
        "run",
        file,
        "--base-url",
        base,
        "--api-key-file",
        key.to_str().expect("utf-8 path"),
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// `paybatch run FILE` against `sim`, with the workspace's key file and ledger, plus `extra`
/// arguments and `envs` ([`paybatch_in`]).
pub async fn run_file(
    ws: &Workspace,
    sim: &SimHandle,
    file: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> std::process::Output {
    let args = run_args(ws, &sim.base_url(), file, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    paybatch_in(ws.dir.path(), &args, envs).await
}

pub fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

pub fn stdout_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Ground truth: the simulator's orders per row reference (from the order metadata), as
/// (order id, status) pairs, oldest first.
pub fn service_orders_per_reference(
    sim: &SimHandle,
) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let mut out: std::collections::BTreeMap<String, Vec<(String, String)>> = Default::default();
    for order in sim.orders() {
        for reference in paybatch::batch::order_body::references_in_metadata(&order.metadata) {
            out.entry(reference)
                .or_default()
                .push((order.id.clone(), order.status.as_str().to_string()));
        }
    }
    out
}

/// Every reference has exactly one service order that is not FAILED, and no order pays a row
/// outside `references`. Returns the live order id of each reference.
pub fn assert_one_live_order_per_row(
    sim: &SimHandle,
    references: &[String],
) -> std::collections::BTreeMap<String, String> {
    let per_ref = service_orders_per_reference(sim);
    let mut live_ids = std::collections::BTreeMap::new();
    for r in references {
        let orders = per_ref.get(r).cloned().unwrap_or_default();
        let live: Vec<&(String, String)> = orders.iter().filter(|(_, s)| s != "FAILED").collect();
        assert_eq!(
            live.len(),
            1,
            "row {r} must have exactly one live service order, found {orders:?}"
        );
        live_ids.insert(r.clone(), live[0].0.clone());
    }
    for r in per_ref.keys() {
        assert!(
            references.contains(r),
            "the service has an order for row {r}, which is not in the batch"
        );
    }
    live_ids
}

/// The references of an input CSV file (column `reference`), in file order.
pub fn references(path: &Path) -> Vec<String> {
    let rows = read_csv(path);
    let c = col(&rows[0], "reference");
    rows[1..].iter().map(|r| r[c].clone()).collect()
}

/// How many `POST /order` requests the simulator has seen since it started.
pub fn order_posts(sim: &SimHandle) -> u64 {
    sim.stats()
        .requests
        .get("POST /order")
        .copied()
        .unwrap_or(0)
}

/// Paths of a SQLite file and its write-ahead log and shared-memory companions.
pub fn sqlite_files(db: &Path) -> [PathBuf; 3] {
    [
        db.to_path_buf(),
        PathBuf::from(format!("{}-wal", db.display())),
        PathBuf::from(format!("{}-shm", db.display())),
    ]
}

/// The paybatch binary started in `dir` with `args` (the caller's paybatch settings removed,
/// as in [`paybatch_in`]), its stderr piped to be read line by line with [`wait_for_line`].
pub fn spawn_paybatch(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> tokio::process::Child {
    let mut cmd = command(dir, args, envs);
    cmd.kill_on_drop(true)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.spawn().expect("paybatch starts")
}

/// Sends `signal` (`-INT`, `-TERM`) to `child`.
pub fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("pid").to_string();
    let sent = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill runs");
    assert!(sent.success());
}

/// Reads `lines` until one contains `needle` (returned with what was read before it), for at
/// most `within`; panics with what was read otherwise.
pub async fn wait_for_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    needle: &str,
    within: Duration,
) -> String {
    let mut seen = String::new();
    let found = tokio::time::timeout(within, async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(needle) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no line with `{needle}` within {within:?}; read:\n{seen}"
    );
    seen
}

/// What a command printed, messages (stderr) then output (stdout): for what may be in either,
/// such as a run's summary (output) beside its warnings (messages).
pub fn output_of(o: &std::process::Output) -> String {
    format!("{}{}", stderr_of(o), stdout_of(o))
}

/// A file `name` of the rows `PREFIX-i` for each `i` of `range`, each a 10.00 USD payout link.
pub fn rows_file(ws: &Workspace, name: &str, prefix: &str, range: std::ops::RangeInclusive<usize>) {
    let mut text = String::from(
        "reference,product_code,face_value,currency,distribution,email,payment_currency,country,department\n",
    );
    for i in range {
        text.push_str(&format!(
            "{prefix}-{i},AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n"
        ));
    }
    ws.write(name, &text);
}

/// The orders that are not FAILED of each `EMP-` reference the service holds.
pub fn live_orders_of_emp_rows(sim: &SimHandle) -> std::collections::BTreeMap<String, usize> {
    service_orders_per_reference(sim)
        .into_iter()
        .filter(|(r, _)| r.starts_with("EMP-"))
        .map(|(r, orders)| {
            let live = orders.iter().filter(|(_, s)| s != "FAILED").count();
            (r, live)
        })
        .collect()
}

/// An amount a test reads from paybatch's output.
pub fn dec(text: &str) -> rust_decimal::Decimal {
    use std::str::FromStr;
    rust_decimal::Decimal::from_str(text)
        .unwrap_or_else(|e| panic!("{text:?} is not a decimal: {e}"))
}

/// The one JSON object a command printed on stdout.
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(stdout_of(out).trim()).unwrap_or_else(|e| {
        panic!(
            "one JSON object on stdout ({e}): {}\n{}",
            stdout_of(out),
            stderr_of(out)
        )
    })
}

/// Pays `csv` as batch `name` on the embedded simulator of the workspace (a run of a known
/// batch resumes it: its rows made payable again are paid).
pub async fn pay(ws: &Workspace, name: &str, csv: &str) {
    let file = format!("{name}.csv");
    ws.write(&file, csv);
    let out = paybatch_ws(ws, &["run", &file, "--batch", name, "-q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}
