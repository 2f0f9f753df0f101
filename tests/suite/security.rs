//! The secrets paybatch handles (the API key; payout links in the ledger, the result file and
//! the embedded simulator's state) stay where they belong. One test per point; each one checks
//! that what it looks for is really there to be found (the key reached the service, the WAL file
//! exists, the umask would have made files readable, the proxy trap does catch connections), so
//! that it can fail.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::*;
use paybatch::sim::SimHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A playground-shaped key the tests give the simulator; it must never show up anywhere.
const SECRET: &str = "xx_secret_key_for_tests_0123456789";
/// A key the simulator does not accept (for the error paths); it must not show up either.
const WRONG: &str = "xx_secret_wrong_key_9876543210";
/// A production-shaped key.
const PRODUCTION_SHAPED: &str = "wg_secret_production_key_4242424242";

fn fingerprint(key: &str) -> String {
    paybatch::api::ApiKey::new(key).expect("key").fingerprint()
}

fn write_key_file(ws: &Workspace, name: &str, key: &str, mode: u32) -> PathBuf {
    let path = ws.path(name);
    std::fs::write(&path, format!("{key}\n")).expect("key file");
    set_mode(&path, mode);
    path
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

async fn secret_sim() -> SimHandle {
    let mut config = fast_config(None);
    config.keys = vec![SECRET.to_string()];
    start_sim(config).await
}

/// Every file under `dir` (recursively) whose bytes contain `needle`, except `skip`.
fn files_containing(dir: &Path, needle: &[u8], skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("read dir")
            .filter_map(|e| e.ok())
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if !skip.contains(&path) {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

fn outputs_containing(outputs: &[(&str, &Output)], needle: &str) -> Vec<String> {
    outputs
        .iter()
        .filter(|(_, o)| stdout_of(o).contains(needle) || stderr_of(o).contains(needle))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_is_in_no_file_no_output_and_no_error_message() {
    let ws = Workspace::new();
    let sim = secret_sim().await;
    ws.copy(SAMPLE, "nov.csv");
    let key_file = write_key_file(&ws, "api.key", SECRET, 0o600);
    let wrong_file = write_key_file(&ws, "wrong.key", WRONG, 0o600);
    let open_file = write_key_file(&ws, "open.key", SECRET, 0o644);
    let skip = [key_file.clone(), wrong_file.clone(), open_file.clone()];
    // The search itself finds the key where it is.
    let mut found = files_containing(ws.dir.path(), SECRET.as_bytes(), &[]);
    found.sort();
    let mut expected = vec![key_file.clone(), open_file.clone()];
    expected.sort();
    assert_eq!(found, expected);
    let base = sim.base_url();
    let ledger = ws.ledger();
    let ledger_arg = ledger.to_str().expect("path");
    let service = ["--base-url", base.as_str(), "--ledger", ledger_arg];
    let with_args = |head: &[&'static str], tail: &[&str]| -> Vec<String> {
        head.iter()
            .chain(tail.iter())
            .chain(service.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let dir = ws.dir.path();
    let run = |args: Vec<String>, envs: Vec<(&'static str, String)>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        paybatch_in(dir, &args, &envs).await
    };
    let key_arg = key_file.to_str().expect("path");

    // 1. Debug output, key from the file, killed after some answers are recorded: the WAL is left
    //    behind, full of answers, and is searched too.
    let killed = run(
        with_args(&["-vv", "run", "nov.csv", "--api-key-file"], &[key_arg]),
        vec![("PAYBATCH_FAILPOINT", "after_record:4".into())],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", stderr_of(&killed));
    let wal = PathBuf::from(format!("{}-wal", ledger.display()));
    assert!(
        std::fs::metadata(&wal)
            .map(|m| m.len() > 0)
            .unwrap_or(false),
        "the killed run left a WAL file to search"
    );
    let in_files = files_containing(dir, SECRET.as_bytes(), &skip);
    assert!(in_files.is_empty(), "the key is in {in_files:?}");

    // 2. Trace logging of every crate, key from the environment, run to the end.
    let traced = run(
        with_args(&["-vv", "run", "nov.csv"], &[]),
        vec![
            ("PAYBATCH_API_KEY", SECRET.into()),
            ("RUST_LOG", "trace".into()),
        ],
    )
    .await;
    assert_eq!(traced.status.code(), Some(0), "{}", stderr_of(&traced));
    assert!(
        stderr_of(&traced).lines().count() > 50,
        "trace logging was on"
    );
    let fp = fingerprint(SECRET);
    let truth = sim.orders();
    assert!(
        !truth.is_empty() && truth.iter().all(|o| o.api_key_fingerprint == fp),
        "the orders were made with the key"
    );

    // 3. Reconcile, traced.
    let reconciled = run(
        with_args(&["-vv", "reconcile", "--batch", "nov", "--json"], &[]),
        vec![
            ("PAYBATCH_API_KEY", SECRET.into()),
            ("RUST_LOG", "trace".into()),
        ],
    )
    .await;
    assert_eq!(
        reconciled.status.code(),
        Some(0),
        "{}",
        stderr_of(&reconciled)
    );

    // 4. Error paths: a key the service refuses, a key of the wrong kind, an unsafe key file,
    //    a batch resumed with another key.
    let refused = run(
        // The same file again on purpose: the refused key is what is tried.
        with_args(
            &[
                "-vv",
                "run",
                "nov.csv",
                "--batch",
                "other",
                "--allow-repeats",
            ],
            &[],
        ),
        vec![
            ("PAYBATCH_API_KEY", WRONG.into()),
            ("RUST_LOG", "trace".into()),
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    let wrong_kind = run(
        vec![
            "run".into(),
            "nov.csv".into(),
            "--env".into(),
            "production".into(),
        ],
        vec![("PAYBATCH_API_KEY", SECRET.into())],
    )
    .await;
    assert_eq!(
        wrong_kind.status.code(),
        Some(2),
        "{}",
        stderr_of(&wrong_kind)
    );
    assert!(
        stderr_of(&wrong_kind).contains(&fp),
        "the fingerprint may be shown"
    );
    let open = run(
        with_args(
            &["run", "nov.csv", "--api-key-file"],
            &[open_file.to_str().expect("path")],
        ),
        vec![],
    )
    .await;
    assert_eq!(open.status.code(), Some(2), "{}", stderr_of(&open));
    let rebound = run(
        with_args(
            &["run", "nov.csv", "--api-key-file"],
            &[wrong_file.to_str().expect("path")],
        ),
        vec![],
    )
    .await;
    assert_eq!(rebound.status.code(), Some(2), "{}", stderr_of(&rebound));
    assert!(
        stderr_of(&rebound).contains("another API key"),
        "{}",
        stderr_of(&rebound)
    );

    let outputs = [
        ("killed -vv run", &killed),
        ("traced run", &traced),
        ("traced reconcile", &reconciled),
        ("refused key", &refused),
        ("wrong kind of key", &wrong_kind),
        ("open key file", &open),
        ("batch bound to another key", &rebound),
    ];
    for key in [SECRET, WRONG] {
        let shown = outputs_containing(&outputs, key);
        assert!(shown.is_empty(), "a key is printed by: {shown:?}");
        let in_files = files_containing(dir, key.as_bytes(), &skip);
        assert!(in_files.is_empty(), "a key is in {in_files:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_others_can_read_is_refused_and_a_private_one_is_accepted() {
    let ws = Workspace::new();
    let sim = secret_sim().await;
    ws.copy(SAMPLE, "nov.csv");
    let base = sim.base_url();
    let ledger = ws.ledger();
    for mode in [0o644, 0o640, 0o604] {
        let file = write_key_file(&ws, "api.key", SECRET, mode);
        let out = paybatch_in(
            ws.dir.path(),
            &[
                "run",
                "nov.csv",
                "--base-url",
                &base,
                "--api-key-file",
                file.to_str().expect("path"),
                "--ledger",
                ledger.to_str().expect("path"),
            ],
            &[],
        )
        .await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "mode {mode:o}: {err}");
        assert!(err.contains(&format!("has mode {mode:o}")), "{err}");
        assert!(err.contains("chmod 600"), "{err}");
    }
    assert!(
        sim.stats().requests.is_empty(),
        "refused before any request: {:?}",
        sim.stats().requests
    );
    let file = write_key_file(&ws, "api.key", SECRET, 0o600);
    let out = paybatch_in(
        ws.dir.path(),
        &[
            "run",
            "nov.csv",
            "--base-url",
            &base,
            "--api-key-file",
            file.to_str().expect("path"),
            "--ledger",
            ledger.to_str().expect("path"),
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(sim.orders().len(), input_rows(&ws.path("nov.csv")));
}

/// The options of a command, as its `--help` lists them.
fn long_options(help: &str) -> Vec<String> {
    help.split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| {
            w.trim_end_matches(',')
                .split('=')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_option_takes_the_key_itself() {
    let ws = Workspace::new();
    // `sim serve --key` is left out: it lists the keys the simulator accepts.
    for command in [
        &["run"][..],
        &["retry"],
        &["ping"],
        &["reconcile"],
        &["catalog", "sync"],
        &["catalog", "list"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let options = long_options(&help_of(&args));
        assert!(
            options.contains(&"--api-key-file".to_string()),
            "{command:?}: the key file option is listed: {options:?}"
        );
        let keyish: Vec<&String> = options
            .iter()
            .filter(|o| o.contains("key") && *o != "--api-key-file")
            .collect();
        assert!(keyish.is_empty(), "{command:?} takes a key: {keyish:?}");
    }
    // Nor is a prefix of `--api-key-file` taken for it (the value would be read as a path, and
    // printed in the error).
    ws.copy(SAMPLE, "nov.csv");
    for args in [
        &["run", "nov.csv", "--api-key", SECRET][..],
        &["run", "nov.csv", &format!("--api-key={SECRET}")],
    ] {
        let out = paybatch_in(ws.dir.path(), args, &[]).await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("unexpected argument '--api-key"), "{err}");
    }
}

/// A local listener standing in for an HTTP(S) proxy: paybatch's HTTP client sends every
/// connection through `HTTPS_PROXY`/`HTTP_PROXY` when they are set, so counting the connections
/// here counts the connections paybatch attempted, and nothing reaches a real host.
struct ProxyTrap {
    url: String,
    connections: Arc<AtomicUsize>,
}

impl ProxyTrap {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = connections.clone();
        tokio::spawn(async move {
            for _ in 0..100 {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                seen.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ =
                        tokio::time::timeout(Duration::from_secs(2), socket.read(&mut buf)).await;
                    let _ = socket
                        .write_all(
                            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        ProxyTrap { url, connections }
    }

    fn envs(&self) -> Vec<(&'static str, String)> {
        [
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "ALL_PROXY",
            "https_proxy",
            "http_proxy",
            "all_proxy",
        ]
        .into_iter()
        .map(|k| (k, self.url.clone()))
        .collect()
    }

    fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Runs paybatch behind the proxy trap; returns the output, the time it took and the number of
/// connections it attempted.
async fn behind_trap(args: &[&str], key: &str) -> (Output, Duration, usize) {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let trap = ProxyTrap::start().await;
    let mut envs = trap.envs();
    envs.push(("PAYBATCH_API_KEY", key.to_string()));
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut all = args.to_vec();
    all.extend_from_slice(&["--ledger", "ledger.db"]);
    let started = Instant::now();
    let out = paybatch_in(ws.dir.path(), &all, &envs).await;
    let took = started.elapsed();
    // Let a connection that was on its way arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (out, took, trap.count())
}

/// The trap works: a well-formed playground key does make paybatch connect (through the trap,
/// which refuses the tunnel, so nothing leaves the machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_trap_sees_the_connections_paybatch_attempts() {
    let (out, _, connections) =
        behind_trap(&["run", "nov.csv", "--env", "playground"], SECRET).await;
    assert_ne!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(connections >= 1, "{}", stderr_of(&out));
    let (out, _, connections) = behind_trap(
        &["run", "nov.csv", "--base-url", "https://example.com/v2"],
        SECRET,
    )
    .await;
    assert_ne!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(connections >= 1, "{}", stderr_of(&out));
}

/// Plain http (allowed to this machine only) never goes through a proxy: the key would cross
/// the network in clear to the proxy's host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_this_machine_never_goes_through_a_proxy() {
    let sim = start_sim(fast_config(None)).await;
    let base = sim.base_url();
    let (out, _, connections) = behind_trap(
        &["run", "nov.csv", "--base-url", &base],
        paybatch::sim::DEFAULT_KEY,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(connections, 0, "nothing went to the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_playground_key_is_refused_for_production_before_any_connection() {
    let (out, took, connections) =
        behind_trap(&["run", "nov.csv", "--env", "production"], SECRET).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a production key"), "{err}");
    assert!(err.contains(&fingerprint(SECRET)), "{err}");
    assert_eq!(connections, 0, "no connection was attempted");
    // Refused on the spot, not after a network timeout (the client allows 10 s to connect).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_key_is_refused_for_the_playground_before_any_connection() {
    let (out, took, connections) = behind_trap(
        &["run", "nov.csv", "--env", "playground"],
        PRODUCTION_SHAPED,
    )
    .await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a playground key"), "{err}");
    assert!(!err.contains(PRODUCTION_SHAPED), "{err}");
    assert_eq!(connections, 0, "no connection was attempted");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_another_host_is_refused_before_any_connection() {
    for url in ["http://example.com/v2", "http://10.0.0.1:8080/v2"] {
        let (out, took, connections) =
            behind_trap(&["run", "nov.csv", "--base-url", url], SECRET).await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains("refusing plain http://"), "{url}: {err}");
        assert_eq!(connections, 0, "{url}: no connection was attempted");
        assert!(took < Duration::from_secs(10), "{url}: took {took:?}");
        assert!(!err.contains(SECRET), "{err}");
    }
}

/// A production key goes to the production service only, through `--env production` and its
/// guard: with any other address (flag, variable or settings file), whatever the command, it is
/// refused before any connection, exit 2. The address is a local listener that answers (403) and
/// counts the connections it gets, so that a command that does send the key ends and is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_key_never_goes_to_another_address() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let service = ProxyTrap::start().await;
    let base = format!("{}/v2", service.url);
    let key_file = write_key_file(&ws, "production.key", PRODUCTION_SHAPED, 0o600);
    let key_file = key_file.to_str().expect("path");
    let in_env = [("PAYBATCH_API_KEY", PRODUCTION_SHAPED)];
    let dir = ws.dir.path();
    // (arguments, environment variables)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let mut cases: Vec<Case> = Vec::new();
    for command in [
        &["run", "nov.csv"][..],
        &["run", "nov.csv", "--yes"],
        &["validate", "nov.csv"],
        &["ping"],
        &["balance"],
        &["catalog", "sync"],
        &["catalog", "list"],
    ] {
        let mut args = command.to_vec();
        args.extend_from_slice(&["--base-url", &base, "--ledger", "ledger.db"]);
        cases.push((args.clone(), in_env.to_vec()));
        // The key from a file, and the address from the variable.
        let mut from_file = command.to_vec();
        from_file.extend_from_slice(&["--api-key-file", key_file, "--ledger", "ledger.db"]);
        cases.push((from_file, vec![("PAYBATCH_BASE_URL", base.as_str())]));
    }
    for (args, envs) in &cases {
        let out = paybatch_in(dir, args, envs).await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?} {envs:?}: {err}");
        assert!(err.contains("is a production key"), "{args:?}: {err}");
        assert!(
            err.contains("help: for real payouts use --env production"),
            "{err}"
        );
        assert!(!err.contains(PRODUCTION_SHAPED), "{err}");
        assert_eq!(service.count(), 0, "{args:?} {envs:?}: {err}");
    }
    // The address from the settings file, for `validate` and `run` (no terminal, no --yes).
    let settings = ws.write("paybatch.toml", &format!("base_url = \"{base}\"\n"));
    for command in [&["validate", "nov.csv"][..], &["run", "nov.csv"]] {
        let out = paybatch_in(dir, command, &in_env).await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {err}");
        assert!(err.contains("is a production key"), "{err}");
        assert_eq!(service.count(), 0, "{command:?}: {err}");
    }
    assert!(!ws.path("nov.result.csv").exists(), "nothing was paid");
    // The listener does count: a playground key is sent there.
    std::fs::remove_file(settings).expect("remove settings");
    let out = paybatch_in(
        dir,
        &["ping", "--base-url", &base],
        &[("PAYBATCH_API_KEY", SECRET)],
    )
    .await;
    assert_ne!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(service.count() >= 1, "{}", stderr_of(&out));
}

/// Runs the binary with umask 000, so that any file it does not protect itself ends up readable
/// (and writable) by everyone.
async fn with_open_umask(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut all = vec!["-c", "umask 000 && exec \"$0\" \"$@\"", BIN];
    all.extend_from_slice(args);
    let mut cmd = tokio::process::Command::new("sh");
    cmd.current_dir(dir).args(&all).kill_on_drop(true);
    for var in [
        "PAYBATCH_API_KEY",
        "PAYBATCH_BASE_URL",
        "PAYBATCH_ENV",
        "PAYBATCH_LEDGER",
    ] {
        cmd.env_remove(var);
    }
    cmd.env_remove("PAYBATCH_FAILPOINT");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("finished within 120 s")
        .expect("ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_the_result_file_and_the_simulator_state_are_private() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let dir = ws.dir.path();
    // The umask is really open: a file made the ordinary way is readable by all.
    let touched = tokio::process::Command::new("sh")
        .current_dir(dir)
        .args(["-c", "umask 000 && : > probe.txt"])
        .status()
        .await
        .expect("sh");
    assert!(touched.success());
    assert_eq!(mode_of(&ws.path("probe.txt")), 0o666);

    // Killed mid-run (the embedded simulator dies with it): the WAL files are there too.
    let args = ["run", "nov.csv", "--ledger", "ledger.db"];
    let killed = with_open_umask(dir, &args, &[("PAYBATCH_FAILPOINT", "after_record:4")]).await;
    assert_eq!(killed.status.code(), None, "{}", stderr_of(&killed));
    let ledger = ws.path("ledger.db");
    let state = paybatch::environment::embedded_state_path(&ledger);
    let mut checked = Vec::new();
    for db in [&ledger, &state] {
        for file in sqlite_files(db) {
            if file.exists() {
                assert_eq!(mode_of(&file), 0o600, "{}", file.display());
                checked.push(file);
            }
        }
    }
    assert!(
        checked.len() >= 4,
        "the ledger, the simulator state and WAL files were checked: {checked:?}"
    );

    let done = with_open_umask(dir, &args, &[]).await;
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let result = ws.path("nov.SIMULATED.result.csv");
    assert_eq!(
        mode_of(&result),
        0o600,
        "the result file holds payout links"
    );
    for db in [&ledger, &state] {
        for file in sqlite_files(db) {
            if file.exists() {
                assert_eq!(mode_of(&file), 0o600, "{}", file.display());
            }
        }
    }
    // A result file that already existed with a wider mode is replaced by a private one.
    set_mode(&result, 0o644);
    let again = with_open_umask(dir, &args, &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert_eq!(mode_of(&result), 0o600);
}

/// A key of no known prefix, for a custom service: hidden because it is the configured key.
const CUSTOM_SHAPED: &str = "k3y-custom-service-5551212";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_given_as_the_input_or_in_a_cell_is_never_echoed() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.keys = vec![SECRET.to_string(), CUSTOM_SHAPED.to_string()];
    let sim = start_sim(config).await;
    let base = sim.base_url();
    let key_file = write_key_file(&ws, "api.key", SECRET, 0o600);
    let key_arg = key_file.to_str().expect("path");
    // The key file, given as the input through a symlink.
    std::os::unix::fs::symlink(&key_file, ws.path("key.csv")).expect("symlink");
    assert!(
        std::fs::read_to_string(ws.path("key.csv"))
            .expect("read through the link")
            .contains(SECRET)
    );
    // The key in cells and in the header of a file.
    let cells = |key: &str| {
        format!(
            "reference,product_code,face_value,currency,{key}\n\
             R-1,AMZ-US,10,{key},x\n\
             R-2,{key},10,USD,x\n\
             R-3,AMZ-US,{key},USD,x\n\
             R-4,AMZ-US,10,USD,x\n"
        )
    };
    ws.write("cells.csv", &cells(SECRET));
    ws.write("custom.csv", &cells(CUSTOM_SHAPED));
    let dir = ws.dir.path();
    let placeholder = "(a value that looks like an API key, not shown)";
    // (arguments, environment variables, the key that must not show)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let mut cases: Vec<Case> = Vec::new();
    for command in ["validate", "run"] {
        for input in ["key.csv", "cells.csv"] {
            let from_file = vec![
                command,
                input,
                "--base-url",
                &base,
                "--api-key-file",
                key_arg,
                "--ledger",
                "ledger.db",
            ];
            cases.push((from_file, vec![], SECRET));
            let from_env = vec![command, input, "--base-url", &base, "--ledger", "ledger.db"];
            cases.push((from_env, vec![("PAYBATCH_API_KEY", SECRET)], SECRET));
            // The embedded simulator (no key needed), with the key file named anyway.
            let sim_env = vec![
                command,
                input,
                "--api-key-file",
                key_arg,
                "--ledger",
                "s.db",
            ];
            cases.push((sim_env, vec![], SECRET));
        }
        let custom = vec![
            command,
            "custom.csv",
            "--base-url",
            &base,
            "--ledger",
            "ledger.db",
        ];
        cases.push((
            custom,
            vec![("PAYBATCH_API_KEY", CUSTOM_SHAPED)],
            CUSTOM_SHAPED,
        ));
    }
    cases.push((
        vec!["validate", "cells.csv", "--json", "--ledger", "s.db"],
        vec![],
        SECRET,
    ));
    for (args, envs, key) in &cases {
        let out = paybatch_in(dir, args, envs).await;
        let all = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert_eq!(out.status.code(), Some(3), "{args:?} {envs:?}: {all}");
        assert!(all.contains(placeholder), "{args:?} {envs:?}: {all}");
        assert!(
            !all.to_ascii_lowercase().contains(&key.to_ascii_lowercase()),
            "{args:?} {envs:?}: {all}"
        );
        assert!(!all.contains(&key[..20]), "{args:?} {envs:?}: {all}");
    }
}

/// The key as a row's reference and in a recipient's address, paid, then repeated: no command
/// that echoes the rows (run's summary and warnings, a refusal naming references, `status`,
/// `history`, `report`, `--json`, the result file, the HTML report) shows it, configured or
/// not; ordinary references stay readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_paid_as_a_reference_or_an_address_is_never_echoed() {
    let ws = Workspace::new();
    let sim = secret_sim().await;
    let base = sim.base_url();
    let header = "reference,product_code,face_value,currency,distribution,email\n";
    let ordinary = "EMP-1042-2026-11";
    ws.write(
        "first.csv",
        &format!(
            "{header}{SECRET},AMZ-US,10,USD,email,r1@example.com\n\
             {ordinary},AMZ-US,20,USD,email,{SECRET}@example.com\n"
        ),
    );
    // The same recipients again, under other references: likely repeats, named by both.
    ws.write(
        "second.csv",
        &format!(
            "{header}R-3,AMZ-US,10,USD,email,r1@example.com\n\
             R-4,AMZ-US,20,USD,email,{SECRET}@example.com\n"
        ),
    );
    // The key's reference again: a repeat, refused by name.
    ws.write(
        "third.csv",
        &format!("{header}{SECRET},AMZ-US,10,USD,email,r9@example.com\n"),
    );
    let dir = ws.dir.path();
    let service = ["--base-url", base.as_str(), "--ledger", "l.db"];
    let env = [("PAYBATCH_API_KEY", SECRET)];
    let placeholder = "(a value that looks like an API key, not shown)";
    let mut outputs: Vec<(String, Output)> = Vec::new();
    let with_service: Vec<Vec<&str>> = vec![
        vec!["run", "first.csv", "--poll-timeout", "60"],
        vec!["validate", "second.csv"],
        vec!["run", "second.csv", "--poll-timeout", "60", "--json"],
        vec!["run", "third.csv", "--poll-timeout", "60"],
        vec!["run", "third.csv", "--poll-timeout", "60", "--json"],
    ];
    for args in with_service {
        let mut all = args.clone();
        all.extend_from_slice(&service);
        let out = paybatch_in(dir, &all, &env).await;
        outputs.push((format!("{args:?}"), out));
    }
    let first = &outputs[0].1;
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(first));
    let seconds = format!("{}{}", stdout_of(&outputs[1].1), stderr_of(&outputs[1].1));
    assert!(seconds.contains("likely repeats"), "{seconds}");
    assert_ne!(outputs[3].1.status.code(), Some(0), "the repeat is refused");
    let reading: Vec<Vec<&str>> = vec![
        vec!["status"],
        vec!["status", "--json"],
        vec!["status", "--batch", "first"],
        vec!["status", "--batch", "first", "--json"],
        vec!["history", "--reference", SECRET],
        vec!["history", "--reference", SECRET, "--json"],
        vec!["history", "--email", "r1@example.com"],
        vec!["history", "--email", "r1@example.com", "--json"],
        vec!["report", "--batch", "first", "--out", "-"],
        vec![
            "report",
            "--batch",
            "first",
            "--out",
            "again.csv",
            "--html",
            "first.html",
            "--group-by",
            "email",
            "--group-by",
            "reference",
        ],
    ];
    // Reading the ledger needs no key: shown with the key configured and without.
    for args in reading {
        let mut all = args.clone();
        all.extend_from_slice(&["--ledger", "l.db"]);
        for envs in [&env[..], &[]] {
            let out = paybatch_in(dir, &all, envs).await;
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
            outputs.push((format!("{args:?} {}", envs.len()), out));
        }
    }
    for (name, out) in &outputs {
        let all = format!("{}{}", stdout_of(out), stderr_of(out));
        assert!(
            !all.to_ascii_lowercase()
                .contains(&SECRET.to_ascii_lowercase())
                && !all.contains(&SECRET[..20]),
            "{name}: {all}"
        );
    }
    let all: String = outputs
        .iter()
        .map(|(_, o)| stdout_of(o) + &stderr_of(o))
        .collect();
    assert!(all.contains(placeholder), "{all}");
    assert!(
        all.contains(ordinary),
        "ordinary references stay readable: {all}"
    );
    for file in [
        "first.result.csv",
        "second.result.csv",
        "again.csv",
        "first.html",
    ] {
        let text = std::fs::read_to_string(ws.path(file)).expect(file);
        assert!(!text.contains(&SECRET[..20]), "{file}: {text}");
        assert!(text.contains(placeholder), "{file}: {text}");
        if file != "second.result.csv" {
            assert!(text.contains(ordinary), "{file}: {text}");
        }
    }
    // The ledger keeps the reference as it was given (it is the row's identity).
    let conn = rusqlite::Connection::open(ws.path("l.db")).expect("ledger");
    let kept: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM rows WHERE reference = ?1",
            [SECRET],
            |r| r.get(0),
        )
        .expect("query");
    assert!(kept >= 1);
}
