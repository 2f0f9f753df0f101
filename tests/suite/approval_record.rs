//! Approval on record: each run held to an approved plan (`run --expect-digest`) records the
//! digest, when, by which user on which host, and which run, before it sends anything; `status`
//! (text and `--json`) and the HTML report show it, or say plainly that the batch's runs were
//! not held to one; the resume command `status` suggests keeps `--expect-digest`; a user name
//! that holds markup or control characters is shown escaped. Through the real binary, against a
//! real simulator on a loopback port and a real SQLite ledger in a temporary directory.

use std::process::Output;

use crate::support::*;
use paybatch::sim::SimHandle;
use serde_json::Value;

const ROWS: &str = "reference,product_code,face_value,currency,email\n\
                    R-1,AMZ-US,10,USD,r1@example.com\n\
                    R-2,AMZ-US,15,USD,r2@example.com\n\
                    R-3,AMZ-US,20,USD,r3@example.com\n";

const USER: &str = "approver-7";

/// The host name as this machine gives it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name (Linux)")
        .trim()
        .to_string()
}

/// A workspace with `f.csv`, a fast simulator, and the digest `validate` shows for the file.
async fn approved_file() -> (Workspace, SimHandle, String) {
    let ws = Workspace::new();
    ws.write("f.csv", ROWS);
    let sim = start_sim(fast_config(None)).await;
    let digest = plan_digest(&ws, &sim.base_url(), "f.csv").await;
    (ws, sim, digest)
}

/// `run f.csv` with `extra`, as `user`, plus `envs`.
async fn run_as(
    ws: &Workspace,
    sim: &SimHandle,
    user: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    let mut all = vec![("USER", user), ("LOGNAME", user)];
    all.extend_from_slice(envs);
    run_file(ws, sim, "f.csv", extra, &all).await
}

