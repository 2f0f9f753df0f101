//! Exactly once while the sending's ledger steps run on the ledger's own thread and the polling
//! fetches finished orders in tasks of their own: kills and fail points during a burst of 64
//! sends in flight, Ctrl-C while the sends wait for the ledger, a step that fails while others
//! are queued, a hostile service within the published contract, how often the polling asks, and
//! how many threads a long run keeps. Real binary, real simulator, real ledger.

use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use crate::support::*;
use paybatch::sim::SimHandle;

/// The arguments of `paybatch run FILE` against `sim` with the workspace's key and ledger.
fn args_of(ws: &Workspace, sim: &SimHandle, file: &str, extra: &[&str]) -> Vec<String> {
    run_args(ws, &sim.base_url(), file, extra)
}

/// The run started, its stderr read line by line.
pub(super) fn spawn_run(
    ws: &Workspace,
    sim: &SimHandle,
    file: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) {
    let args = args_of(ws, sim, file, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &args, envs);
    let lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    (child, lines)
}

/// What is left on `lines`, read until the process closes it (at most `within`).
pub(super) async fn rest_of(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    within: Duration,
) -> String {
    let mut rest = String::new();
    let _ = tokio::time::timeout(within, async {
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push_str(&line);
            rest.push('\n');
        }
    })
    .await;
    rest
}

/// The number of threads of process `pid` (`Threads:` of `/proc/PID/status`), none once it is
/// gone.
fn threads_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The simulator's count of `endpoint` requests.
pub(super) fn requests(sim: &SimHandle, endpoint: &str) -> u64 {
    sim.stats().requests.get(endpoint).copied().unwrap_or(0)
}

/// A simulator whose every request takes `latency` more, orders processing for `processing`.
async fn slow_sim(latency: Duration, processing: (Duration, Duration)) -> SimHandle {
    let mut config = fast_config(None);
    config.faults.latency = latency;
    config.processing_min = processing.0;
    config.processing_max = processing.1;
    start_sim(config).await
}

