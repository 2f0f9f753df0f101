//! `paybatch history` through the real binary, on the embedded simulator in a temporary
//! directory: "did we pay this person already?" answered across batches, by email in any case
//! and by reference, with pinned JSON keys, never a payout link, and no ledger created where
//! there is none.

use std::process::Output;

use crate::support::{
    Workspace, col, output_of, paybatch_in as paybatch, read_csv, stderr_of as stderr,
    stdout_of as stdout,
};

const HEADER: &str = "reference,product_code,face_value,currency,email\n";

/// Pays `nov` (Jane as `jane.doe@example.com`, and John) and `dec` (Jane as
/// `Jane.Doe@Example.COM`, under other references), and plans `jan` (Jane again) without
/// sending it, all on the embedded simulator.
async fn three_batches() -> Workspace {
    let ws = Workspace::new();
    ws.write(
        "nov.csv",
        &format!(
            "{HEADER}NOV-1,AMZ-US,10.00,USD,jane.doe@example.com\n\
             NOV-2,AMZ-US,25,USD,john.roe@example.com\n"
        ),
    );
    ws.write(
        "dec.csv",
        &format!(
            "{HEADER}DEC-1,AMZ-DE,15,EUR,Jane.Doe@Example.COM\n\
             DEC-2,AMZ-US,5.00,USD,john.roe@example.com\n"
        ),
    );
    ws.write(
        "jan.csv",
        &format!("{HEADER}JAN-1,AMZ-US,20,USD,jane.doe@example.com\n"),
    );
    for file in ["nov.csv", "dec.csv"] {
        let out = paybatch(ws.dir.path(), &["run", file], &[]).await;
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
    }
    let out = paybatch(ws.dir.path(), &["run", "jan.csv", "--plan-only"], &[]).await;
    assert!(
        matches!(out.status.code(), Some(0 | 5)),
        "jan.csv --plan-only: {}",
        stderr(&out)
    );
    ws
}

async fn history(ws: &Workspace, args: &[&str]) -> Output {
    let mut all = vec!["history"];
    all.extend_from_slice(args);
    paybatch(ws.dir.path(), &all, &[]).await
}

/// The payout links of the result files in the workspace.
fn payout_links(ws: &Workspace, results: &[&str]) -> Vec<String> {
    let mut links = Vec::new();
    for name in results {
        let rows = read_csv(&ws.path(name));
        let url = col(&rows[0], "payout_url");
        links.extend(
            rows[1..]
                .iter()
                .map(|r| r[url].clone())
                .filter(|u| !u.is_empty()),
        );
    }
    links
}

