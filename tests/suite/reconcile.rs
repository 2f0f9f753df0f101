//! `paybatch reconcile` and the in-doubt window, end to end: the real binary, a real simulator on
//! a loopback port, a real SQLite ledger in a temporary directory. Every scenario ends with the
//! simulator's ground truth: each row of the batch has exactly one live service order.
//!
//! The scenarios are the ways a ledger and the service can disagree: the ledger was lost, an old
//! backup of it was restored (taken while the rows were planned, or while they were still
//! pending), an intent was marked as sent but never reached the service, and an intent has been
//! in doubt for longer than the in-doubt window.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::*;
use paybatch::ledger::{Ledger, OrderRecord, OrderState, RowRecord, RowState};
use paybatch::sim::SimHandle;

/// A workspace, a simulator and the arguments that point paybatch at both.
struct Setup {
    ws: Workspace,
    sim: SimHandle,
    key: PathBuf,
}

impl Setup {
    async fn new() -> Self {
        let ws = Workspace::new();
        let sim = start_sim(fast_config(None)).await;
        let key = ws.key_file();
        Setup { ws, sim, key }
    }

    fn service_args(&self) -> Vec<String> {
        vec![
            "--base-url".into(),
            self.sim.base_url(),
            "--api-key-file".into(),
            self.key.display().to_string(),
            "--ledger".into(),
            self.ws.ledger().display().to_string(),
        ]
    }

    async fn paybatch(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(self.service_args());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        paybatch_in(self.ws.dir.path(), &refs, envs).await
    }

    async fn run(&self, file: &str, extra: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut args = vec!["run", file];
        args.extend_from_slice(extra);
        self.paybatch(&args, envs).await
    }

    /// `reconcile --batch NAME --json EXTRA...`: the exit code and the JSON report.
    async fn reconcile(&self, batch: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
        self.reconcile_with(batch, extra, &[]).await
    }

    /// [`Setup::reconcile`] with environment variables.
    async fn reconcile_with(
        &self,
        batch: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> (Option<i32>, serde_json::Value) {
        let mut args = vec!["reconcile", "--batch", batch, "--json"];
        args.extend_from_slice(extra);
        let out = self.paybatch(&args, envs).await;
        let report = serde_json::from_str(stdout_of(&out).trim()).unwrap_or_else(|e| {
            panic!(
                "reconcile printed no JSON report ({e}): stdout {} stderr {}",
                stdout_of(&out),
                stderr_of(&out)
            )
        });
        (out.status.code(), report)
    }

    fn ledger(&self, batch: &str) -> (Vec<RowRecord>, Vec<OrderRecord>) {
        let ledger = Ledger::open(&self.ws.ledger()).expect("ledger opens");
        let b = ledger
            .batch(batch)
            .expect("ledger readable")
            .unwrap_or_else(|| panic!("batch {batch} is in the ledger"));
        (
            ledger.rows(b.id).expect("rows"),
            ledger.orders(b.id).expect("orders"),
        )
    }

    fn event_count(&self, batch: &str) -> usize {
        let ledger = Ledger::open(&self.ws.ledger()).expect("ledger opens");
        let b = ledger.batch(batch).expect("readable").expect("batch");
        ledger.events(b.id, 1_000_000).expect("events").len()
    }

    /// Copies the ledger and its -wal/-shm files (those that exist) into `dir`.
    fn backup_ledger(&self, dir: &str) -> PathBuf {
        let target = self.ws.path(dir);
        std::fs::create_dir_all(&target).expect("backup dir");
        for file in sqlite_files(&self.ws.ledger()) {
            if file.exists() {
                std::fs::copy(&file, target.join(file.file_name().expect("name"))).expect("copy");
            }
        }
        target
    }

    /// Replaces the ledger (and its -wal/-shm) with the copy in `backup`.
    fn restore_ledger(&self, backup: &Path) {
        self.delete_ledger();
        for file in sqlite_files(&self.ws.ledger()) {
            let saved = backup.join(file.file_name().expect("name"));
            if saved.exists() {
                std::fs::copy(&saved, &file).expect("restore");
            }
        }
    }

    fn delete_ledger(&self) {
        for file in sqlite_files(&self.ws.ledger()) {
            if file.exists() {
                std::fs::remove_file(&file).expect("remove ledger file");
            }
        }
    }
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v} is an array"))
        .iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| x.to_string())
        })
        .collect()
}

/// The rows as the ledger holds them: every one COMPLETED, with the service's order id (checked
/// against ground truth), item id and payout link.
fn assert_ledger_matches_service(
    setup: &Setup,
    batch: &str,
    live: &std::collections::BTreeMap<String, String>,
) {
    let (rows, orders) = setup.ledger(batch);
    assert_eq!(rows.len(), live.len(), "one ledger row per input row");
    let truth = setup.sim.orders();
    for row in &rows {
        assert_eq!(row.state, RowState::Completed, "row {}", row.reference);
        let order = orders
            .iter()
            .find(|o| Some(o.id) == row.order_id)
            .unwrap_or_else(|| panic!("row {} points to an order", row.reference));
        assert_eq!(
            order.service_order_id.as_deref(),
            Some(live[&row.reference].as_str()),
            "row {}: the ledger's order id is the service's",
            row.reference
        );
        let t = truth
            .iter()
            .find(|t| t.id == live[&row.reference])
            .expect("order in ground truth");
        let item = &t.items[row.item_index.unwrap_or(0) as usize];
        assert_eq!(row.item_id.as_deref(), Some(item.id.as_str()));
        assert_eq!(row.payout_url, item.payout_url, "row {}", row.reference);
    }
}