/// Every row of `input` is paid by exactly one order that is not FAILED (the simulator's ground
/// truth), with `what` said on failure.
pub(super) fn each_row_once(sim: &SimHandle, ws: &Workspace, file: &str, what: &str) {
    let refs = references(&ws.path(file));
    let per_ref = service_orders_per_reference(sim);
    let mut wrong = Vec::new();
    for r in &refs {
        let orders = per_ref.get(r).cloned().unwrap_or_default();
        let live = orders.iter().filter(|(_, s)| s != "FAILED").count();
        if live != 1 {
            wrong.push(format!("{r}: {orders:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "rows not paid exactly once ({} of {}): {:?}\n{what}",
        wrong.len(),
        refs.len(),
        &wrong[..wrong.len().min(10)]
    );
}

/// 200 rows, one order each, at 64 in flight against a service that takes 150 ms an answer:
/// SIGKILL once `sent` orders went out (the next ones in flight, their answers or marks waiting
/// for the ledger's thread), then the same command: every row is paid once and the run ends
/// well. At three moments of the burst: its start, its middle (orders sent in sync mode), near
/// its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_in_a_burst_of_64_in_flight_then_the_same_command_pays_each_row_once() {
    // The middle one in sync mode: each answer is the finished order, recorded at once.
    for (sent, sync) in [(20, false), (80, true), (150, false)] {
        let ws = Workspace::new();
        let sim = slow_sim(
            Duration::from_millis(150),
            (Duration::from_millis(100), Duration::from_millis(800)),
        )
        .await;
        rows_file(&ws, "burst.csv", "EMP", 1..=200);
        let mut flags = vec!["--items-per-order", "1", "--concurrency", "64"];
        if sync {
            flags.push("--sync");
        }
        let (mut child, mut lines) = spawn_run(&ws, &sim, "burst.csv", &flags, &[]);
        until("orders sent", Duration::from_secs(60), || {
            order_posts(&sim) >= sent
        })
        .await;
        child.start_kill().expect("SIGKILL");
        let killed = child.wait().await.expect("wait");
        assert_eq!(killed.code(), None, "killed after {sent} sends");
        let before = rest_of(&mut lines, Duration::from_secs(5)).await;
        assert!(
            order_posts(&sim) < 200,
            "killed mid-burst ({sent}):\n{before}"
        );

        let out = run_file(&ws, &sim, "burst.csv", &flags, &[]).await;
        let text = format!(
            "killed after {sent} sends:\n{before}\nthen:\n{}",
            output_of(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{text}");
        each_row_once(&sim, &ws, "burst.csv", &text);
    }
}

/// The first run of 200 rows (`per_order` a order) aborted at fail point `point` (`name:N`,
/// its N-th hit) while up to 64 sends are in flight, against a simulator whose orders process
/// for `processing`; then the same command: every row paid once, the run ends well.
async fn aborted_at_then_resumed(point: &str, per_order: &str, processing: (Duration, Duration)) {
    let sim = slow_sim(Duration::from_millis(100), processing).await;
    let ws = Workspace::new();
    rows_file(&ws, "burst.csv", "EMP", 1..=200);
    let flags = ["--concurrency", "64", "--items-per-order", per_order];
    let armed = [("PAYBATCH_FAILPOINT", point)];
    let first = run_file(&ws, &sim, "burst.csv", &flags, &armed).await;
    let first_text = output_of(&first);
    assert_eq!(
        first.status.code(),
        None,
        "aborted at {point}: {first_text}"
    );
    let name = point.split(':').next().unwrap_or(point);
    assert!(
        first_text.contains(&format!("fail point {name}")),
        "{first_text}"
    );
    let out = run_file(&ws, &sim, "burst.csv", &flags, &[]).await;
    let said = format!(
        "aborted at {point}:\n{first_text}\nthe same command:\n{}",
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    each_row_once(&sim, &ws, "burst.csv", &said);
}

/// Each fail point of a send met while 64 sends are in flight (their marks and answers queued
/// on the ledger's thread), and one met while the polling looks at 100 orders still processing:
/// the same command afterwards pays every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_points_in_a_burst_of_64_in_flight_then_the_same_command_pays_each_row_once() {
    let quick = (Duration::from_millis(100), Duration::from_millis(600));
    for point in ["after_mark_sending:50", "after_send:50", "after_record:50"] {
        aborted_at_then_resumed(point, "1", quick).await;
    }
    let slow = (Duration::from_secs(1), Duration::from_secs(4));
    aborted_at_then_resumed("while_polling:4", "2", slow).await;
}

/// Holds the ledger's write lock from another connection (as another program writing to the
/// ledger would) until told, or `most` at the longest. Returns once it is held.
pub(super) fn hold_the_ledger(
    path: std::path::PathBuf,
    most: Duration,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&path).expect("the ledger opens");
        conn.busy_timeout(Duration::from_secs(20))
            .expect("busy timeout");
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("the write lock");
        held_tx.send(()).expect("the test waits");
        let _ = released.recv_timeout(most);
        conn.execute_batch("ROLLBACK").expect("released");
    });
    held_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the ledger's write lock is held");
    (release, holder)
}

/// The flags of the burst of [`held_burst`]: 64 in flight, one row an order.
const BURST_FLAGS: [&str; 4] = ["--concurrency", "64", "--items-per-order", "1"];

/// A run going on while another connection holds the ledger's write lock: here, of 120 rows
/// sending 64 at once to a slow simulator, once 10 orders went out ([`held_burst`]).
pub(super) struct HeldRun {
    pub ws: Workspace,
    pub sim: SimHandle,
    pub child: tokio::process::Child,
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    pub holding: Holding,
}

/// The other connection holding the ledger's write lock ([`hold_the_ledger`]).
pub(super) struct Holding {
    release: std::sync::mpsc::Sender<()>,
    holder: Option<std::thread::JoinHandle<()>>,
}

impl Holding {
    /// Holds the ledger at `path` for at most `most` ([`hold_the_ledger`]).
    pub(super) fn ledger(path: std::path::PathBuf, most: Duration) -> Self {
        let (release, holder) = hold_the_ledger(path, most);
        Holding {
            release,
            holder: Some(holder),
        }
    }

    /// Lets go of the ledger (unless the holder's time was up already) and waits for the
    /// holder to end.
    pub(super) fn let_go(&mut self) {
        // A holder whose time was up has let go and ended: nothing hears the message.
        let _ = self.release.send(());
        if let Some(holder) = self.holder.take() {
            holder.join().expect("the holder ends");
        }
    }
}

/// Starts the run of [`HeldRun`] and holds the ledger once 10 orders are sent.
async fn held_burst(most: Duration) -> HeldRun {
    let ws = Workspace::new();
    let sim = slow_sim(
        Duration::from_millis(300),
        (Duration::from_millis(100), Duration::from_millis(600)),
    )
    .await;
    rows_file(&ws, "burst.csv", "EMP", 1..=120);
    let (child, mut lines) = spawn_run(&ws, &sim, "burst.csv", &BURST_FLAGS, &[]);
    wait_for_line(&mut lines, "submitting 120 orders", Duration::from_secs(60)).await;
    until("10 orders sent", Duration::from_secs(30), || {
        order_posts(&sim) >= 10
    })
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

/// Ctrl-C while 64 answers wait for the ledger (another program holds its write lock, shorter
/// than the ledger's busy timeout): the run stops at once with 130 and says how far it got,
/// every order sent is in doubt (its answer was not recorded), and once the ledger is free the
/// same command pays every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_64_answers_wait_for_the_ledger_stops_with_130_and_the_resume_pays_once() {
    let mut burst = held_burst(Duration::from_secs(60)).await;
    let (ws, sim, flags) = (&burst.ws, &burst.sim, BURST_FLAGS);
    // Every request sent has been answered: the answers wait for the ledger.
    until("the sends answered", Duration::from_secs(30), || {
        sim.orders().len() as u64 == order_posts(sim)
    })
    .await;
    let sent = order_posts(sim);
    signal(&burst.child, "-INT");
    let status = tokio::time::timeout(Duration::from_secs(30), burst.child.wait())
        .await
        .expect("the run stops soon after Ctrl-C")
        .expect("wait");
    let rest = rest_of(&mut burst.lines, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(130), "{rest}");
    let said = rest
        .lines()
        .find(|l| l.starts_with("interrupted: "))
        .unwrap_or_else(|| panic!("no `interrupted:` line in:\n{rest}"));
    assert!(
        said.contains("nothing is lost; run the same command again to resume"),
        "{said}"
    );
    assert_eq!(order_posts(sim), sent, "nothing sent after the stop");
    burst.holding.let_go();

    let out = run_file(ws, sim, "burst.csv", &flags, &[]).await;
    let text = format!("{rest}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(sim, ws, "burst.csv", &text);
}

/// SIGKILL while 64 answers wait in the ledger thread's queue (another program holds the
/// ledger's write lock): none of them is recorded, every order sent is in doubt, and once the
/// ledger is free the same command pays every row once (the service answers each key again with
/// the order it made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_64_answers_wait_for_the_ledger_then_the_resume_pays_each_row_once() {
    let mut burst = held_burst(Duration::from_secs(60)).await;
    let (ws, sim, flags) = (&burst.ws, &burst.sim, BURST_FLAGS);
    until("the sends answered", Duration::from_secs(30), || {
        sim.orders().len() as u64 == order_posts(sim)
    })
    .await;
    burst.child.start_kill().expect("SIGKILL");
    let killed = burst.child.wait().await.expect("wait");
    assert_eq!(killed.code(), None, "killed");
    let before = rest_of(&mut burst.lines, Duration::from_secs(5)).await;
    burst.holding.let_go();
    let replayed = sim.stats().replayed;

    let out = run_file(ws, sim, "burst.csv", &flags, &[]).await;
    let text = format!("{before}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(sim, ws, "burst.csv", &text);
    assert!(
        sim.stats().replayed > replayed,
        "the orders in doubt were answered again under their keys: {text}"
    );
}

/// Another program holds the ledger's write lock for longer than the ledger's busy timeout
/// (10 s) while 64 answers wait to be recorded: the first step that gives up stops the run,
/// which says so once and exits 5 within a few busy timeouts. (The steps of the sends called
/// off are left undone on the ledger's thread; before, each waited its full 10 s in turn, and
/// the run said nothing for 64 x 10 s, about 11 minutes, the code before the ledger's thread
/// too.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_locked_past_its_busy_timeout_stops_the_run_within_a_few_busy_timeouts() {
    let mut burst = held_burst(Duration::from_secs(200)).await;
    // Six busy timeouts of the ledger: the first step gives up after one.
    let ended = tokio::time::timeout(Duration::from_secs(60), burst.child.wait()).await;
    if ended.is_err() {
        burst.child.start_kill().expect("SIGKILL");
        let _ = burst.child.wait().await;
    }
    let rest = rest_of(&mut burst.lines, Duration::from_secs(5)).await;
    burst.holding.let_go();
    let status = ended
        .unwrap_or_else(|_| {
            panic!("the run did not stop within 60 s of the ledger locked; said:\n{rest}")
        })
        .expect("wait");
    assert_eq!(status.code(), Some(5), "{rest}");
    let errors = rest.lines().filter(|l| l.starts_with("error:")).count();
    assert_eq!(errors, 1, "the error said once: {rest}");
    assert!(rest.contains("database is locked"), "{rest}");
}

/// The ledger's record of an answer fails as on a full disk (`record_answer`, from its 20th
/// hit) while up to 64 answers are on their way: the run stops, says the error once (exit 5,
/// with the command that resumes), and once the disk has room the same command pays every row
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_while_64_answers_come_is_said_once_and_the_resume_pays_each_row_once() {
    let ws = Workspace::new();
    let sim = slow_sim(
        Duration::from_millis(100),
        (Duration::from_millis(100), Duration::from_millis(600)),
    )
    .await;
    rows_file(&ws, "burst.csv", "EMP", 1..=200);
    let flags = ["--concurrency", "64", "--items-per-order", "1"];
    let full = [("PAYBATCH_FAILPOINT", "record_answer:20")];
    let first = run_file(&ws, &sim, "burst.csv", &flags, &full).await;
    let said = stderr_of(&first);
    assert_eq!(first.status.code(), Some(5), "{said}");
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{said}");
    assert!(errors[0].contains("disk is full"), "{said}");
    assert!(said.contains("run the same command again"), "{said}");

    let out = run_file(&ws, &sim, "burst.csv", &flags, &[]).await;
    let text = format!("{said}\nthen:\n{}", output_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    each_row_once(&sim, &ws, "burst.csv", &text);
}

/// Runs `file` on `sim` with `flags` until a run ends well (four runs at most); returns what
/// they said.
async fn until_it_ends_well(ws: &Workspace, sim: &SimHandle, file: &str, flags: &[&str]) -> String {
    let mut all = String::new();
    for i in 1..=4 {
        let out = run_file(ws, sim, file, flags, &[]).await;
        all.push_str(&format!(
            "run {i}: exit {:?}\n{}\n",
            out.status.code(),
            output_of(&out)
        ));
        if out.status.code() == Some(0) {
            return all;
        }
    }
    panic!("no run ended well:\n{all}");
}

/// A simulator within the published contract but unkind: answers late by 50 to 350 ms, 10 %
/// of them 5xx, 10 % 504s for orders it made, `drop_rate` of connections dropped after the
/// order was created, `burst_429_rate` of 429 bursts; orders processing 0.2 to 1.5 s.
async fn unkind_sim(drop_rate: f64, burst_429_rate: f64) -> SimHandle {
    let mut config = fast_config(None);
    config.faults = paybatch::sim::Faults {
        latency: Duration::from_millis(50),
        latency_jitter: Duration::from_millis(300),
        error_rate: 0.1,
        drop_rate,
        timeout_rate: 0.1,
        burst_429_rate,
        ..Default::default()
    };
    config.processing_min = Duration::from_millis(200);
    config.processing_max = Duration::from_millis(1500);
    start_sim(config).await
}

/// A service within the published contract but unkind, at 64 in flight: answers late by up to
/// 350 ms, 5xx answers, connections dropped after the order was created, 504s for orders it
/// made. Every row paid once, with no more than a run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unkind_service_at_64_in_flight_pays_each_row_once() {
    let ws = Workspace::new();
    let sim = unkind_sim(0.15, 0.0).await;
    rows_file(&ws, "h.csv", "EMP", 1..=300);
    let flags = [
        "--concurrency",
        "64",
        "--items-per-order",
        "2",
        "--poll-timeout",
        "60",
    ];
    let said = until_it_ends_well(&ws, &sim, "h.csv", &flags).await;
    let stats = sim.stats();
    assert!(stats.dropped > 0 && stats.timeouts > 0, "{stats:?}");
    each_row_once(&sim, &ws, "h.csv", &said);
}

/// Orders of 200 items (the most the service takes) at the default concurrency against 429
/// bursts, 5xx answers, dropped connections and 504s: every row paid once, and each finished
/// order read whole a few times at most (the polling does not ask again for what it has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_of_200_items_against_429s_and_lost_answers_pay_each_row_once() {
    let ws = Workspace::new();
    let sim = unkind_sim(0.2, 0.05).await;
    rows_file(&ws, "big.csv", "EMP", 1..=2000);
    let flags = ["--items-per-order", "200", "--poll-timeout", "60"];
    let said = until_it_ends_well(&ws, &sim, "big.csv", &flags).await;
    each_row_once(&sim, &ws, "big.csv", &said);
    let orders = sim.orders().len() as u64;
    assert_eq!(orders, 10, "{said}");
    // Each order read whole once when finished, again after an injected 5xx (10 %).
    let reads = requests(&sim, "GET /order/{id}");
    assert!(reads <= 3 * orders, "{reads} reads of 10 orders: {said}");
}

