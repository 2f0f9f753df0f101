//! Attacks on the end of `paybatch run`: the summary is read on a second connection to the
//! ledger while the result file is written on the first. The summary must be the summary of
//! the run's own batch in the ledger the run wrote, whatever happened to the ledger's path since
//! the run opened it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// The `--json` object a run printed on stdout.
fn json_line(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout_of(out).trim()).unwrap_or_else(|e| {
        panic!(
            "{e}: one JSON object on stdout\n{}\n{}",
            stdout_of(out),
            stderr_of(out)
        )
    })
}

/// A simulator whose orders stay PROCESSING 1.5 to 2 s: long enough polling for the ledger's
/// path to be moved while the run waits for its orders.
async fn a_polling_sim() -> paybatch::sim::SimHandle {
    let mut config = fast_config(None);
    config.processing_min = Duration::from_millis(1500);
    config.processing_max = Duration::from_millis(2000);
    start_sim(config).await
}

/// `paybatch run b.csv --batch b --json` (6 rows) on the ledger at `ledger`, started.
fn spawn_batch_b(
    ws: &Workspace,
    sim: &paybatch::sim::SimHandle,
    ledger: &str,
) -> tokio::process::Child {
    rows_file(ws, "b.csv", "B", 1..=6);
    let (base, key) = (sim.base_url(), ws.key_file());
    let key = key.to_str().expect("utf-8");
    let args = [
        "run",
        "b.csv",
        "--batch",
        "b",
        "--base-url",
        &base,
        "--api-key-file",
        key,
        "--ledger",
        ledger,
        "--json",
    ];
    spawn_paybatch(ws.dir.path(), &args, &[])
}

/// Runs `move_it` once the run has sent its orders, while they are still processing (1.5 s at
/// least), then waits for the run (at most 60 s): its JSON summary must be of batch b as the run
/// left it, every row COMPLETED, exit 0.
async fn moved_while_it_polls(
    sim: &paybatch::sim::SimHandle,
    run: tokio::process::Child,
    move_it: impl FnOnce(),
) -> (std::process::Output, Value) {
    until("the run sends its orders", Duration::from_secs(60), || {
        order_posts(sim) >= 1
    })
    .await;
    let started = Instant::now();
    move_it();
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "moved before the orders finished"
    );
    let out = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the run ends within 60 s")
        .expect("run");
    let summary = json_line(&out);
    assert_eq!(
        summary["rows"],
        serde_json::json!({"COMPLETED": 6}),
        "the summary of batch b as the run left it: {summary}\n{}",
        stderr_of(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    (out, summary)
}

/// A ledger given through a symbolic link that is pointed at another ledger while the run
/// polls (a backup restored, a "current" link moved by a deploy script): the run keeps the
/// ledger it opened (its result file is read from it), and so must its summary. With the
/// summary read on a connection opened again by path, it is the summary of the other ledger's
/// batch with the same id: wrong counts, wrong outcome, wrong exit code.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_is_of_the_ledger_the_run_opened_even_when_its_path_moves() {
    let ws = Workspace::new();
    let sim = a_polling_sim().await;
    let base = sim.base_url();
    let key = ws.key_file();
    let key = key.to_str().expect("utf-8");
    std::fs::create_dir_all(ws.path("real")).expect("dir");
    std::fs::create_dir_all(ws.path("other")).expect("dir");

    // The other ledger: one batch (id 1 there too), planned only.
    rows_file(&ws, "o.csv", "O", 1..=4);
    let other = paybatch_in(
        ws.dir.path(),
        &[
            "run",
            "o.csv",
            "--plan-only",
            "--base-url",
            &base,
            "--api-key-file",
            key,
            "--ledger",
            "other/ledger.db",
            "-q",
        ],
        &[],
    )
    .await;
    assert_eq!(other.status.code(), Some(5), "{}", stderr_of(&other));

    std::os::unix::fs::symlink("real/ledger.db", ws.path("cur.db")).expect("link");
    // The link must name a file that exists (a link to nothing is refused).
    std::fs::write(ws.path("real/ledger.db"), b"").expect("empty ledger");
    let run = spawn_batch_b(&ws, &sim, "cur.db");
    let (_, summary) = moved_while_it_polls(&sim, run, || {
        std::fs::remove_file(ws.path("cur.db")).expect("unlink");
        std::os::unix::fs::symlink("other/ledger.db", ws.path("cur.db")).expect("relink");
    })
    .await;
    assert_eq!(summary["batch"], "b");
    let result = read_csv(&ws.path(summary["result_file"].as_str().expect("result file")));
    let status = col(&result[0], "status");
    assert_eq!(result.len(), 7, "{result:?}");
    assert!(result[1..].iter().all(|r| r[status] == "COMPLETED"));
}

