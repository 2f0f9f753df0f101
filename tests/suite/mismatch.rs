//! A finished order is checked against what was sent: a service that answers COMPLETED with
//! other face values, another currency, a negative price, no items, items without payout
//! links, or the id of another order, or answers FAILED with items carrying payout links, gets
//! its rows recorded MISMATCH (never COMPLETED, never sent again, not even after
//! `paybatch retry`), shown by `status`, and the run exits 4.
//!
//! The tests put a rewriting proxy (`support::rewriting`) on a loopback port in front of the real
//! simulator. The whole path of a MISMATCH is run here for a changed face value and a failed
//! order with links; the other changes of a finished order are checked in-process, as a table
//! (`hostile_answers::every_changed_finished_order_is_a_mismatch_naming_its_difference`).

use std::sync::Arc;
use std::time::Duration;

use crate::support::rewriting::{Rewrite, start as proxy};
use crate::support::*;
use axum::http::Method;

const TWO_ROWS: &str = "reference,product_code,face_value,currency,distribution,email\n\
M-1,AMZ-US,10,USD,email,m1@example.com\n\
M-2,AMZ-US,20,USD,email,m2@example.com\n";

async fn run_through(ws: &Workspace, base: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "pay.csv", "--poll-timeout", "60"];
    args.extend_from_slice(extra);
    tokio::time::timeout(Duration::from_secs(120), against_url(ws, base, &args))
        .await
        .expect("the run ends")
}

