//! A plan is not a payment: an intent never sent that holds a row no longer in the input file
//! is cancelled when the file is merged again, and the rows it held that are still in the file
//! are planned again under new keys; an intent already sent (in doubt) is followed. The real
//! binary, a real simulator on a loopback port, a real SQLite ledger in a temporary directory;
//! what was paid is read from the simulator's own orders.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::support::*;

use paybatch::sim::SimHandle;

const HEADER: &str = "reference,product_code,face_value,currency,email\n";

/// A batch file of the rows `R-n` for each `n` of `rows`, all paid alike (so that they can
/// share an order).
fn batch_file(rows: &[u32]) -> String {
    let mut text = HEADER.to_string();
    for n in rows {
        text.push_str(&format!("R-{n},AMZ-US,1{n},USD,r{n}@example.com\n"));
    }
    text
}

async fn run(ws: &Workspace, sim: &SimHandle, extra: &[&str], envs: &[(&str, &str)]) -> Output {
    run_file(ws, sim, "b.csv", extra, envs).await
}

fn db(ledger: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(ledger, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("ledger")
}

/// The ledger's rows: reference -> (state, attempt, key of its order).
fn ledger_rows(ledger: &Path) -> BTreeMap<String, (String, i64, Option<String>)> {
    let conn = db(ledger);
    let mut st = conn
        .prepare(
            "SELECT r.reference, r.state, r.attempt, o.idempotency_key
             FROM rows r LEFT JOIN orders o ON o.id = r.order_id",
        )
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .expect("rows")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
}

/// The ledger's orders: key -> (state, sends).
fn ledger_orders(ledger: &Path) -> BTreeMap<String, (String, i64)> {
    let conn = db(ledger);
    let mut st = conn
        .prepare("SELECT idempotency_key, state, sends FROM orders")
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .expect("orders")
        .collect::<rusqlite::Result<_>>()
        .expect("orders")
}

/// The rows the service has orders for, with their statuses, and the rows it has none for
/// among `absent`.
fn paid_once_each(sim: &SimHandle, paid: &[&str], absent: &[&str]) {
    let per_ref = service_orders_per_reference(sim);
    for r in paid {
        let orders = per_ref.get(*r).cloned().unwrap_or_default();
        assert_eq!(orders.len(), 1, "row {r}: {orders:?}");
        assert_eq!(orders[0].1, "COMPLETED", "row {r}: {orders:?}");
    }
    for r in absent {
        assert!(
            !per_ref.contains_key(*r),
            "row {r} was taken out of the file but the service has {:?}",
            per_ref[*r]
        );
    }
    assert_eq!(per_ref.len(), paid.len(), "{per_ref:?}");
}

fn result_references(path: &Path) -> Vec<(String, String)> {
    let rows = read_csv(path);
    let (reference, status) = (col(&rows[0], "reference"), col(&rows[0], "status"));
    rows[1..]
        .iter()
        .map(|r| (r[reference].clone(), r[status].clone()))
        .collect()
}

/// Planned with every row in one order, then one row taken out of the file: the intent, never
/// sent, is cancelled; the row taken out is never sent; the four others are paid once, in a new
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_taken_out_after_plan_only_is_never_paid_and_its_order_is_planned_again() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4, 5]));
    let planned = run(&ws, &sim, &["--plan-only", "--items-per-order", "5"], &[]).await;
    assert_eq!(planned.status.code(), Some(5), "{}", stderr_of(&planned));
    let before = ledger_orders(&ws.ledger());
    assert_eq!(before.len(), 1, "{before:?}");
    let old_key = before.keys().next().cloned().expect("the intent");

    ws.write("b.csv", &batch_file(&[1, 2, 4, 5]));
    let out = run(&ws, &sim, &["--items-per-order", "5"], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("`R-3`"),
        "the run names the row taken out: {err}"
    );
    assert!(err.contains("cancelled"), "{err}");

    paid_once_each(&sim, &["R-1", "R-2", "R-4", "R-5"], &["R-3"]);
    assert_eq!(order_posts(&sim), 1, "one new order, sent once");
    let orders = ledger_orders(&ws.ledger());
    assert_eq!(orders[&old_key], ("CANCELLED".to_string(), 0));
    assert_eq!(orders.len(), 2, "{orders:?}");
    let rows = ledger_rows(&ws.ledger());
    assert_eq!(rows["R-3"].0, "REMOVED");
    assert_eq!(rows["R-3"].2, None, "a removed row belongs to no order");
    for r in ["R-1", "R-2", "R-4", "R-5"] {
        assert_eq!(rows[r].0, "COMPLETED", "{r}");
        assert_ne!(
            rows[r].2.as_deref(),
            Some(old_key.as_str()),
            "{r}: a new key"
        );
    }
    assert_eq!(
        result_references(&ws.path("b.result.csv")),
        ["R-1", "R-2", "R-4", "R-5"]
            .map(|r| (r.to_string(), "COMPLETED".to_string()))
            .to_vec()
    );

    // status shows the cancelled order.
    let status = against_url(&ws, &sim.base_url(), &["status", "--batch", "b", "--json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(json["orders"]["CANCELLED"], 1, "{json}");
    assert_eq!(json["states"]["REMOVED"], 1, "{json}");
}

/// One row an order: only the intent of the row taken out is cancelled, the others are sent
/// as planned. The row put back later is paid once, under a key of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_row_an_order_the_intent_of_the_row_taken_out_is_cancelled_and_the_row_can_come_back() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4, 5]));
    let planned = run(&ws, &sim, &["--plan-only", "--items-per-order", "1"], &[]).await;
    assert_eq!(planned.status.code(), Some(5), "{}", stderr_of(&planned));
    let planned_rows = ledger_rows(&ws.ledger());

    ws.write("b.csv", &batch_file(&[1, 2, 4, 5]));
    let out = run(&ws, &sim, &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    paid_once_each(&sim, &["R-1", "R-2", "R-4", "R-5"], &["R-3"]);
    let rows = ledger_rows(&ws.ledger());
    let orders = ledger_orders(&ws.ledger());
    let r3_key = planned_rows["R-3"].2.clone().expect("R-3 was planned");
    assert_eq!(orders[&r3_key], ("CANCELLED".to_string(), 0));
    assert_eq!(rows["R-3"].0, "REMOVED");
    for r in ["R-1", "R-2", "R-4", "R-5"] {
        // The intents planned for them are the ones sent.
        assert_eq!(rows[r].2, planned_rows[r].2, "{r}");
        assert_eq!(orders[rows[r].2.as_deref().expect("key")].0, "COMPLETED");
    }
    assert_eq!(order_posts(&sim), 4);

    // The row is back: paid once, under a key the cancelled intent never had.
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4, 5]));
    let out = run(&ws, &sim, &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    paid_once_each(&sim, &["R-1", "R-2", "R-3", "R-4", "R-5"], &[]);
    let rows = ledger_rows(&ws.ledger());
    assert_eq!(rows["R-3"].0, "COMPLETED");
    assert_ne!(rows["R-3"].2.as_deref(), Some(r3_key.as_str()));
    assert_eq!(
        ledger_orders(&ws.ledger())[&r3_key].0,
        "CANCELLED",
        "the cancelled intent stays cancelled"
    );
}