/// The lines of the table whose first cell is `batch`.
fn table_lines<'t>(text: &'t str, batch: &str) -> Vec<&'t str> {
    text.lines()
        .filter(|l| l.split_whitespace().next() == Some(batch))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_paid_in_two_batches_is_found_in_both_in_any_case() {
    let ws = three_batches().await;
    let links = payout_links(
        &ws,
        &["nov.SIMULATED.result.csv", "dec.SIMULATED.result.csv"],
    );
    assert_eq!(
        links.len(),
        4,
        "every paid row has its link in the result file"
    );

    for query in [
        "jane.doe@example.com",
        "JANE.DOE@EXAMPLE.COM",
        "Jane.doe@example.Com",
    ] {
        let out = history(&ws, &["--email", query]).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.contains("paid 2 times: 15.00 EUR + 10.00 USD face value")
                && first.contains("in batch dec"),
            "{text}"
        );
        assert!(text.contains("all of them SIMULATED"), "{text}");
        let nov = table_lines(&text, "nov");
        let dec = table_lines(&text, "dec");
        let jan = table_lines(&text, "jan");
        assert_eq!(nov.len(), 1, "{text}");
        assert!(
            nov[0].contains("NOV-1") && nov[0].contains("COMPLETED"),
            "{text}"
        );
        assert!(nov[0].contains("10.00 USD"), "{text}");
        assert_eq!(dec.len(), 1, "{text}");
        assert!(
            dec[0].contains("DEC-1") && dec[0].contains("COMPLETED"),
            "{text}"
        );
        // Planned, not sent: listed, and said to be unfinished, not paid.
        assert_eq!(jan.len(), 1, "{text}");
        assert!(jan[0].contains("PLANNED"), "{text}");
        assert!(
            text.contains("1 not finished (PLANNED 1)") && text.contains("--batch jan"),
            "{text}"
        );
        // John's payouts are not Jane's.
        assert!(!text.contains("NOV-2") && !text.contains("DEC-2"), "{text}");
        let all = output_of(&out);
        for link in &links {
            assert!(!all.contains(link.as_str()), "a payout link shown: {all}");
        }
        assert!(!all.contains("/redeem/"), "{all}");
    }

    // The columns line up: each value starts where its header does.
    let out = history(&ws, &["--email", "jane.doe@example.com"]).await;
    let text = stdout(&out);
    let header = text
        .lines()
        .find(|l| l.starts_with("BATCH "))
        .unwrap_or_else(|| panic!("a table header: {text}"));
    let state_at = header.find("STATE").expect("a STATE column");
    for batch in ["nov", "dec", "jan"] {
        let line = table_lines(&text, batch)[0];
        assert!(
            line[state_at..].starts_with("COMPLETED") || line[state_at..].starts_with("PLANNED"),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_is_found_with_its_batch_and_no_link() {
    let ws = three_batches().await;
    let links = payout_links(&ws, &["nov.SIMULATED.result.csv"]);
    let out = history(&ws, &["--reference", "NOV-2"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("paid 1 time: 25.00 USD face value")),
        "{text}"
    );
    let nov = table_lines(&text, "nov");
    assert_eq!(nov.len(), 1, "{text}");
    // Looked up by reference, the table names the address.
    assert!(nov[0].contains("john.roe@example.com"), "{text}");
    assert!(table_lines(&text, "dec").is_empty(), "{text}");
    for link in &links {
        assert!(!output_of(&out).contains(link.as_str()), "{text}");
    }

    // Planned, never sent: not paid.
    let out = history(&ws, &["--reference", "JAN-1"]).await;
    assert!(
        stdout(&out)
            .starts_with("reference JAN-1: not paid: 1 payout in this ledger, not completed\n"),
        "{}",
        stdout(&out)
    );

    // Both: the rows that match both.
    let out = history(
        &ws,
        &["--email", "JOHN.ROE@example.com", "--reference", "NOV-2"],
    )
    .await;
    assert_eq!(
        table_lines(&stdout(&out), "nov").len(),
        1,
        "{}",
        stdout(&out)
    );
    let out = history(
        &ws,
        &["--email", "jane.doe@example.com", "--reference", "NOV-2"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .starts_with("no payout to jane.doe@example.com with reference NOV-2 in this ledger"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_object_has_stable_keys() {
    let ws = three_batches().await;
    let out = history(&ws, &["--email", "JANE.doe@example.com", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    let keys: Vec<&str> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "email",
            "reference",
            "ledger",
            "batches_searched",
            "count",
            "paid",
            "paid_face_value",
            "payouts"
        ]
    );
    assert_eq!(v["email"], "JANE.doe@example.com");
    assert_eq!(v["reference"], serde_json::Value::Null);
    assert_eq!(v["batches_searched"], 3);
    assert_eq!(v["count"], 3);
    assert_eq!(v["paid"], 2);
    assert_eq!(
        v["paid_face_value"],
        serde_json::json!({"EUR": "15", "USD": "10.00"})
    );
    let payouts = v["payouts"].as_array().expect("payouts");
    assert_eq!(payouts.len(), 3);
    for p in payouts {
        let keys: Vec<&str> = p
            .as_object()
            .expect("a payout")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "batch",
                "environment",
                "date",
                "completed_at",
                "batch_created_at",
                "reference",
                "email",
                "product_codes",
                "face_value",
                "currency",
                "price",
                "debited_amount",
                "debited_currency",
                "state",
                "attempt",
                "order_id",
                "error_type"
            ]
        );
    }
    let summary: Vec<(&str, &str, &str, &str)> = payouts
        .iter()
        .map(|p| {
            (
                p["batch"].as_str().unwrap_or_default(),
                p["reference"].as_str().unwrap_or_default(),
                p["email"].as_str().unwrap_or_default(),
                p["state"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("nov", "NOV-1", "jane.doe@example.com", "COMPLETED"),
            ("dec", "DEC-1", "Jane.Doe@Example.COM", "COMPLETED"),
            ("jan", "JAN-1", "jane.doe@example.com", "PLANNED"),
        ]
    );
    let nov = &payouts[0];
    assert_eq!(nov["environment"], "sim");
    assert_eq!(nov["product_codes"], serde_json::json!(["AMZ-US"]));
    assert_eq!(
        (&nov["face_value"], &nov["currency"]),
        (&"10.00".into(), &"USD".into())
    );
    assert!(
        nov["price"].is_string() && nov["order_id"].is_string(),
        "{nov}"
    );
    assert_eq!(nov["date"], nov["completed_at"]);
    let jan = &payouts[2];
    assert!(
        jan["completed_at"].is_null() && jan["price"].is_null(),
        "{jan}"
    );
    assert_eq!(jan["date"], jan["batch_created_at"]);
    let links = payout_links(
        &ws,
        &["nov.SIMULATED.result.csv", "dec.SIMULATED.result.csv"],
    );
    for link in &links {
        assert!(!stdout(&out).contains(link.as_str()));
    }

    // Nobody: an empty list, not an error.
    let out = history(&ws, &["--reference", "NOBODY", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!((&v["count"], &v["paid"]), (&0.into(), &0.into()));
    assert_eq!(v["reference"], "NOBODY");
    assert_eq!(v["payouts"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_paid_is_said_plainly() {
    let ws = three_batches().await;
    let out = history(&ws, &["--email", "nobody@example.com"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "no payout to nobody@example.com in this ledger (3 batches searched, paybatch.db)\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ledger_it_says_so_and_creates_none() {
    let ws = Workspace::new();
    for args in [
        &["history", "--email", "jane.doe@example.com"][..],
        &["history", "--reference", "NOV-1", "--json"],
        &[
            "history",
            "--email",
            "a@b.co",
            "--ledger",
            "ledgers/other.db",
        ],
    ] {
        let out = paybatch(ws.dir.path(), args, &[]).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout(&out));
        assert!(
            stderr(&out).starts_with("error: no ledger at "),
            "{args:?}: {}",
            stderr(&out)
        );
        let left: Vec<_> = std::fs::read_dir(ws.dir.path())
            .expect("read dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
    // Neither --email nor --reference: a usage error.
    let out = paybatch(ws.dir.path(), &["history"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let out = paybatch(ws.dir.path(), &["history", "--email", " "], &[]).await;
    assert_eq!(out.status.code(), Some(2));
}

/// The same reference paid in two batches (the second allowed to repeat it), and skipped as a
/// repeat by a third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_repeated_in_two_batches_is_found_in_both() {
    let ws = Workspace::new();
    let row = format!("{HEADER}EMP-7,AMZ-US,10.00,USD,jane.doe@example.com\n");
    for (file, flag) in [
        ("nov.csv", None),
        ("dec.csv", Some("--allow-repeats")),
        ("jan.csv", Some("--skip-repeats")),
    ] {
        ws.write(file, &row);
        let mut args = vec!["run", file];
        args.extend(flag);
        let out = paybatch(ws.dir.path(), &args, &[]).await;
        assert!(
            matches!(out.status.code(), Some(0 | 4)),
            "{file}: {}",
            stderr(&out)
        );
    }
    let out = history(&ws, &["--reference", "EMP-7"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("paid 2 times: 20.00 USD face value"),
        "{text}"
    );
    assert!(text.contains("1 never sent (SKIPPED 1)"), "{text}");
    for (batch, state) in [
        ("nov", "COMPLETED"),
        ("dec", "COMPLETED"),
        ("jan", "SKIPPED"),
    ] {
        let lines = table_lines(&text, batch);
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].contains(state), "{text}");
    }
}

/// A reference in another spelling is the same reference: `history --reference` finds every
/// spelling that folds to it (case, width, look-alike letters), and not one that differs but for
/// `-`, `_` or spaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_is_found_in_every_spelling_of_it() {
    let ws = Workspace::new();
    for (file, reference, flag) in [
        ("nov.csv", "EMP-7", None),
        ("dec.csv", "emp-7", Some("--allow-repeats")),
        ("jan.csv", "EMP_7", None),
    ] {
        ws.write(
            file,
            &format!("{HEADER}{reference},AMZ-US,10.00,USD,jane.doe@example.com\n"),
        );
        let mut args = vec!["run", file];
        args.extend(flag);
        let out = paybatch(ws.dir.path(), &args, &[]).await;
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
    }
    let out = history(&ws, &["--reference", "\u{ff25}\u{ff2d}\u{ff30}-\u{ff17}"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("paid 2 times: 20.00 USD face value"),
        "{text}"
    );
    assert_eq!(table_lines(&text, "nov").len(), 1, "{text}");
    assert_eq!(table_lines(&text, "dec").len(), 1, "{text}");
    assert_eq!(table_lines(&text, "jan").len(), 0, "{text}");
}