/// Runs the two-row batch through a proxy that rewrites finished orders with `change`, and
/// checks that every row ends MISMATCH with `needle` among the differences.
async fn finished_orders_changed(change: fn(&mut serde_json::Value), needle: &str) {
    let sim = start_sim(fast_config(None)).await;
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        let finished = json["status"] == "COMPLETED";
        if *method == Method::GET && path.starts_with("/order/") && status == 200 && finished {
            change(json);
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("pay.csv", TWO_ROWS);
    let out = run_through(&ws, &base, &["--items-per-order", "2"]).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{needle}: {err}");
    let result = read_csv(&ws.path("pay.result.csv"));
    let status = col(&result[0], "status");
    let error = col(&result[0], "error_message");
    for row in &result[1..] {
        assert_eq!(row[status], "MISMATCH", "{needle}: {row:?}");
        assert!(row[error].contains(needle), "{needle}: {}", row[error]);
    }
    // Status says what to do; nothing is sent again by a retry and a second run.
    let posts = order_posts(&sim);
    let retried = against_url(&ws, &base, &["retry", "--batch", "pay", "--json"]).await;
    let retried_json: serde_json::Value =
        serde_json::from_slice(&retried.stdout).expect("retry --json answers JSON");
    assert_eq!(
        retried_json["retried"],
        serde_json::json!([]),
        "{needle}: retry takes no MISMATCH row: {retried_json}"
    );
    let again = run_through(&ws, &base, &["--items-per-order", "2"]).await;
    assert_eq!(again.status.code(), Some(4), "{}", stderr_of(&again));
    assert_eq!(
        order_posts(&sim),
        posts,
        "a MISMATCH row is never sent again"
    );
    let ledger = ws.ledger();
    let status_out = paybatch_in(
        ws.dir.path(),
        &[
            "status",
            "--batch",
            "pay",
            "--ledger",
            ledger.to_str().expect("utf-8"),
        ],
        &[],
    )
    .await;
    let text = format!("{}{}", stdout_of(&status_out), stderr_of(&status_out));
    assert!(text.contains("2 rows are MISMATCH"), "{needle}: {text}");
    let result = read_csv(&ws.path("pay.result.csv"));
    assert!(
        result[1..].iter().all(|row| row[status] == "MISMATCH"),
        "{needle}: {result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_face_values_are_a_mismatch() {
    finished_orders_changed(
        |o| o["items"][0]["face_value"] = "1000.00".into(),
        "face value 1000.00",
    )
    .await;
}

/// A FAILED order whose items carry payout links may have paid: its rows are not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_order_with_payout_links_is_a_mismatch() {
    finished_orders_changed(
        |o| {
            o["status"] = "FAILED".into();
            o["message"] = "The order failed.".into();
        },
        "failed, but its items carry payout links",
    )
    .await;
}

/// The service answers the second order's creation with the first order's id: one service
/// order belongs to one intent only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_id_of_another_order_is_a_mismatch() {
    let sim = start_sim(fast_config(None)).await;
    let first: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let seen = first.clone();
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        if *method == Method::POST && path == "/order" && status == 202 {
            let mut first = seen.lock().unwrap_or_else(|p| p.into_inner());
            match first.as_ref() {
                None => *first = json["id"].as_str().map(str::to_string),
                Some(id) => json["id"] = id.clone().into(),
            }
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("pay.csv", TWO_ROWS);
    let out = run_through(&ws, &base, &["--concurrency", "1"]).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let result = read_csv(&ws.path("pay.result.csv"));
    let status = col(&result[0], "status");
    let error = col(&result[0], "error_message");
    let states: Vec<&str> = result[1..].iter().map(|r| r[status].as_str()).collect();
    assert_eq!(states, ["COMPLETED", "MISMATCH"], "{err}");
    assert!(
        result[2][error].contains("holds for another intent"),
        "{}",
        result[2][error]
    );
}

/// Runs `csv` through a proxy that changes finished orders with `change`; returns the result
/// file's rows (header first) and the simulator.
async fn through_proxy(
    csv: &str,
    change: fn(&mut serde_json::Value),
    extra: &[&str],
) -> (Vec<Vec<String>>, paybatch::sim::SimHandle, String) {
    let sim = start_sim(fast_config(None)).await;
    // Every finished order the service answers: read alone, or answered to a sync creation.
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        let finished = json["status"] == "COMPLETED";
        let read = *method == Method::GET && path.starts_with("/order/");
        let created = *method == Method::POST && path == "/order";
        if (read || created) && status == 200 && finished {
            change(json);
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("pay.csv", csv);
    let out = run_through(&ws, &base, extra).await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    (read_csv(&ws.path("pay.result.csv")), sim, err)
}

/// Items answered in another order than sent are paired by what each asks for: every row
/// completes with its own item and payout link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_answered_in_another_order_each_reach_their_own_row() {
    let (result, sim, _) = through_proxy(
        TWO_ROWS,
        |o| {
            if let Some(items) = o["items"].as_array_mut() {
                items.reverse();
            }
        },
        &["--items-per-order", "2"],
    )
    .await;
    let (status, item) = (col(&result[0], "status"), col(&result[0], "item_id"));
    let truth = sim.orders();
    let order = &truth[0];
    for (row, face) in result[1..].iter().zip(["10.00", "20.00"]) {
        assert_eq!(row[status], "COMPLETED");
        let mine = order
            .items
            .iter()
            .find(|i| i.id == row[item])
            .expect("the row's item is the service's");
        assert_eq!(mine.face_value.to_string(), face, "{row:?}");
    }
}

/// What left the balance is read right when the answer leaves optional fields out (an item's
/// `currency`) and when the order costs more than its items (fees in `total_price`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_left_the_balance_holds_without_item_currencies_and_with_fees() {
    let csv = "reference,product_code,face_value,currency,payment_currency\n\
               FX-1,UBER-JP,3000,JPY,USD\n\
               US-1,AMZ-US,10.00,USD,USD\n\
               US-2,AMZ-US,20.00,USD,USD\n";
    let (result, sim, _) = through_proxy(
        csv,
        |o| {
            if let Some(items) = o["items"].as_array_mut() {
                for item in items {
                    item.as_object_mut().map(|i| i.remove("currency"));
                }
            }
            // A fee of 0.50 on every order.
            let total: rust_decimal::Decimal = o["total_price"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("a total");
            o["total_price"] = (total + rust_decimal::Decimal::new(50, 2))
                .to_string()
                .into();
        },
        &["--items-per-order", "2"],
    )
    .await;
    let (amount, currency) = (
        col(&result[0], "debited_amount"),
        col(&result[0], "debited_currency"),
    );
    assert!(
        result[1..].iter().all(|r| r[currency] == "USD"),
        "{result:?}"
    );
    let charged: rust_decimal::Decimal = result[1..]
        .iter()
        .map(|r| {
            r[amount]
                .parse::<rust_decimal::Decimal>()
                .expect("an amount")
        })
        .sum();
    // What the service's orders cost, with the 0.50 fee each (two orders: the converted row
    // alone, the two USD rows together).
    let cost: rust_decimal::Decimal = sim.orders().iter().map(|o| o.total_price).sum();
    assert_eq!(
        charged,
        cost + rust_decimal::Decimal::new(100, 2),
        "{result:?}"
    );
}

/// The service answers a new batch's order (another ledger, another batch, the same content,
/// its repeats allowed) with the id of an earlier order of the same content, which it then shows whole: its rows
/// are MISMATCH, never COMPLETED with the other batch's payout links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_batchs_order_of_the_same_content_is_a_mismatch() {
    let sim = start_sim(fast_config(None)).await;
    let earlier = Workspace::new();
    earlier.write("pay.csv", TWO_ROWS);
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        against_url(
            &earlier,
            &sim.base_url(),
            &["run", "pay.csv", "--items-per-order", "2"],
        ),
    )
    .await
    .expect("the run ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let first = sim.orders()[0].id.clone();
    let links: Vec<String> = {
        let result = read_csv(&earlier.path("pay.result.csv"));
        let url = col(&result[0], "payout_url");
        result[1..].iter().map(|r| r[url].clone()).collect()
    };
    let answered = first.clone();
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        if *method == Method::POST && path == "/order" && status == 202 {
            json["id"] = answered.clone().into();
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("other.csv", TWO_ROWS);
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        against_url(
            &ws,
            &base,
            &[
                "run",
                "other.csv",
                "--items-per-order",
                "2",
                "--poll-timeout",
                "60",
                // The same rows again, on purpose: the repeat check stops them otherwise.
                "--allow-repeats",
            ],
        ),
    )
    .await
    .expect("the run ends");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let result = read_csv(&ws.path("other.result.csv"));
    let (status, error, url) = (
        col(&result[0], "status"),
        col(&result[0], "error_message"),
        col(&result[0], "payout_url"),
    );
    for row in &result[1..] {
        assert_eq!(row[status], "MISMATCH", "{row:?}");
        assert!(
            row[error].contains("its description names idempotency key"),
            "{}",
            row[error]
        );
        assert!(
            !links.contains(&row[url]),
            "the other batch's link is not this row's: {row:?}"
        );
    }
    assert!(!first.is_empty());
}

