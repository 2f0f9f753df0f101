//! The books around payment: the period's journal in double entry (`--journal-format
//! double-entry`, accounts from `[accounts]` in paybatch.toml), both journals in the layout
//! `--out-format` asks, the result file's `charged_all_attempts` adding up to what `status`
//! says left each balance, and the value of links not claimed, expired and cancelled in the
//! currency of the balance that paid it, aged (`payouts --json`, the period's page). Through
//! the binary on the embedded simulator and a real ledger; expected figures come from the
//! ledger's rows (SQL) or from another command's answer.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use crate::support::paybatch_ws as pb;
use crate::support::{
    Workspace, col, dec, json_of, links_expire_after, pay, read_csv, stderr_of, stdout_of,
};

/// Rows paid from the USD balance (converted AUD and JPY, and USD) and from the EUR balance,
/// each with a cost centre (one left empty).
fn mixed_csv(prefix: &str) -> String {
    let mut csv =
        String::from("reference,product_code,face_value,currency,payment_currency,cost_center\n");
    for (i, (product, face, currency, pay, cc)) in [
        ("WOOLWORTHS-AU", "50", "AUD", "USD", "CC-AU"),
        ("RAKUTEN-JP", "3000", "JPY", "USD", "CC-JP"),
        ("AMZ-US", "25", "USD", "", "CC-US"),
        ("AMZ-DE", "15.00", "EUR", "", "CC-EU"),
        ("AMZ-DE", "20.00", "EUR", "", ""),
    ]
    .into_iter()
    .enumerate()
    {
        csv.push_str(&format!(
            "{prefix}-{i},{product},{face},{currency},{pay},{cc}\n"
        ));
    }
    csv
}

/// What the ledger's COMPLETED rows charged, per paying currency.
fn charged_per_currency(ws: &Workspace) -> BTreeMap<String, Decimal> {
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    let mut st = db
        .prepare("SELECT debited_currency, debited_amount FROM rows WHERE state = 'COMPLETED'")
        .expect("query");
    let mut out: BTreeMap<String, Decimal> = BTreeMap::new();
    let rows = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("rows");
    for row in rows {
        let (currency, amount) = row.expect("a row");
        *out.entry(currency).or_default() += dec(&amount);
    }
    out
}

