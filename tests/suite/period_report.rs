//! `paybatch report` for finance: what a batch cost where finance books it (charged in the
//! paying balance's currency, discount, effective rate, per product and per `--group-by`
//! column), and a period's report (`--since/--until`): one result CSV of the batches completed
//! in it, its totals, and an accounting journal. Through the binary on the default environment
//! (the embedded simulator) and a real ledger; expected figures are read from what the ledger's
//! orders recorded (the service's answers), or summed from the ledger's rows by SQL.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::support::paybatch_ws as pb;
use crate::support::{Workspace, links_expire_after, stderr_of, stdout_of};

fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_else(|e| panic!("{text:?} is not a decimal: {e}"))
}

/// A batch file with a `cost_center` column: AUD and JPY products paid from the USD balance
/// (converted), and a USD product; references prefixed with `prefix`, amounts in `scale`
/// steps so that batches differ.
fn cost_center_csv(prefix: &str, scale: u32) -> String {
    let mut csv = String::from(
        "reference,product_code,face_value,currency,distribution,payment_currency,country,cost_center\n",
    );
    for (i, (product, face, currency, country, cc)) in [
        ("WOOLWORTHS-AU", 50, "AUD", "AU", "CC-AU"),
        ("WOOLWORTHS-AU", 20, "AUD", "AU", "CC-AU"),
        ("RAKUTEN-JP", 3000, "JPY", "JP", "CC-JP"),
        ("AMZ-US", 25, "USD", "US", "CC-US"),
        ("RAKUTEN-JP", 1000, "JPY", "JP", "CC-JP"),
    ]
    .into_iter()
    .enumerate()
    {
        let face = if currency == "JPY" {
            face * (scale + 1)
        } else {
            face + scale
        };
        let pay = if currency == "USD" { "" } else { "USD" };
        csv.push_str(&format!(
            "{prefix}-{i},{product},{face},{currency},PAYOUT_LINK,{pay},{country},{cc}\n"
        ));
    }
    csv
}

