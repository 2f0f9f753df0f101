//! A batch new to the ledger is read once when its file is valid (checked, recorded and
//! planned in one pass), through the real binary and a real simulator on a loopback port: the
//! ledger and the result file it leaves are the ones the two passes leave; a file with a
//! problem, or with another number of rows than its line ends suggest, is read in two passes
//! and nothing of the stopped pass stays; a batch the balance cannot pay is not even created.

use std::path::Path;

use crate::support::*;
use crate::support::{run_file as run, stderr_of as stderr};

fn db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("open ledger")
}

/// Every column of a table that a run decides (not ids, times or the ledger's own counters),
/// in a stable order, as text.
fn dump(ledger: &Path, sql: &str) -> Vec<String> {
    let conn = db(ledger);
    let mut st = conn.prepare(sql).expect("prepare");
    let columns = st.column_count();
    st.query_map([], |r| {
        let mut line = Vec::new();
        for i in 0..columns {
            let v: rusqlite::types::Value = r.get(i)?;
            line.push(format!("{v:?}"));
        }
        Ok(line.join(" | "))
    })
    .expect("query")
    .collect::<rusqlite::Result<_>>()
    .expect("rows")
}

const ROWS_SQL: &str = "SELECT r.reference, r.position, r.line, r.fields, r.spec, r.content_hash,
        r.state, r.attempt, r.item_index, r.delivery, r.merged, o.idempotency_key
    FROM rows r LEFT JOIN orders o ON o.id = r.order_id ORDER BY r.position";
const ORDERS_SQL: &str = "SELECT idempotency_key, body, mode, payment_currency, payment_method,
        card_id, state, sends FROM orders ORDER BY id";
const BATCH_SQL: &str = "SELECT name, input_hash, headers, environment, base_url,
        key_fingerprint, merges FROM batches";
const EVENTS_SQL: &str = "SELECT subject, from_state, to_state, cause FROM events
    WHERE subject = 'batch' ORDER BY id";

/// `n` valid rows over four products and three currencies, every other one by email, with a
/// carried column that holds quotes and a delimiter.
fn rows(n: usize) -> String {
    const PRODUCTS: [(&str, &str, &str); 4] = [
        ("AMZ-US", "USD", "10.00"),
        ("STEAM-US", "USD", "20"),
        ("TESCO-GB", "GBP", "10"),
        ("AMZ-DE", "EUR", "15.00"),
    ];
    let mut text = String::from("reference,product_code,face_value,currency,email,note\n");
    for i in 0..n {
        let (code, currency, value) = PRODUCTS[i % PRODUCTS.len()];
        let email = if i % 2 == 0 {
            format!("p{i}@example.com")
        } else {
            String::new()
        };
        let note = if i % 7 == 0 {
            "\"a \"\"quoted\"\", note\"".to_string()
        } else {
            format!("n{i}")
        };
        text.push_str(&format!(
            "P-{i:04},{code},{value},{currency},{email},{note}\n"
        ));
    }
    text
}