async fn report(ws: &Workspace, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["report", "--since", "2000-01-01", "--until", "2100-12-31"];
    args.extend_from_slice(extra);
    let out = pb(ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_double_entry_journal_balances_per_entry_and_currency_on_the_accounts_set() {
    let ws = Workspace::new();
    ws.write(
        "paybatch.toml",
        "[accounts]\nexpense = \"6100 Rewards:{cost_centre}\"\nprepaid = \"1410 Prepaid {currency}\"\n",
    );
    pay(&ws, "oct", &mixed_csv("A")).await;
    pay(&ws, "nov", &mixed_csv("B")).await;
    report(
        &ws,
        &["--journal", "de.csv", "--journal-format", "double-entry"],
    )
    .await;
    let lines = read_csv(&ws.path("de.csv"));
    let header = &lines[0];
    assert_eq!(
        header[..7],
        [
            "entry", "date", "account", "debit", "credit", "currency", "memo"
        ]
    );
    let at = |name: &str| col(header, name);
    let (entry, account, debit, credit, currency, cc, reference) = (
        at("entry"),
        at("account"),
        at("debit"),
        at("credit"),
        at("currency"),
        at("cost_center"),
        at("reference"),
    );
    let amount = |s: &str| if s.is_empty() { Decimal::ZERO } else { dec(s) };
    // Per entry: two lines, one currency, debits equal credits.
    let mut entries: BTreeMap<&str, Vec<&Vec<String>>> = BTreeMap::new();
    for line in &lines[1..] {
        entries.entry(line[entry].as_str()).or_default().push(line);
    }
    assert_eq!(entries.len(), 10, "one entry per paid row");
    let mut debited: BTreeMap<String, Decimal> = BTreeMap::new();
    for (n, posting) in &entries {
        assert_eq!(posting.len(), 2, "entry {n}");
        assert_eq!(posting[0][currency], posting[1][currency], "entry {n}");
        let (d, c) = posting
            .iter()
            .fold((Decimal::ZERO, Decimal::ZERO), |(d, c), l| {
                (d + amount(&l[debit]), c + amount(&l[credit]))
            });
        assert_eq!(d, c, "entry {n} balances");
        assert!(d > Decimal::ZERO, "entry {n}");
        // The expense of its cost centre debited, the prepaid balance of its currency credited.
        let expense = match posting[0][cc].as_str() {
            "" => "Rewards expense".to_string(),
            value => format!("6100 Rewards:{value}"),
        };
        assert_eq!(posting[0][account], expense, "entry {n}");
        assert_eq!(
            posting[1][account],
            format!("1410 Prepaid {}", posting[1][currency]),
            "entry {n}"
        );
        assert!(posting[1][reference].starts_with(['A', 'B']), "entry {n}");
        *debited.entry(posting[0][currency].clone()).or_default() += d;
    }
    // Per currency, the journal books what left each balance, as the ledger recorded it.
    let charged = charged_per_currency(&ws);
    assert_eq!(charged.keys().collect::<Vec<_>>(), ["EUR", "USD"]);
    assert_eq!(debited, charged);
    // `config` shows the accounts and where they came from, and second_person.
    let out = pb(&ws, &["config"]).await;
    let text = stdout_of(&out);
    for (setting, value, from) in [
        ("accounts.expense", "6100 Rewards:{cost_centre}", "file"),
        ("accounts.prepaid", "1410 Prepaid {currency}", "file"),
        (
            "accounts.suspense",
            "Rewards suspense {currency}",
            "default",
        ),
        ("second_person", "false", "default"),
    ] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(setting))
            .unwrap_or_else(|| panic!("{setting} in {text}"));
        assert!(line.contains(value) && line.ends_with(from), "{line}");
    }
    let json = json_of(&pb(&ws, &["config", "--json"]).await);
    assert_eq!(
        json["settings"]["accounts.expense"]["value"],
        "6100 Rewards:{cost_centre}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_journals_are_written_in_the_layout_out_format_asks() {
    let ws = Workspace::new();
    pay(&ws, "oct", &mixed_csv("A")).await;
    // Without --out-format, the plain journal stays `,`, LF, no BOM.
    report(&ws, &["--journal", "plain.csv"]).await;
    let plain = std::fs::read(ws.path("plain.csv")).expect("the journal");
    assert!(plain.starts_with(b"line,date,environment,"));
    assert!(!plain.contains(&b'\r'));
    for format in ["plain", "double-entry"] {
        let file = format!("{format}-semicolon.csv");
        let mut args = vec!["--journal", &file, "--out-format", "excel-semicolon"];
        if format != "plain" {
            args.extend(["--journal-format", format]);
        }
        report(&ws, &args).await;
        let bytes = std::fs::read(ws.path(&file)).expect("the journal");
        assert!(bytes.starts_with(b"\xEF\xBB\xBF"), "{format}: a BOM");
        let text = String::from_utf8(bytes[3..].to_vec()).expect("UTF-8");
        assert!(text.ends_with("\r\n"), "{format}");
        let lines: Vec<&str> = text.trim_end_matches("\r\n").split("\r\n").collect();
        assert!(
            lines.iter().all(|l| !l.contains('\n')),
            "{format}: CRLF only"
        );
        let first = if format == "plain" {
            "line;date;"
        } else {
            "entry;date;account;"
        };
        assert!(lines[0].starts_with(first), "{format}: {}", lines[0]);
        // The same cells as the plain CSV, only laid out otherwise.
        if format == "plain" {
            let same: Vec<String> = String::from_utf8(plain.clone())
                .expect("UTF-8")
                .lines()
                .map(|l| l.replace(',', ";"))
                .collect();
            assert_eq!(lines, same);
        }
    }
    let out = pb(
        &ws,
        &[
            "report",
            "--since",
            "2000-01-01",
            "--journal-format",
            "double-entry",
            "--json",
        ],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "--journal-format needs --journal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charged_all_attempts_adds_up_to_what_status_says_left_each_balance() {
    let ws = Workspace::new();
    links_expire_after(&ws, "10", "0").await;
    let mut csv = String::from("reference,product_code,face_value,currency,payment_currency\n");
    for i in 1..=3 {
        csv.push_str(&format!("R-{i},AMZ-US,10.00,USD,\n"));
        csv.push_str(&format!("J-{i},RAKUTEN-JP,{},JPY,USD\n", 1000 * i));
    }
    pay(&ws, "b", &csv).await;
    pb(&ws, &["sim", "clock", "--advance", "12d"]).await;
    let read = pb(&ws, &["payouts", "--batch", "b"]).await;
    assert!(read.status.code().is_some(), "{}", stderr_of(&read));
    let retried = json_of(&pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await);
    let reissued = retried["retried"].as_array().expect("references").len();
    assert_eq!(reissued, 6, "{retried}");
    pay(&ws, "b", &csv).await;
    let out = pb(&ws, &["report", "--batch", "b", "--out", "b.result.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = read_csv(&ws.path("b.result.csv"));
    let header = &lines[0];
    assert_eq!(
        header.last().map(String::as_str),
        Some("charged_all_attempts")
    );
    let (all, own, currency) = (
        col(header, "charged_all_attempts"),
        col(header, "debited_amount"),
        col(header, "debited_currency"),
    );
    let mut summed: BTreeMap<String, Decimal> = BTreeMap::new();
    for line in &lines[1..] {
        let (all, own) = (dec(&line[all]), dec(&line[own]));
        assert!(all > own, "both attempts of a reissued row: {line:?}");
        *summed.entry(line[currency].clone()).or_default() += all;
    }
    let status = json_of(&pb(&ws, &["status", "--batch", "b", "--json"]).await);
    let mut said: BTreeMap<String, Decimal> = BTreeMap::new();
    for c in status["charged"].as_array().expect("charged") {
        let currency = c["currency"].as_str().expect("a currency").to_string();
        *said.entry(currency).or_default() += dec(c["amount"].as_str().expect("an amount"));
    }
    assert_eq!(summed, said);
    assert_eq!(said.keys().collect::<Vec<_>>(), ["USD"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclaimed_value_is_in_the_paying_currency_and_aged_since_payment() {
    let ws = Workspace::new();
    // Half the links are cancelled within a day; the others expire after 40 days.
    let setup = pb(
        &ws,
        &[
            "sim",
            "account",
            "--link-expiry-days",
            "40",
            "--claim-share",
            "0",
            "--cancel-share",
            "0.5",
            "--claim-within-days",
            "1",
        ],
    )
    .await;
    assert!(setup.status.success(), "{}", stderr_of(&setup));
    let mut csv = String::from("reference,product_code,face_value,currency,payment_currency\n");
    for i in 1..=16 {
        csv.push_str(&format!(
            "J-{i},RAKUTEN-JP,{},JPY,USD\n",
            1000 * (i % 3 + 1)
        ));
    }
    pay(&ws, "jp", &csv).await;
    pb(&ws, &["sim", "clock", "--advance", "45d"]).await;
    let out = pb(&ws, &["payouts", "--batch", "jp", "--json"]).await;
    assert!(out.status.code().is_some(), "{}", stderr_of(&out));
    let json = json_of(&out);
    // What the ledger recorded each row charged, per link status as read.
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    let mut st = db
        .prepare(
            "SELECT p.status, r.debited_currency, r.debited_amount FROM rows r
             JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             WHERE r.state = 'COMPLETED'",
        )
        .expect("query");
    let mut expected: BTreeMap<(String, String), Decimal> = BTreeMap::new();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .expect("rows");
    for row in rows {
        let (status, currency, amount) = row.expect("a row");
        *expected.entry((status, currency)).or_default() += dec(&amount);
    }
    let expired = expected.get(&("EXPIRED".into(), "USD".into())).copied();
    let cancelled = expected.get(&("CANCELLED".into(), "USD".into())).copied();
    assert!(expired.is_some() && cancelled.is_some(), "{expected:?}");
    for (key, want) in [
        ("expired_charged", expired),
        ("cancelled_charged", cancelled),
    ] {
        let by_currency = json[key].as_object().expect(key);
        assert_eq!(
            by_currency.keys().collect::<Vec<_>>(),
            ["USD"],
            "{key}: {json}"
        );
        assert_eq!(
            Some(dec(json[key]["USD"]["charged"].as_str().expect(key))),
            want,
            "{key}"
        );
    }
    assert_eq!(json["outstanding_charged"], serde_json::json!({}));
    // Paid 45 days ago: every such link is in the 31-60 bucket of its status.
    for (kind, want) in [("expired", expired), ("cancelled", cancelled)] {
        let aged = &json["ageing"][kind];
        assert_eq!(
            Some(dec(aged["31-60"]["USD"]["charged"].as_str().expect(kind))),
            want
        );
        for age in ["0-30", "61-90", "over_90"] {
            assert_eq!(aged[age], serde_json::json!({}), "{kind} {age}");
        }
    }
    // The text says it in the balance's money; the period's page and --json too.
    let text = stdout_of(&pb(&ws, &["payouts", "--batch", "jp", "--no-read"]).await);
    assert!(text.contains("USD balance"), "{text}");
    let out = report(&ws, &["--html", "p.html", "--json"]).await;
    let period = json_of(&out);
    assert_eq!(
        period["unclaimed"]["expired_charged"],
        json["expired_charged"]
    );
    assert_eq!(period["unclaimed"]["ageing"], json["ageing"]);
    let page = std::fs::read_to_string(ws.path("p.html")).expect("the page");
    assert!(page.contains("Unclaimed value"));
    let shown = expired.map(|e| format!("{e} USD")).unwrap_or_default();
    assert!(page.contains(&shown), "{shown} on the page");
}
