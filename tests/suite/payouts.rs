//! `paybatch payouts` and `paybatch retry --expired`, through the binary on the default
//! environment (the embedded simulator, whose payout links live a seeded life on a clock that
//! `paybatch sim clock` moves): counts per status agree with the simulator's own, an order whose
//! links are all final is never read again, `--list` names exactly the rows in a state, and a
//! reissue pays each expired row once more and no other.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::paybatch_ws as pb;
use crate::support::{
    Workspace, against_url, col, fast_config, links_expire_after, read_csv, restart_sim, start_sim,
    stderr_of, stdout_of,
};
use serde_json::Value;

/// A batch of `rows` payout links of 10.00 USD, `R-001`...
fn batch_csv(rows: usize) -> String {
    let mut csv = String::from("reference,product_code,face_value,currency,department\n");
    for i in 1..=rows {
        csv.push_str(&format!(
            "R-{i:03},AMZ-US,10.00,USD,{}\n",
            ["Sales", "Ops"][i % 2]
        ));
    }
    csv
}

/// `paybatch payouts --batch b --json`, with its exit code.
async fn payouts_json(ws: &Workspace, extra: &[&str]) -> (Value, i32) {
    let mut args = vec!["payouts", "--batch", "b", "--json"];
    args.extend_from_slice(extra);
    let out = pb(ws, &args).await;
    let json: Value = serde_json::from_str(stdout_of(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout_of(&out), stderr_of(&out)));
    (json, out.status.code().unwrap_or(-1))
}

/// The simulator's own count per status (`paybatch sim payouts --json`), and its items'
/// statuses by (order id, item id).
async fn simulator_census(
    ws: &Workspace,
) -> (BTreeMap<String, i64>, BTreeMap<(String, String), String>) {
    let out = pb(ws, &["sim", "payouts", "--json"]).await;
    assert!(out.status.success(), "{}", stderr_of(&out));
    let json: Value = serde_json::from_str(stdout_of(&out).trim()).expect("census JSON");
    let counts = json["payouts"]
        .as_object()
        .expect("counts")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(-1)))
        .collect();
    let items = json["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                (
                    i["order_id"].as_str().unwrap_or("").to_string(),
                    i["item_id"].as_str().unwrap_or("").to_string(),
                ),
                i["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (counts, items)
}

fn counts_of(json: &Value) -> BTreeMap<String, i64> {
    json["payouts"]
        .as_object()
        .expect("payouts")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(-1)))
        .collect()
}

