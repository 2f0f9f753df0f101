//! What the published contract leaves optional is never a mismatch. The simulator answers a
//! share of its answers with only what the contract requires (`minimal_answers`: no
//! `transaction_detail`, `description`, `metadata`, `completed_at`, item `currency`, link
//! expiry, product details or error `help`), and paybatch pays every row exactly once with the
//! outcomes `docs/service-api.md` promises: a converted row whose answer leaves out its
//! `transaction_detail` completes, its total not confirmed; an order whose answer names neither
//! key nor batch completes, not confirmed as the order sent; a `transaction_detail` that is
//! there and disagrees is still a MISMATCH.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::support::*;
use paybatch::sim::SimConfig;

/// Rows paid from a balance in another currency (embedded FX, one-item sync orders), and one
/// paid in its own currency.
const CONVERTED: &str = "reference,product_code,face_value,currency,payment_currency\n\
FX-1,AMZ-DE,15.00,EUR,USD\n\
FX-2,AMZ-DE,50,EUR,USD\n\
FX-3,TESCO-GB,20,GBP,USD\n\
FX-4,UBER-JP,3000,JPY,USD\n\
US-1,AMZ-US,10.00,USD,USD\n";

const CONVERTED_ROWS: [&str; 4] = ["FX-1", "FX-2", "FX-3", "FX-4"];

fn minimal(share: f64, state: Option<std::path::PathBuf>) -> SimConfig {
    SimConfig {
        minimal_answers: share,
        ..fast_config(state)
    }
}

async fn run(ws: &Workspace, base: &str, args: &[&str]) -> std::process::Output {
    tokio::time::timeout(Duration::from_secs(150), against_url(ws, base, args))
        .await
        .expect("the command ends")
}

/// The result file as (reference -> column -> value).
fn results(ws: &Workspace, file: &str) -> BTreeMap<String, HashMap<String, String>> {
    let rows = read_csv(&ws.path(file));
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

/// The service orders (ground truth) of each reference, from their metadata.
fn orders_per_reference(sim: &paybatch::sim::SimHandle) -> HashMap<String, Vec<String>> {
    let mut per: HashMap<String, Vec<String>> = HashMap::new();
    for o in sim.orders() {
        for r in paybatch::batch::order_body::references_in_metadata(&o.metadata) {
            per.entry(r).or_default().push(o.id.clone());
        }
    }
    per
}

/// Converted rows against answers holding only what is required complete, each marked "total
/// not confirmed" in the result file, the run's `--json`, `status`, the HTML report and the
/// accounting journal; the run exits 0 and each row is paid once. With `transaction_detail`
/// there, an inflated total is still a MISMATCH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converted_rows_against_minimal_answers_complete_their_totals_not_confirmed() {
    let sim = start_sim(minimal(1.0, None)).await;
    let ws = Workspace::new();
    ws.write("fx.csv", CONVERTED);
    let base = sim.base_url();
    let out = run(&ws, &base, &["run", "fx.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("run --json");
    assert_eq!(summary["total_unconfirmed_rows"], 4, "{summary}");
    assert_eq!(summary["unconfirmed_rows"], 5, "{summary}");
    assert!(sim.stats().minimal_answers > 0);

    let rows = results(&ws, "fx.result.csv");
    for (reference, row) in &rows {
        assert_eq!(row["status"], "COMPLETED", "{reference}: {row:?}");
        let converted = CONVERTED_ROWS.contains(&reference.as_str());
        let expected = if converted {
            "order_and_total_unconfirmed"
        } else {
            "order_unconfirmed"
        };
        assert_eq!(row["error_type"], expected, "{reference}: {row:?}");
        assert_eq!(
            row["error_message"].contains("total not confirmed"),
            converted,
            "{reference}: {row:?}"
        );
    }
    let per = orders_per_reference(&sim);
    for reference in rows.keys() {
        assert_eq!(per.get(reference).map(Vec::len), Some(1), "{reference}");
    }

    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8");
    let status = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "fx", "--ledger", ledger, "--json"],
        &[],
    )
    .await;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(
        status["total_unconfirmed_orders"].as_array().map(Vec::len),
        Some(4),
        "{status}"
    );
    let text = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "fx", "--ledger", ledger],
        &[],
    )
    .await;
    assert!(
        stdout_of(&text).contains("total not confirmed: 4 COMPLETED"),
        "{}",
        stdout_of(&text)
    );

    let report = paybatch_in(
        ws.dir.path(),
        &[
            "report", "--batch", "fx", "--ledger", ledger, "--html", "fx.html",
        ],
        &[],
    )
    .await;
    assert_eq!(report.status.code(), Some(0), "{}", stderr_of(&report));
    let page = std::fs::read_to_string(ws.path("fx.html")).expect("the report");
    assert!(
        page.contains("total not confirmed") && page.contains("FX-4"),
        "{page}"
    );

    let journal = paybatch_in(
        ws.dir.path(),
        &[
            "report",
            "--since",
            "2000-01-01",
            "--ledger",
            ledger,
            "--journal",
            "j.csv",
        ],
        &[],
    )
    .await;
    assert_eq!(journal.status.code(), Some(0), "{}", stderr_of(&journal));
    let lines = read_csv(&ws.path("j.csv"));
    let (reference, note) = (col(&lines[0], "reference"), col(&lines[0], "note"));
    let booked: Vec<&Vec<String>> = lines[1..].iter().filter(|l| l[0] != "total").collect();
    assert_eq!(booked.len(), 5, "{lines:?}");
    for line in booked {
        let converted = CONVERTED_ROWS.contains(&line[reference].as_str());
        // A total not confirmed is money not believed yet: in suspense, not paid.
        let expected = if converted {
            ("suspense", "order and total not confirmed")
        } else {
            ("payment", "order not confirmed")
        };
        assert_eq!(
            (line[0].as_str(), line[note].as_str()),
            expected,
            "{line:?}"
        );
    }
    an_inflated_converted_total_with_its_transaction_detail_is_a_mismatch().await;
}

