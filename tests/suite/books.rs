//! The books: one clock (each attempt booked when paybatch recorded its order final, on the
//! embedded simulator by its simulated clock), periods that gather lines rather than batches,
//! suspense apart from what left the balances, every table of the period page from the same
//! lines, and months closed with `paybatch close`. Through the binary, on the embedded simulator
//! (its clock moved with `sim clock --advance`) or a simulator on a loopback port, and a real
//! ledger.

use std::collections::BTreeMap;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::support::paybatch_ws as pb;
use crate::support::rewriting::{Rewrite, start as proxy};
use crate::support::*;

/// A batch of `prefix`: USD rows and rows converted from the USD balance, with a cost centre.
fn batch_csv(prefix: &str) -> String {
    let mut csv = String::from(
        "reference,product_code,face_value,currency,payment_currency,country,cost_center\n",
    );
    csv.push_str(&format!("{prefix}-1,AMZ-US,10.00,USD,,US,CC-US\n"));
    csv.push_str(&format!("{prefix}-2,AMZ-US,25.00,USD,,US,CC-US\n"));
    csv.push_str(&format!("{prefix}-3,RAKUTEN-JP,3000,JPY,USD,JP,CC-JP\n"));
    csv.push_str(&format!("{prefix}-4,WOOLWORTHS-AU,50,AUD,USD,AU,CC-AU\n"));
    csv
}

/// The months (`YYYY-MM`) the orders of batch `name` were booked in, as the ledger of the
/// embedded simulator's runs says.
fn booked_months(ws: &Workspace, name: &str) -> Vec<String> {
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    let mut st = db
        .prepare(
            "SELECT DISTINCT substr(o.booked_on, 1, 7) FROM orders o JOIN batches b
             ON b.id = o.batch_id WHERE b.name = ?1 AND o.booked_on IS NOT NULL ORDER BY 1",
        )
        .expect("query");
    st.query_map([name], |r| r.get(0))
        .expect("months")
        .map(|m| m.expect("a month"))
        .collect()
}

/// The first and last days of `month` (`YYYY-MM`).
fn bounds(month: &str) -> (String, String) {
    let first =
        chrono::NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").expect("a month");
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .expect("a next month");
    let last = next.pred_opt().expect("a last day");
    (first.to_string(), last.to_string())
}

