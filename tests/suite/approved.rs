//! The plans `validate` approved, kept in the ledger: a run refusing a file whose digest is not
//! the approved one (`--expect-digest`) says which rows were added, removed and changed, field
//! by field, and which other parts of the plan changed (batch, repeats decision); a digest this
//! ledger did not keep is said to be unknown; a plan that cannot be kept still has its digest
//! printed; an older ledger keeps plans once migrated; the plans kept per batch are bounded.
//! Through the real binary, against a real simulator on a loopback port and a real SQLite ledger
//! in a temporary directory.

use std::path::Path;
use std::process::Output;

use crate::support::*;
use crate::support::{stderr_of as stderr, stdout_of as stdout};
use paybatch::batch::lock::LedgerLock;
use paybatch::ledger::Ledger;
use paybatch::ledger::approved::{KEPT_PER_BATCH, NewApprovedPlan};
use paybatch::sim::SimHandle;

const HEADER: &str = "reference,product_code,face_value,currency,email\n";

/// `n` valid rows `R-001`..: 10 USD of AMZ-US each, by email; `edit` may change a row's cells.
fn rows(range: std::ops::RangeInclusive<usize>, edit: impl Fn(usize, &mut [String; 5])) -> String {
    let mut text = HEADER.to_string();
    for i in range {
        let mut cells = [
            format!("R-{i:03}"),
            "AMZ-US".to_string(),
            "10".to_string(),
            "USD".to_string(),
            format!("r{i}@example.com"),
        ];
        edit(i, &mut cells);
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    text
}

async fn against(ws: &Workspace, sim: &SimHandle, args: &[&str]) -> Output {
    against_url(ws, &sim.base_url(), args).await
}

/// The digest `validate` printed.
fn digest_of(out: &Output) -> String {
    let text = stdout(out);
    text.lines()
        .find_map(|l| l.strip_prefix("plan digest: sha256:"))
        .map(|hex| format!("sha256:{}", hex.trim()))
        .unwrap_or_else(|| panic!("no digest in: {text}{}", stderr(out)))
}

fn batches(ledger: &Path) -> usize {
    Ledger::open(ledger)
        .expect("ledger")
        .batches()
        .expect("batches")
        .len()
}

/// `run FILE --expect-digest DIGEST` with `extra`: refused (exit 3), nothing sent, no batch;
/// its error output.
async fn refused(ws: &Workspace, sim: &SimHandle, digest: &str, extra: &[&str]) -> String {
    let batches_before = batches(&ws.ledger());
    let mut args = vec!["run", "f.csv", "--expect-digest", digest];
    args.extend_from_slice(extra);
    let out = against(ws, sim, &args).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no longer matches the approved plan"), "{err}");
    assert!(err.contains("nothing was submitted"), "{err}");
    assert!(sim.orders().is_empty(), "{err}");
    assert_eq!(batches(&ws.ledger()), batches_before, "{err}");
    err
}

/// The lines of `err` from the one that starts with `head` up to the next that is not indented
/// deeper than four spaces.
fn section(err: &str, head: &str) -> Vec<String> {
    let mut lines = err.lines().skip_while(|l| !l.starts_with(head));
    let Some(first) = lines.next() else {
        return Vec::new();
    };
    let mut out = vec![first.to_string()];
    out.extend(
        lines
            .take_while(|l| l.starts_with("    "))
            .map(|l| l.trim().to_string()),
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_plan_names_the_rows_added_removed_and_changed() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("f.csv", &rows(1..=40, |_, _| {}));
    let approved = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);

    // One amount changed.
    ws.write(
        "f.csv",
        &rows(1..=40, |i, c| {
            if i == 5 {
                c[2] = "25.00".into();
            }
        }),
    );
    let err = refused(&ws, &sim, &approved, &[]).await;
    assert!(
        err.contains("what changed since that plan was approved"),
        "{err}"
    );
    assert_eq!(
        section(&err, "  1 row changed:"),
        [
            "  1 row changed:",
            "`R-005` (line 6): face_value 10 -> 25.00"
        ],
        "{err}"
    );
    assert!(!err.contains("added") && !err.contains("removed"), "{err}");

    // A row added at the end, and one taken out (the lines after it move: not a change).
    ws.write("f.csv", &rows(1..=41, |_, _| {}));
    let err = refused(&ws, &sim, &approved, &[]).await;
    assert_eq!(
        section(&err, "  1 row added:"),
        ["  1 row added:", "`R-041` (line 42)"],
        "{err}"
    );
    assert!(
        !err.contains("removed") && !err.contains("changed:"),
        "{err}"
    );
    let without_10 = rows(1..=40, |_, _| {}).replace("R-010,AMZ-US,10,USD,r10@example.com\n", "");
    ws.write("f.csv", &without_10);
    let err = refused(&ws, &sim, &approved, &[]).await;
    assert_eq!(
        section(&err, "  1 row removed:"),
        ["  1 row removed:", "`R-010` (was line 11)"],
        "{err}"
    );
    assert!(!err.contains("added") && !err.contains("changed:"), "{err}");

    // 30 rows changed (their recipients' addresses, named but not shown), one of them also in
    // its product: the first ten named, then the count.
    ws.write(
        "f.csv",
        &rows(1..=40, |i, c| {
            if i <= 30 {
                c[4] = format!("someone{i}@example.org");
            }
            if i == 2 {
                c[1] = "STEAM-US".into();
            }
        }),
    );
    let err = refused(&ws, &sim, &approved, &[]).await;
    let mut expected = vec!["  30 rows changed:".to_string()];
    for i in 1..=10 {
        expected.push(match i {
            2 => "`R-002` (line 3): product_code AMZ-US -> STEAM-US, email".to_string(),
            _ => format!("`R-{i:03}` (line {}): email", i + 1),
        });
    }
    expected.push("and 20 more".into());
    assert_eq!(section(&err, "  30 rows changed:"), expected, "{err}");
    assert!(
        !err.contains("example.org"),
        "addresses are not shown: {err}"
    );

    // The approved file again: paid.
    ws.write("f.csv", &rows(1..=40, |_, _| {}));
    let out = against(&ws, &sim, &["run", "f.csv", "--expect-digest", &approved]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!sim.orders().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_this_ledger_did_not_keep_is_said_to_be_unknown() {
    let sim = start_sim(fast_config(None)).await;
    // Approved on another machine (another ledger).
    let elsewhere = Workspace::new();
    elsewhere.write("f.csv", &rows(1..=5, |_, _| {}));
    let approved = digest_of(&against(&elsewhere, &sim, &["validate", "f.csv"]).await);

    let ws = Workspace::new();
    ws.write(
        "f.csv",
        &rows(1..=5, |i, c| {
            if i == 1 {
                c[2] = "11".into();
            }
        }),
    );
    let err = refused(&ws, &sim, &approved, &[]).await;
    assert!(
        err.contains(&format!("{approved} is not a plan this ledger kept")),
        "{err}"
    );
    assert!(err.contains("what changed cannot be said here"), "{err}");
    assert!(err.contains("the file gives sha256:"), "{err}");
    assert!(!err.contains("changed:"), "{err}");
}

/// The batch and the decision on repeats are part of the plan: said in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_plan_names_another_batch_and_another_decision_on_repeats() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("f.csv", &rows(1..=3, |_, _| {}));
    let approved = digest_of(&against(&ws, &sim, &["validate", "f.csv", "--batch", "nov"]).await);
    let err = refused(&ws, &sim, &approved, &["--batch", "dec"]).await;
    assert!(
        err.contains("it was approved for batch nov in environment custom; this run is batch dec in environment custom"),
        "{err}"
    );
    assert!(!err.contains("no row differs"), "{err}");

    // Paid as batch nov; batch dec repeats its rows: approved skipping them, run allowing them.
    let out = against(&ws, &sim, &["run", "f.csv", "--batch", "nov"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let paid = sim.orders().len();
    let approved = digest_of(
        &against(
            &ws,
            &sim,
            &["validate", "f.csv", "--batch", "dec", "--skip-repeats"],
        )
        .await,
    );
    let out = against(
        &ws,
        &sim,
        &[
            "run",
            "f.csv",
            "--batch",
            "dec",
            "--allow-repeats",
            "--expect-digest",
            &approved,
        ],
    )
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            "the decision on repeats: approved with --skip-repeats, this run has --allow-repeats"
        ),
        "{err}"
    );
    assert!(
        !err.contains("rows changed") && !err.contains("added"),
        "{err}"
    );
    assert_eq!(sim.orders().len(), paid);
}

/// A plan `validate` cannot keep (another paybatch holds the ledger, or the ledger refuses the
/// write) still has its digest printed, with a warning; a run then says it does not know it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_that_cannot_be_kept_still_has_its_digest() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("f.csv", &rows(1..=3, |_, _| {}));
    let kept = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);

    ws.write("f.csv", &rows(1..=4, |_, _| {}));
    let lock = LedgerLock::acquire(&ws.ledger()).expect("lock");
    let out = against(&ws, &sim, &["validate", "f.csv"]).await;
    drop(lock);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let not_kept = digest_of(&out);
    assert_ne!(not_kept, kept);
    assert!(
        stderr(&out).contains("warning: this plan could not be kept in the ledger (another paybatch process is running with the ledger"),
        "{}",
        stderr(&out)
    );
    let digests = Ledger::open(&ws.ledger())
        .expect("ledger")
        .approved_digests("f", "custom")
        .expect("digests");
    assert_eq!(digests, [kept]);

    // A ledger that refuses the write (as a read-only one does).
    rusqlite::Connection::open(ws.ledger())
        .expect("open")
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON approved_plans
             BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END;",
        )
        .expect("trigger");
    let out = against(&ws, &sim, &["validate", "f.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["digest"].as_str(), Some(not_kept.as_str()));
    let why = report["plan_not_kept"].as_str().unwrap_or_default();
    assert!(why.contains("readonly database"), "{report}");
    assert!(
        stderr(&out).contains("warning: this plan could not be kept in the ledger"),
        "{}",
        stderr(&out)
    );
    // The plan not kept is unknown to a run of a file changed since.
    ws.write("f.csv", &rows(1..=5, |_, _| {}));
    let err = refused(&ws, &sim, &not_kept, &[]).await;
    assert!(err.contains("is not a plan this ledger kept"), "{err}");
}

/// A ledger of the previous schema (8), in the middle of a batch, is migrated by `validate`,
/// which keeps the plan; a run of a file changed since says what changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_of_schema_8_keeps_plans_once_migrated() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("f.csv", &rows(1..=4, |_, _| {}));
    let out = against(&ws, &sim, &["run", "f.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let conn = rusqlite::Connection::open(ws.ledger()).expect("open");
    conn.execute_batch(
        "DROP TABLE plan_approvals; DROP INDEX rows_later_attempts;
         DROP TABLE service_orders;
         DROP TABLE service_order_rows;
         DROP TABLE service_reads;
         DROP TABLE approvals;
         ALTER TABLE batches DROP COLUMN result_format;
         ALTER TABLE batches DROP COLUMN input_format;
         DROP TABLE payouts; ALTER TABLE batches DROP COLUMN payouts_read_at;
         DROP TABLE closed_months; DROP INDEX orders_booked_on;
         ALTER TABLE orders DROP COLUMN booked_on; ALTER TABLE orders DROP COLUMN booked_at;
         DROP TABLE approved_plans; PRAGMA user_version = 8;",
    )
    .expect("schema 8");
    drop(conn);

    ws.write("f.csv", &rows(1..=8, |_, _| {}));
    let approved = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);
    let version: i64 = rusqlite::Connection::open(ws.ledger())
        .expect("open")
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, 15);
    ws.write(
        "f.csv",
        &rows(1..=8, |i, c| {
            if i == 7 {
                c[2] = "12.50".into();
            }
        }),
    );
    let out = against(&ws, &sim, &["run", "f.csv", "--expect-digest", &approved]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(
        section(&err, "  1 row changed:"),
        [
            "  1 row changed:",
            "`R-007` (line 8): face_value 10 -> 12.50"
        ],
        "{err}"
    );
    assert_eq!(sim.orders().len(), 4);
}

/// Only the last plans of each batch are kept; the same digest approved again is kept once.
#[test]
fn the_plans_kept_per_batch_are_bounded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ledger = Ledger::open(&dir.path().join("l.db")).expect("ledger");
    let digest = |i: i64| format!("sha256:{i:064x}");
    let keep = |ledger: &mut Ledger, batch: &str, d: &str| {
        ledger
            .keep_approved_plan(&NewApprovedPlan {
                digest: d,
                batch,
                environment: "sim",
                input_path: "f.csv",
                input_hash: "h",
                rows: 1,
                context: "{}",
                plan: b"x",
            })
            .expect("kept");
    };
    keep(&mut ledger, "other", &digest(1000));
    for i in 0..KEPT_PER_BATCH + 5 {
        keep(&mut ledger, "nov", &digest(i));
    }
    keep(&mut ledger, "nov", &digest(KEPT_PER_BATCH + 4));
    let kept = ledger.approved_digests("nov", "sim").expect("digests");
    let expected: Vec<String> = (5..KEPT_PER_BATCH + 5).rev().map(digest).collect();
    assert_eq!(kept, expected);
    assert!(ledger.approved_plan(&digest(4)).expect("read").is_none());
    assert!(ledger.approved_plan(&digest(5)).expect("read").is_some());
    assert_eq!(
        ledger.approved_digests("other", "sim").expect("digests"),
        [digest(1000)]
    );
}

