//! The delivery column (migration 007) and the rows inserted several to a statement, through the
//! real binary and a real simulator on a loopback port: a ledger of schema version 6 left by a
//! run killed mid-batch resumes on the new schema and pays each row once, with the same rows per
//! delivery as the older query counted; a row's delivery follows every change of the row made
//! before it is submitted; and orders of every size from 1 to 60 rows put each row at its item
//! of the body that was committed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;
use crate::support::{
    paybatch_in as paybatch, run_file as run, stderr_of as stderr, stdout_of as stdout,
};
use rust_decimal::Decimal;

fn db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("open ledger")
}

/// The rows per delivery as the summary of schema version 6 counted them: from each row's
/// recorded content, rows taken out of the file left out.
fn per_delivery_from_specs(ledger: &Path, batch: &str) -> BTreeMap<String, i64> {
    let conn = db(ledger);
    let mut st = conn
        .prepare(
            "SELECT json_extract(r.spec, '$.distribution'), COUNT(*) FROM rows r
             JOIN batches b ON b.id = r.batch_id
             WHERE b.name = ?1 AND r.spec IS NOT NULL AND r.state != 'REMOVED'
             GROUP BY 1",
        )
        .expect("prepare");
    st.query_map([batch], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
}

/// The summary's line for `counts`, as `run` prints it.
fn delivery_line(counts: &BTreeMap<String, i64>) -> String {
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!("rows per delivery: {}", parts.join(", "))
}

/// Rows whose `delivery` is not the distribution of their recorded content (NULL for a row
/// without content): none may exist.
fn rows_whose_delivery_differs(ledger: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = db(ledger);
    let mut st = conn
        .prepare(
            "SELECT reference, state, delivery FROM rows
             WHERE delivery IS NOT json_extract(spec, '$.distribution')",
        )
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
}

fn row_states(ledger: &Path) -> BTreeMap<String, i64> {
    let conn = db(ledger);
    let mut st = conn
        .prepare("SELECT state, COUNT(*) FROM rows GROUP BY state")
        .expect("prepare");
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
}

/// Takes a ledger back to schema version 6, as the previous release left it: no delivery
/// column, the index on (batch, state), no approved plans, no payouts, no recorded layouts.
fn back_to_schema_6(ledger: &Path) {
    db(ledger)
        .execute_batch(
            "DROP TABLE plan_approvals; DROP INDEX rows_later_attempts;
             DROP TABLE service_orders;
             DROP TABLE service_order_rows;
             DROP TABLE service_reads;
             DROP TABLE approvals;
             ALTER TABLE batches DROP COLUMN result_format;
             ALTER TABLE batches DROP COLUMN input_format;
             DROP TABLE payouts;
             ALTER TABLE batches DROP COLUMN payouts_read_at;
             DROP TABLE approved_plans;
             DROP INDEX rows_paid_likeness;
             ALTER TABLE rows DROP COLUMN likeness;
             DROP INDEX rows_batch_state;
             ALTER TABLE rows DROP COLUMN delivery;
             CREATE INDEX rows_batch_state ON rows(batch_id, state);
             DROP TABLE closed_months; DROP INDEX orders_booked_on;
             ALTER TABLE orders DROP COLUMN booked_on; ALTER TABLE orders DROP COLUMN booked_at;
             PRAGMA user_version = 6;",
        )
        .expect("schema 6");
}

/// `n` valid rows `PREFIX-NN`, every other one by email, over four products and three currencies.
fn valid_rows(prefix: &str, range: std::ops::Range<usize>) -> String {
    const PRODUCTS: [(&str, &str, &str); 4] = [
        ("AMZ-US", "USD", "10.00"),
        ("STEAM-US", "USD", "20"),
        ("TESCO-GB", "GBP", "10"),
        ("AMZ-DE", "EUR", "15.00"),
    ];
    range
        .map(|i| {
            let (code, currency, value) = PRODUCTS[i % PRODUCTS.len()];
            let email = if i % 2 == 0 {
                format!("{prefix}{i}@example.com").to_lowercase()
            } else {
                String::new()
            };
            format!("{prefix}-{i:02},{code},{value},{currency},{email}\n")
        })
        .collect()
}

const HEADER: &str = "reference,product_code,face_value,currency,email\n";

/// A ledger left by the previous release (schema 6) in the middle of a batch (orders completed,
/// accepted and only planned, invalid rows recorded) is migrated by the first command that opens
/// it; `status` and `report` read it, and the same `run` again pays every row once, with the rows
/// per delivery the previous release counted from the rows' content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_6_ledger_interrupted_mid_batch_resumes_and_counts_the_same_deliveries() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let flags = [
        "--skip-invalid",
        "--items-per-order",
        "3",
        "--concurrency",
        "1",
    ];
    ws.write("v.csv", &format!("{HEADER}{}", valid_rows("V", 0..6)));
    let first = run(&ws, &sim, "v.csv", &flags, &[]).await;
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    ws.write(
        "v.csv",
        &format!(
            "{HEADER}{}X-1,NOPE-US,10,USD,x1@example.com\nX-2,AMZ-US,10.00,USD,not-an-email\n",
            valid_rows("V", 0..24)
        ),
    );
    let killed = run(
        &ws,
        &sim,
        "v.csv",
        &flags,
        &[("PAYBATCH_FAILPOINT", "after_record:2")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", stderr(&killed));
    let ledger = ws.ledger();
    let states = row_states(&ledger);
    assert!(
        states.get("COMPLETED").is_some_and(|n| *n >= 6),
        "{states:?}"
    );
    assert_eq!(states.get("INVALID"), Some(&2), "{states:?}");
    assert!(
        states.get("SUBMITTED").is_some_and(|n| *n > 0),
        "{states:?}"
    );
    assert!(states.get("PLANNED").is_some_and(|n| *n > 0), "{states:?}");
    back_to_schema_6(&ledger);
    let before = per_delivery_from_specs(&ledger, "v");
    assert_eq!(before.values().sum::<i64>(), 24, "{before:?}");

    let l = ledger.to_str().expect("utf-8");
    let status = paybatch(
        ws.dir.path(),
        &["status", "--batch", "v", "--ledger", l],
        &[],
    )
    .await;
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let version: i64 = db(&ledger)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(
        version, 15,
        "the first command that opens it migrates it to the latest"
    );
    assert_eq!(rows_whose_delivery_differs(&ledger), []);
    let report = paybatch(
        ws.dir.path(),
        &["report", "--batch", "v", "--ledger", l, "--out", "-"],
        &[],
    )
    .await;
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    assert_eq!(stdout(&report).lines().count(), 27, "a header and 26 rows");

    let out = run(&ws, &sim, "v.csv", &flags, &[]).await;
    assert_eq!(out.status.code(), Some(4), "invalid rows: {}", stderr(&out));
    assert!(
        stdout(&out).contains(&delivery_line(&before)),
        "{}\nexpected {}",
        stdout(&out),
        delivery_line(&before)
    );
    assert_eq!(per_delivery_from_specs(&ledger, "v"), before);
    assert_eq!(rows_whose_delivery_differs(&ledger), []);
    let references: Vec<String> = (0..24).map(|i| format!("V-{i:02}")).collect();
    assert_one_live_order_per_row(&sim, &references);
    let per_ref = service_orders_per_reference(&sim);
    assert!(!per_ref.contains_key("X-1") && !per_ref.contains_key("X-2"));
    assert!(
        sim.orders()
            .iter()
            .all(|o| o.status.as_str() == "COMPLETED")
    );
    let html = paybatch(
        ws.dir.path(),
        &["report", "--batch", "v", "--ledger", l, "--html", "v.html"],
        &[],
    )
    .await;
    assert_eq!(html.status.code(), Some(0), "{}", stderr(&html));
}

/// Before a row is submitted its content may change: each change (email taken out: EMAIL
/// becomes PAYOUT_LINK; an email added; a row taken out and brought back by another delivery;
/// an invalid row fixed) is followed by the row's delivery, and the summary counts the rows as
/// their content says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rows_delivery_follows_each_change_made_before_it_is_submitted() {
    let ws = Workspace::new();
    let state = ws.sim_state();
    let mut failing = fast_config(Some(state.clone()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let flags = ["--skip-invalid", "--items-per-order", "2"];
    ws.write(
        "d.csv",
        "reference,product_code,face_value,currency,email\n\
         D-1,AMZ-US,10.00,USD,d1@example.com\n\
         D-2,STEAM-US,20,USD,\n\
         D-3,AMZ-US,25.50,USD,d3@example.com\n\
         D-4,TESCO-GB,10,GBP,\n\
         D-5,AMZ-US,5.00,USD,not-an-email\n\
         D-6,NOPE-US,10,USD,d6@example.com\n",
    );
    let failed = run(&ws, &sim, "d.csv", &flags, &[]).await;
    assert_eq!(failed.status.code(), Some(4), "{}", stderr(&failed));
    let retry = retry_batch(&ws, "d").await;
    assert_eq!(retry.status.code(), Some(0), "{}", stderr(&retry));
    let sim = restart_sim(sim, fast_config(Some(state))).await;
    let ledger = ws.ledger();
    let delivery = |reference: &str| -> Option<String> {
        db(&ledger)
            .query_row(
                "SELECT delivery FROM rows WHERE reference = ?1",
                [reference],
                |r| r.get(0),
            )
            .expect("row")
    };
    // D-1 loses its email, D-2 gains one, D-3 is taken out, D-5 is fixed, D-6 taken out.
    ws.write(
        "d.csv",
        "reference,product_code,face_value,currency,email\n\
         D-1,AMZ-US,10.00,USD,\n\
         D-2,STEAM-US,20,USD,d2@example.com\n\
         D-4,TESCO-GB,10,GBP,\n\
         D-5,AMZ-US,5.00,USD,d5@example.com\n",
    );
    let out = run(&ws, &sim, "d.csv", &flags, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(delivery("D-1").as_deref(), Some("PAYOUT_LINK"));
    assert_eq!(delivery("D-2").as_deref(), Some("EMAIL"));
    assert_eq!(delivery("D-5").as_deref(), Some("EMAIL"));
    assert_eq!(rows_whose_delivery_differs(&ledger), []);
    let counts = per_delivery_from_specs(&ledger, "d");
    assert_eq!(
        counts,
        BTreeMap::from([("EMAIL".to_string(), 2), ("PAYOUT_LINK".to_string(), 2)])
    );
    assert!(
        stdout(&out).contains(&delivery_line(&counts)),
        "{}",
        stdout(&out)
    );

    // D-3 comes back without its email: paid by payout link.
    ws.write(
        "d.csv",
        "reference,product_code,face_value,currency,email\n\
         D-1,AMZ-US,10.00,USD,\n\
         D-2,STEAM-US,20,USD,d2@example.com\n\
         D-3,AMZ-US,25.50,USD,\n\
         D-4,TESCO-GB,10,GBP,\n\
         D-5,AMZ-US,5.00,USD,d5@example.com\n",
    );
    let out = run(&ws, &sim, "d.csv", &flags, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(delivery("D-3").as_deref(), Some("PAYOUT_LINK"));
    assert_eq!(rows_whose_delivery_differs(&ledger), []);
    let counts = per_delivery_from_specs(&ledger, "d");
    assert_eq!(
        counts,
        BTreeMap::from([("EMAIL".to_string(), 2), ("PAYOUT_LINK".to_string(), 3)])
    );
    assert!(
        stdout(&out).contains(&delivery_line(&counts)),
        "{}",
        stdout(&out)
    );
    let paid: Vec<String> = ["D-1", "D-2", "D-3", "D-4", "D-5"]
        .map(String::from)
        .to_vec();
    assert_one_live_order_per_row(&sim, &paid);
    assert!(!service_orders_per_reference(&sim).contains_key("D-6"));
    // Each row was paid as its last content says.
    let conn = db(&ledger);
    let mut st = conn
        .prepare(
            "SELECT r.reference, r.delivery, r.item_index, o.body FROM rows r
             JOIN orders o ON o.id = r.order_id WHERE r.state = 'COMPLETED'",
        )
        .expect("prepare");
    let paid_as: Vec<(String, String, i64, Vec<u8>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(paid_as.len(), 5);
    for (reference, delivery, index, body) in paid_as {
        let body: serde_json::Value = serde_json::from_slice(&body).expect("body");
        assert_eq!(
            body["items"][index as usize]["distribution_method"]["type"], delivery,
            "{reference}"
        );
    }
}

/// Every size of order from 1 to 60 rows (the rows inserted several to a statement, in a few
/// shapes): each row of the file is in exactly one committed order, at the item of the body
/// that asks for its product, face value and delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_of_every_size_from_1_to_60_put_each_row_at_its_item_of_the_body() {
    // 61 rows of one currency: --items-per-order N gives orders of N rows and of 61 mod N.
    let mut file = String::from(HEADER);
    let mut expected: BTreeMap<String, (String, Decimal, &str)> = BTreeMap::new();
    for i in 0..61 {
        let (code, value) = [("AMZ-US", "10.00"), ("STEAM-US", "20"), ("AMZ-US", "25.50")][i % 3];
        let (email, delivery) = if i % 2 == 0 {
            (format!("s{i}@example.com"), "EMAIL")
        } else {
            (String::new(), "PAYOUT_LINK")
        };
        file.push_str(&format!("S-{i:02},{code},{value},USD,{email}\n"));
        expected.insert(
            format!("S-{i:02}"),
            (code.to_string(), value.parse().expect("decimal"), delivery),
        );
    }
    // The runs of the binary go four at a time (each in a workspace of its own); every size is
    // checked.
    let sizes: Vec<usize> = (1..=60).collect();
    for chunk in sizes.chunks(4) {
        let mut runs = tokio::task::JoinSet::new();
        for &n in chunk {
            let file = file.clone();
            runs.spawn(async move {
                let ws = Workspace::new();
                ws.write("s.csv", &file);
                let n_text = n.to_string();
                let args = ["run", "s.csv", "--plan-only", "--items-per-order", &n_text];
                let out = paybatch(ws.dir.path(), &args, &[]).await;
                (n, ws, out)
            });
        }
        while let Some(done) = runs.join_next().await {
            let (n, ws, out) = done.expect("a planning run");
            assert_eq!(out.status.code(), Some(5), "n={n}: {}", stderr(&out));
            each_row_at_its_item(n, &ws.path("paybatch.db"), &expected);
        }
    }
}

/// The ledger of a planned run of the 61 rows at `n` items an order: each row in exactly
/// one order, at the item of its body that asks for its product, face value and delivery.
fn each_row_at_its_item(
    n: usize,
    ledger: &Path,
    expected: &BTreeMap<String, (String, Decimal, &str)>,
) {
    let conn = db(ledger);
    let rows: BTreeMap<String, (i64, i64, String)> = {
        let mut st = conn
            .prepare("SELECT reference, order_id, item_index, delivery FROM rows")
            .expect("prepare");
        st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    };
    assert_eq!(rows.len(), 61, "n={n}");
    let mut st = conn
        .prepare("SELECT id, body FROM orders")
        .expect("prepare");
    let orders: Vec<(i64, Vec<u8>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("orders");
    let mut sizes = Vec::new();
    let mut seen = 0;
    for (id, body) in orders {
        let body: serde_json::Value = serde_json::from_slice(&body).expect("body");
        let metadata: BTreeMap<String, String> =
            serde_json::from_value(body["metadata"].clone()).expect("metadata");
        let references = paybatch::batch::order_body::references_in_metadata(&metadata);
        let items = body["items"].as_array().expect("items");
        assert_eq!(references.len(), items.len(), "n={n} order {id}");
        sizes.push(items.len());
        for (index, (reference, item)) in references.iter().zip(items).enumerate() {
            seen += 1;
            let (order, at, delivery) = &rows[reference];
            assert_eq!((*order, *at), (id, index as i64), "n={n} {reference}");
            let (code, value, want) = &expected[reference];
            assert_eq!(delivery, want, "n={n} {reference}");
            assert_eq!(
                item["distribution_method"]["type"], *want,
                "n={n} {reference}"
            );
            assert_eq!(
                item["products"]["value"],
                code.as_str(),
                "n={n} {reference}"
            );
            let face: Decimal = item["face_value"].to_string().parse().expect("face value");
            assert_eq!(face, *value, "n={n} {reference}");
        }
    }
    assert_eq!(seen, 61, "n={n}: every row in exactly one order");
    sizes.sort_unstable();
    let mut want = vec![n; 61 / n];
    if 61 % n != 0 {
        want.insert(0, 61 % n);
    }
    assert_eq!(sizes, want, "n={n}");
}
