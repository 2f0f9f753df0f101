//! The edges of the finance outputs (the period report and its journal, the outputs' targets,
//! the approval record and the advice to resume), through the binary on the embedded simulator
//! and a real ledger: money booked once, in its period and environment, and no file replaced
//! that is not the output's own.

use std::str::FromStr;

use rust_decimal::Decimal;

use crate::support::paybatch_ws as pb;
use crate::support::{Workspace, links_expire_after, paybatch_in, stderr_of, stdout_of};

/// Pays `csv` as batch `name` on the embedded simulator.
async fn pay(ws: &Workspace, name: &str, csv: &str) {
    let file = format!("{name}.csv");
    ws.write(&file, csv);
    let out = pb(ws, &["run", &file, "--batch", name, "-q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

const TWO_ROWS: &str = "reference,product_code,face_value,currency,cost_center\n\
                        R-1,AMZ-US,10.00,USD,CC-1\n\
                        R-2,AMZ-US,12.00,USD,CC-2\n";

/// A whole-ledger period: every batch paid by the test is in it.
const PERIOD: [&str; 4] = ["--since", "2000-01-01", "--until", "2100-12-31"];

/// `--journal` naming a symbolic link (as `/dev/stdout` is) is refused before anything is
/// written: the link is kept, never replaced by a regular file (as root, a rename over
/// `/dev/stdout` or `/dev/null` would replace the device for the whole machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_through_a_symbolic_link_keeps_the_link() {
    let ws = Workspace::new();
    pay(&ws, "b", TWO_ROWS).await;
    std::fs::create_dir(ws.path("books")).expect("a directory");
    ws.write("books/target.csv", "kept\n");
    let link = ws.path("link.csv");
    std::os::unix::fs::symlink(ws.path("books/target.csv"), &link).expect("a symbolic link");
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "link.csv"]);
    let out = pb(&ws, &args).await;
    let meta = std::fs::symlink_metadata(&link).expect("link.csv");
    assert!(
        meta.file_type().is_symlink(),
        "link.csv is no longer a symbolic link (exit {:?}): {}",
        out.status.code(),
        stderr_of(&out)
    );
}

/// `--out` and `--journal` (or `--html`) at the same path are refused (exit 2) before anything
/// is written: one output would silently replace the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_outputs_of_a_period_at_one_path_are_refused() {
    let ws = Workspace::new();
    pay(&ws, "b", TWO_ROWS).await;
    for other in ["--out", "--html"] {
        let mut args = vec!["report"];
        args.extend(PERIOD);
        args.extend(["--journal", "same.csv", other, "same.csv"]);
        let out = pb(&ws, &args).await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "--journal and {other} at one path: {}",
            stderr_of(&out)
        );
    }
}

/// `--journal` onto a batch's result file (the payout links) is refused, as the ledger and the
/// input file are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_onto_a_batch_result_file_is_refused() {
    let ws = Workspace::new();
    pay(&ws, "b", TWO_ROWS).await;
    let result = ws.path("b.SIMULATED.result.csv");
    let before = std::fs::read(&result).expect("the result file");
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "b.SIMULATED.result.csv"]);
    let out = pb(&ws, &args).await;
    let after = std::fs::read(&result).expect("the result file");
    assert!(
        before == after,
        "the result file was replaced (exit {:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&after)
    );
}

/// `--journal -` writes the journal on stdout, as `--out -` does: never a file named `-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_to_dash_is_not_a_file_named_dash() {
    let ws = Workspace::new();
    pay(&ws, "b", TWO_ROWS).await;
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "-"]);
    let out = pb(&ws, &args).await;
    assert!(
        !ws.path("-").exists(),
        "a file named `-` (exit {:?}); stdout: {}",
        out.status.code(),
        stdout_of(&out)
    );
}

/// A run held to `--expect-digest` and killed after its approval line, before any intent: the
/// batch is on record with no row, and `status` says to run again (with the digest), never
/// "nothing to do: every row completed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_its_approval_is_not_said_completed() {
    let ws = Workspace::new();
    ws.write("b.csv", TWO_ROWS);
    let validated = pb(&ws, &["validate", "b.csv", "--json"]).await;
    let json: serde_json::Value =
        serde_json::from_str(stdout_of(&validated).trim()).expect("validate --json");
    let digest = json["digest"].as_str().expect("a digest").to_string();
    let killed = paybatch_in(
        ws.dir.path(),
        &["run", "b.csv", "--expect-digest", &digest],
        &[("PAYBATCH_FAILPOINT", "before_intent")],
    )
    .await;
    assert_ne!(killed.status.code(), Some(0), "the fail point was reached");
    let status = pb(&ws, &["status", "--batch", "b"]).await;
    let text = stdout_of(&status);
    assert!(
        !text.contains("every row completed"),
        "nothing was paid, yet: {text}"
    );
    assert!(
        text.contains(&digest),
        "the resume keeps --expect-digest: {text}"
    );
}

