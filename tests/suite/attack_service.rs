//! Two machines of one team and a service that answers within its published contract, against
//! the promise that a row another ledger paid is never paid again: the order list read before
//! every run that may send, every unknown order read whole, its rows kept in the ledger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::*;

/// Ledger A pays `payroll` (10 rows, one an order) straight at the simulator.
async fn a_pays_payroll(sim: &paybatch::sim::SimHandle) -> Workspace {
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&a, sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(paid_twice(sim).is_empty());
    a
}

/// The published contract lets a whole order (`GET /order/{id}`) come back with `description`
/// and `metadata` both null (the simulator's `--minimal-answers`). Another ledger's orders read
/// whole that way are kept as orders that are nobody's, never read again, and the same batch
/// on a second machine is paid again in full. Such an order cannot be told: it should hold the
/// run back (exit 5) as an order still processing does, never count as not paybatch's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_answered_without_description_and_metadata_are_not_taken_for_nobodys() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let _a = a_pays_payroll(&sim).await;
    // The same service now answers with only what its contract requires.
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 1.0;
    let sim = restart_sim(sim, config).await;
    let posts = order_posts(&sim);

    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("--allow-untold-orders"),
        "{}",
        output_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// Orders of another tool on the account, answered bare: the run is held back until a person
/// says they are not paybatch's (`--allow-untold-orders`); then it pays, once, and says what it
/// could not check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_orders_of_another_tool_hold_the_run_until_a_person_says_so() {
    let mut config = fast_config(None);
    config.seed_orders = Some(paybatch::sim::SeedOrders {
        count: 5,
        span: std::time::Duration::from_secs(86_400),
    });
    config.minimal_answers = 1.0;
    let sim = start_sim(config).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=4);
    let out = run_file(&b, &sim, "payroll.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), 0, "nothing sent");
    let out = run_file(&b, &sim, "payroll.csv", &["--allow-untold-orders"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("neither description nor metadata"),
        "{}",
        output_of(&out)
    );
    assert_eq!(live_orders_of_emp_rows(&sim).len(), 4);
    assert!(paid_twice(&sim).is_empty());
}

/// Only a share of the answers minimal (as `--minimal-answers 0.5` draws them), and the same
/// rows under another batch name with `--skip-repeats`: the orders read whole without
/// description and metadata are taken for nobody's, their rows are not repeats, and they are
/// paid again (the rows of the orders answered in full are skipped, as promised).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_of_bare_answers_pays_those_rows_twice() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let _a = a_pays_payroll(&sim).await;
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 0.5;
    let sim = restart_sim(sim, config).await;

    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 1..=10);
    let mut last = None;
    for _ in 0..4 {
        let out = run_file(&b, &sim, "bonus.csv", &["--skip-repeats"], &[]).await;
        let code = out.status.code();
        last = Some(out);
        if code != Some(5) {
            break;
        }
    }
    let out = last.expect("ran");
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
}