/// `status --batch f` with `extra`.
async fn status(ws: &Workspace, extra: &[&str]) -> Output {
    let ledger = ws.ledger();
    let mut args = vec![
        "status",
        "--batch",
        "f",
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    let out = paybatch_in(ws.dir.path(), &args, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    out
}

/// The `approvals` of `status --batch f --json`.
async fn approvals_json(ws: &Workspace) -> Vec<Value> {
    let out = status(ws, &["--json"]).await;
    let json: Value = serde_json::from_str(stdout_of(&out).trim()).expect("one JSON value");
    json["approvals"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of approvals: {json}"))
        .clone()
}

/// The HTML report of batch `f`.
async fn report_page(ws: &Workspace) -> String {
    let ledger = ws.ledger();
    let args = [
        "report",
        "--batch",
        "f",
        "--html",
        "f.html",
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ];
    let out = paybatch_in(ws.dir.path(), &args, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    std::fs::read_to_string(ws.path("f.html")).expect("the page")
}

/// `sha256:` and the first 16 hex digits, as paybatch shortens a digest.
fn short(digest: &str) -> String {
    digest.chars().take("sha256:".len() + 16).collect()
}

#[tokio::test]
async fn each_approved_run_is_on_record_with_its_user_host_and_run() {
    let (ws, sim, digest) = approved_file().await;
    let host = host_name();
    let out = run_as(&ws, &sim, USER, &["--expect-digest", &digest], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let said = stderr_of(&out);
    assert!(
        said.contains(&format!("approval on record: {}", short(&digest)))
            && said.contains(&format!("by {USER}@{host} (run ")),
        "{said}"
    );

    let text = stdout_of(&status(&ws, &[]).await);
    let line = text
        .lines()
        .find(|l| l.contains(&short(&digest)))
        .unwrap_or_else(|| panic!("the approval in: {text}"));
    assert!(line.contains(&format!("{USER}@{host}")), "{line}");
    assert!(!text.contains("no approval on record"), "{text}");

    let approvals = approvals_json(&ws).await;
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    let a = &approvals[0];
    assert_eq!(a["digest"], digest.as_str(), "{a}");
    assert_eq!(a["user"], USER, "{a}");
    assert_eq!(a["host"], host.as_str(), "{a}");
    let at = a["approved_at"].as_str().expect("when");
    let when = chrono::DateTime::parse_from_rfc3339(at).expect("RFC 3339");
    assert!(
        at.ends_with('Z') && when.offset().local_minus_utc() == 0,
        "{at}"
    );

    // The report shows it beside the plan digest, near the top.
    let page = report_page(&ws).await;
    let plan = page.find("Plan digest").expect("the plan digest");
    let approved = page.find("Approved").expect("the approval");
    assert!(approved > plan && approved - plan < 400, "{page}");
    let record = format!("{} at {at} by {USER}@{host} (run ", short(&digest));
    assert!(page.contains(&record), "{page}");
    assert!(!page.contains("no approval on record"));

    // The same command again (nothing left to pay) is a run of its own: recorded on its own.
    let again = run_as(&ws, &sim, "second", &["--expect-digest", &digest], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    let approvals = approvals_json(&ws).await;
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert_eq!(approvals[1]["user"], "second");
    let runs: Vec<&str> = approvals.iter().filter_map(|a| a["run"].as_str()).collect();
    assert!(runs.len() == 2 && runs[0] != runs[1], "{runs:?}");
}

#[tokio::test]
async fn a_run_without_the_digest_records_no_approval_and_says_so() {
    let (ws, sim, _) = approved_file().await;
    let out = run_as(&ws, &sim, USER, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(!stderr_of(&out).contains("approval on record"));
    let text = stdout_of(&status(&ws, &[]).await);
    assert!(
        text.contains("no approval on record (runs without --expect-digest)"),
        "{text}"
    );
    assert!(approvals_json(&ws).await.is_empty());
    let page = report_page(&ws).await;
    assert!(
        page.contains("no approval on record (runs without --expect-digest)"),
        "{page}"
    );
}

#[tokio::test]
async fn an_interrupted_approved_run_is_resumed_as_approved() {
    let (ws, sim, digest) = approved_file().await;
    // The run dies once its orders are planned, before the first is sent.
    let out = run_as(
        &ws,
        &sim,
        USER,
        &["--expect-digest", &digest],
        &[("PAYBATCH_FAILPOINT", "after_intent")],
    )
    .await;
    assert!(!out.status.success(), "{}", output_of(&out));
    assert!(sim.orders().is_empty(), "nothing was sent");
    // The approval was on record before anything was sent.
    assert_eq!(approvals_json(&ws).await.len(), 1);

    let text = stdout_of(&status(&ws, &[]).await);
    let resume = text
        .lines()
        .find(|l| l.contains("run the same command again to resume"))
        .unwrap_or_else(|| panic!("a resume command in: {text}"));
    assert!(
        resume.contains(&format!(
            " f.csv --batch f --ledger {} --base-url {} --expect-digest {digest})",
            ws.ledger().display(),
            sim.base_url()
        )),
        "{resume}"
    );

    // The command as suggested resumes the batch as approved.
    let again = run_as(&ws, &sim, USER, &["--expect-digest", &digest], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_eq!(approvals_json(&ws).await.len(), 2);
    let text = stdout_of(&status(&ws, &[]).await);
    assert!(text.contains("nothing to do"), "{text}");
}

#[tokio::test]
async fn a_user_name_with_markup_or_control_characters_is_shown_escaped() {
    let (ws, sim, digest) = approved_file().await;
    let hostile = "<script>alert(1)</script>\u{1b}[31mred\u{7}\u{202e}";
    let out = run_as(&ws, &sim, hostile, &["--expect-digest", &digest], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let said = stderr_of(&out);
    assert!(said.contains("approval on record"), "{said}");
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{7}'),
        "{said:?}"
    );

    let text = stdout_of(&status(&ws, &[]).await);
    assert!(
        text.contains(r"<script>alert(1)</script>\u{1b}[31mred\u{7}\u{202e}@"),
        "{text}"
    );
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
        "{text:?}"
    );

    let out = status(&ws, &["--json"]).await;
    let raw = stdout_of(&out);
    assert!(
        !raw.contains('\u{1b}') && !raw.contains('\u{7}') && !raw.contains('\u{202e}'),
        "{raw:?}"
    );
    let approvals = approvals_json(&ws).await;
    assert_eq!(
        approvals[0]["user"], hostile,
        "the same text, escaped as JSON"
    );

    let page = report_page(&ws).await;
    assert!(!page.contains("<script>alert"), "markup is not the page's");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains('\u{1b}') && !page.contains('\u{7}') && !page.contains('\u{202e}'));
}

/// A run held to an approved plan stopped by SIGINT says to run the same command again with
/// the digest it was held to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_approved_run_says_to_resume_with_its_digest() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let ws = Workspace::new();
    ws.write("f.csv", ROWS);
    // Orders take a minute to finish: the run is still polling when it is stopped.
    let sim = start_sim(paybatch::sim::SimConfig {
        processing_min: std::time::Duration::from_secs(60),
        processing_max: std::time::Duration::from_secs(60),
        ..fast_config(None)
    })
    .await;
    let digest = plan_digest(&ws, &sim.base_url(), "f.csv").await;
    let args = run_args(&ws, &sim.base_url(), "f.csv", &["--expect-digest", &digest]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[("USER", USER)]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let within = std::time::Duration::from_secs(60);
    wait_for_line(&mut lines, "approval on record", within).await;
    wait_for_line(&mut lines, "submitting", within).await;
    signal(&child, "-INT");
    let status = tokio::time::timeout(within, child.wait())
        .await
        .expect("the run stops soon after the signal")
        .expect("wait");
    assert_eq!(status.code(), Some(130));
    let mut rest = String::new();
    let mut stderr = lines.into_inner();
    tokio::time::timeout(within, stderr.read_to_string(&mut rest))
        .await
        .expect("the run's messages end")
        .expect("stderr read");
    let advice = rest
        .lines()
        .find(|l| l.contains("run the same command again"))
        .unwrap_or_else(|| panic!("the advice in: {rest}"));
    assert!(
        advice.contains(&format!(
            "run the same command again (with --expect-digest {digest}) to resume"
        )),
        "{advice}"
    );
}

/// `paybatch approve f.csv --expect-digest DIGEST` as `user` (the workspace's key file and
/// ledger, against `sim`).
async fn approve_as(ws: &Workspace, sim: &SimHandle, user: &str, digest: &str) -> Output {
    let key = ws.key_file();
    let ledger = ws.ledger();
    let base = sim.base_url();
    let args = [
        "approve",
        "f.csv",
        "--expect-digest",
        digest,
        "--base-url",
        &base,
        "--api-key-file",
        key.to_str().expect("utf-8 path"),
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ];
    paybatch_in(ws.dir.path(), &args, &[("USER", user), ("LOGNAME", user)]).await
}

/// `approve` records who approved which plan and what it pays; `status` (text and JSON), the
/// HTML report and the period report show who approved the plan beside who ran it. A digest the
/// file does not give is not recorded (exit 3).
#[tokio::test]
async fn approve_records_the_approver_and_status_shows_approver_and_runner() {
    let (ws, sim, digest) = approved_file().await;
    let host = host_name();
    let wrong = format!("sha256:{}", "ab".repeat(32));
    let refused = approve_as(&ws, &sim, "bob", &wrong).await;
    assert_eq!(refused.status.code(), Some(3), "{}", output_of(&refused));
    assert!(stderr_of(&refused).contains("nothing was approved"));

    let out = approve_as(&ws, &sim, "bob", &digest).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let said = stdout_of(&out);
    assert!(
        said.contains(&format!(
            "approved: plan {digest} of batch f by bob@{host} at "
        )) && said.contains("(3 rows: USD 45.00)"),
        "{said}"
    );

    let run = run_as(&ws, &sim, USER, &["--expect-digest", &digest], &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", output_of(&run));

    let text = stdout_of(&status(&ws, &[]).await);
    let line = text
        .lines()
        .find(|l| l.contains(&short(&digest)))
        .unwrap_or_else(|| panic!("the approval in: {text}"));
    assert!(line.contains(&format!("run by {USER}@{host}")), "{line}");
    assert!(
        line.contains(&format!("approved by bob@{host} at ")),
        "{line}"
    );

    let approvals = approvals_json(&ws).await;
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0]["user"], USER);
    let by = &approvals[0]["approved_by"];
    assert_eq!(by.as_array().map(Vec::len), Some(1), "{by}");
    assert_eq!(by[0]["user"], "bob", "{by}");
    assert_eq!(by[0]["host"], host.as_str(), "{by}");
    assert_eq!(by[0]["rows"], 3, "{by}");
    assert_eq!(by[0]["totals"]["USD"], "45.00", "{by}");

    let page = report_page(&ws).await;
    assert!(
        page.contains(&format!("by {USER}@{host} (run ")) && page.contains("approved by bob@"),
        "{page}"
    );

    let ledger = ws.ledger();
    let args = [
        "report",
        "--since",
        "2000-01-01",
        "--json",
        "--ledger",
        ledger.to_str().expect("utf-8 path"),
    ];
    let period = paybatch_in(ws.dir.path(), &args, &[]).await;
    let json: Value = serde_json::from_str(stdout_of(&period).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", output_of(&period)));
    let approval = json["batches"][0]["approval"].as_str().unwrap_or_default();
    assert!(
        approval.contains(&format!("run by {USER}@{host}"))
            && approval.contains(&format!("approved by bob@{host} at ")),
        "{json}"
    );
}

/// With the second-person setting (`--second-person`, or `second_person = true` in
/// paybatch.toml), a run without an approved digest, or whose digest only the user running it
/// approved, is refused (exit 3, nothing sent, no batch); once another user approved it, the
/// same run pays.
#[tokio::test]
async fn a_second_person_must_approve_the_plan_a_run_pays() {
    let (ws, sim, digest) = approved_file().await;
    let refused = |out: &Output, why: &str| {
        let err = stderr_of(out);
        assert_eq!(out.status.code(), Some(3), "{}", output_of(out));
        assert!(
            err.contains("requires a plan approved by a second person"),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
        assert!(err.contains("nothing was submitted"), "{err}");
        assert!(sim.orders().is_empty(), "{err}");
    };
    let out = run_as(&ws, &sim, USER, &["--second-person"], &[]).await;
    refused(&out, "no --expect-digest was given");
    let out = run_as(
        &ws,
        &sim,
        USER,
        &["--second-person", "--expect-digest", &digest],
        &[],
    )
    .await;
    refused(&out, "nobody approved it with `paybatch approve`");

    // Approved by the user who runs it: not a second person. The setting holds for every run.
    let own = approve_as(&ws, &sim, USER, &digest).await;
    assert_eq!(own.status.code(), Some(0), "{}", output_of(&own));
    ws.write("paybatch.toml", "second_person = true\n");
    let out = run_as(&ws, &sim, USER, &["--expect-digest", &digest], &[]).await;
    refused(
        &out,
        &format!("only {USER} approved it, the user running it"),
    );
    let out = run_as(&ws, &sim, USER, &[], &[]).await;
    refused(&out, "no --expect-digest was given");
    assert!(
        paybatch::ledger::Ledger::open(&ws.ledger())
            .expect("ledger")
            .batches()
            .expect("batches")
            .is_empty(),
        "no batch was made"
    );

    // Another user approves it: the same run pays, and says who approved it.
    let other = approve_as(&ws, &sim, "bob", &digest).await;
    assert_eq!(other.status.code(), Some(0), "{}", output_of(&other));
    let out = run_as(&ws, &sim, USER, &["--expect-digest", &digest], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(!sim.orders().is_empty());
    let approvals = approvals_json(&ws).await;
    let users: Vec<&str> = approvals[0]["approved_by"]
        .as_array()
        .expect("approvers")
        .iter()
        .filter_map(|a| a["user"].as_str())
        .collect();
    assert_eq!(users, [USER, "bob"]);
}
