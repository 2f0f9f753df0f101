//! An in-doubt intent older than the in-doubt window whose order the service made and has
//! finished, answered only with what the published contract requires (no description, no
//! metadata, in the list and whole): whose it is shows only by what it asks, which a resend of
//! the intent's key names.

use std::time::Duration;

use crate::support::*;

/// A run killed right after its send: the order is made and finishes, and the service then
/// answers minimally. A later run with the intent older than the in-doubt window reconciles it
/// first: the finished bare order cannot be attributed, but it names nothing by waiting, so the
/// intent is cleared, not kept in doubt, and its key sent again, whose answer names the order.
/// Kept in doubt (as while an unattributed order still processes), every later run and
/// reconcile would say the same forever. One order, each row paid once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_intent_whose_finished_order_is_answered_bare_is_not_kept_in_doubt_forever() {
    let state = Workspace::new();
    let sim = start_sim(fast_config(Some(state.sim_state()))).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=3);
    let grouping = ["--items-per-order", "3"];
    let killed = run_file(
        &a,
        &sim,
        "payroll.csv",
        &grouping,
        &[("PAYBATCH_FAILPOINT", "after_send")],
    )
    .await;
    let mut all = output_of(&killed);
    assert!(all.contains("fail point after_send"), "{all}");
    until_orders_finish(&sim, Duration::from_secs(10)).await;
    let mut config = fast_config(Some(state.sim_state()));
    config.minimal_answers = 1.0;
    let sim = restart_sim(sim, config).await;
    // In doubt for longer than the window: reconciled before any resend.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stale = [&grouping[..], &["--in-doubt-hours", "0.0001"]].concat();
    for _ in 0..2 {
        let out = run_file(&a, &sim, "payroll.csv", &stale, &[]).await;
        all.push_str(&format!("run exit {:?}:\n", out.status.code()));
        all.push_str(&output_of(&out));
        let out = against_url(&a, &sim.base_url(), &["reconcile", "--batch", "payroll"]).await;
        all.push_str(&format!("reconcile exit {:?}:\n", out.status.code()));
        all.push_str(&output_of(&out));
    }
    let out = run_file(&a, &sim, "payroll.csv", &stale, &[]).await;
    all.push_str(&format!("last run exit {:?}:\n", out.status.code()));
    all.push_str(&output_of(&out));
    assert!(paid_twice(&sim).is_empty(), "{all}");
    assert_eq!(sim.orders().len(), 1, "{all}");
    assert_eq!(out.status.code(), Some(0), "{all}");
}
