//! A refusal of one item re-plans the others: the service refuses an order naming items of it
//! (`items.N....`), those rows are REJECTED with its reason, and the other rows are paid in new
//! orders in the same run, also when the run is killed between the refusal and its record.

use std::collections::BTreeSet;

use crate::support::*;

/// The walkthrough's file: `rows` rows of 10.00 USD e-mailed to `r-N@example.com`, and the
/// addresses of every `every`th row from the 4th, `refused` of them, that the service refuses.
fn walkthrough(ws: &Workspace, rows: usize, refused: usize, every: usize) -> BTreeSet<String> {
    let mut text = String::from("reference,product_code,face_value,currency,email\n");
    let mut refuse = BTreeSet::new();
    for i in 1..=rows {
        let email = format!("r-{i}@example.com");
        if i % every == 4 && refuse.len() < refused {
            refuse.insert(email.clone());
        }
        text.push_str(&format!("W-{i},AMZ-US,10.00,USD,{email}\n"));
    }
    ws.write("month.csv", &text);
    refuse
}

/// The result file's rows: (reference, status, error_message).
fn results(ws: &Workspace) -> Vec<(String, String, String)> {
    let rows = read_csv(&ws.path("month.result.csv"));
    let (r, s, m) = (
        col(&rows[0], "reference"),
        col(&rows[0], "status"),
        col(&rows[0], "error_message"),
    );
    rows[1..]
        .iter()
        .map(|row| (row[r].clone(), row[s].clone(), row[m].clone()))
        .collect()
}

/// Every row the service refused is REJECTED with its reason; every other row COMPLETED, once.
fn assert_paid_but_refused(
    ws: &Workspace,
    sim: &paybatch::sim::SimHandle,
    refused: &BTreeSet<String>,
    rows: usize,
) {
    let results = results(ws);
    assert_eq!(results.len(), rows);
    let mut completed = Vec::new();
    for (reference, status, message) in &results {
        let i: usize = reference[2..].parse().expect("W-N");
        let email = format!("r-{i}@example.com");
        if refused.contains(&email) {
            assert_eq!(status, "REJECTED", "{reference}");
            assert!(
                message.contains(&format!("'{email}' is not a valid email address"))
                    && message.contains("distribution_method.email_address"),
                "{reference}: {message}"
            );
        } else {
            assert_eq!(status, "COMPLETED", "{reference}: {message}");
            completed.push(reference.clone());
        }
    }
    assert_eq!(completed.len(), rows - refused.len());
    assert_one_live_order_per_row(sim, &completed);
}

/// The walkthrough: 800 rows, 28 addresses the service refuses by item, 25 rows an
/// order: 772 COMPLETED and 28 REJECTED in one run, each with the service's reason in the
/// result file and named in `status`; the summary says how many rows were planned again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_refused_address_never_sinks_its_order() {
    let ws = Workspace::new();
    let refused = walkthrough(&ws, 800, 28, 28);
    assert_eq!(refused.len(), 28);
    let sim = start_sim(paybatch::sim::SimConfig {
        refuse_emails: refused.clone(),
        rate_limit_per_minute: 0,
        ..fast_config(None)
    })
    .await;
    let out = run_file(
        &ws,
        &sim,
        "month.csv",
        &["--items-per-order", "25", "--json"],
        &[],
    )
    .await;
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains(
            "submitted: 60 orders answered (28 of them the rows of refused orders planned again)"
        ),
        "{text}"
    );
    assert_paid_but_refused(&ws, &sim, &refused, 800);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // Each refused row was alone in its order of 25: the 24 others were planned again.
    assert_eq!(json["replanned"]["rows"], 28 * 24, "{json}");
    assert_eq!(
        json["replanned"]["because"]["validation_error"],
        28 * 24,
        "{json}"
    );
    let status = against_url(&ws, &sim.base_url(), &["status", "--batch", "month"]).await;
    let status = output_of(&status);
    for email in refused.iter().take(3) {
        let i: usize = email[2..email.find('@').expect("@")].parse().expect("N");
        assert!(status.contains(&format!("W-{i}")), "{status}");
    }
    assert!(status.contains("is not a valid email address"), "{status}");
}

/// A run killed between the refusal and its record (or just after it, before the new order is
/// sent) pays nothing twice: the refused order is an intent in doubt, sent again with its key,
/// and the service answers the same refusal; the rows end as in one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_around_the_replan_pays_nothing_twice() {
    for point in ["before_replan", "after_replan:2"] {
        let ws = Workspace::new();
        let refused = walkthrough(&ws, 60, 3, 20);
        let sim = start_sim(paybatch::sim::SimConfig {
            refuse_emails: refused.clone(),
            rate_limit_per_minute: 0,
            ..fast_config(None)
        })
        .await;
        let extra = ["--items-per-order", "10", "--concurrency", "1"];
        let out = run_file(
            &ws,
            &sim,
            "month.csv",
            &extra,
            &[("PAYBATCH_FAILPOINT", point)],
        )
        .await;
        let text = output_of(&out);
        assert!(text.contains("fail point"), "{point}: {text}");
        assert_ne!(out.status.code(), Some(0), "{point}: {text}");
        let out = run_file(&ws, &sim, "month.csv", &extra, &[]).await;
        let text = output_of(&out);
        assert_eq!(out.status.code(), Some(4), "{point}: {text}");
        assert_paid_but_refused(&ws, &sim, &refused, 60);
        assert!(
            text.contains("re-planned: 27 rows planned again in new orders"),
            "{point}: {text}"
        );
    }
}