/// An intent sent whose answer was lost (in doubt) is followed even when its row was taken out
/// of the file: re-sent with its key, paid once, and the run says the row was already sent. An
/// intent never sent whose row was taken out is cancelled. The plan digest that `validate`
/// prints covers the order sent for a row the file no longer has: it is not the digest of the
/// same file for a batch new to the ledger, and `run --expect-digest` holds to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_in_doubt_is_followed_and_its_order_is_part_of_the_plan_digest() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4]));
    let one_at_a_time = ["--items-per-order", "1", "--concurrency", "1"];
    let killed = run(
        &ws,
        &sim,
        &one_at_a_time,
        &[("PAYBATCH_FAILPOINT", "after_send:1")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", stderr_of(&killed));
    let rows = ledger_rows(&ws.ledger());
    let orders = ledger_orders(&ws.ledger());
    let in_doubt: Vec<&String> = rows
        .iter()
        .filter(|(_, (_, _, key))| key.as_ref().is_some_and(|k| orders[k].1 > 0))
        .map(|(r, _)| r)
        .collect();
    let never_sent: Vec<&String> = rows
        .iter()
        .filter(|(_, (_, _, key))| key.as_ref().is_some_and(|k| orders[k].1 == 0))
        .map(|(r, _)| r)
        .collect();
    assert_eq!(in_doubt.len(), 1, "{rows:?} {orders:?}");
    assert_eq!(never_sent.len(), 3, "{rows:?} {orders:?}");
    let (sent, unsent) = (in_doubt[0].clone(), never_sent[0].clone());
    assert_eq!(sim.orders().len(), 1, "the service created the order sent");
    let in_doubt_key = rows[&sent].2.clone().expect("key");

    // Both rows taken out of the file.
    let kept: Vec<u32> = (1..=4)
        .filter(|n| ![&sent, &unsent].contains(&&format!("R-{n}")))
        .collect();
    ws.write("b.csv", &batch_file(&kept));

    // The digest of this file for a batch new to the ledger is not the plan here: the run
    // would also send the intent in doubt. Refused, nothing sent.
    // (Taken on a service of its own: this one already has an order of batch b, which a new
    // ledger refuses before anything else.)
    let fresh = Workspace::new();
    fresh.write("b.csv", &batch_file(&kept));
    let elsewhere = start_sim(fast_config(None)).await;
    let file_only = plan_digest(&fresh, &elsewhere.base_url(), "b.csv").await;
    let digest = plan_digest(&ws, &sim.base_url(), "b.csv").await;
    assert_ne!(digest, file_only);
    let posts = order_posts(&sim);
    let refused = run(&ws, &sim, &["--expect-digest", &file_only], &[]).await;
    assert_eq!(refused.status.code(), Some(3), "{}", stderr_of(&refused));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    assert_eq!(
        ledger_orders(&ws.ledger()),
        orders,
        "nothing planned or cancelled"
    );

    let out = run(&ws, &sim, &["--expect-digest", &digest], &[]).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("`{sent}`")) && err.contains("already sent"),
        "the run says the row taken out was already sent: {err}"
    );
    let mut paid: Vec<String> = kept.iter().map(|n| format!("R-{n}")).collect();
    paid.push(sent.clone());
    let paid: Vec<&str> = paid.iter().map(String::as_str).collect();
    paid_once_each(&sim, &paid, &[unsent.as_str()]);
    let orders = ledger_orders(&ws.ledger());
    assert_eq!(orders[&in_doubt_key].0, "COMPLETED");
    let rows = ledger_rows(&ws.ledger());
    assert_eq!(rows[&sent].0, "COMPLETED");
    assert_eq!(rows[&unsent].0, "REMOVED");
    assert_eq!(
        orders.values().filter(|(s, _)| s == "CANCELLED").count(),
        1,
        "{orders:?}"
    );
    // The digest is the same once the order is paid: a later run of the approved plan goes on.
    assert_eq!(plan_digest(&ws, &sim.base_url(), "b.csv").await, digest);
    let again = run(&ws, &sim, &["--expect-digest", &digest], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    // The HTML report, for the finance lead, shows the digest that was approved.
    let report = against_url(
        &ws,
        &sim.base_url(),
        &["report", "--batch", "b", "--html", "r.html"],
    )
    .await;
    assert_eq!(report.status.code(), Some(0), "{}", stderr_of(&report));
    let page = std::fs::read_to_string(ws.path("r.html")).expect("report");
    assert!(page.contains(&digest), "{digest} not in the report");
}