/// A retry of failed rows makes them payable at their next attempt: a new plan, with a new
/// digest. The digest approved before the retry pays nothing (exit 3, nothing sent) and the
/// refusal names the rows made payable again since, with what they pay; the new plan, once
/// approved, is paid, and a run of it interrupted before it sent anything resumes with the
/// same digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_failed_rows_is_a_new_plan_the_digest_before_it_cannot_pay() {
    let ws = Workspace::new();
    let state = ws.sim_state();
    let mut failing = fast_config(Some(state.clone()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    // 10, 15 and 20 USD.
    ws.write(
        "f.csv",
        &rows(1..=3, |i, c| c[2] = (5 * (i + 1)).to_string()),
    );
    let approved = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);
    let failed = against(&ws, &sim, &["run", "f.csv", "--expect-digest", &approved]).await;
    assert_eq!(failed.status.code(), Some(4), "{}", stderr(&failed));
    // Nothing changed since: the approved plan still passes (nothing left to pay).
    let again = against(&ws, &sim, &["run", "f.csv", "--expect-digest", &approved]).await;
    assert_eq!(again.status.code(), Some(4), "{}", stderr(&again));
    let sent = sim.orders().len();
    // `status` says that the rows, once retried, are another plan to approve.
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8 path");
    let status = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "f", "--ledger", ledger],
        &[],
    )
    .await;
    let next = stdout(&status);
    assert!(
        next.contains(&format!(
            "paybatch retry --batch f --ledger {ledger}, then paybatch validate f.csv --batch f --ledger "
        ))
            && next.contains("shows the new plan's digest to approve, then paybatch run f.csv"),
        "{next}"
    );

    let retry = retry_batch(&ws, "f").await;
    assert_eq!(retry.status.code(), Some(0), "{}", stderr(&retry));
    let retried = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);
    assert_ne!(retried, approved, "a retry makes a new plan");

    let out = against(&ws, &sim, &["run", "f.csv", "--expect-digest", &approved]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no longer matches the approved plan"), "{err}");
    assert!(err.contains("nothing was submitted"), "{err}");
    assert!(err.contains("  3 retried rows: USD 45.00 ("), "{err}");
    assert!(!err.contains("reissued rows"), "{err}");
    assert_eq!(sim.orders().len(), sent, "nothing was sent: {err}");

    // The new plan, approved: interrupted before it sends, resumed with the same digest.
    let sim = restart_sim(sim, fast_config(Some(state))).await;
    let sent = sim.orders().len();
    let died = run_file(
        &ws,
        &sim,
        "f.csv",
        &["--expect-digest", &retried],
        &[("PAYBATCH_FAILPOINT", "after_intent")],
    )
    .await;
    assert!(!died.status.success(), "{}", output_of(&died));
    assert_eq!(sim.orders().len(), sent, "nothing was sent");
    let resumed = run_file(&ws, &sim, "f.csv", &["--expect-digest", &retried], &[]).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", output_of(&resumed));
    assert!(sim.orders().len() > sent, "{}", output_of(&resumed));
    // Paid, the plan keeps its digest: the cron job's command passes again.
    let after = digest_of(&against(&ws, &sim, &["validate", "f.csv"]).await);
    assert_eq!(after, retried);
    // The HTML report rebuilds the same digest from what the ledger recorded.
    let args = [
        "report", "--batch", "f", "--html", "f.html", "--ledger", ledger,
    ];
    let report = paybatch_in(ws.dir.path(), &args, &[]).await;
    assert_eq!(report.status.code(), Some(0), "{}", output_of(&report));
    let page = std::fs::read_to_string(ws.path("f.html")).expect("the page");
    assert!(page.contains(&retried), "{page}");
    let cron = run_file(&ws, &sim, "f.csv", &["--expect-digest", &retried], &[]).await;
    assert_eq!(cron.status.code(), Some(0), "{}", output_of(&cron));
}

