//! Multi-item orders (`--items-per-order`): grouped by payment currency, items mapped back to
//! their rows, resumed after a kill, failed as a whole and regrouped by `retry` with new keys.

use std::collections::HashSet;

use crate::support::stderr_of as stderr;
use crate::support::*;
use paybatch::sim::SimHandle;

const BATCH: &str = "reference,product_code,face_value,currency,email\n\
    G-1,AMZ-US,10.00,USD,a@example.com\n\
    G-2,STEAM-US,20,USD,\n\
    G-3,TESCO-GB,10,GBP,\n\
    G-4,AMZ-US,30.00,USD,d@example.com\n\
    G-5,TESCO-GB,20,GBP,\n\
    G-6,AMZ-US,40.00,USD,\n";

async fn run(
    ws: &Workspace,
    sim: &SimHandle,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> std::process::Output {
    run_file(ws, sim, "g.csv", extra, envs).await
}

fn result(ws: &Workspace, name: &str) -> Vec<String> {
    let rows = read_csv(&ws.path("g.result.csv"));
    let c = col(&rows[0], name);
    rows[1..].iter().map(|r| r[c].clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_grouped_per_currency_and_each_item_comes_back_to_its_row() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("g.csv", BATCH);
    // Killed after the first send, then resumed.
    let killed = run(
        &ws,
        &sim,
        &["--items-per-order", "2"],
        &[("PAYBATCH_FAILPOINT", "after_send:1")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", stderr(&killed));
    let out = run(&ws, &sim, &["--items-per-order", "2"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let orders = sim.orders();
    // USD rows G-1,G-2,G-4,G-6 in two orders of 2; GBP rows G-3,G-5 in one.
    assert_eq!(orders.len(), 3, "{orders:#?}");
    let mut groups: Vec<String> = orders
        .iter()
        .map(|o| o.metadata.get("paybatch_rows").cloned().unwrap_or_default())
        .collect();
    groups.sort();
    assert_eq!(groups, ["G-1|G-2", "G-3|G-5", "G-4|G-6"]);
    for o in &orders {
        assert_eq!(o.items.len(), 2);
    }
    // Every row got its own item id and payout link, and the order ids match the groups.
    let items: HashSet<String> = result(&ws, "item_id").into_iter().collect();
    let links: HashSet<String> = result(&ws, "payout_url").into_iter().collect();
    assert_eq!(items.len(), 6);
    assert_eq!(links.len(), 6);
    let order_ids = result(&ws, "order_id");
    assert_eq!(order_ids[0], order_ids[1], "G-1 and G-2 share an order");
    assert_eq!(order_ids[2], order_ids[4], "G-3 and G-5 share an order");
    assert_ne!(order_ids[0], order_ids[3]);
    // The simulator's item of each row is the one the result file names.
    for (i, reference) in ["G-1", "G-2", "G-3", "G-4", "G-5", "G-6"]
        .iter()
        .enumerate()
    {
        let o = orders
            .iter()
            .find(|o| o.id == order_ids[i])
            .unwrap_or_else(|| panic!("order of {reference}"));
        let refs: Vec<&str> = o.metadata["paybatch_rows"].split('|').collect();
        let pos = refs
            .iter()
            .position(|r| r == reference)
            .expect("row in its order");
        assert_eq!(o.items[pos].id, result(&ws, "item_id")[i], "{reference}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_order_fails_all_its_rows_and_retry_regroups_them_with_new_keys() {
    let ws = Workspace::new();
    let state = ws.sim_state();
    let mut failing = fast_config(Some(state.clone()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    ws.write("g.csv", BATCH);
    let out = run(&ws, &sim, &["--items-per-order", "3"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(result(&ws, "status").iter().all(|s| s == "FAILED"));
    let first_keys: HashSet<String> = sim
        .orders()
        .iter()
        .map(|o| o.idempotency_key.clone())
        .collect();
    assert_eq!(first_keys.len(), 3, "USD 3 + USD 1 + GBP 2");

    let sim = restart_sim(sim, fast_config(Some(state))).await;
    let retry = retry_batch(&ws, "g").await;
    assert_eq!(retry.status.code(), Some(0), "{}", stderr(&retry));
    // The next command names the batch's own file, as the run recorded it.
    assert!(
        stderr(&retry).contains("next: paybatch run g.csv --batch g"),
        "{}",
        stderr(&retry)
    );
    let out = run(&ws, &sim, &["--items-per-order", "6"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let orders = sim.orders();
    let new: Vec<_> = orders
        .iter()
        .filter(|o| !first_keys.contains(&o.idempotency_key))
        .collect();
    assert_eq!(
        new.len(),
        2,
        "regrouped: all USD rows in one order, GBP in another"
    );
    assert!(result(&ws, "status").iter().all(|s| s == "COMPLETED"));
    let per_ref = service_orders_per_reference(&sim);
    for r in ["G-1", "G-2", "G-3", "G-4", "G-5", "G-6"] {
        assert_eq!(per_ref[r].len(), 2, "{r}: one failed order, one completed");
    }
}

/// A batch as a new user would run it against the service's published rules: 120 rows, 30 %
/// of them paid from the USD balance for products priced in JPY or EUR, `--items-per-order
/// 200`, references long enough that their `|`-joined list passes 200 characters. Every row
/// completes once: the rows in the payment currency go in one order of many items within the
/// metadata limits, each converted row alone in a sync order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_converted_rows_is_paid_whole_under_the_published_rules() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let mut csv = String::from("reference,product_code,face_value,currency,payment_currency\n");
    let mut converted = 0;
    for i in 0..120 {
        let line = match i % 10 {
            0 | 4 => {
                converted += 1;
                format!("PAY-2026-11-{i:04},UBER-JP,1000,JPY,USD\n")
            }
            7 => {
                converted += 1;
                format!("PAY-2026-11-{i:04},AMZ-DE,{}.00,EUR,USD\n", 10 + i)
            }
            _ => format!("PAY-2026-11-{i:04},AMZ-US,{}.50,USD,USD\n", 5 + i),
        };
        csv.push_str(&line);
    }
    assert_eq!(converted, 36, "30 % of the rows are converted");
    ws.write("g.csv", &csv);
    let out = run(&ws, &sim, &["--items-per-order", "200"], &[]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("36 rows are paid from another currency's balance"),
        "{err}"
    );
    assert!(result(&ws, "status").iter().all(|s| s == "COMPLETED"));
    let orders = sim.orders();
    // 84 rows in the payment currency fit one order; 36 converted rows, one order each.
    assert_eq!(orders.len(), 1 + 36, "{:?}", orders.len());
    for o in &orders {
        let meta = &o.metadata;
        assert!(meta.len() <= 20, "{meta:?}");
        assert!(
            meta.iter()
                .all(|(k, v)| k.len() <= 40 && v.chars().count() <= 200)
        );
        assert!(
            o.description
                .as_deref()
                .is_some_and(|d| d.chars().count() <= 128)
        );
        let currencies: HashSet<&str> = o.items.iter().map(|i| i.currency.as_str()).collect();
        if o.items.len() > 1 {
            assert_eq!(currencies, HashSet::from(["USD"]), "one currency an order");
        }
    }
    let refs: Vec<String> = (0..120).map(|i| format!("PAY-2026-11-{i:04}")).collect();
    assert_one_live_order_per_row(&sim, &refs);
}