/// How often the polling asks: 20 orders that take 8 to 10 s each, looked at every half
/// second while they are young. The order list is read about once a look, each finished order
/// is read whole once; with answers that take 800 ms, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_polling_reads_each_finished_order_once_and_the_list_once_a_look() {
    for latency in [Duration::ZERO, Duration::from_millis(800)] {
        let ws = Workspace::new();
        let sim = slow_sim(latency, (Duration::from_secs(8), Duration::from_secs(10))).await;
        rows_file(&ws, "p.csv", "EMP", 1..=20);
        let started = Instant::now();
        let out = run_file(&ws, &sim, "p.csv", &["--items-per-order", "1"], &[]).await;
        let took = started.elapsed();
        let text = output_of(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let stats = sim.stats().requests;
        assert_eq!(requests(&sim, "GET /order/{id}"), 20, "{stats:?}");
        looks_within_cadence(&sim, took, &format!("{latency:?} an answer"));
    }
}

/// At most one read of the order list each half second of a run that took `took`, and a few
/// more (the read of the list before the run plans, a look that reads a second page); `what`
/// names the run on failure.
pub(super) fn looks_within_cadence(sim: &SimHandle, took: Duration, what: &str) {
    let looks = took.as_millis() as u64 / 500 + 5;
    let listed = requests(sim, "GET /order");
    let stats = sim.stats().requests;
    eprintln!("{what}: {listed} list reads in {took:?} (bound {looks})");
    assert!(
        listed <= looks,
        "{what}: {listed} list reads in {took:?}, at most {looks}: {stats:?}"
    );
}