/// A list answer whose entries carry a `created_at` ahead of the service's own later orders (a
/// host of the service with its clock ahead, a time zone written wrong): the ledger's read mark
/// goes that far ahead and stays (it only grows), so every later read stops at once, before
/// any order created since. Another machine then pays a batch and this one pays it again.
/// The mark should never go past this machine's clock (and a margin), or the read should not
/// stop before what it has not seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_at_in_the_future_does_not_blind_later_reads() {
    let sim = start_sim(fast_config(None)).await;
    let skew = Arc::new(AtomicBool::new(true));
    let on = Arc::clone(&skew);
    let rewrite: rewriting::Rewrite = Arc::new(move |method, path, status, json| {
        if *method != axum::http::Method::GET
            || path != "/order"
            || status != 200
            || !on.load(Ordering::SeqCst)
        {
            return;
        }
        if let Some(items) = json["items"].as_array_mut() {
            for entry in items {
                let ahead = entry["created_at"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| (t + chrono::Duration::days(2)).to_rfc3339());
                if let Some(ahead) = ahead {
                    entry["created_at"] = serde_json::Value::String(ahead);
                }
            }
        }
    });
    let via = rewriting::start(&sim, rewrite).await;

    // Machine B pays a batch of its own while the list is answered two days ahead.
    let b = Workspace::new();
    rows_file(&b, "own.csv", "OWN", 1..=2);
    let out = run_at(&b, &via, "own.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let out = run_at(&b, &via, "own.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    skew.store(false, Ordering::SeqCst);

    // Machine A pays payroll; B is then given the same file with another grouping.
    let _a = a_pays_payroll(&sim).await;
    let posts = order_posts(&sim);
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_at(&b, &via, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// Machine A reads the list, finds nothing, and starts sending; its first sends fail for a
/// moment (503, tried again with the same keys). Meanwhile machine B pays the same rows under
/// another batch name: its read finds nothing of A's (A has no order at the service yet). A's
/// tries then go through: every row paid twice. The list is read once, before the first send,
/// and not again before sends tried again after B's orders were made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_paid_elsewhere_while_sends_are_tried_again_are_not_paid_again() {
    use std::sync::atomic::AtomicUsize;
    let sim = start_sim(fast_config(None)).await;
    let hold = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(AtomicUsize::new(0));
    let (h, n) = (Arc::clone(&hold), Arc::clone(&refused));
    let answer: rewriting::Answer = Arc::new(move |method, body| {
        let order = *method == axum::http::Method::POST
            && String::from_utf8_lossy(body).contains("\"metadata\"");
        if !order || !h.load(Ordering::SeqCst) {
            return None;
        }
        n.fetch_add(1, Ordering::SeqCst);
        Some((
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"type": "internal_server_error", "message": "unavailable", "help": null}),
        ))
    });
    let via = rewriting::start_with(
        &sim,
        rewriting::Rules {
            rewrite: Arc::new(|_, _, _, _| {}),
            answer: Some(answer),
            cut_path_at: None,
        },
    )
    .await;

    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let args = run_args(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--poll-timeout", "120"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = spawn_paybatch(a.dir.path(), &args, &[]);
    let started = std::time::Instant::now();
    while refused.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "A never sent"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 1..=10);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    hold.store(false, Ordering::SeqCst);

    let done = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        child.wait_with_output(),
    )
    .await
    .expect("A ends")
    .expect("A's output");
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        done.status.code(),
        output_of(&done)
    );
}