/// A service that drops the description and metadata of its orders: the rows are COMPLETED as
/// answered, and the result file, `status` and the HTML report say that their orders could
/// not be confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_naming_nothing_completes_reported_unconfirmed() {
    let (result, sim, _) = through_proxy(
        TWO_ROWS,
        |o| {
            o["description"] = serde_json::Value::Null;
            o["metadata"] = serde_json::Value::Null;
        },
        &["--items-per-order", "2"],
    )
    .await;
    let (status, kind, error) = (
        col(&result[0], "status"),
        col(&result[0], "error_type"),
        col(&result[0], "error_message"),
    );
    for row in &result[1..] {
        assert_eq!(row[status], "COMPLETED", "{row:?}");
        assert_eq!(row[kind], "order_unconfirmed", "{row:?}");
        assert!(
            row[error].contains("could not be confirmed"),
            "{}",
            row[error]
        );
    }
    drop(sim);
}

/// The same, through the run's summary, `status` and `report --html`, which a finance user
/// reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_the_html_report_name_unconfirmed_orders() {
    let sim = start_sim(fast_config(None)).await;
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        if *method == Method::GET && path.starts_with("/order/") && status == 200 {
            json["description"] = serde_json::Value::Null;
            json["metadata"] = serde_json::Value::Null;
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("pay.csv", TWO_ROWS);
    let out = run_through(&ws, &base, &["--items-per-order", "2"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary = output_of(&out);
    assert!(
        summary.contains("unconfirmed: 2 COMPLETED rows"),
        "{summary}"
    );
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8");
    let order = sim.orders()[0].id.clone();
    let status = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "pay", "--ledger", ledger],
        &[],
    )
    .await;
    let text = stdout_of(&status);
    assert!(
        text.contains("unconfirmed: 1 COMPLETED") && text.contains(&order),
        "{text}"
    );
    let json = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "pay", "--ledger", ledger, "--json"],
        &[],
    )
    .await;
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["unconfirmed_orders"], serde_json::json!([order]));
    let report = paybatch_in(
        ws.dir.path(),
        &[
            "report", "--batch", "pay", "--ledger", ledger, "--html", "pay.html",
        ],
        &[],
    )
    .await;
    assert_eq!(report.status.code(), Some(0), "{}", stderr_of(&report));
    let page = std::fs::read_to_string(ws.path("pay.html")).expect("the report");
    assert!(
        page.contains("Paid rows not confirmed as the orders sent") && page.contains("M-2"),
        "{page}"
    );
}

/// The simulator's own answers pass and are confirmed: single and multi-item orders, a
/// converted row (embedded FX, a sync order), and sync mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_own_answers_pass_confirmed() {
    let csv = "reference,product_code,face_value,currency,payment_currency\n\
               FX-1,UBER-JP,3000,JPY,USD\n\
               US-1,AMZ-US,10.00,USD,USD\n\
               US-2,AMZ-US,20.00,USD,USD\n\
               US-3,AMZ-US,30.00,USD,USD\n";
    for extra in [
        &["--items-per-order", "2"][..],
        &["--items-per-order", "1"][..],
        &["--sync"][..],
    ] {
        let (result, sim, err) = through_proxy(csv, |_| {}, extra).await;
        let (status, kind) = (col(&result[0], "status"), col(&result[0], "error_type"));
        for row in &result[1..] {
            assert_eq!(row[status], "COMPLETED", "{extra:?}: {row:?} {err}");
            assert_eq!(row[kind], "", "{extra:?}: {row:?}");
        }
        assert!(sim.orders().iter().any(|o| o.items.len() == 1), "{extra:?}");
    }
}