/// A run of 250 orders (one burst within the service's minute) at 64 in flight: the process keeps a handful of threads from start to
/// end (the runtime's workers, the ledger's thread, a few more), never a thread for each send
/// waiting for the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_250_orders_at_64_in_flight_keeps_a_handful_of_threads() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(100);
    config.faults.latency_jitter = Duration::from_millis(200);
    config.processing_min = Duration::from_millis(500);
    config.processing_max = Duration::from_millis(2000);
    let sim = start_sim(config).await;
    rows_file(&ws, "t.csv", "EMP", 1..=500);
    let flags = ["--concurrency", "64", "--items-per-order", "2"];
    let (mut child, mut lines) = spawn_run(&ws, &sim, "t.csv", &flags, &[]);
    let pid = child.id().expect("pid");
    let mut most = 0;
    let mut samples = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the run ends within 120 s");
        if let Some(n) = threads_of(pid) {
            most = most.max(n);
            samples += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let text = rest_of(&mut lines, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(
        samples > 10,
        "{samples} samples of a run that sent 250 orders"
    );
    assert!(order_posts(&sim) >= 250, "{text}");
    assert!(
        most <= 16,
        "{most} threads at most ({samples} samples) in a run of 64 in flight:\n{text}"
    );
    each_row_once(&sim, &ws, "t.csv", &text);
}