/// The list shows a PROCESSING order as `{id, status, message}`, without `created_at`: where
/// it stands among the dated entries is for the service to say (here after them, as a list
/// sorted with undated entries last would put it). A later read stops at the first entry older
/// than where it goes back, and so never reaches the orders another machine is paying right
/// now: the minute's wait for them is skipped, and the batch is paid twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_in_flight_listed_after_older_entries_hold_the_run_back() {
    use std::time::Duration;
    let state = Workspace::new();
    let mut config = fast_config(Some(state.sim_state()));
    config.seed_orders = Some(paybatch::sim::SeedOrders {
        count: 20,
        span: Duration::from_secs(20 * 86_400),
    });
    let sim = start_sim(config).await;
    let rewrite: rewriting::Rewrite = Arc::new(|method, path, status, json| {
        if *method != axum::http::Method::GET || path != "/order" || status != 200 {
            return;
        }
        if let Some(items) = json["items"].as_array_mut() {
            let (undated, dated): (Vec<_>, Vec<_>) =
                items.drain(..).partition(|e| e["created_at"].is_null());
            items.extend(dated);
            items.extend(undated);
        }
    });
    let via = rewriting::start(&sim, rewrite).await;

    // Machine A has read the list before (validate).
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = against_url(&a, &via, &["validate", "payroll.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    // Machine B pays payroll now: its orders are processing for a while.
    let mut slow = fast_config(Some(state.sim_state()));
    slow.processing_min = Duration::from_secs(300);
    slow.processing_max = Duration::from_secs(300);
    let sim = restart_sim(sim, slow).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_file(
        &b,
        &sim,
        "payroll.csv",
        &["--items-per-order", "5", "--poll-timeout", "2"],
        &[],
    )
    .await;
    assert_ne!(out.status.code(), Some(0), "{}", output_of(&out));
    let sim = restart_sim(sim, fast_config(Some(state.sim_state()))).await;
    let posts = order_posts(&sim);
    assert!(
        sim.orders()
            .iter()
            .any(|o| o.status.as_str() == "PROCESSING"),
        "B's orders still processing"
    );

    // Machine A runs the same batch with another grouping.
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--poll-timeout", "5"],
        &[],
    )
    .await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// A batch name longer than a metadata value (its orders name it by its sha256 tag, their
/// descriptions cut it): another machine's run of it is refused, adopted by `reconcile
/// --rebuild`, and the run then pays nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_name_over_200_characters_run_on_two_machines_is_paid_once() {
    let sim = start_sim(fast_config(None)).await;
    let name = format!("payroll-{}", "n".repeat(230));
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_file(
        &a,
        &sim,
        "payroll.csv",
        &["--items-per-order", "1", "--batch", &name],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let posts = order_posts(&sim);

    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let extra = ["--items-per-order", "5", "--batch", name.as_str()];
    let out = run_file(&b, &sim, "payroll.csv", &extra, &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        stderr_of(&out).contains("reconcile --batch"),
        "{}",
        output_of(&out)
    );
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    let adopt = rebuild_at(&b, &sim.base_url(), &name, "payroll.csv").await;
    assert_eq!(adopt.status.code(), Some(0), "{}", output_of(&adopt));
    let out = run_file(&b, &sim, "payroll.csv", &extra, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    assert!(paid_twice(&sim).is_empty());
}

/// The list names each order (`paybatch KEY batch=payroll row=EMP-n`), but the whole order
/// comes back with `description` and `metadata` null (both nullable in the published
/// contract): what the list said is dropped, the order is kept as nobody's and never read
/// again, and the second machine pays the batch again, its name notwithstanding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_list_names_is_not_forgotten_when_its_whole_answer_is_bare() {
    let sim = start_sim(fast_config(None)).await;
    let _a = a_pays_payroll(&sim).await;
    let posts = order_posts(&sim);
    let rewrite: rewriting::Rewrite = Arc::new(|method, path, status, json| {
        if *method == axum::http::Method::GET && path.starts_with("/order/") && status == 200 {
            json["description"] = serde_json::Value::Null;
            json["metadata"] = serde_json::Value::Null;
        }
    });
    let via = rewriting::start(&sim, rewrite).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_at(&b, &via, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_ne!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// Machine A's first run of payroll fails at the service (every order FAILED: nothing paid).
/// Machine B then runs payroll with another grouping and pays every row (rightly: A's orders
/// paid nothing). A follows its own advice, `paybatch retry`, and runs again: its rows are at
/// attempt 2 now, B's orders hold them at attempt 1, and they are taken for earlier attempts
/// of rows this batch has retried since. Nothing is refused and every row is paid again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_here_does_not_hide_the_orders_another_machine_paid() {
    let state = Workspace::new();
    let mut failing = fast_config(Some(state.sim_state()));
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    let sim = restart_sim(sim, fast_config(Some(state.sim_state()))).await;

    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(paid_twice(&sim).is_empty());
    let posts = order_posts(&sim);

    let retried = against_url(&a, &sim.base_url(), &["retry", "--batch", "payroll"]).await;
    assert_eq!(retried.status.code(), Some(0), "{}", output_of(&retried));
    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
}

/// Machine A plans payroll and is stopped before its first send; machine B runs payroll with
/// another grouping and every order of it FAILS (nothing paid). A's run then pays every row
/// once: FAILED orders of another ledger hold no row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_orders_of_another_ledger_do_not_hold_rows_planned_here() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let planned = [("PAYBATCH_FAILPOINT", "after_intent")];
    let out = run_file(
        &a,
        &sim,
        "payroll.csv",
        &["--items-per-order", "2"],
        &planned,
    )
    .await;
    assert_eq!(out.status.code(), None, "{}", output_of(&out));

    let mut failing = fast_config(Some(state.sim_state()));
    failing.failure_rate = 1.0;
    let sim = restart_sim(sim, failing).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "EMP", 1..=10);
    let out = run_file(&b, &sim, "payroll.csv", &["--items-per-order", "5"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_of(&out));
    let sim = restart_sim(sim, fast_config(Some(state.sim_state()))).await;

    let out = run_file(&a, &sim, "payroll.csv", &["--items-per-order", "2"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let per = service_orders_per_reference(&sim);
    for i in 1..=10 {
        let orders = per.get(&format!("EMP-{i}")).cloned().unwrap_or_default();
        let live = orders.iter().filter(|(_, s)| s != "FAILED").count();
        assert_eq!(live, 1, "EMP-{i}: {orders:?}");
    }
}

/// Machine B has payroll with its references in lower case (`emp-1` for A's `EMP-1`, the same
/// rows to a person and to the repeat check). The run is refused and advises `reconcile
/// --rebuild FILE`; that reconcile cannot match the orders to the file's rows and advises
/// passing `--rebuild FILE` (it was), and the run is refused again with the same advice: a loop
/// with no way out named. Nothing is paid twice; the way out (the file spells the service's
/// `EMP-1` as `emp-1`) should be said, or the rows adopted as the repeat check reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_spelt_in_lower_case_on_another_machine_has_a_way_out() {
    let sim = start_sim(fast_config(None)).await;
    let _a = a_pays_payroll(&sim).await;
    let b = Workspace::new();
    rows_file(&b, "payroll.csv", "emp", 1..=10);
    let extra = ["--items-per-order", "5"];
    let out = run_file(&b, &sim, "payroll.csv", &extra, &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let adopt = rebuild_at(&b, &sim.base_url(), "payroll", "payroll.csv").await;
    let out = run_file(&b, &sim, "payroll.csv", &extra, &[]).await;
    let mut live: std::collections::BTreeMap<String, usize> = Default::default();
    for (r, orders) in service_orders_per_reference(&sim) {
        *live.entry(r.to_ascii_uppercase()).or_default() +=
            orders.iter().filter(|(_, s)| s != "FAILED").count();
    }
    assert!(live.values().all(|&n| n == 1), "{live:?}");
    let said = output_of(&adopt);
    // The rows are adopted as the repeat check reads them: the run pays nothing more.
    assert_eq!(
        out.status.code(),
        Some(0),
        "reconcile exited {:?}: {said}\nthen the run exited {:?}: {}",
        adopt.status.code(),
        out.status.code(),
        output_of(&out)
    );
    assert!(said.contains("for row emp-1 "), "{said}");
    assert!(output_of(&out).contains("COMPLETED"), "{}", output_of(&out));
    assert!(!output_of(&out).contains("MISMATCH"), "{}", output_of(&out));
}

/// Machine B pays rows 6 to 10 after machine A read the list before its run (hidden from A's
/// first read, as in the test above). A sends its first five orders, then waits a minute for
/// the service's window: it reads the list again just before the window lets it send, learns
/// B's orders and holds back the orders of their rows, though no read is due by count yet
/// (every 8 orders). Without that read, rows 6 to 8 would be paid twice. Deep tier only: it
/// waits for the service's minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_the_window_reads_the_list_before_it_sends_again() {
    if !deep() {
        eprintln!("the window's read ahead: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 6..=10);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    let via = rewriting::first_list_read_empty(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let args = run_args(
        &a,
        &via,
        "payroll.csv",
        // One at a time: its first five are rows 1 to 5 (sent at once, any five of the ten
        // could go first, and rows of B's among them would be paid twice before any read).
        &[
            "--items-per-order",
            "1",
            "--order-rate",
            "5",
            "--concurrency",
            "1",
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(a.dir.path(), &args, &[("PAYBATCH_SERVICE_READ_EVERY", "8")]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("held back"), "{text}");
    assert!(text.contains("EMP-6"), "{text}");
    assert_eq!(
        live_orders_of_emp_rows(&sim).len(),
        10,
        "every row paid once"
    );
}

/// Machine B pays rows 5 to 10 after machine A read the list before its run (here: the orders
/// are hidden from A's first read, as orders made just after it would be). A reads the list
/// again while it sends, after every 3 orders (`PAYBATCH_SERVICE_READ_EVERY`), learns B's
/// orders and holds back the orders of their rows: each row paid once, A says which it held
/// back, and its next run names them as repeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_paid_elsewhere_while_a_run_sends_are_held_back_at_its_next_read() {
    let sim = start_sim(fast_config(None)).await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", 5..=10);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    // A's first read of the list (before it plans) shows nothing of B's orders; every
    // later one shows them.
    let via = rewriting::first_list_read_empty(&sim).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let args = run_args(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--concurrency", "1"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(a.dir.path(), &args, &[("PAYBATCH_SERVICE_READ_EVERY", "3")]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("held back"), "{text}");
    assert!(text.contains("EMP-5"), "{text}");

    // The next run names the rows another ledger paid, and pays nothing of them.
    let posts = order_posts(&sim);
    let out = run_at(&a, &via, "payroll.csv", &["--items-per-order", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_eq!(order_posts(&sim), posts, "nothing sent");
    let out = run_at(
        &a,
        &via,
        "payroll.csv",
        &["--items-per-order", "1", "--skip-repeats"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(paid_twice(&sim).is_empty());
    assert_eq!(live_orders_of_emp_rows(&sim).len(), 10, "every row paid");
}