/// Moves every order and paid row of batch `name` to complete at `at` (RFC 3339).
fn complete_at(ws: &Workspace, name: &str, at: &str) {
    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("the ledger opens");
    for table in [
        "orders SET booked_on = substr(?2, 1, 10), booked_at",
        "orders SET finished_at",
        "rows SET completed_at",
    ] {
        let column = table.rsplit(' ').next().unwrap_or_default();
        db.execute(
            &format!(
                "UPDATE {table} = ?2 WHERE batch_id = (SELECT id FROM batches WHERE name = ?1)
                 AND {column} IS NOT NULL"
            ),
            rusqlite::params![name, at],
        )
        .expect("moved");
    }
}

/// The lines of the journal at `file`, each by its header's names.
fn journal_lines(ws: &Workspace, file: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(ws.path(file)).expect("the journal");
    reader.deserialize().map(|r| r.expect("a line")).collect()
}

/// The journal's total of `currency` for a period, `None` without a line in it.
async fn journal_total(
    ws: &Workspace,
    since: &str,
    until: &str,
    currency: &str,
) -> Option<Decimal> {
    let out = pb(
        ws,
        &[
            "report",
            "--since",
            since,
            "--until",
            until,
            "--journal",
            "j.csv",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    journal_lines(ws, "j.csv")
        .into_iter()
        .find(|l| l["line"] == "total" && l["balance_currency"] == currency)
        .map(|l| Decimal::from_str(&l["debit_amount"]).expect("a decimal"))
}

/// A batch paid in October whose expired links are reissued in a later month: October's
/// journal, written again, keeps the October charges (each paid attempt is booked in the
/// period its order became final, not by when the batch last completed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reissue_in_a_later_month_keeps_the_earlier_charges_in_their_month() {
    let ws = Workspace::new();
    links_expire_after(&ws, "10", "0").await;
    pay(&ws, "b", TWO_ROWS).await;
    complete_at(&ws, "b", "2026-10-15T12:00:00.000Z");
    let october = journal_total(&ws, "2026-10-01", "2026-10-31", "USD").await;
    assert!(october.is_some(), "the batch is in October's journal");
    pb(&ws, &["sim", "clock", "--advance", "12d"]).await;
    let read = pb(&ws, &["payouts", "--batch", "b"]).await;
    assert!(read.status.code().is_some(), "{}", stderr_of(&read));
    let retried = pb(&ws, &["retry", "--batch", "b", "--expired"]).await;
    assert_eq!(retried.status.code(), Some(0), "{}", stderr_of(&retried));
    pay(&ws, "b", TWO_ROWS).await;
    let again = journal_total(&ws, "2026-10-01", "2026-10-31", "USD").await;
    assert_eq!(again, october, "October's journal, written again");
}

/// A ledger that holds a rehearsal on the embedded simulator and a batch paid at another
/// service (here a standalone simulator, environment `custom`; in real use production): the
/// period's journal names each line's environment and totals per environment and currency, and
/// `--json` keeps the balances apart: simulated money is never added to another environment's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_period_never_adds_simulated_charges_to_another_environments() {
    let ws = Workspace::new();
    let sim = crate::support::start_sim(crate::support::fast_config(None)).await;
    ws.write(
        "other.csv",
        "reference,product_code,face_value,currency\nO-1,AMZ-US,30.00,USD\n",
    );
    let other = crate::support::run_file(&ws, &sim, "other.csv", &["-q"], &[]).await;
    assert_eq!(other.status.code(), Some(0), "{}", stderr_of(&other));
    ws.write("rehearsal.csv", TWO_ROWS);
    let rehearsal = pb(
        &ws,
        &["run", "rehearsal.csv", "-q", "--ledger", "ledger.db"],
    )
    .await;
    assert_eq!(
        rehearsal.status.code(),
        Some(0),
        "{}",
        stderr_of(&rehearsal)
    );
    let mut args = vec!["report", "--ledger", "ledger.db"];
    args.extend(PERIOD);
    args.extend(["--journal", "j.csv"]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = journal_lines(&ws, "j.csv");
    let per_batch = |batch: &str| -> Decimal {
        lines
            .iter()
            .filter(|l| l["batch"] == batch && l["line"] == "payment")
            .map(|l| Decimal::from_str(&l["debit_amount"]).expect("a decimal"))
            .sum()
    };
    let (rehearsal, real) = (per_batch("rehearsal"), per_batch("other"));
    let mixed = lines.iter().filter(|l| l["line"] == "total").any(|l| {
        Decimal::from_str(&l["debit_amount"]).ok() == Some(rehearsal + real)
            && rehearsal > Decimal::ZERO
    });
    let simulated = lines
        .iter()
        .filter(|l| l["batch"] == "rehearsal")
        .all(|l| l["environment"] == "sim");
    assert!(simulated, "a simulated line says so: {lines:?}");
    assert!(
        !mixed,
        "a TOTAL adds the simulated {rehearsal} to the other environment's {real}: {}",
        std::fs::read_to_string(ws.path("j.csv")).unwrap_or_default()
    );
    sim.shutdown().await;
}

/// A run with `--skip-invalid --expect-digest` killed after it sent an order: the resume
/// command `status` prints keeps both flags, and pasted as it is it resumes the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resume_command_of_a_skip_invalid_run_resumes_it() {
    let ws = Workspace::new();
    ws.write(
        "s.csv",
        "reference,product_code,face_value,currency\n\
         S-1,AMZ-US,10.00,USD\nS-2,AMZ-US,99999,USD\nS-3,AMZ-US,11.00,USD\nS-4,AMZ-US,12.00,USD\n",
    );
    let validated = pb(&ws, &["validate", "s.csv", "--skip-invalid", "--json"]).await;
    let json: serde_json::Value =
        serde_json::from_str(stdout_of(&validated).trim()).expect("validate --json");
    let digest = json["digest"].as_str().expect("a digest").to_string();
    let killed = paybatch_in(
        ws.dir.path(),
        &["run", "s.csv", "--skip-invalid", "--expect-digest", &digest],
        &[("PAYBATCH_FAILPOINT", "after_send:2")],
    )
    .await;
    assert_ne!(killed.status.code(), Some(0), "the fail point was reached");
    let status = stdout_of(&pb(&ws, &["status", "--batch", "s"]).await);
    let command = status
        .split("resume (paybatch ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("a resume command in: {status}"))
        .to_string();
    let args: Vec<&str> = command.split_whitespace().collect();
    let resumed = pb(&ws, &args).await;
    assert!(
        matches!(resumed.status.code(), Some(0) | Some(4)),
        "`paybatch {command}` (exit {:?}): {}",
        resumed.status.code(),
        stderr_of(&resumed)
    );
}

/// `--group-by` naming a column no batch of the period has (a typo: `cost_centre`) is refused
/// (exit 2) naming the columns the batches have, as `report --batch` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_period_group_by_of_a_column_no_batch_has_is_refused() {
    let ws = Workspace::new();
    pay(&ws, "b", TWO_ROWS).await;
    let single = pb(
        &ws,
        &[
            "report",
            "--batch",
            "b",
            "--json",
            "--group-by",
            "cost_centre",
        ],
    )
    .await;
    assert_eq!(single.status.code(), Some(2), "{}", stderr_of(&single));
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "j.csv", "--group-by", "cost_centre"]);
    let out = pb(&ws, &args).await;
    let said = stderr_of(&out).contains("cost_centre");
    assert!(
        out.status.code() == Some(2) || said,
        "exit {:?}, nothing said: {}",
        out.status.code(),
        stderr_of(&out)
    );
}