/// The ledger moved away while the run polls (`mv`, as an operator tidying a directory would,
/// its `-wal` and `-shm` with it): the run goes on with the file it opened, and its summary must
/// be that file's. Opened again by path, the summary's connection created a new, empty ledger
/// there (mode 0644, where every ledger is 0600) and summed it: no row, "completed", exit 0.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_moved_away_during_the_run_is_not_replaced_by_an_empty_one_in_the_summary() {
    let ws = Workspace::new();
    let sim = a_polling_sim().await;
    std::fs::create_dir_all(ws.path("real")).expect("dir");
    let run = spawn_batch_b(&ws, &sim, "real/ledger.db");
    moved_while_it_polls(&sim, run, || {
        for [from, to] in [
            ["ledger.db", "moved.db"],
            ["ledger.db-wal", "moved.db-wal"],
            ["ledger.db-shm", "moved.db-shm"],
        ] {
            let from = ws.path(&format!("real/{from}"));
            if from.exists() {
                std::fs::rename(&from, ws.path(&format!("real/{to}"))).expect("moved");
            }
        }
    })
    .await;
    if let Ok(meta) = std::fs::metadata(ws.path("real/ledger.db")) {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "a ledger file created at the old path is private as every ledger"
        );
    }
}

/// A row as the ledger holds it: id, reference, state, attempt, debited amount and currency.
type LedgerRow = (i64, String, String, i64, Option<String>, Option<String>);

