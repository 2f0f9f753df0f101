//! The read of the order list ahead of the service's window, against a slow service: the
//! sends that waited for the window go after that read, not while it is still under way.

use crate::support::*;

/// As `attack_service::a_run_waiting_for_the_window_reads_the_list_before_it_sends_again`, with
/// a service that answers every request 1.2 s late: the read ahead of the window (started a
/// second before it) takes longer than that second. The sends that waited must still go after
/// it, or rows 6 to 10 that machine B paid are paid twice. Deep tier only: it waits a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known defect: the sends that waited for the window go when it opens, while a read ahead of it longer than a second is still under way; its rows are paid twice, silently"]
async fn the_sends_that_waited_for_the_window_wait_for_a_slow_read_ahead() {
    if !deep() {
        eprintln!("the window's read ahead: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let mut config = fast_config(None);
    config.faults.latency = std::time::Duration::from_millis(1200);
    let sim = start_sim(config).await;
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
        &["--items-per-order", "1", "--order-rate", "5", "-v"],
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
}