/// The same valid file planned by a batch new to the ledger (one pass) and by a run that must
/// read it twice (`--expect-digest`): the same rows, orders (keys and exact bodies), batch and
/// result file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pass_records_what_two_passes_record() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.write("b.csv", &rows(450));
    let once = run(&ws, &sim, "b.csv", &["--plan-only", "-v"], &[]).await;
    assert_eq!(once.status.code(), Some(5), "{}", stderr(&once));
    assert!(
        stderr(&once).contains("one pass: rows read, checked and recorded"),
        "{}",
        stderr(&once)
    );
    let result_once = std::fs::read(ws.path("b.result.csv")).expect("result file");
    let ledger_once = ws.path("once.db");
    std::fs::rename(ws.ledger(), &ledger_once).expect("keep the first ledger");
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{side}", ws.ledger().display()));
    }

    let d = plan_digest(&ws, &sim.base_url(), "b.csv").await;
    let twice = run(
        &ws,
        &sim,
        "b.csv",
        &["--plan-only", "-v", "--expect-digest", &d],
        &[],
    )
    .await;
    assert_eq!(twice.status.code(), Some(5), "{}", stderr(&twice));
    assert!(
        stderr(&twice).contains("first pass (read and check)")
            && !stderr(&twice).contains("one pass"),
        "{}",
        stderr(&twice)
    );
    let result_twice = std::fs::read(ws.path("b.result.csv")).expect("result file");
    assert_eq!(result_once, result_twice, "the result files differ");
    for sql in [ROWS_SQL, ORDERS_SQL, BATCH_SQL, EVENTS_SQL] {
        let a = dump(&ledger_once, sql);
        let b = dump(&ws.ledger(), sql);
        assert!(!a.is_empty(), "{sql}");
        assert_eq!(a, b, "{sql}");
    }
    // Both told the same plan.
    let planned = |o: &std::process::Output| {
        output_of(o)
            .lines()
            .filter(|l| l.starts_with("validated:") || l.starts_with("planned:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(planned(&once).len(), 2, "{}", output_of(&once));
    assert_eq!(planned(&once), planned(&twice));
}

/// A file whose last row repeats a reference stops the one pass there; the two passes that
/// follow record every row once (the repeated one INVALID with --skip-invalid), and the batch
/// is created once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_problem_stops_the_one_pass_and_leaves_nothing_of_it() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let mut text = rows(300);
    text.push_str("P-0003,AMZ-US,10.00,USD,,again\n");
    ws.write("b.csv", &text);
    let out = run(
        &ws,
        &sim,
        "b.csv",
        &["--plan-only", "-v", "--skip-invalid"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("one pass stopped"),
        "{}",
        stderr(&out)
    );
    assert!(
        output_of(&out).contains("validated: 301 rows, 300 valid, 1 with problems"),
        "{}",
        output_of(&out)
    );
    assert_eq!(dump(&ws.ledger(), BATCH_SQL).len(), 1);
    assert_eq!(
        dump(&ws.ledger(), EVENTS_SQL),
        vec!["Text(\"batch\") | Null | Text(\"CREATED\") | Text(\"batch created\")".to_string()]
    );
    let states = dump(
        &ws.ledger(),
        "SELECT state, COUNT(*) FROM rows GROUP BY state ORDER BY state",
    );
    assert_eq!(
        states,
        vec![
            "Text(\"INVALID\") | Integer(1)",
            "Text(\"PLANNED\") | Integer(300)"
        ]
    );

    // Without --skip-invalid, the same file is refused with its problem, and nothing is
    // recorded: not even the batch.
    let ws = Workspace::new();
    ws.write("b.csv", &text);
    let out = run(&ws, &sim, "b.csv", &["--plan-only"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(output_of(&out).contains("P-0003"), "{}", output_of(&out));
    assert!(dump(&ws.ledger(), BATCH_SQL).is_empty());
}

/// A quote after a semicolon in a comma-separated file (a character of its cell for the
/// reader) makes the quick count of rows too low: with --items-per-order auto the rows an order
/// takes depend on the number of rows, so the one pass stops once the rows outgrow the count,
/// and the two passes plan the file as they would have: 100 rows, 8 orders in flight, up to 4
/// rows an order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_per_order_decided_by_a_wrong_row_count_are_never_kept() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let text = rows(100).replace(",n1\n", ",x;\"y\n");
    assert_ne!(text, rows(100));
    ws.write("b.csv", &text);
    let out = run(
        &ws,
        &sim,
        "b.csv",
        &["--plan-only", "-v", "--concurrency", "8"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(
        stderr(&out).contains("one pass stopped"),
        "{}",
        stderr(&out)
    );
    assert!(
        output_of(&out).contains("validated: 100 rows, 100 valid, 0 with problems"),
        "{}",
        output_of(&out)
    );
    let planned = dump(
        &ws.ledger(),
        "SELECT COUNT(*) FROM rows WHERE state = 'PLANNED'",
    );
    assert_eq!(planned, vec!["Integer(100)"]);
    let largest = dump(
        &ws.ledger(),
        "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM rows GROUP BY order_id)",
    );
    assert_eq!(largest, vec!["Integer(4)"]);
    let cell: String = db(&ws.ledger())
        .query_row(
            "SELECT json_extract(fields, '$[5]') FROM rows WHERE reference = 'P-0001'",
            [],
            |r| r.get(0),
        )
        .expect("the row's cells");
    assert_eq!(cell, "x;\"y", "the cell is kept as read");
}

/// A batch the balance cannot pay is refused after its one pass, and nothing is recorded: no
/// batch, no row, no order, no result file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_balance_cannot_pay_leaves_no_batch() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.balances.retain(|(currency, _)| currency != "GBP");
    config
        .balances
        .push(("GBP".into(), rust_decimal::Decimal::new(5, 0)));
    let sim = start_sim(config).await;
    ws.write("b.csv", &rows(40));
    let out = run(&ws, &sim, "b.csv", &["--plan-only", "-v"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(output_of(&out).contains("GBP: need"), "{}", output_of(&out));
    assert!(
        stderr(&out).contains("one pass: rows read"),
        "{}",
        stderr(&out)
    );
    assert!(dump(&ws.ledger(), BATCH_SQL).is_empty());
    assert!(dump(&ws.ledger(), "SELECT id FROM rows").is_empty());
    assert!(dump(&ws.ledger(), "SELECT id FROM orders").is_empty());
    // The result file the pass was writing is not put in place, and leaves nothing behind.
    let left: Vec<String> = std::fs::read_dir(ws.dir.path())
        .expect("the workspace")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("result"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// In front of a simulator: holds each balance read until `together` of them are in flight
/// (or 10 s have passed), and counts the most that were in flight at once.
struct BalanceGate {
    upstream: String,
    http: reqwest::Client,
    together: usize,
    in_flight: std::sync::Mutex<usize>,
    most: std::sync::atomic::AtomicUsize,
    arrived: tokio::sync::Notify,
}

async fn through_gate(
    axum::extract::State(gate): axum::extract::State<std::sync::Arc<BalanceGate>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().trim_start_matches("/v2").to_string();
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    if path == "/balance" {
        let now = {
            let mut n = gate.in_flight.lock().expect("lock");
            *n += 1;
            *n
        };
        gate.most
            .fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        gate.arrived.notify_waiters();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                let woken = gate.arrived.notified();
                if gate.most.load(std::sync::atomic::Ordering::SeqCst) >= gate.together {
                    break;
                }
                woken.await;
            }
        })
        .await;
    }
    let mut forwarded = gate
        .http
        .request(parts.method, format!("{}{path}{query}", gate.upstream))
        .body(body.to_vec());
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            forwarded = forwarded.header(name, value);
        }
    }
    let answer = forwarded.send().await;
    if path == "/balance" {
        *gate.in_flight.lock().expect("lock") -= 1;
    }
    let Ok(answer) = answer else {
        return axum::http::StatusCode::BAD_GATEWAY.into_response();
    };
    let status = axum::http::StatusCode::from_u16(answer.status().as_u16())
        .unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
    let bytes = answer.bytes().await.unwrap_or_default();
    (status, [("content-type", "application/json")], bytes).into_response()
}

/// The balances a new batch draws on are read as its one pass first draws on each, all at
/// once: the pass's transaction (which in a large merge keeps readers out of the ledger) waits
/// at its end for one round trip at most, not one per currency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balances_of_a_new_batch_are_read_at_once() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let gate = std::sync::Arc::new(BalanceGate {
        upstream: sim.base_url().trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        together: 3,
        in_flight: std::sync::Mutex::new(0),
        most: std::sync::atomic::AtomicUsize::new(0),
        arrived: tokio::sync::Notify::new(),
    });
    let app = axum::Router::new()
        .fallback(through_gate)
        .with_state(gate.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/v2", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    // USD, GBP and EUR, all drawn on by the first rows.
    ws.write("b.csv", &rows(40));
    let args = ["run", "b.csv", "--plan-only", "-v"];
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        against_url(&ws, &base, &args),
    )
    .await
    .expect("the run ends");
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(
        stderr(&out).contains("one pass: rows read"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        gate.most.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the three balances are read at once"
    );
    let planned = dump(&ws.ledger(), "SELECT id FROM rows WHERE state = 'PLANNED'");
    assert_eq!(planned.len(), 40);
}

/// A workspace with a 60,000-row `b.csv` and a simulator whose balances pay it.
async fn sixty_thousand_rows() -> (Workspace, paybatch::sim::SimHandle) {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.balances = ["USD", "EUR", "GBP"]
        .into_iter()
        .map(|c| (c.to_string(), rust_decimal::Decimal::new(100_000_000, 0)))
        .collect();
    let sim = start_sim(config).await;
    ws.write("b.csv", &rows(60_000));
    (ws, sim)
}

/// Waits (at most 60 s) until `seen` while the run `child` goes on; a run that ends first fails
/// the test.
async fn wait_during_run(
    child: &mut tokio::process::Child,
    what: &str,
    mut seen: impl FnMut() -> bool,
) {
    let started = std::time::Instant::now();
    while !seen() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no {what} within 60 s"
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the run ended before {what}: {status}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// A `--plan-only` run of a new batch writes its result file while it reads: stopped by a
/// signal during the pass, it exits at once with nothing recorded, and leaves neither a result
/// file nor the temporary one it was writing (the rows' addresses). The same command then
/// plans every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_only_run_stopped_during_its_pass_leaves_no_result_file_behind() {
    let (ws, sim) = sixty_thousand_rows().await;
    let args = run_args(&ws, &sim.base_url(), "b.csv", &["--plan-only"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let temporaries = || -> Vec<String> {
        std::fs::read_dir(ws.dir.path())
            .expect("the workspace")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("result"))
            .collect()
    };
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[]);
    // The result file is being written once its temporary file is there.
    wait_during_run(&mut child, "a result file started", || {
        !temporaries().is_empty()
    })
    .await;
    signal(&child, "-INT");
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("the run stops soon after the signal")
        .expect("wait");
    if status.code() == Some(130) {
        assert!(temporaries().is_empty(), "{:?}", temporaries());
        assert!(dump(&ws.ledger(), "SELECT id FROM rows LIMIT 1").is_empty());
    } else {
        // The pass ended first: the plan and its file are complete.
        assert_eq!(status.code(), Some(5));
        assert_eq!(temporaries(), vec!["b.result.csv".to_string()]);
    }
    let again = run(&ws, &sim, "b.csv", &["--plan-only"], &[]).await;
    assert_eq!(again.status.code(), Some(5), "{}", output_of(&again));
    assert_eq!(temporaries(), vec!["b.result.csv".to_string()]);
    assert_eq!(input_rows(&ws.path("b.result.csv")), 60_000);
}

/// A large merge is written with a rollback journal (docs/ledger.md). A run killed (SIGKILL)
/// while the journal is there leaves no trace once the ledger is opened again: `status` finds
/// no batch, the ledger is whole and back in its write-ahead log, and the same command then
/// plans every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_during_a_large_merge_leaves_nothing_and_the_next_plans_all() {
    let (ws, sim) = sixty_thousand_rows().await;
    let args = run_args(&ws, &sim.base_url(), "b.csv", &["--plan-only"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let journal = std::path::PathBuf::from(format!("{}-journal", ws.ledger().display()));
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[]);
    wait_during_run(&mut child, "a rollback journal", || journal.exists()).await;
    child.start_kill().expect("kill");
    child.wait().await.expect("wait");
    let ledger = ws.ledger().display().to_string();
    let status = paybatch_in(ws.dir.path(), &["status", "--ledger", &ledger], &[]).await;
    assert!(status.status.success(), "{}", output_of(&status));
    assert!(
        stdout_of(&status).starts_with("no batches in "),
        "{}",
        output_of(&status)
    );
    // Rolled back and deleted; or, killed before it had a header, a journal SQLite leaves
    // because it is not hot (empty, or its first byte zero: nothing to roll back), gone with
    // the next large merge.
    let left = std::fs::read(&journal).unwrap_or_default();
    assert!(
        left.first().is_none_or(|b| *b == 0),
        "the journal was rolled back: {} bytes left, starting {:02x?}",
        left.len(),
        &left[..left.len().min(16)]
    );
    let conn = db(&ws.ledger());
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity");
    assert_eq!(check, "ok");
    assert!(dump(&ws.ledger(), "SELECT id FROM rows LIMIT 1").is_empty());
    assert!(dump(&ws.ledger(), "SELECT id FROM batches").is_empty());
    drop(conn);
    let again = run(&ws, &sim, "b.csv", &["--plan-only"], &[]).await;
    assert_eq!(again.status.code(), Some(5), "{}", output_of(&again));
    let conn = db(&ws.ledger());
    let planned: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM rows WHERE state = 'PLANNED'",
            [],
            |r| r.get(0),
        )
        .expect("rows");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!((planned, mode.as_str()), (60_000, "wal"));
    assert!(!journal.exists());
}