/// An input file with a column named `batch` (a purchase order's batch, say): the period's
/// result CSV names its own column `paybatch_batch`, so each header names one column and a
/// reader by header name (a spreadsheet lookup, Python's DictReader) reads the right one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_period_csv_names_each_column_once() {
    let ws = Workspace::new();
    pay(
        &ws,
        "b",
        "reference,product_code,face_value,currency,batch\nR-1,AMZ-US,10.00,USD,PO-77\n",
    )
    .await;
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--out", "p.csv"]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mut reader = csv::Reader::from_path(ws.path("p.csv")).expect("the period's CSV");
    let header = reader.headers().expect("a header").clone();
    let names: Vec<&str> = header.iter().collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name twice in {names:?}");
}

/// The USD balance at the service `base` (with the workspace's key file and ledger).
async fn usd_balance(ws: &Workspace, base: &str) -> Decimal {
    let out = crate::support::against_url(ws, base, &["balance", "--json"]).await;
    let json: serde_json::Value =
        serde_json::from_str(stdout_of(&out).trim()).expect("balance --json");
    json["balances"]
        .as_array()
        .expect("balances")
        .iter()
        .find(|b| b["currency"] == "USD")
        .and_then(|b| b["balance"].as_str())
        .map(|b| Decimal::from_str(b).expect("a decimal"))
        .expect("a USD balance")
}