/// The digest approved after `--plan-only` no longer holds once a row is taken out: the run
/// refuses it and sends nothing. The digest of the new file pays the rows left, and not the
/// row taken out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_taken_out_after_plan_only_changes_the_plan_digest() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4, 5]));
    let planned = run(&ws, &sim, &["--plan-only", "--items-per-order", "5"], &[]).await;
    assert_eq!(planned.status.code(), Some(5), "{}", stderr_of(&planned));
    let approved = plan_digest(&ws, &sim.base_url(), "b.csv").await;

    ws.write("b.csv", &batch_file(&[1, 2, 4, 5]));
    let now = plan_digest(&ws, &sim.base_url(), "b.csv").await;
    assert_ne!(now, approved);
    let refused = run(&ws, &sim, &["--expect-digest", &approved], &[]).await;
    let err = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("the file gives {now}")), "{err}");
    assert_eq!(order_posts(&sim), 0, "nothing sent");
    assert!(
        ledger_orders(&ws.ledger())
            .values()
            .all(|(s, _)| s == "INTENT"),
        "nothing cancelled by a refused run"
    );

    let out = run(&ws, &sim, &["--expect-digest", &now], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    paid_once_each(&sim, &["R-1", "R-2", "R-4", "R-5"], &["R-3"]);
}

/// A run stopped between the cancellation of an intent and the commit of the merge leaves the
/// old plan whole; the same command then pays each row left once and the row taken out never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_before_the_cancellation_is_committed_leaves_the_old_plan() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &batch_file(&[1, 2, 3, 4, 5]));
    let planned = run(&ws, &sim, &["--plan-only", "--items-per-order", "5"], &[]).await;
    assert_eq!(planned.status.code(), Some(5), "{}", stderr_of(&planned));
    let rows = ledger_rows(&ws.ledger());
    let orders = ledger_orders(&ws.ledger());

    ws.write("b.csv", &batch_file(&[1, 2, 4, 5]));
    let killed = run(
        &ws,
        &sim,
        &["--items-per-order", "5"],
        &[("PAYBATCH_FAILPOINT", "before_cancel_commit")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", stderr_of(&killed));
    assert_eq!(ledger_rows(&ws.ledger()), rows, "the rows as planned");
    assert_eq!(ledger_orders(&ws.ledger()), orders, "the intent as planned");
    assert_eq!(order_posts(&sim), 0);

    let out = run(&ws, &sim, &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    paid_once_each(&sim, &["R-1", "R-2", "R-4", "R-5"], &["R-3"]);
    assert_eq!(order_posts(&sim), 1);
}
