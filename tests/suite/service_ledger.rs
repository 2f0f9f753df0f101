//! The service as the ledger every machine shares, row by row: before every run that may send,
//! the order list is read since the ledger last read it, every order of another ledger is read
//! whole once (its metadata names every row), and every row about to be paid is checked
//! against them. Two ledgers on one simulator, as two machines of one team would be.

use crate::support::*;

/// Every `EMP-` reference of the service's orders has exactly one order that is not FAILED;
/// how many there are.
fn each_paid_once(sim: &paybatch::sim::SimHandle) -> usize {
    let live = live_orders_of_emp_rows(sim);
    for (r, n) in &live {
        assert_eq!(*n, 1, "row {r} is paid once: {n} live orders");
    }
    live.len()
}

/// `paybatch ARGS --base-url BASE` with the workspace's key file and ledger.
async fn cmd(
    ws: &Workspace,
    sim: &paybatch::sim::SimHandle,
    args: &[&str],
) -> std::process::Output {
    against_url(ws, &sim.base_url(), args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_looks_at_the_service_again_and_pays_nothing_another_ledger_paid() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=40);
    // Machine A, one row an order, killed after its 10th send: one send at a time, so that the
    // service holds 10 of its orders, never all 40 (with many in flight, every order may be
    // made before the kill, and machine B then has nothing left to pay).
    let killed = run_file(
        &a,
        &sim,
        "payroll.csv",
        &["--items-per-order", "1", "--concurrency", "1"],
        &[("PAYBATCH_FAILPOINT", "after_send:10")],
    )
    .await;
    assert_eq!(killed.status.code(), None, "{}", output_of(&killed));

    // Machine B, another grouping: refused, adopts A's orders, pays the rest.
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=40);
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("reconcile --batch payroll --rebuild"));
    let adopt = rebuild_at(&b, &sim.base_url(), "payroll", "payroll.csv").await;
    assert_eq!(adopt.status.code(), Some(0), "{}", output_of(&adopt));
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(each_paid_once(&sim), 40);
    let posts = order_posts(&sim);

    // Machine A resumes: the service now holds orders of its batch it does not know.
    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("that this ledger does not know"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    // It follows the advice: its intents never sent give way to B's orders.
    let adopt = rebuild_at(&a, &sim.base_url(), "payroll", "payroll.csv").await;
    assert_eq!(adopt.status.code(), Some(0), "{}", output_of(&adopt));
    assert!(
        stdout_of(&adopt).contains(
            "the service never created it and has its rows in orders another ledger made"
        ),
        "{}",
        output_of(&adopt)
    );
    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent again");
    assert_eq!(each_paid_once(&sim), 40);
    // Both ledgers say every row is paid.
    for ws in [&a, &b] {
        let status = cmd(ws, &sim, &["status", "--batch", "payroll", "--json"]).await;
        let text = stdout_of(&status);
        assert!(text.contains("\"COMPLETED\":40"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_another_ledgers_orders_is_a_repeat_and_appended_rows_are_checked() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    rows_file(&a, "nov.csv", "EMP", 1..=20);
    let out = run_file(&a, &sim, "nov.csv", &["--items-per-order", "4"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);

    // Another ledger, another batch name: the rows that are not the first of their orders are
    // repeats too.
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 6..=20);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("15 of its rows are already in other batches"),
        "{err}"
    );
    assert!(err.contains("EMP-7"), "{err}");
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    // Known row by row, they can be skipped one by one: only the new rows are paid.
    rows_file(&b, "bonus.csv", "EMP", 6..=25);
    let out = run_file(&b, &sim, "bonus.csv", &["--skip-repeats"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(each_paid_once(&sim), 25);

    // Ledger A appends rows to its batch after it sent everything: one of them is B's.
    let posts = order_posts(&sim);
    rows_file(&a, "nov.csv", "EMP", 1..=23);
    let out = run_file(&a, &sim, "nov.csv", &["--items-per-order", "4"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("EMP-21"), "{}", stderr_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    let out = run_file(
        &a,
        &sim,
        "nov.csv",
        &["--items-per-order", "4", "--skip-repeats"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(each_paid_once(&sim), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_planned_here_and_paid_by_another_ledger_before_its_first_send_is_a_repeat() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    rows_file(&a, "dec.csv", "EMP", 1..=10);
    // Planned, never sent.
    let out = run_file(
        &a,
        &sim,
        "dec.csv",
        &["--items-per-order", "2"],
        &[("PAYBATCH_FAILPOINT", "after_intent")],
    )
    .await;
    assert_eq!(out.status.code(), None, "{}", output_of(&out));
    // Another ledger pays three of those rows under another batch name.
    let b = Workspace::new();
    rows_file(&b, "extra.csv", "EMP", 4..=6);
    let out = run_file(&b, &sim, "extra.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);
    // A resumes: refused, naming them.
    let out = run_file(&a, &sim, "dec.csv", &["--items-per-order", "2"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("3 of its rows are already in other batches"),
        "{err}"
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    // Skipped: the others are planned again without them and paid.
    let out = run_file(
        &a,
        &sim,
        "dec.csv",
        &["--items-per-order", "2", "--skip-repeats"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(each_paid_once(&sim), 10);
}

/// A first run with the list as documented, then the same simulator with an odd first page.
async fn paid_then_odd(odd: paybatch::sim::OddList) -> (paybatch::sim::SimHandle, Workspace) {
    let first = Workspace::new();
    let state = first.sim_state();
    let mut config = fast_config(Some(state.clone()));
    config.seed_orders = Some(paybatch::sim::SeedOrders {
        count: 30,
        span: std::time::Duration::from_secs(60 * 24 * 3600),
    });
    let sim = start_sim(config).await;
    rows_file(&first, "jan.csv", "EMP", 1..=12);
    let out = run_file(&first, &sim, "jan.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut odd_config = fast_config(Some(state));
    odd_config.odd_list = Some(odd);
    (restart_sim(sim, odd_config).await, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_first_page_with_a_cursor_is_read_on() {
    let (sim, _first) = paid_then_odd(paybatch::sim::OddList::Empty).await;
    let posts = order_posts(&sim);
    let second = Workspace::new();
    rows_file(&second, "jan-copy.csv", "EMP", 1..=12);
    let out = run_file(&second, &sim, "jan-copy.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("12 of its rows are already in other batches"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_order_listed_first_makes_the_read_incomplete_and_nothing_is_sent() {
    let (sim, _first) = paid_then_odd(paybatch::sim::OddList::OldFirst).await;
    let posts = order_posts(&sim);
    let second = Workspace::new();
    rows_file(&second, "jan-copy.csv", "EMP", 1..=12);
    let out = run_file(&second, &sim, "jan-copy.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("stopped before its end"), "{err}");
    assert!(err.contains("newest first"), "{err}");
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    assert_eq!(each_paid_once(&sim), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_of_another_ledgers_order_spelt_another_way_is_a_repeat() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    rows_file(&a, "nov.csv", "EMP", 1..=5);
    let out = run_file(&a, &sim, "nov.csv", &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);
    let b = Workspace::new();
    // Lower case, full-width digits, a Cyrillic `Е`: each one of A's rows as a person reads it.
    b.write(
        "dec.csv",
        "reference,product_code,face_value,currency,distribution,email,payment_currency,country,department\n\
         emp-2,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n\
         EMP-３,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n\
         \u{415}MP-4,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n\
         NEW-1,AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n",
    );
    let out = run_file(&b, &sim, "dec.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("3 of its rows are already in other batches"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// An order of 200 rows whose references do not fit its metadata `|`-joined names them written
/// against each other (`paybatch_refs`): another ledger sees every one of its rows, and a lost
/// ledger is rebuilt with each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_an_order_named_in_compact_references_is_seen() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    let prefix = "EMP-PAYROLL-2026-11-ENGINEERING";
    rows_file(&a, "nov.csv", prefix, 1..=200);
    let out = run_file(&a, &sim, "nov.csv", &["--items-per-order", "200"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), 1, "one order of the 200 rows");
    let orders = sim.orders();
    let meta = &orders[0].metadata;
    assert!(
        meta.contains_key("paybatch_refs") && !meta.contains_key("paybatch_rows"),
        "{meta:?}"
    );
    assert_eq!(each_paid_once(&sim), 200);

    // Another ledger, another batch name: its rows of the middle and the end of A's order are
    // repeats, each of them.
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", prefix, 100..=200);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("101 of its rows are already in other batches"),
        "{err}"
    );
    assert_eq!(order_posts(&sim), 1, "nothing sent");

    // A's ledger lost: rebuilt from the service, every row is paid and nothing is sent again.
    let c = Workspace::new();
    rows_file(&c, "nov.csv", prefix, 1..=200);
    let out = rebuild_at(&c, &sim.base_url(), "nov", "nov.csv").await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let out = run_file(&c, &sim, "nov.csv", &["--items-per-order", "200"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), 1, "nothing sent again");
    let status = cmd(&c, &sim, &["status", "--batch", "nov", "--json"]).await;
    let text = stdout_of(&status);
    assert!(text.contains("\"COMPLETED\":200"), "{text}");
}