/// `report --since FIRST --until LAST --journal FILE` of the months `from` to `to`: the
/// journal's bytes.
async fn journal(ws: &Workspace, from: &str, to: &str, file: &str) -> Vec<u8> {
    let (since, _) = bounds(from);
    let (_, until) = bounds(to);
    let out = pb(
        ws,
        &[
            "report",
            "--since",
            &since,
            "--until",
            &until,
            "--journal",
            file,
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    std::fs::read(ws.path(file)).expect("the journal")
}

/// The lines of a journal, as column -> value.
fn lines_of(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    csv::Reader::from_reader(bytes)
        .deserialize()
        .map(|r| r.expect("a line"))
        .collect()
}

/// Per currency, what the lines of `kind` (`payment`, `suspense`) add up to.
fn summed(lines: &[BTreeMap<String, String>], kind: &str) -> BTreeMap<String, Decimal> {
    let mut sums: BTreeMap<String, Decimal> = BTreeMap::new();
    for l in lines.iter().filter(|l| l["line"] == kind) {
        *sums.entry(l["balance_currency"].clone()).or_default() += dec(&l["debit_amount"]);
    }
    sums
}

/// The total lines of a journal of `kind` (`paid`, `suspense`), per currency.
fn totals(lines: &[BTreeMap<String, String>], kind: &str) -> BTreeMap<String, Decimal> {
    lines
        .iter()
        .filter(|l| l["line"] == "total" && l["kind"] == kind)
        .map(|l| (l["balance_currency"].clone(), dec(&l["debit_amount"])))
        .collect()
}

/// The embedded simulator's balances, per currency.
async fn balances(ws: &Workspace) -> BTreeMap<String, Decimal> {
    let out = pb(ws, &["balance", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    json_of(&out)["balances"]
        .as_array()
        .expect("balances")
        .iter()
        .map(|b| {
            (
                b["currency"].as_str().unwrap_or_default().to_string(),
                dec(b["balance"].as_str().expect("a balance")),
            )
        })
        .collect()
}

/// Moves the embedded simulator's clock past the end of its month when it is within three
/// hours of it, so that what a test pays in a minute falls in one month.
async fn away_from_month_end(ws: &Workspace) {
    // A second's move makes the state when there is none yet, and says the simulated now.
    let out = pb(ws, &["sim", "clock", "--advance", "1s", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let now = json_of(&out)["now"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let now = chrono::DateTime::parse_from_rfc3339(&now).expect("the simulated now");
    let later = now + chrono::Duration::hours(3);
    if chrono::Datelike::month(&later) != chrono::Datelike::month(&now) {
        let moved = pb(ws, &["sim", "clock", "--advance", "4h"]).await;
        assert_eq!(moved.status.code(), Some(0), "{}", stderr_of(&moved));
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The finding's two months on the simulator: a month-1 batch, its links expire, the clock
/// moves 31 days, its expired links are reissued and a month-2 batch is paid. Month 1's
/// journal holds the first attempts only and is the same byte for byte before and after month
/// 2; month 2's holds the reissues and the new batch; the two add up to the journal of both
/// months, which is what left each balance; both months close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_months_each_book_their_own_lines_and_add_up_to_what_left_the_balances() {
    let ws = Workspace::new();
    links_expire_after(&ws, "10", "0").await;
    away_from_month_end(&ws).await;
    let before = balances(&ws).await;
    pay(&ws, "m1", &batch_csv("A")).await;
    let months = booked_months(&ws, "m1");
    assert_eq!(months.len(), 1, "{months:?}");
    let month1 = months[0].clone();
    let month1_journal = journal(&ws, &month1, &month1, "j1-before.csv").await;
    assert_eq!(
        lines_of(&month1_journal)
            .iter()
            .filter(|l| l["line"] == "payment")
            .count(),
        4
    );

    let advanced = pb(&ws, &["sim", "clock", "--advance", "31d"]).await;
    assert_eq!(advanced.status.code(), Some(0), "{}", stderr_of(&advanced));
    let read = pb(&ws, &["payouts", "--batch", "m1"]).await;
    assert!(read.status.code().is_some(), "{}", stderr_of(&read));
    let retried = pb(&ws, &["retry", "--batch", "m1", "--expired", "--json"]).await;
    let reissued = json_of(&retried)["retried"]
        .as_array()
        .expect("references")
        .len();
    assert_eq!(reissued, 4, "every link expired: {}", stdout_of(&retried));
    pay(&ws, "m1", &batch_csv("A")).await;
    pay(&ws, "m2", &batch_csv("B")).await;
    // The reissues and the new batch are booked by the simulated clock, a month later.
    let month2 = booked_months(&ws, "m2");
    assert_eq!(month2.len(), 1, "{month2:?}");
    let month2 = month2[0].clone();
    assert!(month2 > month1, "{month1} then {month2}");
    assert_eq!(booked_months(&ws, "m1"), [month1.clone(), month2.clone()]);

    // Month 1 as it was; month 2 its own lines; both months the two together.
    let month1_after = journal(&ws, &month1, &month1, "j1-after.csv").await;
    assert_eq!(
        String::from_utf8_lossy(&month1_after),
        String::from_utf8_lossy(&month1_journal),
        "month 1's journal is the same after month 2"
    );
    let month2_journal = journal(&ws, &month2, &month2, "j2.csv").await;
    let both = journal(&ws, &month1, &month2, "j-both.csv").await;
    let (one, two, all) = (
        lines_of(&month1_journal),
        lines_of(&month2_journal),
        lines_of(&both),
    );
    assert_eq!(two.iter().filter(|l| l["line"] == "payment").count(), 8);
    let payments = |lines: &[BTreeMap<String, String>]| -> Vec<BTreeMap<String, String>> {
        lines
            .iter()
            .filter(|l| l["line"] == "payment")
            .cloned()
            .collect()
    };
    let mut joined = payments(&one);
    joined.extend(payments(&two));
    assert_eq!(payments(&all), joined, "month 1 + month 2 = both months");
    let after = balances(&ws).await;
    let left: BTreeMap<String, Decimal> = before
        .iter()
        .filter_map(|(c, b)| {
            let spent = *b - after.get(c).copied().unwrap_or_default();
            (!spent.is_zero()).then(|| (c.clone(), spent))
        })
        .collect();
    let mut added = totals(&one, "paid");
    for (c, t) in totals(&two, "paid") {
        *added.entry(c).or_default() += t;
    }
    assert_eq!(added, totals(&all, "paid"));
    assert_eq!(totals(&all, "paid"), summed(&all, "payment"));
    assert_eq!(totals(&all, "paid"), left, "what left each balance");

    // Both months close; month 1's journal is still the one closed.
    for month in [&month1, &month2] {
        let closed = pb(&ws, &["close", month, "--json"]).await;
        assert_eq!(closed.status.code(), Some(0), "{}", stderr_of(&closed));
        let closed = json_of(&closed);
        assert_eq!(closed["outcome"], "closed", "{closed}");
        if *month == month1 {
            assert_eq!(
                closed["journal_digest"],
                sha256(&month1_journal),
                "{closed}"
            );
        }
    }
    let again = journal(&ws, &month1, &month1, "j1-closed.csv").await;
    assert_eq!(sha256(&again), sha256(&month1_journal));
    let (since, until) = bounds(&month1);
    let said = pb(
        &ws,
        &[
            "report",
            "--since",
            &since,
            "--until",
            &until,
            "--journal",
            "j1-said.csv",
        ],
    )
    .await;
    assert!(
        stderr_of(&said).contains(&format!("journal of {month1}: as closed at")),
        "{}",
        stderr_of(&said)
    );
}

/// `paybatch close`: refused while an order of the month is not final, naming its batch;
/// then recorded with who and the journal's digest; said by `status` and the period report;
/// closing twice says so; and an order made final later in the closed month is booked on the
/// first day of the next month, with a note, leaving the closed month's journal as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_month_is_refused_while_orders_are_open_then_never_booked_into() {
    let ws = Workspace::new();
    away_from_month_end(&ws).await;
    pay(&ws, "early", &batch_csv("E")).await;
    let month = booked_months(&ws, "early").remove(0);
    let (first, last) = bounds(&month);
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    // An order processing at the service: the month cannot be closed.
    let accepted = "UPDATE orders SET state = 'ACCEPTED' WHERE id = (SELECT MIN(id) FROM orders)";
    db.execute(accepted, []).expect("an order processing");
    let refused = pb(&ws, &["close", &month]).await;
    assert_eq!(refused.status.code(), Some(3), "{}", stderr_of(&refused));
    let said = stderr_of(&refused);
    assert!(
        said.contains(&format!("month {month} cannot be closed")) && said.contains("batch early"),
        "{said}"
    );
    db.execute(
        "UPDATE orders SET state = 'COMPLETED' WHERE id = (SELECT MIN(id) FROM orders)",
        [],
    )
    .expect("final again");
    let before = journal(&ws, &month, &month, "before.csv").await;

    let closed = pb(&ws, &["close", &month, "--json"]).await;
    assert_eq!(closed.status.code(), Some(0), "{}", stderr_of(&closed));
    let closed = json_of(&closed);
    assert_eq!(closed["outcome"], "closed");
    assert_eq!(closed["journal_digest"], sha256(&before));
    assert_eq!(closed["journal_lines"], 4, "its 4 lines paid");
    assert!(
        closed["closed_by"]
            .as_str()
            .is_some_and(|b| b.contains('@')),
        "{closed}"
    );
    let twice = pb(&ws, &["close", &month]).await;
    assert_eq!(twice.status.code(), Some(0), "{}", stderr_of(&twice));
    assert!(
        stdout_of(&twice).contains(&format!("month {month} already closed")),
        "{}",
        stdout_of(&twice)
    );
    let status = pb(&ws, &["status"]).await;
    assert!(
        stdout_of(&status).contains(&format!("month {month} closed at")),
        "{}",
        stdout_of(&status)
    );

    let page = |name: &'static str| {
        let ws = &ws;
        let (first, last) = (first.clone(), last.clone());
        async move {
            let out = pb(
                ws,
                &[
                    "report", "--since", &first, "--until", &last, "--html", name,
                ],
            )
            .await;
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
            std::fs::read_to_string(ws.path(name)).expect("the page")
        }
    };
    let closed_page = page("closed.html").await;

    // Paid now, in the month closed: booked on the first day of the next.
    pay(&ws, "late", &batch_csv("L")).await;
    assert_eq!(
        page("closed-again.html").await,
        closed_page,
        "the closed month's page is as closed"
    );
    let (next_first, _) = bounds(&booked_months(&ws, "late")[0]);
    assert!(next_first > last, "{next_first} after {last}");
    assert_eq!(
        journal(&ws, &month, &month, "after.csv").await,
        before,
        "the closed month's journal is as closed"
    );
    let later = lines_of(&journal(&ws, &month, &booked_months(&ws, "late")[0], "later.csv").await);
    let late: Vec<_> = later
        .iter()
        .filter(|l| l["line"] == "payment" && l["batch"] == "late")
        .collect();
    assert_eq!(late.len(), 4);
    for l in late {
        assert_eq!(l["date"], next_first, "{l:?}");
        assert!(
            l["note"].contains(&format!("in month {month} already closed")),
            "{l:?}"
        );
    }
    let out = pb(
        &ws,
        &[
            "report", "--since", &first, "--until", &last, "--json", "--html", "p.html",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(json_of(&out)["closed"][0]["month"], month.as_str());
    let page = std::fs::read_to_string(ws.path("p.html")).expect("the page");
    assert!(
        page.contains(&format!("Month {month} is closed")),
        "the page says so"
    );
}

/// Per currency, the sum of `field` over `items` (each with a currency in `currency`).
fn per_currency(items: &Value, currency: &str, field: &str) -> BTreeMap<String, Decimal> {
    let mut sums: BTreeMap<String, Decimal> = BTreeMap::new();
    for item in items.as_array().expect("a list") {
        *sums
            .entry(item[currency].as_str().unwrap_or_default().to_string())
            .or_default() += dec(item[field].as_str().expect("an amount"));
    }
    sums
}

/// Converted rows, failed rows retried, links expired and reissued, and orders whose answer
/// claims a total 1000 times their items (MISMATCH): every table of the period (what left each
/// balance, the costs per product and per cost centre, the batch lines, the journal's totals,
/// in `--json`, on the page and in the journal) adds up to the same amounts to the cent, and
/// the MISMATCH claims are only in suspense.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_of_the_period_agrees_to_the_cent() {
    let mut config = fast_config(None);
    config.failure_rate = 0.25;
    config.faults.hostile.inflated_total_rate = 0.2;
    config.payout_life.claim_share = 0.0;
    config.payout_life.link_expiry_days = 5;
    let sim = start_sim(config).await;
    let base = sim.base_url();
    let ws = Workspace::new();
    let mut csv = String::from(
        "reference,product_code,face_value,currency,payment_currency,country,cost_center\n",
    );
    for i in 0..24 {
        let row = match i % 3 {
            0 => format!("R-{i},AMZ-US,{}.00,USD,,US,CC-US\n", 10 + i),
            1 => format!("R-{i},RAKUTEN-JP,{},JPY,USD,JP,CC-JP\n", 1000 * (1 + i % 4)),
            _ => format!("R-{i},WOOLWORTHS-AU,{},AUD,USD,AU,CC-AU\n", 20 + i),
        };
        csv.push_str(&row);
    }
    ws.write("b.csv", &csv);
    let run = ["run", "b.csv", "--poll-timeout", "60", "-q"];
    let first = against_url(&ws, &base, &run).await;
    assert!(first.status.code().is_some(), "{}", stderr_of(&first));
    // The failed rows retried (a few times at most), then the expired links reissued.
    for _ in 0..3 {
        let retried = against_url(&ws, &base, &["retry", "--batch", "b", "--json"]).await;
        let json: Value = serde_json::from_str(stdout_of(&retried).trim()).unwrap_or_default();
        if json["retried"].as_array().is_none_or(Vec::is_empty) {
            break;
        }
        against_url(&ws, &base, &run).await;
    }
    sim.advance_clock(std::time::Duration::from_secs(6 * 86_400))
        .expect("the clock moves");
    against_url(&ws, &base, &["payouts", "--batch", "b"]).await;
    let reissued = against_url(&ws, &base, &["retry", "--batch", "b", "--expired"]).await;
    assert!(reissued.status.code().is_some(), "{}", stderr_of(&reissued));
    against_url(&ws, &base, &run).await;
    let db = rusqlite::Connection::open(ws.ledger()).expect("the ledger opens");
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).expect("a count") };
    assert!(count("SELECT COUNT(*) FROM rows WHERE state = 'MISMATCH'") > 0);
    assert!(count("SELECT COUNT(*) FROM payouts WHERE reissued_at IS NOT NULL") > 0);
    assert!(count("SELECT COUNT(*) FROM rows WHERE state = 'COMPLETED' AND attempt > 1") > 0);

    let out = against_url(
        &ws,
        &base,
        &[
            "report",
            "--since",
            "2000-01-01",
            "--until",
            "2100-12-31",
            "--json",
            "--journal",
            "j.csv",
            "--html",
            "p.html",
            "--group-by",
            "cost_center",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let json = json_of(&out);
    let balances: BTreeMap<String, Decimal> = {
        let mut sums = BTreeMap::new();
        for b in json["balances"].as_array().expect("balances") {
            *sums
                .entry(b["currency"].as_str().unwrap_or_default().to_string())
                .or_default() += dec(b["charged"].as_str().expect("charged"));
        }
        sums
    };
    assert!(!balances.is_empty(), "{json}");
    let products = per_currency(&json["products"], "charged_currency", "charged");
    let groups = per_currency(&json["groups"][0]["lines"], "charged_currency", "charged");
    let mut batches: BTreeMap<String, Decimal> = BTreeMap::new();
    for b in json["batches"].as_array().expect("batches") {
        for (c, v) in per_currency(&b["charged"], "currency", "amount") {
            *batches.entry(c).or_default() += v;
        }
    }
    let paid_totals: Vec<Value> = json["journal_totals"]
        .as_array()
        .expect("journal totals")
        .iter()
        .filter(|t| t["kind"] == "paid")
        .cloned()
        .collect();
    let journal_json = per_currency(&Value::Array(paid_totals), "currency", "amount");
    let lines = lines_of(&std::fs::read(ws.path("j.csv")).expect("the journal"));
    assert_eq!(products, balances, "costs per product");
    assert_eq!(groups, balances, "costs per cost centre");
    assert_eq!(batches, balances, "the batch lines");
    assert_eq!(journal_json, balances, "the journal's totals, --json");
    assert_eq!(
        totals(&lines, "paid"),
        balances,
        "the journal's total lines"
    );
    assert_eq!(summed(&lines, "payment"), balances, "the journal's lines");
    let paid_rows = json["paid_rows"].as_u64().expect("paid rows") as usize;
    assert_eq!(
        lines.iter().filter(|l| l["line"] == "payment").count(),
        paid_rows
    );
    // The MISMATCH claims: suspense lines, totalled apart, never in what left the balance.
    let suspense = summed(&lines, "suspense");
    assert!(!suspense.is_empty(), "suspense lines");
    assert_eq!(totals(&lines, "suspense"), suspense);
    assert_eq!(
        per_currency(&json["suspense"], "currency", "claimed"),
        suspense
    );
    assert!(
        lines
            .iter()
            .filter(|l| l["line"] == "suspense")
            .all(|l| l["status"] == "MISMATCH" && !l["expected_amount"].is_empty()),
        "{lines:?}"
    );
    // The page shows the same totals, grouped as it writes amounts.
    let page = std::fs::read_to_string(ws.path("p.html")).expect("the page");
    for t in json["journal_totals"].as_array().expect("totals") {
        let amount = t["amount"].as_str().expect("an amount");
        let shown = format!(
            "{} {}",
            paybatch::money::grouped_text(amount),
            t["currency"].as_str().unwrap_or_default()
        );
        assert!(page.contains(&shown), "{shown} on the page");
    }
    sim.shutdown().await;
}

/// An order the service answered with another order (its description names another
/// idempotency key): its rows are MISMATCH, and this ledger books none of it, neither paid nor
/// in suspense (the ledger that made that order books it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_answered_for_another_key_is_never_booked_here() {
    let sim = start_sim(fast_config(None)).await;
    let rewrite: Rewrite = Arc::new(|method, path, status, json| {
        let finished = json["status"] == "COMPLETED";
        if *method == axum::http::Method::GET
            && path.starts_with("/order/")
            && status == 200
            && finished
        {
            json["description"] =
                "paybatch 7c1d2e3f-0a1b-5c2d-8e3f-4a5b6c7d8e9f batch=pay rows=M-1 (+1 more)".into();
        }
    });
    let base = proxy(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write(
        "pay.csv",
        "reference,product_code,face_value,currency\nM-1,AMZ-US,10,USD\nM-2,AMZ-US,20,USD\n",
    );
    let run = against_url(&ws, &base, &["run", "pay.csv", "--poll-timeout", "60"]).await;
    assert_eq!(run.status.code(), Some(4), "{}", stderr_of(&run));
    let out = against_url(
        &ws,
        &base,
        &[
            "report",
            "--since",
            "2000-01-01",
            "--until",
            "2100-12-31",
            "--journal",
            "j.csv",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = lines_of(&std::fs::read(ws.path("j.csv")).expect("the journal"));
    assert!(lines.is_empty(), "nothing booked: {lines:?}");
    assert!(
        stderr_of(&out).contains("2 rows of orders the service answered with another order"),
        "{}",
        stderr_of(&out)
    );
    sim.shutdown().await;
}

/// A ledger of the previous schema (14): migration 015 books the orders already final at the
/// time the ledger recorded them final, so that their lines are in the period they were in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_of_the_previous_schema_books_its_final_orders_when_it_recorded_them() {
    let ws = Workspace::new();
    pay(&ws, "old", &batch_csv("O")).await;
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    db.execute_batch(
        "DROP TABLE closed_months; DROP INDEX orders_booked_on;
         ALTER TABLE orders DROP COLUMN booked_on; ALTER TABLE orders DROP COLUMN booked_at;
         ALTER TABLE payouts DROP COLUMN error_type;
         UPDATE orders SET finished_at = '2026-10-31T23:59:59.500Z' WHERE finished_at IS NOT NULL;
         PRAGMA user_version = 14;",
    )
    .expect("schema 14");
    drop(db);
    let status = pb(&ws, &["status"]).await;
    assert_eq!(status.status.code(), Some(0), "{}", stderr_of(&status));
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    let booked: Vec<(String, String)> = db
        .prepare("SELECT booked_at, booked_on FROM orders ORDER BY id")
        .expect("query")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("orders")
        .map(|o| o.expect("an order"))
        .collect();
    assert!(!booked.is_empty());
    for (at, on) in &booked {
        assert_eq!(
            (at.as_str(), on.as_str()),
            ("2026-10-31T23:59:59.500Z", "2026-10-31")
        );
    }
    let october = lines_of(&journal(&ws, "2026-10", "2026-10", "j.csv").await);
    assert_eq!(
        october.iter().filter(|l| l["line"] == "payment").count(),
        4,
        "October's lines"
    );
}
