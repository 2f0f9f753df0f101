//! `paybatch report` through the real binary, against a real simulator on a loopback port and a
//! real SQLite ledger in a temporary directory: the result CSV on stdout, and the HTML report a
//! finance lead signs off (what left each balance, the plan digest, breakdowns per column, the
//! rows that did not complete).

use std::collections::BTreeMap;
use std::process::Output;

use crate::support::*;
use paybatch::sim::SimHandle;
use rust_decimal::Decimal;

use crate::support::{paybatch_in as paybatch, stderr_of as stderr, stdout_of as stdout};

/// Pays the sample file (five currencies, a JPY product paid from the USD balance) as batch
/// `nov`; returns the workspace and the ledger path.
async fn paid_sample() -> (Workspace, String, SimHandle) {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = against_url(&ws, &sim.base_url(), &["run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ledger = ws.ledger().to_str().expect("utf-8 path").to_string();
    (ws, ledger, sim)
}

async fn report(ws: &Workspace, ledger: &str, args: &[&str]) -> Output {
    let mut all = vec!["report", "--batch", "nov", "--ledger", ledger];
    all.extend_from_slice(args);
    paybatch(ws.dir.path(), &all, &[]).await
}

fn page(ws: &Workspace, name: &str) -> String {
    std::fs::read_to_string(ws.path(name)).expect("the HTML report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_dash_writes_the_result_csv_on_stdout() {
    let (ws, ledger, _sim) = paid_sample().await;
    let out = report(&ws, &ledger, &["--out", "-"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes());
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| {
            r.expect("a CSV record")
                .iter()
                .map(str::to_string)
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 1 + input_rows(&ws.path("nov.csv")), "{text}");
    let status = col(&rows[0], "status");
    assert!(rows[1..].iter().all(|r| r[status] == "COMPLETED"), "{text}");
    assert!(text.contains("/redeem/"), "the payout links are in it");
    assert!(!ws.path("-").exists(), "no file named `-`");
    assert!(
        !stderr(&out).contains("reference,"),
        "messages only on stderr"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_opens_with_what_left_each_balance_and_the_plan_digest() {
    let (ws, ledger, sim) = paid_sample().await;
    let out = report(&ws, &ledger, &["--html", "nov.html", "--out", "result.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = page(&ws, "nov.html");

    // What the result file says left each balance, per currency (never added across them).
    let result = read_csv(&ws.path("result.csv"));
    let (amount, currency) = (
        col(&result[0], "debited_amount"),
        col(&result[0], "debited_currency"),
    );
    let mut charged: BTreeMap<String, Decimal> = BTreeMap::new();
    for r in &result[1..] {
        *charged.entry(r[currency].clone()).or_default() +=
            r[amount].parse::<Decimal>().expect("an amount");
    }
    assert!(charged.len() >= 2, "two currencies or more: {charged:?}");
    let balances = &html[html.find("What left each balance").expect("the section")..];
    let balances = &balances[..balances.find("<h2>").expect("a next section")];
    for (cur, total) in &charged {
        assert!(
            balances.contains(&format!("{total:.2} {cur}"))
                || balances.contains(&format!("{total} {cur}")),
            "{total} {cur} in {balances}"
        );
        assert!(balances.contains(&format!("balance {cur}")), "{balances}");
    }
    // The JPY product paid from the USD balance is a line of its own.
    assert!(
        balances.contains("JPY products, converted to USD"),
        "{balances}"
    );
    assert!(balances.contains("3,000 JPY"), "{balances}");

    // The plan digest is the one `validate` shows for the same file.
    let out = against_url(&ws, &sim.base_url(), &["validate", "nov.csv"]).await;
    let digest = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("plan digest: ").map(str::to_string))
        .expect("validate prints the digest");
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("{needle} in the page"))
    };
    assert!(at(&digest) < at("Per currency and status"), "digest first");
    // The technical details come last.
    assert!(at("What left each balance") < at("Input file SHA-256"));
    assert!(at("Per product") < at("API key fingerprint"));
    assert!(at("Rows that need attention") < at("Technical details"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_by_breaks_the_rows_down_per_value_of_a_column() {
    let (ws, ledger, _sim) = paid_sample().await;
    let out = report(
        &ws,
        &ledger,
        &["--html", "nov.html", "--group-by", "department"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = page(&ws, "nov.html");
    let section = &html[html.find("<h2>Per department</h2>").expect("the breakdown")..];
    // Two Engineering rows in USD (50.00 and 50), one in JPY: never added together.
    assert!(
        section.contains(
            "<td>USD</td><td>Engineering</td><td class=\"num\">2</td><td class=\"num\">100.00</td>"
        ),
        "{section}"
    );
    assert!(
        section.contains(
            "<td>JPY</td><td>Engineering</td><td class=\"num\">1</td><td class=\"num\">3,000</td>"
        ),
        "{section}"
    );
    assert!(section.contains("Research, Data"), "{section}");

    // A column the file does not have: a usage error naming the columns, nothing written.
    let out = report(
        &ws,
        &ledger,
        &["--html", "other.html", "--group-by", "team"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no column `team`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("department"), "{}", stderr(&out));
    assert!(!ws.path("other.html").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_row_shows_its_own_reason_and_no_price() {
    let ws = Workspace::new();
    let mut failing = fast_config(None);
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency,email\n\
         R-1,AMZ-US,37.00,USD,ann@example.com\n",
    );
    let out = against_url(&ws, &sim.base_url(), &["run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let ledger = ws.ledger().to_str().expect("utf-8 path").to_string();
    let out = report(
        &ws,
        &ledger,
        &["--out", "nov.csv.out", "--html", "nov.html"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = read_csv(&ws.path("nov.csv.out"));
    let row = &result[1];
    assert_eq!(row[col(&result[0], "status")], "FAILED");
    let price = &row[col(&result[0], "price")];
    let reason = &row[col(&result[0], "error_message")];
    assert!(!reason.is_empty());
    let html = page(&ws, "nov.html");
    assert!(html.contains(reason.as_str()), "its own reason: {html}");
    // The service's answer of a failed order still prices its items: the ledger keeps it.
    assert!(!price.is_empty(), "{row:?}");
    assert!(
        !html.contains(&format!(">{price}<")),
        "a failed row costs nothing: {price} in {html}"
    );
    let states = &html[html.find("Per currency and status").expect("section")..];
    let failed = &states[states.find("FAILED").expect("the FAILED line")..];
    let failed = &failed[..failed.find("</tr>").expect("end of line")];
    assert!(
        failed.ends_with("<td class=\"num\">&mdash;</td>"),
        "{failed}"
    );
    assert!(html.contains("Nothing was charged"), "{html}");
}