/// A service that completes the orders (the money leaves the balance) but answers their items
/// without payout links: the rows are MISMATCH, and what the service claims is in the period's
/// journal as suspense, marked `MISMATCH`, totalled apart: nothing is booked as paid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_left_for_mismatch_rows_is_in_the_journal() {
    use std::sync::Arc;
    let sim = crate::support::start_sim(crate::support::fast_config(None)).await;
    let rewrite: crate::support::rewriting::Rewrite = Arc::new(|method, path, status, json| {
        let finished = json["status"] == "COMPLETED";
        if *method == axum::http::Method::GET
            && path.starts_with("/order/")
            && status == 200
            && finished
            && let Some(items) = json["items"].as_array_mut()
        {
            for item in items {
                item.as_object_mut().map(|i| i.remove("payout"));
            }
        }
    });
    let base = crate::support::rewriting::start(&sim, rewrite).await;
    let ws = Workspace::new();
    ws.write("pay.csv", TWO_ROWS);
    let before = usd_balance(&ws, &base).await;
    let run =
        crate::support::against_url(&ws, &base, &["run", "pay.csv", "--poll-timeout", "60"]).await;
    assert_eq!(run.status.code(), Some(4), "{}", stderr_of(&run));
    let left = before - usd_balance(&ws, &base).await;
    assert!(left > Decimal::ZERO, "the service charged the balance");
    let mut args = vec!["report", "--ledger", "ledger.db", "--journal", "j.csv"];
    args.extend(PERIOD);
    let out = pb(&ws, &args).await;
    let journal = std::fs::read_to_string(ws.path("j.csv")).unwrap_or_default();
    let lines: Vec<std::collections::HashMap<String, String>> =
        csv::Reader::from_reader(journal.as_bytes())
            .deserialize()
            .map(|r| r.expect("a line"))
            .collect();
    let booked: Decimal = lines
        .iter()
        .filter(|l| {
            l["line"] == "total" && l["kind"] == "suspense" && l["balance_currency"] == "USD"
        })
        .map(|l| Decimal::from_str(&l["debit_amount"]).expect("a decimal"))
        .sum();
    assert!(
        !lines.iter().any(|l| l["kind"] == "paid"),
        "nothing booked as paid: {journal}"
    );
    assert!(
        lines
            .iter()
            .filter(|l| l["line"] == "suspense")
            .all(|l| l["status"] == "MISMATCH"),
        "marked for finance: {journal}"
    );
    assert_eq!(
        booked,
        left,
        "the balance lost {left}, the journal books {booked} (exit {:?}): {}{journal}",
        out.status.code(),
        stderr_of(&out)
    );
    sim.shutdown().await;
}

/// A row whose reference is `TOTAL` is a payment line of the journal, told from the total
/// lines by the `line` column: a spreadsheet summing `debit_amount` over the `payment` lines
/// counts each charge once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_referenced_total_is_a_payment_line_of_the_journal() {
    let ws = Workspace::new();
    pay(
        &ws,
        "b",
        "reference,product_code,face_value,currency\nTOTAL,AMZ-US,10.00,USD\nR-2,AMZ-US,12.00,USD\n",
    )
    .await;
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "j.csv"]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = journal_lines(&ws, "j.csv");
    let kinds: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["line"].as_str(), l["reference"].as_str()))
        .collect();
    assert!(kinds.contains(&("payment", "TOTAL")), "{kinds:?}");
    let sum = |kind: &str| -> Decimal {
        lines
            .iter()
            .filter(|l| l["line"] == kind)
            .map(|l| Decimal::from_str(&l["debit_amount"]).expect("a decimal"))
            .sum()
    };
    assert!(sum("payment") > Decimal::ZERO);
    assert_eq!(sum("payment"), sum("total"));
    assert_eq!(lines.iter().filter(|l| l["line"] == "total").count(), 1);
}
