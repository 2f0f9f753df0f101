//! The operator's commands, through the real binary, against a real simulator on a loopback port
//! and a real SQLite ledger in a temporary directory: validate and the plan digest, run
//! --expect-digest, status, report (CSV and HTML), balance, the settings file, the production
//! guard, completions and the manual page.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::support::*;

use crate::support::stdout_of as stdout;
use crate::support::{paybatch_in as paybatch, stderr_of as stderr};
use paybatch::ledger::Ledger;
use paybatch::sim::SimHandle;

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// `paybatch COMMAND ARGS... --base-url SIM --api-key-file KEY --ledger LEDGER` in the workspace.
async fn against(ws: &Workspace, sim: &SimHandle, args: &[&str]) -> Output {
    against_url(ws, &sim.base_url(), args).await
}

/// The digest printed by `validate`: `plan digest: sha256:<64 hex>`.
fn digest_of(out: &str) -> String {
    let line = out
        .lines()
        .find(|l| l.starts_with("plan digest: "))
        .unwrap_or_else(|| panic!("no digest line in: {out}"));
    let digest = line["plan digest: ".len()..].trim().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    assert_eq!(digest.len(), 7 + 64, "{digest}");
    assert!(
        digest[7..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    digest
}

fn batch_names(ledger: &Path) -> Vec<String> {
    if !ledger.exists() {
        return Vec::new();
    }
    Ledger::open(ledger)
        .expect("ledger")
        .batches()
        .expect("batches")
        .into_iter()
        .map(|b| b.name)
        .collect()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

// ---------------------------------------------------------------------------------------------
// validate

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_shows_totals_and_a_stable_digest_and_creates_no_batch() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = against(&ws, &sim, &["validate", "nov.csv"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.lines()
            .next()
            .unwrap_or_default()
            .contains("environment"),
        "{text}"
    );
    assert!(
        text.contains("rows: 12 read, 12 valid, 0 with problems"),
        "{text}"
    );
    assert!(text.contains("to pay, per payment currency:"), "{text}");
    assert!(text.contains("to pay, per product:"), "{text}");
    // The JPY row is paid from USD: converted by the service, not part of the USD check.
    assert!(text.contains("plus 2,910 JPY converted"), "{text}");
    assert!(
        text.contains("balance: enough in every payment currency"),
        "{text}"
    );
    let digest = digest_of(&text);
    assert!(
        text.contains(&format!(
            "paybatch run nov.csv --base-url {} --api-key-file {} --ledger {} --expect-digest {digest}",
            sim.base_url(),
            ws.key_file().display(),
            ws.ledger().display()
        )),
        "{text}"
    );

    // Nothing but the catalog cache was written: no batch, no order.
    assert!(batch_names(&ws.ledger()).is_empty());
    assert!(sim.orders().is_empty());

    // The same file, batch and environment: the same digest. Another batch name: another one.
    let again = against(&ws, &sim, &["validate", "nov.csv"]).await;
    assert_eq!(digest_of(&stdout(&again)), digest);
    let other = against(&ws, &sim, &["validate", "nov.csv", "--batch", "nov-2"]).await;
    assert_ne!(digest_of(&stdout(&other)), digest);

    // A carried-through column does not count; an amount does.
    let original = std::fs::read_to_string(ws.path("nov.csv")).unwrap();
    ws.write("nov.csv", &original.replace(",Engineering", ",Platform"));
    let carried = against(&ws, &sim, &["validate", "nov.csv"]).await;
    assert_eq!(digest_of(&stdout(&carried)), digest);
    ws.write(
        "nov.csv",
        &original.replace("AMZ-US,50.00,", "AMZ-US,55.00,"),
    );
    let edited = against(&ws, &sim, &["validate", "nov.csv"]).await;
    assert_ne!(digest_of(&stdout(&edited)), digest);

    // --json: one object with the same facts.
    ws.write("nov.csv", &original);
    let out = against(&ws, &sim, &["validate", "nov.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["valid"], true);
    assert_eq!(v["digest"], digest.as_str());
    assert_eq!(v["rows"], 12);
    assert_eq!(v["batch"], "nov");
    assert_eq!(v["environment"], "custom");
    assert_eq!(v["totals"]["per_payment_currency"]["USD"]["rows"], 6);
    assert_eq!(
        v["totals"]["per_payment_currency"]["USD"]["converted"]["JPY"],
        "2910"
    );
    assert_eq!(v["totals"]["per_product"]["AMZ-DE"]["rows"], 2);
    assert_eq!(v["totals"]["per_product"]["AMZ-DE"]["face_value"], "125.00");
    let usd = v["balance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["currency"] == "USD")
        .expect("USD balance checked");
    assert_eq!(usd["enough"], true);
    assert!(batch_names(&ws.ledger()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_reports_every_problem_with_its_line_and_exits_3() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE_MISTAKES, "bad.csv");
    let out = against(&ws, &sim, &["validate", "bad.csv"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            "error: line 2, column 2 (product_code): product `AMZ-UK` is not in the catalog"
        ),
        "{err}"
    );
    assert!(err.contains("help: did you mean `AMZ-US`?"), "{err}");
    assert!(err.contains("error: 8 problem(s) in bad.csv"), "{err}");
    assert!(
        stdout(&out).contains("plan digest: none"),
        "{}",
        stdout(&out)
    );
    assert!(batch_names(&ws.ledger()).is_empty());

    let out = against(&ws, &sim, &["validate", "bad.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(v["valid"], false);
    assert_eq!(v["digest"], serde_json::Value::Null);
    let problems = v["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 8);
    assert_eq!(problems[0]["line"], 2);
    assert_eq!(problems[0]["column_name"], "product_code");

    // --skip-invalid, as with run: the valid rows make a plan.
    let out = against(&ws, &sim, &["validate", "bad.csv", "--skip-invalid"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    digest_of(&stdout(&out));
}

/// A misspelt column is not carried through unread: `e-mail address` without a distribution
/// column would have paid every row as a payout link. And what is paid per delivery is shown
/// before (validate, the production confirmation) and after (the run's summary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelt_column_is_refused_and_the_rows_per_delivery_are_shown() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency,e-mail address,department\n\
         R1,AMZ-US,10,USD,ann@example.com,Sales\n\
         R2,AMZ-US,20,USD,bob@example.com,Ops\n",
    );
    for command in ["validate", "run"] {
        let out = against(&ws, &sim, &[command, "nov.csv"]).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{command}: {err}");
        assert!(
            err.contains(
                "error: line 1, column 5 (e-mail address): column `e-mail address` is not a column paybatch knows; did you mean `email`?"
            ),
            "{err}"
        );
        assert!(err.contains("every row is paid as a PAYOUT_LINK"), "{err}");
    }
    assert!(sim.orders().is_empty(), "nothing was paid");

    // Named right (and a column far from every known name carried through): two email rows
    // and a payout link.
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency,email,department\n\
         R1,AMZ-US,10,USD,ann@example.com,Sales\n\
         R2,AMZ-US,20,USD,bob@example.com,Ops\n\
         R3,AMZ-US,30,USD,,Ops\n",
    );
    let out = against(&ws, &sim, &["validate", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("to pay per delivery: 2 EMAIL, 1 PAYOUT_LINK"),
        "{}",
        stdout(&out)
    );
    let v = json(&against(&ws, &sim, &["validate", "nov.csv", "--json"]).await);
    assert_eq!(v["totals"]["per_delivery"]["EMAIL"], 2);
    let out = against(&ws, &sim, &["run", "nov.csv"]).await;
    let err = output_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("rows per delivery: 2 EMAIL, 1 PAYOUT_LINK"),
        "{err}"
    );
    let result = read_csv(&ws.path("nov.result.csv"));
    assert_eq!(result[0][5], "department");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_a_balance_too_low() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.balances = vec![("USD".into(), rust_decimal::Decimal::new(1000, 2))];
    let sim = start_sim(config).await;
    ws.write(
        "small.csv",
        "reference,product_code,face_value,currency,email\n\
         R-1,AMZ-US,25.00,USD,ann@example.com\n",
    );
    let out = against(&ws, &sim, &["validate", "small.csv"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("error: the balance is too low"), "{err}");
    assert!(err.contains("USD: need 24.50, available 10.00"), "{err}");
    assert!(err.contains("help: top up the account"), "{err}");
    assert!(stdout(&out).contains("SHORT by 14.50"), "{}", stdout(&out));
}

// ---------------------------------------------------------------------------------------------
// run --expect-digest

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_pays_only_the_plan_whose_digest_was_approved() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let input = ws.copy(SAMPLE, "nov.csv");
    let approved = digest_of(&stdout(&against(&ws, &sim, &["validate", "nov.csv"]).await));

    // The file changed after approval: refused, nothing submitted, no batch created.
    let original = std::fs::read_to_string(&input).unwrap();
    ws.write(
        "nov.csv",
        &original.replace("jordan.lee@example.com", "jordan.lee@example.net"),
    );
    let now = digest_of(&stdout(&against(&ws, &sim, &["validate", "nov.csv"]).await));
    let out = against(&ws, &sim, &["run", "nov.csv", "--expect-digest", &approved]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no longer matches the approved plan"), "{err}");
    assert!(err.contains(&format!("the file gives {now}")), "{err}");
    assert!(err.contains("nothing was submitted"), "{err}");
    assert!(err.contains("help: run `paybatch validate`"), "{err}");
    assert!(sim.orders().is_empty());
    assert!(
        batch_names(&ws.ledger()).is_empty(),
        "no batch before the digest matches"
    );

    // A malformed digest is a usage error.
    let out = against(&ws, &sim, &["run", "nov.csv", "--expect-digest", "abc"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // Restored: the approved plan is paid (the digest also accepted without its prefix).
    ws.write("nov.csv", &original);
    let bare = approved.trim_start_matches("sha256:").to_ascii_uppercase();
    let out = against(&ws, &sim, &["run", "nov.csv", "--expect-digest", &bare]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("plan digest: {approved} (matches")),
        "{err}"
    );
    assert_eq!(sim.orders().len(), 12);

    // The cron job runs again later: same digest, nothing more to pay, exit 0.
    let out = against(&ws, &sim, &["run", "nov.csv", "--expect-digest", &approved]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(sim.orders().len(), 12);
    // validate now counts the paid rows out of the totals, and keeps the digest.
    let out = against(&ws, &sim, &["validate", "nov.csv"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "already sent or paid by this batch (not paid again, not counted below): 12 rows"
        ),
        "{text}"
    );
    assert!(text.contains("nothing to pay"), "{text}");
    assert_eq!(digest_of(&text), approved);
    // The batch is bound to this service: validating it for another environment is refused.
    let out = paybatch(
        ws.dir.path(),
        &[
            "validate",
            "nov.csv",
            "--ledger",
            ws.ledger().to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("belongs to environment"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// status

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_failed_rows_and_what_to_do_next() {
    let ws = Workspace::new();
    let mut failing = fast_config(None);
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    ws.write(
        "small.csv",
        "reference,product_code,face_value,currency,email\n\
         R-1,AMZ-US,25.00,USD,ann@example.com\n\
         R-2,TESCO-GB,20,GBP,\n",
    );
    let out = against(&ws, &sim, &["run", "small.csv"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));

    let ledger = ws.ledger();
    let ledger_arg = ledger.to_str().unwrap();
    let out = paybatch(ws.dir.path(), &["status", "--ledger", ledger_arg], &[]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = text
        .lines()
        .find(|l| l.starts_with("small "))
        .expect("batch listed");
    assert!(
        line.contains("custom") && line.contains("FAILED 2"),
        "{line}"
    );

    let out = paybatch(
        ws.dir.path(),
        &["status", "--batch", "small", "--ledger", ledger_arg],
        &[],
    )
    .await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(text.contains("FAILED            2"), "{text}");
    assert!(text.contains("none in flight"), "{text}");
    assert!(text.contains("last events (newest first):"), "{text}");
    assert!(text.contains("ACCEPTED -> FAILED"), "{text}");
    assert!(text.contains("next: 2 rows FAILED"), "{text}");
    assert!(text.contains("paybatch retry --batch small"), "{text}");

    let out = paybatch(
        ws.dir.path(),
        &[
            "status", "--batch", "small", "--ledger", ledger_arg, "--json",
        ],
        &[],
    )
    .await;
    let v = json(&out);
    assert_eq!(v["states"]["FAILED"], 2);
    assert_eq!(v["orders"]["FAILED"], 2);
    assert!(v["events"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(v["next"][0].as_str().unwrap().contains("retry"));

    // The HTML report names the failed rows and why.
    let out = paybatch(
        ws.dir.path(),
        &[
            "report",
            "--batch",
            "small",
            "--ledger",
            ledger_arg,
            "--html",
            "small.html",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(ws.path("small.html")).unwrap();
    assert!(
        page.contains("R-1") && page.contains("order_failed"),
        "reasons listed"
    );

    // An unknown batch, a missing ledger: usage errors, and no ledger is created.
    let out = paybatch(
        ws.dir.path(),
        &["status", "--batch", "nope", "--ledger", ledger_arg],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("help: batches in this ledger: small"),
        "{}",
        stderr(&out)
    );
    let out = paybatch(ws.dir.path(), &["status", "--ledger", "none.db"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: no ledger at none.db"),
        "{}",
        stderr(&out)
    );
    assert!(!ws.path("none.db").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_orders_in_flight_and_says_to_resume() {
    let ws = Workspace::new();
    let mut slow = fast_config(None);
    slow.processing_min = Duration::from_secs(30);
    slow.processing_max = Duration::from_secs(30);
    let sim = start_sim(slow).await;
    ws.write(
        "dec.csv",
        "reference,product_code,face_value,currency,email\n\
         R-1,AMZ-US,25.00,USD,ann@example.com\n",
    );
    let out = against(&ws, &sim, &["run", "dec.csv", "--poll-timeout", "1"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let ledger = ws.ledger();
    let out = paybatch(
        ws.dir.path(),
        &[
            "status",
            "--batch",
            "dec",
            "--ledger",
            ledger.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let text = stdout(&out);
    assert!(text.contains("SUBMITTED"), "{text}");
    assert!(text.contains("in flight: 1"), "{text}");
    assert!(
        text.contains("accepted by the service, not finished for"),
        "{text}"
    );
    assert!(
        text.contains("run the same command again to resume"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// report

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_rebuilds_the_result_file_and_writes_an_html_page_without_payout_links() {
    let ws = Workspace::new();
    // The embedded simulator: the report must say SIMULATED.
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency,email,note\n\
         R-1,AMZ-US,25.00,USD,ann@example.com,=HYPERLINK(\"x\")\n\
         R-2,AMZ-US,30.00,USD,<script>alert(1)</script>@example.com,\n\
         R-3,TESCO-GB,20,GBP,,\n",
    );
    let out = paybatch(
        ws.dir.path(),
        &["run", "nov.csv", "--ledger", "ledger.db", "--skip-invalid"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let result = ws.path("nov.SIMULATED.result.csv");
    let written_by_run = std::fs::read(&result).expect("result file");

    // Rebuilt from the ledger, byte for byte, in the same place, 0600.
    std::fs::remove_file(&result).unwrap();
    let out = paybatch(
        ws.dir.path(),
        &["report", "--batch", "nov", "--ledger", "ledger.db"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(&result).expect("rebuilt"), written_by_run);
    assert_eq!(mode(&result), 0o600);

    // --out elsewhere; --html alone writes only the page.
    let out = paybatch(
        ws.dir.path(),
        &[
            "report",
            "--batch",
            "nov",
            "--ledger",
            "ledger.db",
            "--out",
            "copy.csv",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(ws.path("copy.csv")).unwrap(), written_by_run);
    std::fs::remove_file(&result).unwrap();
    let out = paybatch(
        ws.dir.path(),
        &[
            "report",
            "--batch",
            "nov",
            "--ledger",
            "ledger.db",
            "--html",
            "nov.html",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!result.exists(), "--html alone writes no CSV");
    let html_path = ws.path("nov.html");
    assert_eq!(mode(&html_path), 0o600);
    let page = std::fs::read_to_string(&html_path).unwrap();

    // No payout link the ledger holds is on the page.
    let ledger = Ledger::open(&ws.ledger()).unwrap();
    let batch = ledger.batch("nov").unwrap().expect("batch");
    let links: Vec<String> = ledger
        .rows(batch.id)
        .unwrap()
        .into_iter()
        .filter_map(|r| r.payout_url)
        .collect();
    assert_eq!(links.len(), 2, "two rows paid");
    for link in &links {
        assert!(
            !page.contains(link.as_str()),
            "payout link {link} is on the page"
        );
    }
    assert!(
        !page.contains("playground.example"),
        "no payout host at all"
    );

    // Self-contained, escaped, labelled, with a chart and the invalid row's reason.
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("SIMULATED"));
    assert!(page.contains("<svg"));
    assert!(!page.contains("<script"), "the hostile address is escaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    for external in ["src=", "href=", "url(", "@import", "http://", "https://"] {
        assert!(!page.contains(external), "external reference {external}");
    }
    assert!(page.contains("INVALID") && page.contains("R-2"));
    assert!(page.contains("nov.csv"), "the input file is named");
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(ws.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

// ---------------------------------------------------------------------------------------------
// balance

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balance_shows_the_accounts_balances() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let out = against(&ws, &sim, &["balance"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        text.lines()
            .next()
            .unwrap_or_default()
            .starts_with("environment:")
    );
    for cur in ["CAD", "EUR", "GBP", "USD"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(cur) && l.ends_with("100,000.00")),
            "{cur}: {text}"
        );
    }
    let out = against(&ws, &sim, &["balance", "--currency", "usd", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["balances"][0]["currency"], "USD");
    assert_eq!(v["balances"][0]["balance"], "100000.00");
    let out = against(&ws, &sim, &["balance", "--currency", "dollars"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("help: give an ISO 4217 code"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// settings

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_come_from_the_file_then_the_environment_then_flags() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.key_file();
    ws.write(
        "paybatch.toml",
        &format!(
            "# monthly rewards\nbase_url = \"{}\"\napi_key_file = \"api.key\"\nledger = \"from-file.db\"\n",
            sim.base_url()
        ),
    );
    let dir = ws.dir.path();
    let out = paybatch(dir, &["config", "--json"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert!(v["file"].as_str().unwrap().ends_with("paybatch.toml"));
    assert_eq!(v["settings"]["base_url"]["from"], "file");
    assert_eq!(v["settings"]["env"]["from"], "default");
    assert_eq!(v["settings"]["api_key_file"]["from"], "file");
    assert_eq!(v["settings"]["ledger"]["from"], "file");
    let ledger = v["settings"]["ledger"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        Path::new(&ledger),
        ws.path("from-file.db"),
        "relative to the file"
    );
    assert_eq!(v["api_key"]["from"], "api_key_file");
    assert!(
        v["api_key"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        !stdout(&out).contains(paybatch::sim::DEFAULT_KEY),
        "never the key itself"
    );

    // The file's settings are used by every command.
    ws.copy(SAMPLE, "nov.csv");
    let out = paybatch(dir, &["validate", "nov.csv"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        ws.path("from-file.db").exists(),
        "the file's ledger holds the catalog cache"
    );

    // An environment variable beats the file, a flag beats both.
    let out = paybatch(dir, &["config", "--json"], &[("PAYBATCH_LEDGER", "env.db")]).await;
    let v = json(&out);
    assert_eq!(v["settings"]["ledger"]["value"], "env.db");
    assert_eq!(v["settings"]["ledger"]["from"], "env");
    let out = paybatch(
        dir,
        &["config", "--json", "--ledger", "flag.db"],
        &[("PAYBATCH_LEDGER", "env.db")],
    )
    .await;
    let v = json(&out);
    assert_eq!(v["settings"]["ledger"]["value"], "flag.db");
    assert_eq!(v["settings"]["ledger"]["from"], "flag");
    // env and base_url go together: PAYBATCH_ENV replaces the file's base_url.
    let out = paybatch(dir, &["config", "--json"], &[("PAYBATCH_ENV", "sim")]).await;
    let v = json(&out);
    assert_eq!(v["settings"]["env"]["from"], "env");
    assert_eq!(v["settings"]["base_url"]["value"], serde_json::Value::Null);
    assert_eq!(v["environment"], "sim");

    // The text form names the source of each setting.
    let out = paybatch(dir, &["config"], &[("PAYBATCH_LEDGER", "env.db")]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ledger_line = text.lines().find(|l| l.starts_with("ledger")).unwrap();
    assert!(
        ledger_line.contains("env.db") && ledger_line.ends_with("env"),
        "{ledger_line}"
    );
    let url_line = text.lines().find(|l| l.starts_with("base_url")).unwrap();
    assert!(url_line.ends_with("file"), "{url_line}");

    // --config names a file elsewhere; its relative paths are relative to it.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = paybatch(
        elsewhere.path(),
        &[
            "config",
            "--json",
            "--config",
            ws.path("paybatch.toml").to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        Path::new(json(&out)["settings"]["ledger"]["value"].as_str().unwrap()),
        ws.path("from-file.db")
    );
    let out = paybatch(
        elsewhere.path(),
        &["status", "--config", "missing.toml"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_file_holding_the_key_itself_is_refused() {
    let ws = Workspace::new();
    ws.write(
        "paybatch.toml",
        "env = \"playground\"\napi_key = \"xx_live_secret_value\"\n",
    );
    let out = paybatch(ws.dir.path(), &["status"], &[]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("must never hold"), "{err}");
    assert!(
        err.contains("help: ") && err.contains("api_key_file"),
        "{err}"
    );
    assert!(
        !err.contains("xx_live_secret_value"),
        "the key is not repeated"
    );

    ws.write("paybatch.toml", "enviroment = \"playground\"\n");
    let out = paybatch(ws.dir.path(), &["config"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("enviroment"), "{}", stderr(&out));
}

// ---------------------------------------------------------------------------------------------
// production guard, quiet, help, completions, man

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_without_a_terminal_needs_yes() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let out = paybatch(
        ws.dir.path(),
        &[
            "run",
            "nov.csv",
            "--env",
            "production",
            "--ledger",
            "ledger.db",
        ],
        &[("PAYBATCH_API_KEY", "wg_not_a_real_key")],
    )
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: --env production pays real money"),
        "{err}"
    );
    assert!(err.contains("help: pass --yes"), "{err}");
    assert!(!ws.ledger().exists(), "nothing was touched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_run_prints_nothing_when_all_is_well() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = against(&ws, &sim, &["--quiet", "run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(stdout(&out), "");
}

/// `--quiet` is for errors only: warnings are held back, and printed (with the summary) only
/// when the run does not end well; a warning about what the batch pays is always printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_run_prints_its_warnings_only_when_it_does_not_end_well() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let input = ws.copy(SAMPLE, "nov.csv");
    let out = against(&ws, &sim, &["--quiet", "run", "nov.csv", "--plan-only"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    // A row taken out of the file after its order was planned: the run ends well, and says so.
    let text = std::fs::read_to_string(&input).expect("input");
    let mut lines: Vec<&str> = text.lines().collect();
    let removed = lines
        .remove(1)
        .split(',')
        .next()
        .expect("reference")
        .to_string();
    std::fs::write(&input, lines.join("\n") + "\n").expect("write");
    let out = against(&ws, &sim, &["--quiet", "run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.starts_with(&format!("warning: row `{removed}`"))
            && err.contains("no longer in the input file and was never sent"),
        "{err}"
    );
    assert!(
        err.contains("1 intent never sent held rows no longer in the input file: cancelled"),
        "{err}"
    );
    let ledger = Ledger::open(&ws.ledger()).expect("ledger");
    let batch = ledger.batch("nov").expect("readable").expect("batch");
    let state = ledger.row_state(batch.id, &removed).expect("readable");
    assert_eq!(
        state,
        Some(paybatch::ledger::RowState::Removed),
        "a row taken out of the file after its order was planned is never paid (and warned of)"
    );
    assert!(
        !service_orders_per_reference(&sim).contains_key(&removed),
        "the service has no order for it"
    );

    // A run that ends incomplete shows what it held back.
    let ws = Workspace::new();
    let failing = paybatch::sim::SimConfig {
        faults: paybatch::sim::Faults {
            error_rate: 1.0,
            ..Default::default()
        },
        ..fast_config(None)
    };
    let sim = start_sim(failing).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = against(
        &ws,
        &sim,
        &["--quiet", "run", "nov.csv", "--send-tries", "1"],
    )
    .await;
    let err = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains("warning: order") && err.contains("got no usable answer after 1 tries"),
        "{err}"
    );
    assert!(err.contains("incomplete"), "the summary too: {err}");
}

/// A service that does not answer (here: nothing listens on its port) is a reason to run again
/// later, not an unexpected failure: exit 5, with what to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_does_not_answer_ends_the_run_incomplete() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}/v2");
    let out = against_url(&ws, &base, &["run", "nov.csv"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
}

#[test]
fn every_command_explains_itself() {
    for (command, expect) in [
        ("validate", "plan digest"),
        ("status", "what to do next"),
        ("report", "never contains payout links"),
        ("balance", "GET /balance"),
        ("config", "Precedence"),
        ("completions", "bash"),
        ("man", "roff"),
        ("run", "--expect-digest"),
    ] {
        let help = help_of(&[command, "--help"]);
        assert!(help.contains(expect), "{command} --help: {help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_the_manual_come_from_the_same_definitions() {
    let ws = Workspace::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = paybatch(ws.dir.path(), &["completions", shell], &[]).await;
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = stdout(&out);
        for word in ["validate", "expect-digest", "status", "report"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let out = paybatch(ws.dir.path(), &["completions", "tcsh"], &[]).await;
    assert_eq!(out.status.code(), Some(2));

    let out = paybatch(ws.dir.path(), &["man"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie") || page.contains(".TH paybatch"),
        "{page}"
    );
    assert!(page.contains("validate"));
    let out = paybatch(ws.dir.path(), &["man", "--out-dir", "man1"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for page in [
        "paybatch.1",
        "paybatch-run.1",
        "paybatch-validate.1",
        "paybatch-status.1",
    ] {
        assert!(ws.path("man1").join(page).exists(), "{page}");
    }
}

/// `run --skip-invalid` and `status` name the INVALID rows (the first five, with their line,
/// reference and problem, then how many more) and say the result file has every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invalid_rows_are_named_with_their_problems() {
    let ws = Workspace::new();
    ws.copy(SAMPLE_MISTAKES, "bad.csv");
    let run = paybatch_in(ws.dir.path(), &["run", "bad.csv", "--skip-invalid"], &[]).await;
    assert_eq!(run.status.code(), Some(4), "{}", output_of(&run));
    let first = "line 2 (EMP-2001-2026-11): product `AMZ-UK` is not in the catalog";
    let said = stdout_of(&run);
    assert!(said.contains(first), "{said}");
    assert!(said.contains("error_message"), "{said}");
    assert!(said.contains("and 3 more"), "{said}");
    let status = paybatch_in(ws.dir.path(), &["status", "--batch", "bad"], &[]).await;
    let said = stdout_of(&status);
    assert!(said.contains(first), "{said}");
    assert!(said.contains("and 3 more"), "{said}");
}

/// The list of batches says, under each batch, what left the account per currency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_list_shows_what_each_batch_charged_per_currency() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let run = paybatch_in(ws.dir.path(), &["run", "nov.csv"], &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", output_of(&run));
    let status = paybatch_in(ws.dir.path(), &["status"], &[]).await;
    let said = stdout_of(&status);
    assert!(
        said.contains("charged: CAD 75.00, EUR 170.00, GBP 37.19, USD 298.94"),
        "{said}"
    );
}

// ---------------------------------------------------------------------------------------------
// amounts

/// Every amount has its currency's decimals (CAD 2, JPY 0), in text and JSON alike; people's
/// text groups thousands, JSON never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amounts_have_their_currencys_decimals_and_people_read_them_grouped() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let validated = paybatch_in(ws.dir.path(), &["validate", "nov.csv", "--json"], &[]).await;
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}",
        output_of(&validated)
    );
    let v = json(&validated);
    let paypal = &v["totals"]["per_product"]["PAYPAL-CA"];
    assert_eq!(
        (&paypal["face_value"], &paypal["price"]),
        (&"75.00".into(), &"75.00".into())
    );
    assert_eq!(v["totals"]["per_product"]["UBER-JP"]["face_value"], "3000");
    assert_eq!(v["totals"]["per_payment_currency"]["CAD"]["price"], "75.00");
    let cad = v["balance"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["currency"] == "CAD"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&cad["needed"], &cad["available"]),
        (&"75.00".into(), &"100000000.00".into())
    );

    let run = paybatch_in(ws.dir.path(), &["run", "nov.csv"], &[]).await;
    let said = output_of(&run);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(
        said.contains("balance CAD: 100,000,000.00 available, 75.00 needed"),
        "{said}"
    );
    let totals = |cur: &str| {
        said.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() == 3 && w[0] == cur)
            .unwrap_or_default()
    };
    assert_eq!(totals("CAD"), ["CAD", "75.00", "75.00"], "{said}");
    assert_eq!(totals("JPY"), ["JPY", "3,000", "2,910"], "{said}");
    assert!(said.contains("1 row from the CAD balance"), "{said}");

    let balance = paybatch_in(ws.dir.path(), &["balance"], &[]).await;
    assert!(
        stdout_of(&balance).contains("99,999,925.00"),
        "{}",
        output_of(&balance)
    );
    let balance = paybatch_in(ws.dir.path(), &["balance", "--json"], &[]).await;
    assert!(
        json(&balance)["balances"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["balance"] == "99999925.00")),
        "{}",
        output_of(&balance)
    );
    let list = paybatch_in(ws.dir.path(), &["status", "--json"], &[]).await;
    assert_eq!(
        json(&list)[0]["charged"]["CAD"],
        "75.00",
        "{}",
        output_of(&list)
    );

    let again = Workspace::new();
    again.copy(SAMPLE, "nov.csv");
    let run = paybatch_in(again.dir.path(), &["run", "nov.csv", "--json"], &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", output_of(&run));
    let per_currency = &json(&run)["totals"]["per_product_currency"];
    assert_eq!(per_currency["CAD"]["face_value"], "75.00");
    assert_eq!(per_currency["JPY"]["face_value"], "3000");
}