/// With `transaction_detail` there, an inflated `total_price` of a converted order is a
/// MISMATCH, as before: only what is left out is not a difference.
async fn an_inflated_converted_total_with_its_transaction_detail_is_a_mismatch() {
    let mut config = fast_config(None);
    config.faults.hostile.inflated_total_rate = 1.0;
    let sim = start_sim(config).await;
    let ws = Workspace::new();
    ws.write("fx.csv", CONVERTED);
    let out = run(&ws, &sim.base_url(), &["run", "fx.csv"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    for (reference, row) in results(&ws, "fx.result.csv") {
        assert_eq!(row["status"], "MISMATCH", "{reference}: {row:?}");
        assert!(
            row["error_message"].contains("total price"),
            "{reference}: {row:?}"
        );
    }
}

/// A batch of single, multi-item and converted rows against a share of minimal answers, with
/// dropped connections and server errors: run until it finishes, every row is paid exactly
/// once and COMPLETED, noted only as the table promises; the ledger lost, it is rebuilt from
/// the service through minimal answers and nothing is paid again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_of_minimal_answers_pays_each_row_once_and_a_lost_ledger_is_rebuilt() {
    let ws = Workspace::new();
    let mut config = minimal(0.5, Some(ws.sim_state()));
    config.faults.drop_rate = 0.2;
    config.faults.error_rate = 0.15;
    let sim = start_sim(config).await;
    let mut csv = String::from(CONVERTED);
    for i in 0..6 {
        csv.push_str(&format!("M-{i},AMZ-US,{}.00,USD,USD\n", 5 + i));
    }
    ws.write("mix.csv", &csv);
    let base = sim.base_url();
    let args = [
        "run",
        "mix.csv",
        "--items-per-order",
        "3",
        "--poll-timeout",
        "60",
    ];
    let mut finished = None;
    for _ in 0..6 {
        let out = run(&ws, &base, &args).await;
        match out.status.code() {
            Some(0) => {
                finished = Some(out);
                break;
            }
            Some(5) => {}
            other => panic!("run exited {other:?}: {}", output_of(&out)),
        }
    }
    let out = finished.expect("a run finished");
    assert!(sim.stats().minimal_answers > 0, "{}", output_of(&out));
    let rows = results(&ws, "mix.result.csv");
    assert_eq!(rows.len(), 11);
    let per = orders_per_reference(&sim);
    for (reference, row) in &rows {
        assert_eq!(per.get(reference).map(Vec::len), Some(1), "{reference}");
        assert_eq!(row["status"], "COMPLETED", "{reference}: {row:?}");
        let noted = row["error_type"].as_str();
        let allowed: &[&str] = if CONVERTED_ROWS.contains(&reference.as_str()) {
            &[
                "",
                "order_unconfirmed",
                "total_unconfirmed",
                "order_and_total_unconfirmed",
            ]
        } else {
            &["", "order_unconfirmed"]
        };
        assert!(allowed.contains(&noted), "{reference}: {row:?}");
    }
    let posts = order_posts(&sim);
    let orders = sim.orders().len();

    // The ledger lost: reconcile rebuilds it through minimal answers (again while an order
    // cannot be told), then a run pays nothing more.
    for file in ["", "-wal", "-shm"] {
        let path = std::path::PathBuf::from(format!("{}{file}", ws.ledger().display()));
        if path.exists() {
            std::fs::remove_file(&path).expect("remove the ledger");
        }
    }
    let mut rebuilt = false;
    for _ in 0..8 {
        let out = run(
            &ws,
            &base,
            &["reconcile", "--batch", "mix", "--rebuild", "mix.csv"],
        )
        .await;
        match out.status.code() {
            Some(0) => {
                rebuilt = true;
                break;
            }
            Some(5) => {}
            other => panic!("reconcile exited {other:?}: {}", output_of(&out)),
        }
    }
    assert!(rebuilt, "the ledger was rebuilt");
    // While an order of the account is answered without naming its rows, the run plans
    // nothing and exits 5: run again.
    let mut paid_again = None;
    for _ in 0..8 {
        let again = run(&ws, &base, &args).await;
        match again.status.code() {
            Some(0) => {
                paid_again = Some(again);
                break;
            }
            Some(5) => {}
            other => panic!("the run exited {other:?}: {}", output_of(&again)),
        }
    }
    assert!(paid_again.is_some(), "a run after the rebuild finished");
    assert_eq!(
        order_posts(&sim),
        posts,
        "not a single order was sent again"
    );
    assert_eq!(sim.orders().len(), orders, "nothing new at the service");
    for (reference, row) in results(&ws, "mix.result.csv") {
        assert_eq!(row["status"], "COMPLETED", "{reference}: {row:?}");
    }
}

/// Each payout link's status is read through minimal answers (no `expiry_date`), a converted
/// row's among them: the counts per status are the simulator's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payout_links_are_followed_through_minimal_answers() {
    let sim = start_sim(minimal(1.0, None)).await;
    let ws = Workspace::new();
    let mut csv = String::from(
        "reference,product_code,face_value,currency,payment_currency\nPX-1,AMZ-DE,15.00,EUR,USD\n",
    );
    for i in 0..8 {
        csv.push_str(&format!("P-{i},AMZ-US,10.00,USD,USD\n"));
    }
    ws.write("p.csv", &csv);
    let base = sim.base_url();
    let out = run(&ws, &base, &["run", "p.csv", "--items-per-order", "3"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    sim.advance_clock(Duration::from_secs(40 * 24 * 3600))
        .expect("the clock moves");
    let read = run(&ws, &base, &["payouts", "--batch", "p", "--json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&read.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", output_of(&read)));
    let census = sim.payouts().expect("census");
    for (status, n) in census.payouts {
        let counted = json["payouts"][status.as_str()].as_i64().unwrap_or(0);
        assert_eq!(counted, n as i64, "{status:?}: {json}");
    }
}