/// Pays `csv` as batch `name` on the embedded simulator.
async fn pay(ws: &Workspace, name: &str, csv: &str) {
    let file = format!("{name}.csv");
    ws.write(&file, csv);
    let out = pb(ws, &["run", &file, "--batch", name, "-q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

fn ledger(ws: &Workspace) -> rusqlite::Connection {
    rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens")
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout_of(out).trim()).unwrap_or_else(|e| {
        panic!(
            "one JSON object on stdout ({e}): {}\n{}",
            stdout_of(out),
            stderr_of(out)
        )
    })
}

/// Per cost centre, from the orders' answers as the ledger recorded them (one row per
/// order): (face value, price, product currency, charged in USD).
fn recorded_per_cost_center(ws: &Workspace, batch: &str) -> BTreeMap<String, [Decimal; 3]> {
    let db = ledger(ws);
    let mut st = db
        .prepare(
            "SELECT json_extract(r.fields, '$[7]'), o.last_response FROM rows r
             JOIN orders o ON o.id = r.order_id JOIN batches b ON b.id = r.batch_id
             WHERE b.name = ?1 AND r.state = 'COMPLETED'",
        )
        .expect("query");
    let mut out: BTreeMap<String, [Decimal; 3]> = BTreeMap::new();
    let rows = st
        .query_map([batch], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .expect("rows");
    for row in rows {
        let (cc, answer) = row.expect("a row");
        let answer: Value = serde_json::from_str(&answer).expect("the recorded answer");
        assert_eq!(
            answer["items"].as_array().map(Vec::len),
            Some(1),
            "{answer}"
        );
        assert_eq!(answer["currency"], "USD", "{answer}");
        let item = &answer["items"][0];
        let sums = out.entry(cc).or_default();
        sums[0] += dec(item["face_value"].as_str().expect("face value"));
        sums[1] += dec(item["price"].as_str().expect("price"));
        sums[2] += dec(answer["total_price"].as_str().expect("total price"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converted_cost_center_shows_what_the_usd_balance_was_charged_its_discount_and_rate() {
    let ws = Workspace::new();
    pay(&ws, "cc", &cost_center_csv("A", 0)).await;
    let out = pb(
        &ws,
        &[
            "report",
            "--batch",
            "cc",
            "--json",
            "--group-by",
            "cost_center",
            "--html",
            "cc.html",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let json = json_of(&out);
    let recorded = recorded_per_cost_center(&ws, "cc");
    let lines = json["groups"][0]["lines"].as_array().expect("group lines");
    assert_eq!(json["groups"][0]["column"], "cost_center");
    assert_eq!(lines.len(), 3, "{json}");
    let page = std::fs::read_to_string(ws.path("cc.html")).expect("the page");
    for line in lines {
        let cc = line["value"].as_str().expect("value");
        let [face, price, charged] = recorded[cc];
        assert_eq!(line["charged_currency"], "USD", "{line}");
        assert_eq!(
            dec(line["charged"].as_str().expect("charged")),
            charged,
            "{line}"
        );
        assert_eq!(
            dec(line["face_value"].as_str().expect("face")),
            face,
            "{line}"
        );
        assert_eq!(dec(line["price"].as_str().expect("price")), price, "{line}");
        assert_eq!(
            dec(line["discount"].as_str().expect("discount")),
            face - price,
            "{line}"
        );
        let shown = format!("{} USD", line["charged"].as_str().unwrap_or_default());
        assert!(page.contains(&shown), "{shown} on the page");
        if cc == "CC-US" {
            assert!(line["effective_rate"].is_null(), "{line}");
            continue;
        }
        // The rate is charged per unit of price to 6 significant digits: within half a unit
        // of its sixth digit of the exact quotient.
        let rate = dec(line["effective_rate"].as_str().expect("a rate"));
        let exact = charged / price;
        assert!(
            (rate - exact).abs() <= exact * dec("0.000005"),
            "{cc}: {rate} vs {exact}"
        );
        let digits = rate
            .normalize()
            .to_string()
            .trim_start_matches("0.")
            .trim_start_matches('0')
            .len();
        assert!((2..=6).contains(&digits), "{cc}: {rate}");
        // The simulator's own table: 0.66 USD per AUD, 0.0067 per JPY (its fees aside).
        let table = if cc == "CC-AU" {
            dec("0.66")
        } else {
            dec("0.0067")
        };
        assert!((rate - table).abs() <= table * dec("0.02"), "{cc}: {rate}");
        assert!(page.contains(&format!("{rate} USD/")), "{rate} on the page");
    }
}

/// Moves every order and paid row of batch `name` to complete at `at` (RFC 3339).
fn complete_at(ws: &Workspace, name: &str, at: &str) {
    let db = ledger(ws);
    db.execute(
        "UPDATE orders SET finished_at = ?2, booked_at = ?2, booked_on = substr(?2, 1, 10)
         WHERE batch_id = (SELECT id FROM batches WHERE name = ?1) AND finished_at IS NOT NULL",
        rusqlite::params![name, at],
    )
    .expect("orders");
    db.execute(
        "UPDATE rows SET completed_at = ?2
         WHERE batch_id = (SELECT id FROM batches WHERE name = ?1) AND completed_at IS NOT NULL",
        rusqlite::params![name, at],
    )
    .expect("rows");
}

/// The names of the batches with lines in a period, as its `--json` lists them.
async fn period_batches(ws: &Workspace, since: &str, until: &str) -> Vec<String> {
    let out = pb(
        ws,
        &["report", "--since", since, "--until", until, "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    json_of(&out)["batches"]
        .as_array()
        .expect("batches")
        .iter()
        .map(|b| b["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Three batches completed on 30 Sep (late in the day, UTC), 15 Oct and 1 Nov 2026.
async fn three_batches(ws: &Workspace) {
    for (i, name) in ["sep", "oct", "nov"].iter().enumerate() {
        pay(ws, name, &cost_center_csv(name, i as u32 + 1)).await;
    }
    complete_at(ws, "sep", "2026-09-30T23:59:59.999Z");
    complete_at(ws, "oct", "2026-10-15T12:00:00.000Z");
    complete_at(ws, "nov", "2026-11-01T00:00:00.000Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn since_and_until_take_exactly_the_lines_booked_in_the_period() {
    let ws = Workspace::new();
    three_batches(&ws).await;
    assert_eq!(
        period_batches(&ws, "2026-10-01", "2026-10-31").await,
        ["oct"]
    );
    assert_eq!(
        period_batches(&ws, "2026-09-30", "2026-11-01").await,
        ["sep", "oct", "nov"]
    );
    assert_eq!(
        period_batches(&ws, "2026-10-16", "2026-10-31").await,
        Vec::<String>::new()
    );
    assert_eq!(
        period_batches(&ws, "2026-10-15", "2026-10-15").await,
        ["oct"]
    );
    assert_eq!(
        period_batches(&ws, "2026-11-01", "2026-11-01").await,
        ["nov"]
    );

    // A batch with a row left to finish is named and left out.
    ledger(&ws)
        .execute(
            "UPDATE rows SET state = 'PENDING' WHERE id = (SELECT MIN(r.id) FROM rows r
             JOIN batches b ON b.id = r.batch_id WHERE b.name = 'oct')",
            [],
        )
        .expect("a row not final");
    let out = pb(
        &ws,
        &[
            "report",
            "--since",
            "2026-09-01",
            "--until",
            "2026-11-30",
            "--json",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("warning: batch oct is not finished"),
        "{}",
        stderr_of(&out)
    );
    let json = json_of(&out);
    assert_eq!(json["unfinished"], serde_json::json!(["oct"]), "{json}");
    // oct's orders booked in the period are lines of the period all the same (its money left
    // the balance then); its rows are not in the period's result file.
    let names: Vec<&str> = json["batches"]
        .as_array()
        .expect("batches")
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert_eq!(names, ["sep", "oct", "nov"]);
    let out = pb(
        &ws,
        &[
            "report",
            "--since",
            "2026-09-01",
            "--until",
            "2026-11-30",
            "--out",
            "all.csv",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mut in_file: Vec<String> = csv::Reader::from_path(ws.path("all.csv"))
        .expect("the period's CSV")
        .records()
        .map(|r| r.expect("a row")[0].to_string())
        .collect();
    in_file.dedup();
    assert_eq!(in_file, ["sep", "nov"]);
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("file").permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_period_csv_has_a_batch_column_and_the_journal_adds_up_to_the_ledger() {
    let ws = Workspace::new();
    three_batches(&ws).await;
    // A fourth batch in the period with another column (a department), and a cost centre
    // that a spreadsheet would run as a formula.
    pay(
        &ws,
        "extra",
        "reference,product_code,face_value,currency,department,cost_center\nX-1,AMZ-US,30.00,USD,Sales,=SUM(A1)\n",
    )
    .await;
    complete_at(&ws, "extra", "2026-10-20T08:00:00.000Z");
    let out = pb(
        &ws,
        &[
            "report",
            "--since",
            "2026-10-01",
            "--until",
            "2026-11-30",
            "--out",
            "period.csv",
            "--journal",
            "journal.csv",
            "--html",
            "period.html",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).is_empty(), "{}", stdout_of(&out));

    // The period's result CSV: `batch` first, every input column once, one line per row.
    let mut reader = csv::Reader::from_path(ws.path("period.csv")).expect("the period CSV");
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header[0], "batch");
    assert_eq!(header.iter().filter(|h| *h == "reference").count(), 1);
    let cc = header
        .iter()
        .position(|h| h == "cost_center")
        .expect("cost_center");
    let dept = header
        .iter()
        .position(|h| h == "department")
        .expect("department");
    let lines: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a line")).collect();
    let per_batch = |name: &str| lines.iter().filter(|l| &l[0] == name).count();
    assert_eq!(
        (per_batch("oct"), per_batch("nov"), per_batch("extra")),
        (5, 5, 1)
    );
    assert_eq!(per_batch("sep"), 0, "completed before the period");
    assert_eq!(lines.len(), 11);
    let extra = lines.iter().find(|l| &l[0] == "extra").expect("extra");
    assert_eq!((&extra[cc], &extra[dept]), ("'=SUM(A1)", "Sales"));
    let oct = lines.iter().find(|l| &l[0] == "oct").expect("oct");
    assert_eq!(
        &oct[dept], "",
        "blank where a batch's file lacks the column"
    );

    // The journal: a plain CSV, one line per paid row, then its totals.
    let mut reader = csv::Reader::from_path(ws.path("journal.csv")).expect("the journal");
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(
        header,
        [
            "line",
            "date",
            "environment",
            "batch",
            "status",
            "balance_currency",
            "debit_amount",
            "cost_center",
            "product",
            "reference",
            "order_id",
            "note",
            "kind",
            "expected_amount",
            "expected_currency",
            "service_completed_at"
        ]
    );
    let journal: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a line")).collect();
    let (totals, paid): (Vec<_>, Vec<_>) = journal.iter().partition(|l| &l[0] == "total");
    assert_eq!(paid.len(), 11);
    let extra = paid.iter().find(|l| &l[3] == "extra").expect("extra");
    assert_eq!(&extra[7], "'=SUM(A1)", "a formula is written as text");
    let mut summed: BTreeMap<String, Decimal> = BTreeMap::new();
    for line in &paid {
        assert!(
            ["2026-10-15", "2026-10-20", "2026-11-01"].contains(&&line[1]),
            "{line:?}"
        );
        assert_eq!(
            (&line[0], &line[2], &line[4]),
            ("payment", "sim", "COMPLETED")
        );
        assert!(!line[10].is_empty(), "an order id");
        assert!(!line[6].contains(','), "no grouping");
        *summed.entry(line[5].to_string()).or_default() += dec(&line[6]);
    }
    let totals: BTreeMap<String, Decimal> = totals
        .iter()
        .map(|l| {
            assert_eq!(
                (&l[1], &l[2], &l[3]),
                ("", "sim", ""),
                "a total line has no date or batch, and its environment"
            );
            (l[5].to_string(), dec(&l[6]))
        })
        .collect();
    assert_eq!(summed, totals);
    // The ledger's own sum of what was charged for the batches of the period.
    let db = ledger(&ws);
    let mut st = db
        .prepare(
            "SELECT r.debited_currency, r.debited_amount FROM rows r JOIN batches b
             ON b.id = r.batch_id WHERE b.name IN ('oct', 'nov', 'extra')
             AND r.state = 'COMPLETED'",
        )
        .expect("query");
    let mut ledger_sums: BTreeMap<String, Decimal> = BTreeMap::new();
    for row in st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("rows")
    {
        let (currency, amount) = row.expect("a row");
        *ledger_sums.entry(currency).or_default() += dec(&amount);
    }
    assert_eq!(totals, ledger_sums);
    #[cfg(unix)]
    {
        assert_eq!(mode(&ws.path("journal.csv")), 0o600);
        assert_eq!(mode(&ws.path("period.csv")), 0o600);
        assert_eq!(mode(&ws.path("period.html")), 0o600);
    }
    // The page names each batch of the period, and never a payout link.
    let page = std::fs::read_to_string(ws.path("period.html")).expect("the page");
    for name in ["oct", "nov", "extra"] {
        assert!(page.contains(&format!("<td>{name}</td>")), "{name}");
    }
    assert!(!page.contains("/redeem/"));
    let usd = totals.get("USD").expect("USD charged");
    assert!(
        page.contains(&format!("{usd} USD")),
        "{usd} USD on the page"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reissued_row_is_in_the_journal_once_per_attempt_charged() {
    let ws = Workspace::new();
    links_expire_after(&ws, "10", "0").await;
    let mut csv = String::from("reference,product_code,face_value,currency,cost_center\n");
    for i in 1..=4 {
        csv.push_str(&format!("R-{i},AMZ-US,10.00,USD,CC-{i}\n"));
    }
    pay(&ws, "b", &csv).await;
    pb(&ws, &["sim", "clock", "--advance", "12d"]).await;
    let read = pb(&ws, &["payouts", "--batch", "b"]).await;
    assert!(read.status.code().is_some(), "{}", stderr_of(&read));
    let retried = pb(&ws, &["retry", "--batch", "b", "--expired", "--json"]).await;
    let retried = json_of(&retried);
    let reissued = retried["retried"].as_array().expect("references").len();
    assert!(reissued > 0, "{retried}");
    pay(&ws, "b", &csv).await;
    let out = pb(
        &ws,
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
    let mut reader = csv::Reader::from_path(ws.path("j.csv")).expect("the journal");
    let lines: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a line")).collect();
    let paid: Vec<_> = lines.iter().filter(|l| &l[0] == "payment").collect();
    assert_eq!(paid.len(), 4 + reissued, "every attempt charged");
    let orders: std::collections::BTreeSet<&str> = paid.iter().map(|l| &l[10]).collect();
    assert_eq!(orders.len(), 4 + reissued, "each attempt its own order");
    let total = lines.iter().find(|l| &l[0] == "total").expect("a total");
    assert_eq!(dec(&total[6]), dec("9.80") * Decimal::from(4 + reissued));
    // What left the balance, on the batch's page and in its --json, counts both attempts too.
    let out = pb(
        &ws,
        &["report", "--batch", "b", "--json", "--html", "b.html"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let json = json_of(&out);
    assert_eq!(
        dec(json["balances"][0]["charged"].as_str().expect("charged")),
        dec(&total[6])
    );
    assert_eq!(json["products"][0]["rows"], serde_json::json!(4 + reissued));
    let page = std::fs::read_to_string(ws.path("b.html")).expect("the page");
    assert!(
        page.contains(&format!("{} USD", &total[6])),
        "{}",
        &total[6]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_period_is_refused_without_an_output_with_a_bad_date_or_with_batch() {
    let ws = Workspace::new();
    pay(&ws, "cc", &cost_center_csv("A", 0)).await;
    let cases: [(&[&str], &str); 7] = [
        (&["--since", "2026-11-01"], "--out FILE"),
        (&["--since", "2026-02-30", "--json"], "is not a date"),
        (&["--since", "2026-1-05", "--json"], "is not a date"),
        (
            &["--since", "2026-11-01", "--until", "yesterday", "--json"],
            "is not a date",
        ),
        (
            &["--since", "2026-11-02", "--until", "2026-11-01", "--json"],
            "starts after it ends",
        ),
        (
            &["--since", "2026-11-01", "--batch", "cc", "--json"],
            "cannot be used with",
        ),
        (
            &["--batch", "cc", "--json", "--out", "-"],
            "--json and --out -",
        ),
    ];
    for (args, said) in cases {
        let mut all = vec!["report"];
        all.extend_from_slice(args);
        let out = pb(&ws, &all).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(said),
            "{args:?}: {}",
            stderr_of(&out)
        );
    }
}
