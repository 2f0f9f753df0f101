//! Exactly once across the batches of one ledger: a file paid once is never paid again under
//! another name or another batch, and rows another batch has are refused, skipped or allowed
//! by a person's decision, before anything is sent.

use crate::support::*;

/// The sample file, its references given `prefix` on the rows `renamed` (0-based data rows).
fn sample_with(ws: &Workspace, name: &str, renamed: &[usize], prefix: &str) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SAMPLE))
            .expect("sample");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for &i in renamed {
        lines[i + 1] = lines[i + 1].replacen("EMP-", prefix, 1);
    }
    ws.write(name, &(lines.join("\n") + "\n"))
}

async fn paid_once(ws: &Workspace, sim: &paybatch::sim::SimHandle) {
    let out = run_file(ws, sim, "recipients.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
}

#[tokio::test]
async fn a_paid_file_under_a_new_name_or_batch_is_refused_and_nothing_is_sent() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let file = ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    let posts = order_posts(&sim);

    std::fs::copy(&file, ws.path("recipients (1).csv")).expect("copy");
    let out = run_file(&ws, &sim, "recipients (1).csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("the file is the one batch recipients was made from"),
        "{err}"
    );
    assert!(err.contains("12 paid"), "{err}");
    assert!(
        err.contains("--skip-repeats") && err.contains("--allow-repeats"),
        "{err}"
    );

    let out = run_file(&ws, &sim, "recipients.csv", &["--batch", "other-name"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing was sent");
    assert_one_live_order_per_row(&sim, &references(&file));
    // Neither refused run left a batch behind.
    let status = against_url(&ws, &sim.base_url(), &["status"]).await;
    let text = stdout_of(&status);
    assert!(
        !text.contains("other-name") && !text.contains("recipients (1)"),
        "{text}"
    );
}

#[tokio::test]
async fn a_new_file_repeating_paid_references_is_refused_skipped_or_allowed() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let first = ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    let posts = order_posts(&sim);
    // December: three new rows, nine repeated.
    let dec = sample_with(&ws, "dec.csv", &[0, 1, 2], "DEC-");

    let out = run_file(&ws, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("9 of its rows are already in other batches"),
        "{err}"
    );
    assert!(err.contains("batch recipients"), "{err}");
    assert!(!err.contains("the file is the one"), "another file: {err}");
    assert_eq!(order_posts(&sim), posts, "nothing was sent");

    let validate = against_url(&ws, &sim.base_url(), &["validate", "dec.csv"]).await;
    assert_eq!(validate.status.code(), Some(3), "{}", output_of(&validate));
    let text = stdout_of(&validate);
    assert!(text.contains("repeats: 9 rows"), "{text}");
    assert!(text.contains("EMP-1045-2026-11"), "{text}");

    let out = run_file(&ws, &sim, "dec.csv", &["--skip-repeats"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut expected = references(&first);
    expected.extend(
        references(&dec)
            .into_iter()
            .filter(|r| r.starts_with("DEC-")),
    );
    assert_one_live_order_per_row(&sim, &expected);
    let status = against_url(&ws, &sim.base_url(), &["status", "--batch", "dec"]).await;
    let text = stdout_of(&status);
    assert!(text.contains("SKIPPED"), "{text}");
    let result = read_csv(&ws.path("dec.result.csv"));
    let status_col = col(&result[0], "status");
    assert_eq!(
        result[1..]
            .iter()
            .filter(|r| r[status_col] == "SKIPPED")
            .count(),
        9
    );
    // The same command again pays nothing more; without the flag the skipped rows are
    // refused again, not paid.
    let again = run_file(&ws, &sim, "dec.csv", &["--skip-repeats"], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
    assert_one_live_order_per_row(&sim, &expected);
    let posts = order_posts(&sim);
    let bare = run_file(&ws, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(bare.status.code(), Some(3), "{}", output_of(&bare));
    assert_eq!(order_posts(&sim), posts);
    assert_one_live_order_per_row(&sim, &expected);
    // Skipped until a person allows it, even once nothing shows what made it a repeat.
    rusqlite::Connection::open(ws.ledger())
        .expect("ledger")
        .execute(
            "UPDATE rows SET reference = reference || '-elsewhere', likeness = NULL
             WHERE batch_id = (SELECT id FROM batches WHERE name = 'recipients')",
            [],
        )
        .expect("earlier rows out of sight");
    let bare = run_file(&ws, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(bare.status.code(), Some(3), "{}", output_of(&bare));
    assert!(stderr_of(&bare).contains("skipped before as a repeat"));
    assert_eq!(order_posts(&sim), posts);
}

#[tokio::test]
async fn allowed_repeats_are_paid_again_and_recorded_on_the_batch() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let file = ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    let out = run_file(
        &ws,
        &sim,
        "recipients.csv",
        &["--batch", "again", "--allow-repeats"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("paid again (--allow-repeats)"));
    let per_ref = service_orders_per_reference(&sim);
    for r in references(&file) {
        assert_eq!(
            per_ref.get(&r).map(Vec::len),
            Some(2),
            "{r} paid twice, as allowed"
        );
    }
    let status = against_url(&ws, &sim.base_url(), &["status", "--batch", "again"]).await;
    let text = stdout_of(&status);
    assert!(text.contains("repeats allowed (--allow-repeats)"), "{text}");
    // The report shows the decision where the plan digest stands.
    let report = against_url(
        &ws,
        &sim.base_url(),
        &["report", "--batch", "again", "--html", "again.html"],
    )
    .await;
    assert_eq!(report.status.code(), Some(0), "{}", output_of(&report));
    let page = std::fs::read_to_string(ws.path("again.html")).expect("report page");
    assert!(
        page.contains("repeats allowed (--allow-repeats)"),
        "the decision is shown"
    );
}

#[tokio::test]
async fn validate_digest_covers_the_decision_on_repeats() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    sample_with(&ws, "dec.csv", &[0, 1, 2], "DEC-");
    let base = sim.base_url();
    let digest_of = |out: &std::process::Output| {
        stdout_of(out)
            .split_whitespace()
            .find(|w| w.starts_with("sha256:"))
            .map(str::to_string)
    };
    let skip = against_url(&ws, &base, &["validate", "dec.csv", "--skip-repeats"]).await;
    assert_eq!(skip.status.code(), Some(0), "{}", output_of(&skip));
    let allow = against_url(&ws, &base, &["validate", "dec.csv", "--allow-repeats"]).await;
    assert_eq!(allow.status.code(), Some(0), "{}", output_of(&allow));
    let (skip, allow) = (digest_of(&skip), digest_of(&allow));
    assert!(skip.is_some() && allow.is_some() && skip != allow);
    let skip = skip.expect("digest");
    // The digest approved with --skip-repeats does not pay with --allow-repeats...
    let out = run_file(
        &ws,
        &sim,
        "dec.csv",
        &["--allow-repeats", "--expect-digest", &skip],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    // ...and pays exactly the approved plan with it.
    let out = run_file(
        &ws,
        &sim,
        "dec.csv",
        &["--skip-repeats", "--expect-digest", &skip],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
}

#[tokio::test]
async fn a_recipient_paid_the_same_lately_is_a_warning_not_a_refusal() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    // Every reference new, every recipient and amount the same: a weekly bonus.
    sample_with(&ws, "weekly.csv", &(0..12).collect::<Vec<_>>(), "WK-");
    let out = run_file(&ws, &sim, "weekly.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("rows pay a recipient what another batch paid them in the last 35 days"),
        "{err}"
    );
    assert!(err.contains("(EMP-1042-2026-11)"), "{err}");
}

#[tokio::test]
async fn batches_of_another_service_are_not_repeats() {
    let ws = Workspace::new();
    let one = start_sim(fast_config(None)).await;
    let two = start_sim(fast_config(None)).await;
    let file = ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &one).await;
    let out = run_file(&ws, &two, "recipients.csv", &["--batch", "elsewhere"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_one_live_order_per_row(&two, &references(&file));
}

#[tokio::test]
async fn a_ledger_of_the_previous_schema_knows_what_it_paid_once_migrated() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "recipients.csv");
    paid_once(&ws, &sim).await;
    // As the previous release left it: no likeness of paid rows.
    rusqlite::Connection::open(ws.ledger())
        .expect("ledger")
        .execute_batch(
            "DROP TABLE plan_approvals; DROP INDEX rows_later_attempts;
             DROP TABLE service_orders;
             DROP TABLE service_order_rows;
             DROP TABLE service_reads;
             DROP TABLE approvals;
             ALTER TABLE batches DROP COLUMN result_format;
             ALTER TABLE batches DROP COLUMN input_format;
             DROP TABLE payouts;
             ALTER TABLE batches DROP COLUMN payouts_read_at;
             DROP TABLE approved_plans;
             DROP INDEX rows_paid_likeness;
             ALTER TABLE rows DROP COLUMN likeness;
             DROP TABLE closed_months; DROP INDEX orders_booked_on;
             ALTER TABLE orders DROP COLUMN booked_on; ALTER TABLE orders DROP COLUMN booked_at;
             PRAGMA user_version = 7;",
        )
        .expect("schema 7");
    sample_with(&ws, "weekly.csv", &(0..12).collect::<Vec<_>>(), "WK-");
    let out = run_file(&ws, &sim, "weekly.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("(EMP-1042-2026-11)"),
        "{}",
        stderr_of(&out)
    );
    // The references it kept fold as a new ledger's do: `emp-1042-2026-11` is the row it paid.
    sample_with(&ws, "lower.csv", &[0], "emp-");
    let posts = order_posts(&sim);
    let out = run_file(&ws, &sim, "lower.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("12 of its rows are already in other batches"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing was sent");
}

/// The sample file with one more row, `LATE-1`, at its end.
fn sample_plus_late_row(ws: &Workspace, name: &str) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SAMPLE))
            .expect("sample");
    let late = "LATE-1,AMZ-US,10.00,USD,EMAIL,late.hire@example.com,,US,Engineering";
    ws.write(name, &format!("{text}{late}\n"))
}

#[tokio::test]
async fn a_second_ledger_of_the_same_batch_is_refused_then_adopts_and_pays_only_what_is_missing() {
    let sim = start_sim(fast_config(None)).await;
    let first = Workspace::new();
    let file = first.copy(SAMPLE, "recipients.csv");
    paid_once(&first, &sim).await;
    let posts = order_posts(&sim);

    // A colleague's machine: another ledger, another grouping, one late row added.
    let second = Workspace::new();
    sample_plus_late_row(&second, "recipients.csv");
    let out = run_file(
        &second,
        &sim,
        "recipients.csv",
        &["--items-per-order", "5"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("batch recipients already has")
            && err.contains("that this ledger does not know"),
        "{err}"
    );
    assert!(
        err.contains("paybatch reconcile --batch recipients --rebuild"),
        "{err}"
    );
    assert_eq!(order_posts(&sim), posts, "nothing was sent");

    let rebuilt = against_url(
        &second,
        &sim.base_url(),
        &[
            "reconcile",
            "--batch",
            "recipients",
            "--rebuild",
            "recipients.csv",
        ],
    )
    .await;
    assert!(
        matches!(rebuilt.status.code(), Some(0) | Some(4)),
        "{}",
        output_of(&rebuilt)
    );
    let out = run_file(
        &second,
        &sim,
        "recipients.csv",
        &["--items-per-order", "5"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut expected = references(&file);
    expected.push("LATE-1".into());
    assert_one_live_order_per_row(&sim, &expected);
    assert_eq!(order_posts(&sim), posts + 1, "only the late row was sent");
}

#[tokio::test]
async fn the_first_row_of_another_ledgers_order_is_a_repeat() {
    let sim = start_sim(fast_config(None)).await;
    let first = Workspace::new();
    first.copy(SAMPLE, "recipients.csv");
    // One row an order: every row is the first of its order.
    let out = run_file(
        &first,
        &sim,
        "recipients.csv",
        &["--items-per-order", "1"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);
    // Another ledger, another batch name, three rows of it repeated.
    let second = Workspace::new();
    sample_with(&second, "dec.csv", &[0, 1, 2], "DEC-");
    let out = run_file(&second, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("ordered at the service, unknown to this ledger"),
        "{err}"
    );
    assert_eq!(order_posts(&sim), posts);
    // Another ledger's order is read whole (its metadata names every row): its rows can be
    // skipped one by one, and the others are paid.
    let out = run_file(&second, &sim, "dec.csv", &["--skip-repeats"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(order_posts(&sim) > posts);
    for (r, orders) in &service_orders_per_reference(&sim) {
        assert_eq!(orders.len(), 1, "{r} paid once: {orders:?}");
    }
}

#[tokio::test]
async fn a_batch_planned_here_but_paid_elsewhere_before_its_first_send_is_refused() {
    let sim = start_sim(fast_config(None)).await;
    let here = Workspace::new();
    let file = here.copy(SAMPLE, "recipients.csv");
    let planned = run_file(&here, &sim, "recipients.csv", &["--plan-only"], &[]).await;
    assert_eq!(planned.status.code(), Some(5), "{}", output_of(&planned));
    // Meanwhile another ledger pays the batch.
    let elsewhere = Workspace::new();
    elsewhere.copy(SAMPLE, "recipients.csv");
    let out = run_file(
        &elsewhere,
        &sim,
        "recipients.csv",
        &["--items-per-order", "5"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);
    // The planned batch has sent nothing yet: it looks at the service again, and stops.
    let out = run_file(&here, &sim, "recipients.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("that this ledger does not know"));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    assert_one_live_order_per_row(&sim, &references(&file));
}

#[tokio::test]
async fn orders_still_processing_that_the_ledger_does_not_know_hold_a_new_batch_back() {
    let mut slow = fast_config(None);
    slow.processing_min = std::time::Duration::from_secs(30);
    slow.processing_max = std::time::Duration::from_secs(40);
    let sim = start_sim(slow).await;
    let first = Workspace::new();
    first.copy(SAMPLE, "recipients.csv");
    // Killed once its first order is accepted: the service holds it, PROCESSING.
    let killed = run_file(
        &first,
        &sim,
        "recipients.csv",
        &["--items-per-order", "12"],
        &[("PAYBATCH_FAILPOINT", "after_record:1")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", output_of(&killed));
    let posts = order_posts(&sim);
    let second = Workspace::new();
    second.copy(SAMPLE, "recipients.csv");
    // It waits for them (at most --poll-timeout), then refuses.
    let out = run_file(
        &second,
        &sim,
        "recipients.csv",
        &["--batch", "copy", "--poll-timeout", "3"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("still processing at the service"));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

#[tokio::test]
async fn orders_whose_description_a_long_batch_name_cut_are_read_whole() {
    let sim = start_sim(fast_config(None)).await;
    let long = "Prämien Dezember 2026 – Vertrieb und Außendienst, Region Süd-West, Nachzahlung, erste Runde";
    let first = Workspace::new();
    first.copy(SAMPLE, "recipients.csv");
    let out = run_file(
        &first,
        &sim,
        "recipients.csv",
        &["--batch", long, "--items-per-order", "1"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);
    // Another ledger, another name: its rows are found in the orders read whole.
    let second = Workspace::new();
    second.copy(SAMPLE, "recipients.csv");
    let out = run_file(
        &second,
        &sim,
        "recipients.csv",
        &["--batch", "Dezember-Kopie"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("12 of its rows are already in other batches"));
    // A name sharing the cut part is not taken for the batch: the orders say whose they are.
    let twin = long.replace("erste Runde", "zweite Runde");
    let out = run_file(&second, &sim, "recipients.csv", &["--batch", &twin], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(!err.contains("that this ledger does not know"), "{err}");
    assert!(
        err.contains("12 of its rows are already in other batches"),
        "{err}"
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// Payout-link rows (no address to warn on), each reference spelt four ways.
const SPELLINGS: [&str; 4] = [
    "EMP-1",
    "emp-1",
    "\u{ff25}\u{ff2d}\u{ff30}-\u{ff11}", // full-width ＥＭＰ-１
    "\u{415}\u{41c}\u{420}-1",           // Cyrillic ЕМР-1
];

fn link_rows(references: &[&str]) -> String {
    let mut text =
        String::from("reference,product_code,face_value,currency,distribution,country\n");
    for r in references {
        text.push_str(&format!("{r},TESCO-GB,20,GBP,PAYOUT_LINK,GB\n"));
    }
    text
}

/// Within a file, `emp-1`, `ＥＭＰ-１` and `ЕМР-1` after `EMP-1` are the reference of the first
/// row: the file is refused with nothing sent, each later row naming its spelling and the first
/// line; with --skip-invalid only the first is paid.
#[tokio::test]
async fn a_reference_spelt_another_way_in_one_file_is_the_same_reference() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("links.csv", &link_rows(&SPELLINGS));
    let out = run_file(&ws, &sim, "links.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    for (i, spelling) in SPELLINGS.iter().enumerate().skip(1) {
        assert!(
            err.contains(&format!(
                "line {}, column 1 (reference): reference `{spelling}` is already used on line 2, spelt another way there",
                i + 2
            )),
            "{spelling}: {err}"
        );
    }
    assert_eq!(order_posts(&sim), 0, "nothing was sent");

    let out = run_file(&ws, &sim, "links.csv", &["--skip-invalid"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    assert_one_live_order_per_row(&sim, &["EMP-1".to_string()]);
}

/// Across the batches of a ledger, a reference another batch paid is a repeat in any case, width
/// or look-alike letters: refused (exit 3, nothing sent) or skipped as today; one equal but for
/// `_` for `-` is a likely repeat, named, and paid.
#[tokio::test]
async fn a_reference_spelt_another_way_in_a_later_batch_is_a_repeat() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("nov.csv", &link_rows(&["EMP-1", "EMP-2", "EMP-3", "EMP-4"]));
    let out = run_file(&ws, &sim, "nov.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);

    let dec = [
        "emp-1",
        "\u{ff25}\u{ff2d}\u{ff30}-\u{ff12}", // full-width ＥＭＰ-２
        "\u{415}\u{41c}\u{420}-3",           // Cyrillic ЕМР-3
        "DEC-9",
    ];
    ws.write("dec.csv", &link_rows(&dec));
    let out = run_file(&ws, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("3 of its rows are already in other batches"),
        "{err}"
    );
    assert!(err.contains("batch nov"), "{err}");
    assert_eq!(order_posts(&sim), posts, "nothing was sent");

    let out = run_file(&ws, &sim, "dec.csv", &["--skip-repeats"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let paid: Vec<String> = ["EMP-1", "EMP-2", "EMP-3", "EMP-4", "DEC-9"]
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_one_live_order_per_row(&sim, &paid);
    let result = read_csv(&ws.path("dec.result.csv"));
    let status = col(&result[0], "status");
    assert_eq!(
        result[1..]
            .iter()
            .filter(|r| r[status] == "SKIPPED")
            .count(),
        3,
        "{result:?}"
    );

    ws.write("jan.csv", &link_rows(&["EMP_3", "JAN-1"]));
    let out = run_file(&ws, &sim, "jan.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("1 rows have a reference that another batch has but for `-`, `_` or spaces"),
        "{err}"
    );
    assert!(
        err.contains("line 2: `EMP_3` is `EMP-3` of batch nov (paid) but for `-`, `_` or spaces"),
        "{err}"
    );
    let mut paid = paid;
    paid.extend(["EMP_3".to_string(), "JAN-1".to_string()]);
    assert_one_live_order_per_row(&sim, &paid);
}