/// The result file's lines as (reference -> column -> value).
fn result_lines(ws: &Workspace) -> BTreeMap<String, BTreeMap<String, String>> {
    let rows = read_csv(&ws.path("b.SIMULATED.result.csv"));
    let header = rows[0].clone();
    let reference = col(&header, "reference");
    rows[1..]
        .iter()
        .map(|r| {
            (
                r[reference].clone(),
                header.iter().cloned().zip(r.iter().cloned()).collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_are_followed_until_final_as_the_simulator_counts_them_and_read_once() {
    let ws = Workspace::new();
    ws.write("b.csv", &batch_csv(40));
    let setup = pb(
        &ws,
        &[
            "sim",
            "account",
            "--link-expiry-days",
            "20",
            "--claim-share",
            "0.5",
            "--cancel-share",
            "0.1",
            "--claim-within-days",
            "10",
        ],
    )
    .await;
    assert!(setup.status.success(), "{}", stderr_of(&setup));
    let run = pb(
        &ws,
        &[
            "run",
            "b.csv",
            "--batch",
            "b",
            "--items-per-order",
            "3",
            "-q",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));

    // Right after payment every link is live; each order is read once.
    let (first, code) = payouts_json(&ws, &[]).await;
    assert_eq!(code, 0, "nothing expires within 14 days: {first}");
    assert_eq!(counts_of(&first)["ACTIVE"], 40, "{first}");
    assert_eq!(first["orders_read"], 14, "40 rows in orders of 3: {first}");
    assert_eq!(
        first["outstanding"]["USD"]["face_value"], "400.00",
        "{first}"
    );

    // A week later some are claimed or cancelled: the counts are the simulator's own.
    let moved = pb(&ws, &["sim", "clock", "--advance", "7d"]).await;
    assert!(moved.status.success(), "{}", stderr_of(&moved));
    let (week, code) = payouts_json(&ws, &[]).await;
    let (census, week_items) = simulator_census(&ws).await;
    let orders_still_active: BTreeSet<&String> = week_items
        .iter()
        .filter(|(_, status)| status.as_str() == "ACTIVE")
        .map(|((order, _), _)| order)
        .collect();
    assert_eq!(counts_of(&week), census, "a week on: {week}");
    assert!(counts_of(&week)["CLAIMED"] > 0, "{week}");
    assert_eq!(
        code, 7,
        "the links still ACTIVE expire within 14 days: {week}"
    );
    assert_eq!(
        week["expiring"].as_i64(),
        Some(counts_of(&week)["ACTIVE"]),
        "{week}"
    );
    let read_in_week = week["orders_read"].as_i64().expect("orders read");
    assert!(read_in_week > 0 && read_in_week <= 14, "{week}");

    // A month later every link is final, and as the simulator says.
    pb(&ws, &["sim", "clock", "--advance", "30d"]).await;
    let (month, code) = payouts_json(&ws, &[]).await;
    let (census, items) = simulator_census(&ws).await;
    assert_eq!(counts_of(&month), census, "a month on: {month}");
    assert_eq!(counts_of(&month)["ACTIVE"], 0, "{month}");
    assert!(counts_of(&month)["EXPIRED"] > 0, "{month}");
    assert_eq!(code, 0, "{month}");
    // Only the orders that still had a live link were read again, each once.
    assert_eq!(
        month["orders_read"].as_u64(),
        Some(orders_still_active.len() as u64),
        "{month}"
    );
    // A second call reads no order at all.
    let (again, _) = payouts_json(&ws, &[]).await;
    assert_eq!(again["orders_read"], 0, "{again}");
    assert_eq!(counts_of(&again), census);

    // The result file and `status` carry each row's last known status, item by item as the
    // simulator has it.
    let report = pb(&ws, &["report", "--batch", "b"]).await;
    assert!(report.status.success(), "{}", stderr_of(&report));
    for (reference, line) in result_lines(&ws) {
        let key = (line["order_id"].clone(), line["item_id"].clone());
        assert_eq!(
            Some(&line["payout_status"]),
            items.get(&key),
            "row {reference}"
        );
    }
    let status = pb(&ws, &["status", "--batch", "b", "--json"]).await;
    let status: Value = serde_json::from_str(stdout_of(&status).trim()).expect("status JSON");
    assert_eq!(status["payouts"]["EXPIRED"], census["EXPIRED"], "{status}");
    assert!(status["payouts_read_at"].is_string(), "{status}");

    // The HTML report says what was claimed so far, per product and per column asked for.
    let html = pb(
        &ws,
        &[
            "report",
            "--batch",
            "b",
            "--html",
            "r.html",
            "--group-by",
            "department",
        ],
    )
    .await;
    assert!(html.status.success(), "{}", stderr_of(&html));
    let page = std::fs::read_to_string(ws.path("r.html")).expect("page");
    assert!(page.contains("Claimed so far"), "no claims section");
    assert!(page.contains("Claims per product"));
    assert!(page.contains("Claims per department"));
    let claimed = census["CLAIMED"];
    let expired_value = format!("{}.00 USD", census["EXPIRED"] * 10);
    assert!(
        page.contains(&format!("<td class=\"num\">{claimed}</td>")),
        "claimed count {claimed} on the page"
    );
    assert!(
        page.contains(&expired_value),
        "expired value {expired_value} on the page"
    );
    assert!(
        !page.contains("playground.example"),
        "no payout link on the page"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expired_rows_are_listed_exactly_and_each_reissued_and_paid_once_more() {
    let ws = Workspace::new();
    ws.write("b.csv", &batch_csv(30));
    links_expire_after(&ws, "10", "0.4").await;
    let run = pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));

    // Nothing is reissued before a link is read EXPIRED.
    let early = pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await;
    let early: Value = serde_json::from_str(stdout_of(&early).trim()).expect("retry JSON");
    assert_eq!(early["retried"], serde_json::json!([]), "{early}");

    pb(&ws, &["sim", "clock", "--advance", "12d"]).await;
    let (read, _) = payouts_json(&ws, &[]).await;
    let expired_count = counts_of(&read)["EXPIRED"];
    assert!(expired_count > 0 && expired_count < 30, "{read}");

    // --list expired names exactly the rows whose link expired (as the result file says), and
    // carries the input's other columns; no link without --with-links.
    let listed = pb(&ws, &["payouts", "--batch", "b", "--list", "expired"]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
    let mut reader = csv::Reader::from_reader(listed.stdout.as_slice());
    let header: Vec<String> = reader
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    assert!(header.contains(&"department".to_string()), "{header:?}");
    assert!(!header.contains(&"payout_url".to_string()), "{header:?}");
    let listed: BTreeSet<String> = reader
        .records()
        .map(|r| r.expect("a record")[0].to_string())
        .collect();
    pb(&ws, &["report", "--batch", "b"]).await;
    let before = result_lines(&ws);
    let expired: BTreeSet<String> = before
        .iter()
        .filter(|(_, l)| l["payout_status"] == "EXPIRED")
        .map(|(r, _)| r.clone())
        .collect();
    assert_eq!(listed, expired);
    assert_eq!(listed.len() as i64, expired_count);

    // With --out, the file is private and holds the links when asked.
    let out = pb(
        &ws,
        &[
            "payouts",
            "--batch",
            "b",
            "--list",
            "EXPIRED",
            "--out",
            "remind.csv",
            "--with-links",
            "--no-read",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr_of(&out));
    let remind = read_csv(&ws.path("remind.csv"));
    let link = col(&remind[0], "payout_url");
    assert!(remind[1..].iter().all(|r| r[link].starts_with("https://")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ws.path("remind.csv"))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The reissue makes exactly the expired rows payable; the run pays each once more.
    let retried = pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await;
    let retried: Value = serde_json::from_str(stdout_of(&retried).trim()).expect("retry JSON");
    let reissued: BTreeSet<String> = retried["retried"]
        .as_array()
        .expect("references")
        .iter()
        .map(|r| r.as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(reissued, expired);
    let again = pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    let after = result_lines(&ws);
    let (_, items) = simulator_census(&ws).await;
    let orders_per_reference = {
        // Every item at the simulator is a payment: count them per row through the result
        // file's order ids and the reissued attempts' ones.
        let mut n: BTreeMap<String, usize> = BTreeMap::new();
        for (reference, line) in &after {
            let now_paid = items.contains_key(&(line["order_id"].clone(), line["item_id"].clone()));
            let earlier = !line["reissue_of"].is_empty();
            *n.entry(reference.clone()).or_default() +=
                usize::from(now_paid) + usize::from(earlier);
        }
        n
    };
    assert_eq!(
        items.len(),
        30 + expired.len(),
        "one more item per expired row, no other"
    );
    for (reference, line) in &after {
        assert_eq!(line["status"], "COMPLETED", "{reference}");
        if expired.contains(reference) {
            assert_ne!(
                line["order_id"], before[reference]["order_id"],
                "{reference}: a new order"
            );
            assert_eq!(
                line["reissue_of"],
                format!("attempt 1: {}", before[reference]["order_id"]),
                "{reference}"
            );
            assert_eq!(line["payout_status"], "ACTIVE", "{reference}");
            assert_eq!(orders_per_reference[reference], 2, "{reference}");
        } else {
            assert_eq!(
                line["order_id"], before[reference]["order_id"],
                "{reference}"
            );
            assert_eq!(line["reissue_of"], "", "{reference}");
            assert_eq!(orders_per_reference[reference], 1, "{reference}");
        }
    }
    // What left the balance counts both attempts of a reissued row.
    let status = pb(&ws, &["status", "--batch", "b", "--json"]).await;
    let status: Value = serde_json::from_str(stdout_of(&status).trim()).expect("status JSON");
    let usd = status["charged"]
        .as_array()
        .expect("charged")
        .iter()
        .find(|c| c["currency"] == "USD")
        .expect("USD charged")["amount"]
        .as_str()
        .expect("amount")
        .parse::<rust_decimal::Decimal>()
        .expect("a decimal");
    let per_row = usd / rust_decimal::Decimal::from(30 + expired.len());
    assert!(
        per_row > rust_decimal::Decimal::from(9) && per_row <= rust_decimal::Decimal::from(10),
        "{status}"
    );
    // The HTML report links both attempts of each reissued row.
    let html = pb(&ws, &["report", "--batch", "b", "--html", "r.html"]).await;
    assert!(html.status.success(), "{}", stderr_of(&html));
    let page = std::fs::read_to_string(ws.path("r.html")).expect("page");
    assert!(page.contains("Reissued after their link expired"));
    for reference in &expired {
        let line = &after[reference];
        assert!(
            page.contains(&line["reissue_of"]),
            "{reference}: the expired order on the page"
        );
        assert!(
            page.contains(&format!("attempt 2: {}", line["order_id"])),
            "{reference}: the new order on the page"
        );
    }
    // A second reissue finds nothing: the new links are ACTIVE.
    let none = pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await;
    let none: Value = serde_json::from_str(stdout_of(&none).trim()).expect("retry JSON");
    assert_eq!(none["retried"], serde_json::json!([]), "{none}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_expiring_soon_make_exit_7_and_are_listed_with_their_references() {
    let ws = Workspace::new();
    ws.write("b.csv", &batch_csv(6));
    links_expire_after(&ws, "10", "0").await;
    let run = pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    let (json, code) = payouts_json(&ws, &[]).await;
    assert_eq!(code, 7, "{json}");
    assert_eq!(json["expiring"], 6, "{json}");
    assert_eq!(
        json["expiring_links"].as_array().map(Vec::len),
        Some(6),
        "{json}"
    );
    // A shorter window: nothing expires within it.
    let (json, code) = payouts_json(&ws, &["--expiring-within", "5", "--no-read"]).await;
    assert_eq!((code, json["expiring"].as_i64()), (0, Some(0)), "{json}");
    // --all, for cron: one object, the same exit code.
    let all = pb(&ws, &["payouts", "--all", "--quiet", "--json"]).await;
    assert_eq!(all.status.code(), Some(7), "{}", stderr_of(&all));
    let all: Value = serde_json::from_str(stdout_of(&all).trim()).expect("JSON");
    assert_eq!(all["expiring"], 6, "{all}");
    assert_eq!(all["batches"][0]["batch"], "b", "{all}");
    let listed = pb(
        &ws,
        &["payouts", "--batch", "b", "--list", "expiring", "--no-read"],
    )
    .await;
    assert_eq!(
        stdout_of(&listed).lines().count(),
        7,
        "{}",
        stdout_of(&listed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_refuses_what_it_cannot_do_plainly() {
    let ws = Workspace::new();
    let none = pb(&ws, &["payouts", "--batch", "b"]).await;
    assert_eq!(none.status.code(), Some(2), "{}", stderr_of(&none));
    assert!(!ws.ledger().exists(), "no ledger is created");
    let neither = pb(&ws, &["payouts"]).await;
    assert_eq!(neither.status.code(), Some(2));
    let bad = pb(&ws, &["payouts", "--batch", "b", "--list", "SPENT"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_of(&bad).contains("not a payout status"),
        "{}",
        stderr_of(&bad)
    );
    ws.write("b.csv", &batch_csv(2));
    pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    let clash = pb(
        &ws,
        &[
            "payouts",
            "--batch",
            "b",
            "--list",
            "active",
            "--out",
            "paybatch.db",
        ],
    )
    .await;
    assert_eq!(clash.status.code(), Some(2), "{}", stderr_of(&clash));
    let both = pb(
        &ws,
        &["payouts", "--batch", "b", "--list", "active", "--json"],
    )
    .await;
    assert_eq!(both.status.code(), Some(2), "{}", stderr_of(&both));
    let other = pb(&ws, &["payouts", "--batch", "nope"]).await;
    assert_eq!(other.status.code(), Some(2), "{}", stderr_of(&other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_fails_or_is_not_believed_keeps_the_last_known_status_and_says_so() {
    let ws = Workspace::new();
    let state = ws.path("sim.db");
    let sim = start_sim(fast_config(Some(state.clone()))).await;
    ws.write("b.csv", &batch_csv(4));
    let run = against_url(
        &ws,
        &sim.base_url(),
        &["run", "b.csv", "--batch", "b", "-q"],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    // Forty days on, every link is final at the service.
    sim.advance_clock(std::time::Duration::from_secs(40 * 86_400))
        .expect("the clock moves");
    let read = |sim_url: String| {
        let ws = &ws;
        async move {
            let out = against_url(
                ws,
                &sim_url,
                &["payouts", "--batch", "b", "--json", "--timeout", "3"],
            )
            .await;
            let json: Value = serde_json::from_str(stdout_of(&out).trim())
                .unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
            (json, out.status.code())
        }
    };
    // Every read fails: the links keep their last known status (ACTIVE), and it says so.
    let mut failing = fast_config(Some(state.clone()));
    failing.faults.error_rate = 1.0;
    let sim = restart_sim(sim, failing).await;
    let (json, code) = read(sim.base_url()).await;
    assert_eq!(code, Some(5), "{json}");
    assert_eq!(counts_of(&json)["ACTIVE"], 4, "{json}");
    assert_eq!(json["orders_read"], 0, "{json}");
    assert!(
        !json["not_read"].as_array().expect("not read").is_empty(),
        "{json}"
    );
    // Answers without the items' payout: not believed, said, nothing changed.
    let mut unlinked = fast_config(Some(state.clone()));
    unlinked.faults.hostile.unlinked_rate = 1.0;
    let sim = restart_sim(sim, unlinked).await;
    let (json, code) = read(sim.base_url()).await;
    assert_eq!(code, Some(5), "{json}");
    assert_eq!(counts_of(&json)["ACTIVE"], 4, "{json}");
    assert!(
        json["not_read"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no payout status")),
        "{json}"
    );
    // The service answers again: every link is read final.
    let sim = restart_sim(sim, fast_config(Some(state))).await;
    let (json, code) = read(sim.base_url()).await;
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(counts_of(&json)["ACTIVE"], 0, "{json}");
    assert_eq!(json["not_read"], serde_json::json!([]), "{json}");
    sim.shutdown().await;
}

/// After `retry --expired` and the run that reissues, each row has two orders at the service:
/// the first, whose link was read EXPIRED, and the reissue. `reconcile` lists the first as
/// reissued, raises no alert and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_after_a_reissue_lists_the_expired_orders_as_reissued_not_live() {
    let ws = Workspace::new();
    ws.write("b.csv", &batch_csv(5));
    links_expire_after(&ws, "10", "0").await;
    let run = pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    pb(&ws, &["sim", "clock", "--advance", "12d"]).await;
    let (read, _) = payouts_json(&ws, &[]).await;
    assert_eq!(counts_of(&read)["EXPIRED"], 5, "{read}");
    let first_orders: BTreeSet<(String, String)> = {
        pb(&ws, &["report", "--batch", "b"]).await;
        result_lines(&ws)
            .into_iter()
            .map(|(r, l)| (r, l["order_id"].clone()))
            .collect()
    };
    let retried = pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await;
    assert_eq!(retried.status.code(), Some(0), "{}", stderr_of(&retried));
    let again = pb(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));

    let out = pb(&ws, &["reconcile", "--batch", "b", "--json"]).await;
    let json: Value = serde_json::from_str(stdout_of(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout_of(&out), stderr_of(&out)));
    assert_eq!(json["duplicates"], serde_json::json!([]), "{json}");
    let reissued: BTreeSet<(String, String)> = json["reissued"]
        .as_array()
        .unwrap_or_else(|| panic!("a reissued list: {json}"))
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap_or("").to_string(),
                p[1].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(reissued, first_orders, "{json}");
    assert_eq!(json["found"], 10, "{json}");
    assert_eq!(out.status.code(), Some(0), "{json}");

    let text = pb(&ws, &["reconcile", "--batch", "b"]).await;
    assert_eq!(text.status.code(), Some(0), "{}", stdout_of(&text));
    assert!(!stdout_of(&text).contains("ALERT"), "{}", stdout_of(&text));
    assert_eq!(
        stdout_of(&text).matches("reissued: order").count(),
        5,
        "{}",
        stdout_of(&text)
    );
}

/// `paybatch payouts --batch b --json` against the simulator at `base`, with its exit code.
async fn payouts_at(ws: &Workspace, base: &str) -> (Value, Option<i32>) {
    let out = against_url(
        ws,
        base,
        &["payouts", "--batch", "b", "--json", "--timeout", "5"],
    )
    .await;
    let json: Value = serde_json::from_str(stdout_of(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
    (json, out.status.code())
}

/// A simulator on a state file whose payout answers flip as `flips` says, and the batch `b`
/// of four rows paid through it, two hours before (the flips leave a link's first hour alone).
async fn paid_two_hours_ago(
    ws: &Workspace,
    flips: paybatch::sim::Flips,
) -> paybatch::sim::SimHandle {
    let mut config = fast_config(Some(ws.path("sim.db")));
    config.payout_life.claim_share = 0.0;
    config.payout_life.cancel_share = 0.0;
    config.faults.flips = flips;
    let sim = start_sim(config).await;
    ws.write("b.csv", &batch_csv(4));
    let run = against_url(ws, &sim.base_url(), &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    sim.advance_clock(std::time::Duration::from_secs(2 * 3600))
        .expect("the clock moves");
    sim
}

/// An answer that says a link EXPIRED with its expiry date still ahead is not believed: the
/// links keep their last believed status (ACTIVE), the orders are named and the exit is 5, the
/// orders are read again at the next call, nothing is reissued; once the service answers
/// plainly, the links are read as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_answer_with_its_expiry_ahead_is_not_believed_and_read_again() {
    let ws = Workspace::new();
    let sim = paid_two_hours_ago(
        &ws,
        paybatch::sim::Flips {
            expired_ahead_rate: 1.0,
            ..Default::default()
        },
    )
    .await;
    for _ in 0..2 {
        let (json, code) = payouts_at(&ws, &sim.base_url()).await;
        assert_eq!(code, Some(5), "{json}");
        assert_eq!(counts_of(&json)["ACTIVE"], 4, "{json}");
        assert_eq!(counts_of(&json)["EXPIRED"], 0, "{json}");
        let reasons = json["not_read"].as_array().expect("not read");
        assert!(!reasons.is_empty(), "{json}");
        assert!(
            reasons.iter().all(|r| r["reason"]
                .as_str()
                .is_some_and(|r| r.contains("still ahead"))),
            "{json}"
        );
    }
    let retried = against_url(
        &ws,
        &sim.base_url(),
        &["retry", "--batch", "b", "--expired", "--json"],
    )
    .await;
    let retried: Value = serde_json::from_str(stdout_of(&retried).trim()).expect("retry JSON");
    assert_eq!(retried["retried"], serde_json::json!([]), "{retried}");

    let sim = restart_sim(sim, {
        let mut plain = fast_config(Some(ws.path("sim.db")));
        plain.payout_life.claim_share = 0.0;
        plain.payout_life.cancel_share = 0.0;
        plain
    })
    .await;
    let (json, code) = payouts_at(&ws, &sim.base_url()).await;
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(counts_of(&json)["ACTIVE"], 4, "{json}");
    assert_eq!(json["not_read"], serde_json::json!([]), "{json}");
    assert!(
        json["orders_read"].as_u64().is_some_and(|n| n > 0),
        "{json}"
    );
    sim.shutdown().await;
}

/// A link the service reports EXPIRED once and CLAIMED at the next read: `payouts` believes the
/// EXPIRED (it agrees with itself), but `retry --expired` reads the order once more, finds a
/// final status changed, reissues nothing, names the order and exits 5; the next run pays
/// nothing again: one live order per row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_read_expired_then_claimed_is_not_reissued_nor_paid_twice() {
    let ws = Workspace::new();
    let sim = paid_two_hours_ago(
        &ws,
        paybatch::sim::Flips {
            expired_once_rate: 1.0,
            ..Default::default()
        },
    )
    .await;
    let (json, code) = payouts_at(&ws, &sim.base_url()).await;
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(counts_of(&json)["EXPIRED"], 4, "{json}");

    let out = against_url(
        &ws,
        &sim.base_url(),
        &["retry", "--batch", "b", "--expired", "--json"],
    )
    .await;
    let retried: Value = serde_json::from_str(stdout_of(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
    assert_eq!(retried["retried"], serde_json::json!([]), "{retried}");
    assert_eq!(out.status.code(), Some(5), "{retried}");
    let named = retried["not_read"].as_array().expect("not read");
    assert!(!named.is_empty(), "{retried}");
    assert!(
        named.iter().all(|n| n["reason"]
            .as_str()
            .is_some_and(|r| r.contains("CLAIMED") && r.contains("never changes"))),
        "{retried}"
    );
    assert!(
        stderr_of(&out).contains("not reissued"),
        "{}",
        stderr_of(&out)
    );

    let again = against_url(
        &ws,
        &sim.base_url(),
        &["run", "b.csv", "--batch", "b", "-q"],
    )
    .await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    let references: Vec<String> = (1..=4).map(|i| format!("R-{i:03}")).collect();
    crate::support::assert_one_live_order_per_row(&sim, &references);
    // The ledger keeps the status it last believed.
    let (json, _) = payouts_at(&ws, &sim.base_url()).await;
    assert_eq!(counts_of(&json)["EXPIRED"], 4, "{json}");
    sim.shutdown().await;
}

/// A service that answers a finished order's links EXPIRED with their expiry date decades ahead,
/// from the first answer: the run completes the rows but records no link status from that
/// answer (never read), `retry --expired` reissues nothing, and `payouts` does not believe it
/// (exit 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_answer_with_its_expiry_ahead_at_completion_is_not_recorded() {
    use std::sync::Arc;
    let sim = start_sim(fast_config(None)).await;
    let rewrite: crate::support::rewriting::Rewrite = Arc::new(|method, path, status, json| {
        if *method == axum::http::Method::GET
            && path.starts_with("/order/")
            && status == 200
            && json["status"] == "COMPLETED"
            && let Some(items) = json["items"].as_array_mut()
        {
            for item in items {
                item["payout"]["status"] = Value::from("EXPIRED");
                item["payout"]["expiry_date"] = Value::from("2099-01-01T00:00:00.000Z");
            }
        }
    });
    let base = crate::support::rewriting::start(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("b.csv", &batch_csv(3));
    let run = against_url(&ws, &base, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    let offline = against_url(
        &ws,
        &base,
        &["payouts", "--batch", "b", "--json", "--no-read"],
    )
    .await;
    let offline: Value = serde_json::from_str(stdout_of(&offline).trim()).expect("payouts JSON");
    assert_eq!(counts_of(&offline).get("NOT_READ"), Some(&3), "{offline}");
    assert_eq!(counts_of(&offline).get("EXPIRED"), Some(&0), "{offline}");
    let retried = against_url(
        &ws,
        &base,
        &["retry", "--batch", "b", "--expired", "--json"],
    )
    .await;
    let retried: Value = serde_json::from_str(stdout_of(&retried).trim()).expect("retry JSON");
    assert_eq!(retried["retried"], serde_json::json!([]), "{retried}");
    let (read, code) = payouts_at(&ws, &base).await;
    assert_eq!(code, Some(5), "{read}");
    assert_eq!(counts_of(&read).get("NOT_READ"), Some(&3), "{read}");
}