/// `retry --expired` makes the rows whose payout link expired payable again: a new plan. The
/// digest approved before pays nothing and the refusal names the reissued rows with what they
/// pay; the new digest pays them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reissue_of_expired_links_is_a_new_plan_the_digest_before_it_cannot_pay() {
    let ws = Workspace::new();
    let mut csv = String::from("reference,product_code,face_value,currency\n");
    for i in 1..=5 {
        csv.push_str(&format!("R-{i},AMZ-US,10.00,USD\n"));
    }
    ws.write("b.csv", &csv);
    links_expire_after(&ws, "10", "0").await;
    let pb = |args: &'static [&'static str]| paybatch_ws(&ws, args);
    let approved = digest_of(&pb(&["validate", "b.csv", "--batch", "b"]).await);
    let run = paybatch_ws(
        &ws,
        &[
            "run",
            "b.csv",
            "--batch",
            "b",
            "-q",
            "--expect-digest",
            &approved,
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    pb(&["sim", "clock", "--advance", "12d"]).await;
    let read = pb(&["payouts", "--batch", "b"]).await;
    assert!(stdout(&read).contains("EXPIRED"), "{}", output_of(&read));
    let retried = pb(&["retry", "--batch", "b", "--expired"]).await;
    assert_eq!(retried.status.code(), Some(0), "{}", output_of(&retried));

    let reissued = digest_of(&pb(&["validate", "b.csv", "--batch", "b"]).await);
    assert_ne!(reissued, approved, "a reissue makes a new plan");
    let out = paybatch_ws(
        &ws,
        &["run", "b.csv", "--batch", "b", "--expect-digest", &approved],
    )
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("nothing was submitted"), "{err}");
    assert!(err.contains("  5 reissued rows: USD 50.00 ("), "{err}");
    let status = pb(&["status", "--batch", "b", "--json"]).await;
    let json: serde_json::Value = serde_json::from_str(stdout(&status).trim()).expect("JSON");
    assert_eq!(
        json["states"]["PENDING"], 5,
        "nothing was planned or sent: {json}"
    );

    let paid = paybatch_ws(
        &ws,
        &[
            "run",
            "b.csv",
            "--batch",
            "b",
            "-q",
            "--expect-digest",
            &reissued,
        ],
    )
    .await;
    assert_eq!(paid.status.code(), Some(0), "{}", output_of(&paid));
}