fn ground_truth(sim: &SimHandle) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = sim
        .orders()
        .into_iter()
        .map(|o| (o.id, o.status.as_str().to_string()))
        .collect();
    v.sort();
    v
}

const TWO_ROWS: &str = "reference,product_code,face_value,currency,email\n\
                        R-1,AMZ-US,25.00,USD,ann@example.com\n\
                        R-2,TESCO-GB,20,GBP,\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ledger_is_rebuilt_from_the_service_and_nothing_is_paid_again() {
    let s = Setup::new().await;
    let input = s.ws.copy(SAMPLE, "nov.csv");
    let refs = references(&input);
    let out = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    let truth = ground_truth(&s.sim);
    let posts = order_posts(&s.sim);

    s.delete_ledger();
    // Without the input file, reconcile cannot know the rows and says how to rebuild.
    let lost = s.paybatch(&["reconcile", "--batch", "nov"], &[]).await;
    assert_eq!(code(&lost), Some(2), "{}", stderr_of(&lost));
    assert!(
        stderr_of(&lost).contains("--rebuild"),
        "{}",
        stderr_of(&lost)
    );

    let (rc, report) = s.reconcile("nov", &["--rebuild", "nov.csv"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["found"], refs.len(), "{report}");
    let adopted: Vec<String> = report["adopted"]
        .as_array()
        .expect("adopted")
        .iter()
        .map(|pair| pair[0].as_str().expect("reference").to_string())
        .collect();
    let mut expected = refs.clone();
    expected.sort();
    assert_eq!(
        adopted, expected,
        "every row's order was found and recorded"
    );
    assert!(strings(&report["duplicates"]).is_empty(), "{report}");
    assert_ledger_matches_service(&s, "nov", &live);

    let again = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_eq!(
        order_posts(&s.sim),
        posts,
        "not a single order was sent again"
    );
    let result = read_csv(&s.ws.path("nov.result.csv"));
    let (status, order_id) = (col(&result[0], "status"), col(&result[0], "order_id"));
    let reference = col(&result[0], "reference");
    for row in &result[1..] {
        assert_eq!(row[status], "COMPLETED", "{row:?}");
        assert_eq!(row[order_id], live[&row[reference]], "{row:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_after_planning_is_reconciled_and_nothing_is_paid_twice() {
    let s = Setup::new().await;
    let input = s.ws.copy(SAMPLE, "nov.csv");
    let refs = references(&input);
    let stopped = s
        .run("nov.csv", &[], &[("PAYBATCH_FAILPOINT", "after_intent")])
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    assert!(s.sim.orders().is_empty(), "stopped before any send");
    let backup = s.backup_ledger("backup");

    let out = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    let truth = ground_truth(&s.sim);
    let posts = order_posts(&s.sim);

    s.restore_ledger(&backup);
    let (_, orders) = s.ledger("nov");
    assert_eq!(orders.len(), refs.len());
    assert!(
        orders
            .iter()
            .all(|o| o.state == OrderState::Intent && o.sends == 0),
        "the backup holds unsent intents: {orders:?}"
    );

    // A dry run reports the orders it would record, and changes nothing.
    let events = s.event_count("nov");
    let (rc, report) = s.reconcile("nov", &["--dry-run"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["adopted"].as_array().map(Vec::len), Some(refs.len()));
    assert_eq!(s.ledger("nov").1, orders, "a dry run changes no order");
    assert_eq!(s.event_count("nov"), events, "a dry run records nothing");

    let (rc, report) = s.reconcile("nov", &[]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["adopted"].as_array().map(Vec::len), Some(refs.len()));
    assert!(strings(&report["absent"]).is_empty(), "{report}");
    assert_ledger_matches_service(&s, "nov", &live);

    let again = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_eq!(order_posts(&s.sim), posts, "no order was sent again");
    assert_one_live_order_per_row(&s.sim, &refs);

    // A second reconcile finds the ledger in agreement.
    let (rc, report) = s.reconcile("nov", &[]).await;
    assert_eq!(rc, Some(0));
    assert!(strings(&report["adopted"]).is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_before_the_intents_were_committed_is_reported_and_nothing_is_paid_twice() {
    let s = Setup::new().await;
    let input = s.ws.copy(SAMPLE, "nov.csv");
    let refs = references(&input);
    // A run held to an approved digest reads the file in two passes and creates its batch
    // before the second (a new batch read in one pass is created with its intents, and a stop
    // before them leaves nothing at all).
    let digest = plan_digest(&s.ws, &s.sim.base_url(), "nov.csv").await;
    let stopped = s
        .run(
            "nov.csv",
            &["--expect-digest", &digest],
            &[("PAYBATCH_FAILPOINT", "before_intent")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    let backup = s.backup_ledger("backup");

    let out = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    let truth = ground_truth(&s.sim);

    // Rows are recorded together with their orders' intents: the backup has the batch only.
    s.restore_ledger(&backup);
    let (rows, orders) = s.ledger("nov");
    assert!(
        rows.is_empty() && orders.is_empty(),
        "the backup has no row and no order yet"
    );

    // Reconcile cannot attach the service's orders to rows the ledger does not have: it names
    // them for a person (exit 4) and changes nothing.
    let (rc, report) = s.reconcile("nov", &[]).await;
    assert_eq!(rc, Some(4), "{report}");
    let unknown: Vec<&str> = report["unknown_rows"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p[0].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(unknown.len(), refs.len(), "{report}");

    // The batch has sent nothing, and the service has orders of it this ledger does not know:
    // the next run refuses (another grouping would pay again) and says how to adopt them.
    let refused = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&refused), Some(3), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("--rebuild"),
        "{}",
        stderr_of(&refused)
    );
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    // Adopted with the file, the run finds everything paid: nobody is paid twice.
    let (rc, report) = s.reconcile("nov", &["--rebuild", "nov.csv"]).await;
    assert_eq!(rc, Some(0), "{report}");
    let again = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_one_live_order_per_row(&s.sim, &refs);
    assert_ledger_matches_service(&s, "nov", &live);

    let (rc, report) = s.reconcile("nov", &[]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert!(strings(&report["adopted"]).is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_restored_backup_without_reconcile_is_refused_until_its_orders_are_adopted() {
    let s = Setup::new().await;
    let input = s.ws.copy(SAMPLE, "nov.csv");
    let refs = references(&input);
    let stopped = s
        .run("nov.csv", &[], &[("PAYBATCH_FAILPOINT", "before_intent")])
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    let backup = s.backup_ledger("backup");
    let out = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    let truth = ground_truth(&s.sim);
    let replayed = s.sim.stats().replayed;

    // A run on the restored backup (no reconcile) does not send what the service has: the
    // batch has sent nothing here, and the service's orders of it are unknown to this ledger.
    s.restore_ledger(&backup);
    let refused = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&refused), Some(3), "{}", stderr_of(&refused));
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_eq!(s.sim.stats().replayed, replayed, "nothing sent again");
    let (rc, report) = s.reconcile("nov", &["--rebuild", "nov.csv"]).await;
    assert_eq!(rc, Some(0), "{report}");
    let again = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_ledger_matches_service(&s, "nov", &live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_the_service_never_received_is_reported_then_cleared_then_paid_once() {
    let s = Setup::new().await;
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    // One send at a time: the process dies after marking the first order as sent, before the
    // request leaves.
    let stopped = s
        .run(
            "two.csv",
            &["--concurrency", "1"],
            &[("PAYBATCH_FAILPOINT", "after_mark_sending:1")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    assert!(s.sim.orders().is_empty(), "the request never left");
    let (_, orders) = s.ledger("two");
    let in_doubt: Vec<&OrderRecord> = orders.iter().filter(|o| o.sends > 0).collect();
    assert_eq!(in_doubt.len(), 1, "{orders:?}");
    let key = in_doubt[0].idempotency_key.clone();
    assert_eq!(in_doubt[0].state, OrderState::Intent);

    let events = s.event_count("two");
    let (rc, report) = s.reconcile("two", &["--dry-run"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["found"], 0, "{report}");
    assert_eq!(strings(&report["absent"]), vec![key.clone()], "{report}");
    assert_eq!(s.ledger("two").1, orders, "a dry run changes nothing");
    assert_eq!(s.event_count("two"), events, "a dry run records nothing");
    // The same in words.
    let words = s
        .paybatch(&["reconcile", "--batch", "two", "--dry-run"], &[])
        .await;
    assert!(
        stdout_of(&words).contains(&format!("would clear in-doubt intent {key}")),
        "{}",
        stdout_of(&words)
    );
    assert_eq!(s.ledger("two").1, orders, "a dry run changes nothing");

    let (rc, report) = s.reconcile("two", &[]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["dry_run"], false);
    assert_eq!(strings(&report["absent"]), vec![key.clone()], "{report}");
    let (_, after) = s.ledger("two");
    let cleared = after
        .iter()
        .find(|o| o.idempotency_key == key)
        .expect("order");
    assert_eq!(
        (
            cleared.state,
            cleared.sends,
            cleared.first_sent_at.as_deref()
        ),
        (OrderState::Intent, 0, None),
        "cleared: no longer in doubt"
    );
    assert!(s.sim.orders().is_empty(), "reconcile sends nothing");

    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(s.sim.orders().len(), refs.len());
    assert_eq!(
        s.sim.stats().replayed,
        0,
        "each order was created by its first send"
    );
    assert_ledger_matches_service(&s, "two", &live);
}

/// Stops a run of TWO_ROWS after the first order was sent and created at the service, before its
/// answer was recorded: that order is in doubt.
async fn in_doubt_after_send(s: &Setup) -> String {
    let stopped = s
        .run(
            "two.csv",
            &["--concurrency", "1"],
            &[("PAYBATCH_FAILPOINT", "after_send:1")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    assert_eq!(
        s.sim.orders().len(),
        1,
        "the first order reached the service"
    );
    let (_, orders) = s.ledger("two");
    let in_doubt: Vec<&OrderRecord> = orders
        .iter()
        .filter(|o| o.state == OrderState::Intent && o.sends > 0)
        .collect();
    assert_eq!(in_doubt.len(), 1, "{orders:?}");
    in_doubt[0].idempotency_key.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_doubt_intent_older_than_the_window_is_looked_up_not_resent() {
    let s = Setup::new().await;
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    let key = in_doubt_after_send(&s).await;
    let created = s.sim.orders()[0].clone();
    assert_eq!(created.idempotency_key, key);
    let posts = order_posts(&s.sim);
    // 0.0001 h is 0.36 s: let the intent grow older than that.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let out = s.run("two.csv", &["--in-doubt-hours", "0.0001"], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(code(&out), Some(0), "{err}");
    assert!(
        err.contains("1 in-doubt orders are older than the in-doubt window: reconciling"),
        "{err}"
    );
    assert!(err.contains("reconciled: 1 found at the service"), "{err}");
    assert_eq!(
        order_posts(&s.sim),
        posts + 1,
        "only the other row's order was sent; the in-doubt one was never sent again"
    );
    assert_eq!(
        s.sim.stats().replayed,
        0,
        "nothing was re-sent with its key"
    );
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(
        live[&created.metadata["paybatch_rows"]], created.id,
        "the original order was recorded"
    );
    assert_ledger_matches_service(&s, "two", &live);
}

/// The contrast: inside the window the same in-doubt intent is re-sent with its key and bytes,
/// and the service answers from its idempotency memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_doubt_intent_inside_the_window_is_resent_with_its_key_and_replayed() {
    let s = Setup::new().await;
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    in_doubt_after_send(&s).await;
    let created = s.sim.orders()[0].clone();
    let out = s.run("two.csv", &[], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(code(&out), Some(0), "{err}");
    assert!(!err.contains("reconciling"), "{err}");
    assert_eq!(
        s.sim.stats().replayed,
        1,
        "the in-doubt order was re-sent once"
    );
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(live[&created.metadata["paybatch_rows"]], created.id);
    assert_ledger_matches_service(&s, "two", &live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_in_doubt_intent_the_service_never_created_is_cleared_and_paid_once() {
    let s = Setup::new().await;
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    let stopped = s
        .run(
            "two.csv",
            &["--concurrency", "1"],
            &[("PAYBATCH_FAILPOINT", "after_mark_sending:1")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    assert!(s.sim.orders().is_empty());
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let out = s.run("two.csv", &["--in-doubt-hours", "0.0001"], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(code(&out), Some(0), "{err}");
    assert!(
        err.contains("reconciled: 0 found at the service and recorded, 1 never created"),
        "{err}"
    );
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(s.sim.orders().len(), refs.len());
    assert_ledger_matches_service(&s, "two", &live);
}

/// An in-doubt intent whose order is still processing at the service (the list shows only its
/// id): the run's read of the list meets that order and holds back (exit 5), saying it may be
/// this ledger's own send in doubt; nothing is sent again. (An intent older than the in-doubt
/// window is reconciled only after that read, so the same holds for it.) Once the order has
/// finished the same command records it and pays the other row: each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_doubt_intent_whose_order_still_processes_holds_the_run_then_is_recorded() {
    let ws = Workspace::new();
    let state = Workspace::new();
    // Minutes: no wait of the run can outlast it by chance; the clock is moved past it below.
    let processing = Duration::from_secs(600);
    let config = |processing| paybatch::sim::SimConfig {
        list_metadata: false,
        processing_min: processing,
        processing_max: processing,
        ..fast_config(Some(state.sim_state()))
    };
    let sim = start_sim(config(processing)).await;
    let key = ws.key_file();
    let s = Setup { ws, sim, key };
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    let grouping = ["--items-per-order", "2", "--concurrency", "1"];
    let stopped = s
        .run(
            "two.csv",
            &grouping,
            &[("PAYBATCH_FAILPOINT", "after_send:1")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    assert_eq!(s.sim.orders().len(), 1, "the order reached the service");

    let flags = [&grouping[..], &["--poll-timeout", "1"]].concat();
    let out = s.run("two.csv", &flags, &[]).await;
    let err = stderr_of(&out);
    assert!(
        err.contains("they may be this ledger's own (1 of its sends"),
        "{err}"
    );
    assert_eq!(code(&out), Some(5), "{err}");
    assert_eq!(s.sim.orders().len(), 1, "nothing sent again: {err}");

    s.sim
        .advance_clock(processing + Duration::from_secs(1))
        .expect("the simulator's clock moves");
    until_orders_finish(&s.sim, Duration::from_secs(10)).await;
    // The order the next run sends processes as usual.
    let Setup { ws, sim, key } = s;
    let sim = restart_sim(sim, config(Duration::from_millis(200))).await;
    let s = Setup { ws, sim, key };
    let out = s.run("two.csv", &grouping, &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    // The in-doubt order recorded as it was made, and the other row's order sent once.
    assert_eq!(s.sim.orders().len(), refs.len(), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_ledger_matches_service(&s, "two", &live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_doubt_window_must_be_a_number_of_hours() {
    let s = Setup::new().await;
    s.ws.write("two.csv", TWO_ROWS);
    for bad in ["-1", "NaN", "inf", "a day", "100000"] {
        let flag = format!("--in-doubt-hours={bad}");
        let out = s.run("two.csv", &[&flag], &[]).await;
        let err = stderr_of(&out);
        assert_eq!(code(&out), Some(2), "--in-doubt-hours {bad}: {err}");
        assert!(err.contains("--in-doubt-hours"), "{bad}: {err}");
    }
    assert!(s.sim.orders().is_empty());
    assert!(
        !s.ws.ledger().exists(),
        "refused before the ledger was touched"
    );
}

/// A row whose first order failed and whose retry (attempt 2) was paid: after the ledger is lost,
/// the rebuilt ledger must show the paid attempt, not the failed one. Otherwise the row reads
/// FAILED although it was paid, and a `retry` after the service's 30-day idempotency memory
/// would pay it a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_ledger_records_the_latest_attempt_of_a_retried_row() {
    let ws = Workspace::new();
    let state = ws.sim_state();
    let mut failing = fast_config(Some(state.clone()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let addr = sim.addr();
    let s = Setup {
        key: ws.key_file(),
        ws,
        sim,
    };
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(4), "{}", stderr_of(&out));
    let Setup { ws, sim, key } = s;
    sim.shutdown().await;
    // The same simulator (state and address), now without failures.
    let sim = paybatch::sim::start(fast_config(Some(state)), addr)
        .await
        .expect("simulator restarts on the same address");
    let s = Setup { ws, sim, key };
    let retry = s.paybatch(&["retry", "--batch", "two"], &[]).await;
    assert_eq!(code(&retry), Some(0), "{}", stderr_of(&retry));
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(s.sim.orders().len(), 4, "a failed and a paid order per row");
    let truth = ground_truth(&s.sim);
    let posts = order_posts(&s.sim);

    s.delete_ledger();
    let (rc, report) = s.reconcile("two", &["--rebuild", "two.csv"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_ledger_matches_service(&s, "two", &live);
    let (rows, _) = s.ledger("two");
    assert!(
        rows.iter().all(|r| r.attempt == 2),
        "the rows are at their paid attempt: {rows:?}"
    );

    let again = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    let retry = s.paybatch(&["retry", "--batch", "two"], &[]).await;
    assert!(
        stderr_of(&retry).contains("no FAILED or REJECTED rows"),
        "{}",
        stderr_of(&retry)
    );
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_eq!(order_posts(&s.sim), posts, "no order was sent again");
}

/// A simulator with `config` on `addr` (a batch is bound to its service address).
async fn sim_at(config: paybatch::sim::SimConfig, addr: std::net::SocketAddr) -> SimHandle {
    paybatch::sim::start(config, addr)
        .await
        .expect("simulator starts on the address")
}

/// Both rows fail at attempt 1 (the backup taken at `backup_point`, or after the failing run when
/// `None`), then are retried and paid at attempt 2 on the same simulator; then the backup is
/// restored. Returns the setup and the rows' live order ids.
async fn backup_from_before_a_retry(
    backup_point: Option<&str>,
) -> (Setup, std::collections::BTreeMap<String, String>) {
    let ws = Workspace::new();
    let state = ws.sim_state();
    let mut failing = fast_config(Some(state.clone()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let addr = sim.addr();
    let s = Setup {
        key: ws.key_file(),
        ws,
        sim,
    };
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);
    let early = match backup_point {
        Some(point) => {
            let stopped = s
                .run("two.csv", &[], &[("PAYBATCH_FAILPOINT", point)])
                .await;
            assert_eq!(code(&stopped), None, "{}", stderr_of(&stopped));
            Some(s.backup_ledger("backup-early"))
        }
        None => None,
    };
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(4), "{}", stderr_of(&out));
    let backup = early.unwrap_or_else(|| s.backup_ledger("backup"));
    let Setup { ws, sim, key } = s;
    sim.shutdown().await;
    let sim = sim_at(fast_config(Some(state)), addr).await;
    let s = Setup { ws, sim, key };
    let retry = s.paybatch(&["retry", "--batch", "two"], &[]).await;
    assert_eq!(code(&retry), Some(0), "{}", stderr_of(&retry));
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(s.sim.orders().len(), 4, "a failed and a paid order per row");
    s.restore_ledger(&backup);
    (s, live)
}

/// After reconcile, the restored ledger shows what the service has, the next run pays nothing
/// and there is nothing left to retry.
async fn assert_caught_up(s: &Setup, live: &std::collections::BTreeMap<String, String>) {
    let truth = ground_truth(&s.sim);
    let posts = order_posts(&s.sim);
    let (rc, report) = s.reconcile("two", &[]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_ledger_matches_service(s, "two", live);
    let (rows, _) = s.ledger("two");
    assert!(rows.iter().all(|r| r.attempt == 2), "{rows:?}");
    let again = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    let retry = s.paybatch(&["retry", "--batch", "two"], &[]).await;
    assert!(
        stderr_of(&retry).contains("no FAILED or REJECTED rows"),
        "{}",
        stderr_of(&retry)
    );
    assert_eq!(ground_truth(&s.sim), truth, "nothing new at the service");
    assert_eq!(order_posts(&s.sim), posts, "no order was sent again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_from_before_a_retry_catches_up_with_the_paid_attempt() {
    let (s, live) = backup_from_before_a_retry(None).await;
    let (rows, _) = s.ledger("two");
    assert!(
        rows.iter()
            .all(|r| r.state == RowState::Failed && r.attempt == 1),
        "the backup has the failed first attempt: {rows:?}"
    );
    // A dry run already tells the whole story.
    let (rc, report) = s.reconcile("two", &["--dry-run"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(
        report["adopted"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
    assert_eq!(s.ledger("two").0, rows, "a dry run changes nothing");
    assert_caught_up(&s, &live).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_from_before_the_first_send_catches_up_through_the_failure_and_the_retry() {
    let (s, live) = backup_from_before_a_retry(Some("after_intent")).await;
    let (_, orders) = s.ledger("two");
    assert!(
        orders
            .iter()
            .all(|o| o.state == OrderState::Intent && o.sends == 0),
        "the backup has the first attempt's intents: {orders:?}"
    );
    let (rc, report) = s.reconcile("two", &["--dry-run"]).await;
    assert_eq!(rc, Some(0), "{report}");
    // Each row: its failed first order on its intent, then its paid retry.
    assert_eq!(
        report["adopted"].as_array().map(Vec::len),
        Some(4),
        "{report}"
    );
    assert_caught_up(&s, &live).await;
}

/// The row was refused at attempt 1 (no order at the service), retried and paid at attempt 2;
/// a backup from before the first send is restored, and the service no longer remembers the
/// first attempt's key (its idempotency memory lasts 30 days; here: a new service state).
/// The first attempt's intent must never be sent: it would pay the row a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_superseded_by_a_paid_retry_is_never_sent() {
    let ws = Workspace::new();
    let mut poor = fast_config(Some(ws.path("sim-a.db")));
    poor.balances = vec![("USD".to_string(), "1.00".parse().expect("decimal"))];
    // As the playground: no estimate, so the converted row's price is unknown before it is
    // ordered (the pre-flight only warns) and the service refuses it.
    poor.estimates = false;
    let sim = start_sim(poor).await;
    let addr = sim.addr();
    let s = Setup {
        key: ws.key_file(),
        ws,
        sim,
    };
    // A yen product paid from the dollar balance: converted at order time, with no estimate and
    // no earlier conversion in the ledger, so the balance pre-flight does not stop it and the
    // service refuses it.
    let input = s.ws.write(
        "two.csv",
        "reference,product_code,face_value,currency,payment_currency\nY-1,UBER-JP,3000,JPY,USD\n",
    );
    let refs = references(&input);
    let stopped = s
        .run("two.csv", &[], &[("PAYBATCH_FAILPOINT", "after_intent")])
        .await;
    assert_eq!(code(&stopped), None, "{}", stderr_of(&stopped));
    let backup = s.backup_ledger("backup");
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(4), "{}", stderr_of(&out));
    assert!(s.sim.orders().is_empty(), "refused: no order");
    let (rows, _) = s.ledger("two");
    assert_eq!(rows[0].state, RowState::Rejected, "{rows:?}");
    let Setup { ws, sim, key } = s;
    sim.shutdown().await;
    let sim = sim_at(fast_config(Some(ws.path("sim-b.db"))), addr).await;
    let s = Setup { ws, sim, key };
    let retry = s.paybatch(&["retry", "--batch", "two"], &[]).await;
    assert_eq!(code(&retry), Some(0), "{}", stderr_of(&retry));
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);

    s.restore_ledger(&backup);
    let (rc, report) = s.reconcile("two", &[]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(
        report["superseded"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let (rows, orders) = s.ledger("two");
    assert!(
        orders
            .iter()
            .any(|o| o.state == OrderState::Rejected && o.sends == 0),
        "the first attempt's intent is closed unsent: {orders:?}"
    );
    assert_eq!(rows[0].attempt, 2);
    assert_ledger_matches_service(&s, "two", &live);
    let again = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(s.sim.orders().len(), 1, "the row was paid once");
}

/// A batch run with `--payment-currency`: rebuilt without it, its yen row reads as invalid, and
/// the order that paid it is reported (exit 4), not silently left aside; rebuilt with it, the
/// row is recorded as paid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_reports_paid_rows_it_cannot_read_as_they_were_paid() {
    let s = Setup::new().await;
    let input = s.ws.write(
        "yen.csv",
        "reference,product_code,face_value,currency\nY-1,UBER-JP,3000,JPY\nU-1,AMZ-US,25.00,USD\n",
    );
    let refs = references(&input);
    let out = s.run("yen.csv", &["--payment-currency", "USD"], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    let posts = order_posts(&s.sim);

    s.delete_ledger();
    let (rc, report) = s.reconcile("yen", &["--rebuild", "yen.csv"]).await;
    assert_eq!(rc, Some(4), "{report}");
    assert_eq!(
        report["unattached"],
        serde_json::json!([["Y-1", live["Y-1"]]]),
        "{report}"
    );
    let words = s.paybatch(&["reconcile", "--batch", "yen"], &[]).await;
    assert_eq!(code(&words), Some(4));
    assert!(
        stdout_of(&words).contains(&format!("ALERT: order {} pays row Y-1", live["Y-1"])),
        "{}",
        stdout_of(&words)
    );

    s.delete_ledger();
    let (rc, report) = s
        .reconcile(
            "yen",
            &["--rebuild", "yen.csv", "--payment-currency", "USD"],
        )
        .await;
    assert_eq!(rc, Some(0), "{report}");
    assert_ledger_matches_service(&s, "yen", &live);
    let again = s.run("yen.csv", &["--payment-currency", "USD"], &[]).await;
    assert_eq!(code(&again), Some(0), "{}", stderr_of(&again));
    assert_eq!(order_posts(&s.sim), posts, "no order was sent again");
}

/// The real service keeps every answer under its idempotency key, a server error too, and gives
/// it back for that key and body. An order whose first send got such an answer can never be
/// created with its key: re-sent inside the in-doubt window it gets the same 500 again; once it
/// is older than the window, reconciliation finds no order for it, gives the key up and marks its
/// rows REJECTED; `retry` then sends them under new keys, and each row is paid exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_answered_with_a_kept_server_error_is_given_up_and_its_rows_retried_under_new_keys() {
    let ws = Workspace::new();
    let kept_500s = paybatch::sim::SimConfig {
        faults: paybatch::sim::Faults {
            stored_error_rate: 1.0,
            ..Default::default()
        },
        ..fast_config(Some(ws.sim_state()))
    };
    let sim = start_sim(kept_500s).await;
    let key = ws.key_file();
    let s = Setup { ws, sim, key };
    let input = s.ws.write("two.csv", TWO_ROWS);
    let refs = references(&input);

    let out = s.run("two.csv", &["--send-tries", "2"], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(code(&out), Some(5), "{err}");
    assert!(err.contains("got no usable answer after 2 tries"), "{err}");
    assert!(err.contains("gives the key up"), "what happens next: {err}");
    assert!(s.sim.orders().is_empty());
    assert_eq!(s.sim.stats().stored_errors, 2, "each key got its 500 once");
    let (_, first) = s.ledger("two");
    let keys: Vec<String> = first.iter().map(|o| o.idempotency_key.clone()).collect();
    assert!(
        first
            .iter()
            .all(|o| o.state == OrderState::Intent && o.last_http_status == Some(500)),
        "{first:?}"
    );

    // The fault is gone, but the service still holds the 500 under each key.
    let Setup { ws, sim, key } = s;
    let sim = restart_sim(sim, fast_config(Some(ws.sim_state()))).await;
    let s = Setup { ws, sim, key };
    let out = s.run("two.csv", &["--send-tries", "2"], &[]).await;
    assert_eq!(code(&out), Some(5), "{}", stderr_of(&out));
    assert!(
        s.sim.orders().is_empty(),
        "the same keys can create nothing"
    );
    assert_eq!(s.sim.stats().replayed, 4, "each send got the kept 500 back");

    // Inside the window reconciliation would send them again; past it, and once their last
    // send has settled (10 minutes, here 1 s), it gives the keys up.
    let settle = [("PAYBATCH_SETTLE_SECONDS", "1")];
    let (rc, report) = s.reconcile_with("two", &["--dry-run"], &settle).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(strings(&report["absent"]).len(), 2, "{report}");
    assert!(strings(&report["retired"]).is_empty(), "{report}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let past_window = ["--dry-run", "--in-doubt-hours", "0.0001"];
    let (rc, report) = s.reconcile("two", &past_window).await;
    assert_eq!(rc, Some(0), "{report}");
    assert!(
        strings(&report["retired"]).is_empty(),
        "a short window does not shorten the settling time: {report}"
    );
    let (rc, report) = s.reconcile_with("two", &past_window, &settle).await;
    assert_eq!(rc, Some(0), "{report}");
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(strings(&report["retired"]), sorted, "{report}");
    assert!(strings(&report["absent"]).is_empty(), "{report}");
    assert_eq!(s.ledger("two").1.len(), 2, "a dry run changes nothing");

    let posts = order_posts(&s.sim);
    let out = s
        .run("two.csv", &["--in-doubt-hours", "0.0001"], &settle)
        .await;
    let err = stderr_of(&out);
    assert_eq!(code(&out), Some(4), "rows REJECTED: {err}");
    assert!(err.contains("their rows are REJECTED"), "{err}");
    assert!(err.contains("paybatch retry --batch two"), "{err}");
    assert_eq!(order_posts(&s.sim), posts, "a spent key is not sent again");
    let (rows, orders) = s.ledger("two");
    assert!(
        rows.iter().all(|r| r.state == RowState::Rejected
            && r.error_type.as_deref() == Some("idempotency_key_spent")),
        "{rows:?}"
    );
    assert!(orders.iter().all(|o| o.state == OrderState::Rejected));

    let retried = retry_batch(&s.ws, "two").await;
    assert_eq!(code(&retried), Some(0), "{}", stderr_of(&retried));
    let out = s.run("two.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_eq!(
        s.sim.orders().len(),
        refs.len(),
        "one order per row, no more"
    );
    assert!(
        s.sim
            .orders()
            .iter()
            .all(|o| !keys.contains(&o.idempotency_key)),
        "created under new keys"
    );
    assert_ledger_matches_service(&s, "two", &live);
}

/// Reconciliation reads the service's orders again when a read fails for a moment (a 5xx), as a
/// run does: a rebuild through a service that answers some reads with 500 or 503 still finds and
/// records every order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_reads_again_through_passing_server_errors() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(Some(ws.sim_state()))).await;
    let key = ws.key_file();
    let s = Setup { ws, sim, key };
    let input = s.ws.copy(SAMPLE, "nov.csv");
    let refs = references(&input);
    let out = s.run("nov.csv", &[], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    s.delete_ledger();

    let Setup { ws, sim, key } = s;
    let flaky = paybatch::sim::SimConfig {
        seed: 11,
        faults: paybatch::sim::Faults {
            error_rate: 0.3,
            ..Default::default()
        },
        ..fast_config(Some(ws.sim_state()))
    };
    let sim = restart_sim(sim, flaky).await;
    let s = Setup { ws, sim, key };
    let (rc, report) = s.reconcile("nov", &["--rebuild", "nov.csv"]).await;
    assert_eq!(rc, Some(0), "{report}");
    assert_eq!(report["adopted"].as_array().map(Vec::len), Some(refs.len()));
    assert!(
        s.sim.stats().injected_5xx > 0,
        "the service did fail some reads: {:?}",
        s.sim.stats()
    );
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_ledger_matches_service(&s, "nov", &live);
}

/// A key is given up only when the service's order list says for sure that none of its rows was
/// ordered. The interface's order list does not carry `metadata`, and an order of several rows
/// still PROCESSING names only its first row: reconciliation cannot read its rows, so it gives no
/// key up, even one whose last answer was a server error long ago; the same key is sent again
/// and the service's own order is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_given_up_while_an_order_of_the_batch_does_not_say_its_rows() {
    let ws = Workspace::new();
    let config = paybatch::sim::SimConfig {
        list_metadata: false,
        processing_min: Duration::from_secs(6),
        processing_max: Duration::from_secs(6),
        ..fast_config(None)
    };
    let sim = start_sim(config).await;
    let key = ws.key_file();
    let s = Setup { ws, sim, key };
    let input = s.ws.write(
        "two.csv",
        "reference,product_code,face_value,currency,email\n\
         R-1,AMZ-US,25.00,USD,ann@example.com\n\
         R-2,STEAM-US,10,USD,\n",
    );
    let refs = references(&input);
    let stopped = s
        .run(
            "two.csv",
            &["--items-per-order", "2", "--concurrency", "1"],
            &[("PAYBATCH_FAILPOINT", "after_send:1")],
        )
        .await;
    assert_eq!(code(&stopped), None, "stopped: {}", stderr_of(&stopped));
    let created = s.sim.orders();
    assert_eq!(
        created.len(),
        1,
        "one order of two rows reached the service"
    );
    // As if its last send, long ago, had got a server error.
    let db = rusqlite::Connection::open(s.ws.ledger()).expect("ledger");
    let changed = db
        .execute(
            "UPDATE orders SET last_http_status = 503, first_sent_at = '2026-01-01T00:00:00.000Z',
                    last_sent_at = '2026-01-01T00:00:00.000Z' WHERE state = 'INTENT'",
            [],
        )
        .expect("update");
    assert_eq!(changed, 1);
    drop(db);

    let settle = [("PAYBATCH_SETTLE_SECONDS", "1")];
    let (rc, report) = s.reconcile_with("two", &["--dry-run"], &settle).await;
    // Incomplete: the intent stays in doubt until the order can be attributed.
    assert_eq!(rc, Some(5), "{report}");
    assert!(strings(&report["retired"]).is_empty(), "{report}");
    assert_eq!(
        strings(&report["unattributed"]),
        vec![created[0].id.clone()],
        "{report}"
    );
    // The order it cannot attribute may be the intent's own: the doubt is kept, not cleared.
    assert!(strings(&report["absent"]).is_empty(), "{report}");
    assert_eq!(
        strings(&report["kept_in_doubt"]),
        vec![created[0].idempotency_key.clone()]
    );
    let words = s
        .paybatch(&["reconcile", "--batch", "two", "--dry-run"], &settle)
        .await;
    let text = stdout_of(&words);
    assert!(text.contains("does not say its rows yet"), "{text}");
    assert!(!text.contains("agrees"), "{text}");

    let out = s.run("two.csv", &["--items-per-order", "2"], &settle).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    assert_eq!(s.sim.orders().len(), 1, "the same order, never a second");
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_ledger_matches_service(&s, "two", &live);
}

/// A ledger lost while orders of several rows were still processing, rebuilt from the file:
/// the service shows those orders as `{id, status, message}` only, so the rebuild cannot tell
/// which rows they hold. Nothing is planned for the batch until it can (a run with another
/// grouping would otherwise pay those rows again under other keys); once the orders finish,
/// reconciliation attaches them and the run pays only the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_while_orders_are_processing_plans_nothing_until_they_can_be_told() {
    let ws = Workspace::new();
    let config = paybatch::sim::SimConfig {
        processing_min: Duration::from_secs(5),
        processing_max: Duration::from_secs(5),
        ..fast_config(None)
    };
    let sim = start_sim(config).await;
    let key = ws.key_file();
    let s = Setup { ws, sim, key };
    let mut csv = String::from("reference,product_code,face_value,currency\n");
    for i in 1..=6 {
        csv.push_str(&format!("R-{i},AMZ-US,{i}0.00,USD\n"));
    }
    let input = s.ws.write("six.csv", &csv);
    let refs = references(&input);
    // Two orders of three rows reach the service; the run dies before it records anything more.
    let stopped = s
        .run(
            "six.csv",
            &["--items-per-order", "3", "--concurrency", "1"],
            &[("PAYBATCH_FAILPOINT", "after_send:2")],
        )
        .await;
    assert_eq!(code(&stopped), None, "{}", stderr_of(&stopped));
    assert_eq!(s.sim.orders().len(), 2);
    s.delete_ledger();

    let (rc, report) = s.reconcile("six", &["--rebuild", "six.csv"]).await;
    assert_eq!(
        rc,
        Some(5),
        "the rebuild cannot tell the rows yet: {report}"
    );
    assert_eq!(strings(&report["unattributed"]).len(), 2, "{report}");
    // Another grouping would give other keys: nothing is planned or sent.
    let posts = order_posts(&s.sim);
    let held = s.run("six.csv", &["--items-per-order", "2"], &[]).await;
    assert_eq!(code(&held), Some(5), "{}", stderr_of(&held));
    assert!(
        stderr_of(&held).contains("nothing was planned"),
        "{}",
        stderr_of(&held)
    );
    assert_eq!(order_posts(&s.sim), posts, "nothing was sent");

    // Once the orders finish, the next run reconciles, attaches them and finishes.
    until_orders_finish(&s.sim, Duration::from_secs(30)).await;
    let out = s.run("six.csv", &["--items-per-order", "2"], &[]).await;
    assert_eq!(code(&out), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        order_posts(&s.sim),
        posts,
        "every row was in the two orders"
    );
    let live = assert_one_live_order_per_row(&s.sim, &refs);
    assert_ledger_matches_service(&s, "six", &live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_an_order_in_doubt_too_long_by_its_in_doubt_hours() {
    let s = Setup::new().await;
    s.ws.write("two.csv", TWO_ROWS);
    in_doubt_after_send(&s).await;
    // Older than 0.0001 hours (0.36 s), far younger than the default 24.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let default = s.paybatch(&["status", "--batch", "two"], &[]).await;
    assert_eq!(code(&default), Some(0), "{}", stderr_of(&default));
    assert!(
        !stdout_of(&default).contains("-- reconcile"),
        "{}",
        stdout_of(&default)
    );
    let short = s
        .paybatch(
            &["status", "--batch", "two", "--in-doubt-hours", "0.0001"],
            &[],
        )
        .await;
    let text = stdout_of(&short);
    assert_eq!(code(&short), Some(0), "{}", stderr_of(&short));
    assert!(text.contains("-- reconcile"), "{text}");
    assert!(
        text.contains(
            "orders have been in doubt for more than 0.0001 hours: paybatch reconcile --batch two"
        ),
        "{text}"
    );
}