/// The payout columns of the result file (each row's note read with it by a LEFT JOIN of
/// `payouts`) against the ledger read directly, row by row, after links were followed,
/// expired and reissued twice, the last reissue not paid yet: `payout_status`,
/// `payout_status_since`, `payout_expires_at` of the current attempt's line (COMPLETED rows and
/// later attempts only), `reissue_of` (the latest reissued earlier attempt and its order) and
/// `charged_all_attempts` (the own charge when COMPLETED, plus every reissued attempt's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_files_payout_columns_are_what_the_ledger_holds_after_two_reissues() {
    let ws = Workspace::new();
    let mut csv = String::from("reference,product_code,face_value,currency\n");
    for i in 1..=16 {
        csv.push_str(&format!("R-{i:02},AMZ-US,10.00,USD\n"));
    }
    ws.write("b.csv", &csv);
    links_expire_after(&ws, "10", "0.3").await;
    let ok = |out: &std::process::Output, codes: &[i32]| {
        assert!(
            codes.contains(&out.status.code().unwrap_or(-1)),
            "{}{}",
            stdout_of(out),
            stderr_of(out)
        );
    };
    ok(
        &paybatch_ws(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await,
        &[0],
    );
    for round in 0..2 {
        ok(
            &paybatch_ws(&ws, &["sim", "clock", "--advance", "12d"]).await,
            &[0],
        );
        ok(
            &paybatch_ws(&ws, &["payouts", "--batch", "b", "-q"]).await,
            &[0, 7],
        );
        ok(
            &paybatch_ws(&ws, &["retry", "--batch", "b", "--expired", "-q"]).await,
            &[0],
        );
        if round == 0 {
            ok(
                &paybatch_ws(&ws, &["run", "b.csv", "--batch", "b", "-q"]).await,
                &[0],
            );
        }
    }
    let report = paybatch_ws(&ws, &["report", "--batch", "b", "--out", "r.csv", "-q"]).await;
    ok(&report, &[0]);
    let file = read_csv(&ws.path("r.csv"));
    let header = &file[0];
    let cell = |line: &Vec<String>, name: &str| line[col(header, name)].clone();

    let db = rusqlite::Connection::open(ws.path("paybatch.db")).expect("ledger");
    let opt = |s: Option<String>| s.unwrap_or_default();
    let mut seen_reissue = (0, 0);
    let mut lines = file[1..].iter();
    let mut stmt = db
        .prepare(
            "SELECT id, reference, state, attempt, debited_amount, debited_currency FROM rows
             WHERE batch_id = (SELECT id FROM batches WHERE name = 'b') AND state != 'REMOVED'
             ORDER BY position, id",
        )
        .expect("rows");
    let rows: Vec<LedgerRow> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .expect("rows")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(rows.len(), 16);
    for (id, reference, state, attempt, debited, currency) in rows {
        let line = lines.next().expect("a line per row");
        assert_eq!(cell(line, "reference"), reference);
        let noted = state == "COMPLETED" || attempt > 1;
        let current: Option<(String, Option<String>, Option<String>)> = db
            .query_row(
                "SELECT status, since, expires_at FROM payouts WHERE row_id = ?1 AND attempt = ?2",
                [id, attempt],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .ok()
            .filter(|_| noted);
        let (status, since, expires) = match current {
            Some((s, since, e)) => (s, opt(since), opt(e)),
            None => Default::default(),
        };
        assert_eq!(cell(line, "payout_status"), status, "{reference}");
        assert_eq!(cell(line, "payout_status_since"), since, "{reference}");
        assert_eq!(cell(line, "payout_expires_at"), expires, "{reference}");
        let earlier: Option<(i64, Option<String>)> = db
            .query_row(
                "SELECT p.attempt, o.service_order_id FROM payouts p
                 LEFT JOIN orders o ON o.id = p.order_id
                 WHERE p.row_id = ?1 AND p.attempt < ?2 AND p.reissued_at IS NOT NULL
                 ORDER BY p.attempt DESC LIMIT 1",
                [id, attempt],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok()
            .filter(|_| attempt > 1);
        let reissue_of = match &earlier {
            Some((a, Some(order))) => format!("attempt {a}: {order}"),
            Some((a, None)) => format!("attempt {a}"),
            None => String::new(),
        };
        assert_eq!(cell(line, "reissue_of"), reissue_of, "{reference}");
        let mut charged = dec("0");
        let mut any = false;
        if state == "COMPLETED"
            && let (Some(d), Some(c)) = (&debited, &currency)
        {
            assert_eq!(c, "USD");
            charged += dec(d);
            any = true;
        }
        if earlier.is_some() {
            let mut st = db
                .prepare(
                    "SELECT debited_amount, debited_currency FROM payouts
                     WHERE row_id = ?1 AND attempt < ?2 AND reissued_at IS NOT NULL
                       AND debited_amount IS NOT NULL AND debited_currency IS NOT NULL",
                )
                .expect("earlier charges");
            for (d, c) in st
                .query_map([id, attempt], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .expect("charges")
                .map(|r| r.expect("charge"))
            {
                assert_eq!(c, "USD");
                charged += dec(&d);
                any = true;
            }
        }
        let expected = if any {
            format!("{:.2}", charged)
        } else {
            String::new()
        };
        assert_eq!(cell(line, "charged_all_attempts"), expected, "{reference}");
        match (attempt, state.as_str()) {
            (3, "COMPLETED") => seen_reissue.0 += 1,
            (a, s) if a > 1 && s != "COMPLETED" => seen_reissue.1 += 1,
            _ => {}
        }
    }
    assert!(lines.next().is_none(), "no line without its row");
    // The cases that matter were met: a row paid at its third attempt is impossible here (the
    // second reissue is not run); rows waiting for their third attempt are.
    assert_eq!(seen_reissue.0, 0);
    assert!(seen_reissue.1 > 0, "a reissued row not paid yet");
}
