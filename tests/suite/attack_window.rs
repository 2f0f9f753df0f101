//! The read of the order list ahead of the service's window, against a slow service: the
//! sends that waited for the window go after that read, not while it is still under way.

use std::time::Duration;

use crate::support::*;

/// The `EMP-` rows the simulator's orders pay so far.
fn paid_rows(sim: &paybatch::sim::SimHandle) -> Vec<String> {
    service_orders_per_reference(sim).into_keys().collect()
}

/// A service that answers every request 1.2 s late. Machine A sends the first five of its ten
/// one-row orders (`--order-rate 5`) and waits for the window; during the wait machine B pays
/// the five rows A has not sent. The read ahead of the window (started a second before it)
/// takes longer than that second: the sends that waited must still go after it, held back, or
/// B's rows are paid twice, and silently (the read finds them sent, no longer to hold). Deep
/// tier only: it waits a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sends_that_waited_for_the_window_wait_for_a_slow_read_ahead() {
    if !deep() {
        eprintln!("the window's read ahead: deep tier only ({DEEP_VAR}=1), it waits a minute");
        return;
    }
    let mut config = fast_config(None);
    config.faults.latency = Duration::from_millis(1200);
    let sim = start_sim(config).await;
    let a = Workspace::new();
    rows_file(&a, "payroll.csv", "EMP", 1..=10);
    let args = run_args(
        &a,
        &sim.base_url(),
        "payroll.csv",
        &["--items-per-order", "1", "--order-rate", "5"],
    );
    let dir = a.dir.path().to_path_buf();
    let run_a = tokio::spawn(async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        paybatch_in(&dir, &args, &[("PAYBATCH_SERVICE_READ_EVERY", "8")]).await
    });
    // A's first burst: five orders at the service (bounded wait).
    let started = std::time::Instant::now();
    while sim.orders().len() < 5 {
        assert!(started.elapsed() < Duration::from_secs(40), "A sends");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sent = paid_rows(&sim);
    assert_eq!(sent.len(), 5, "{sent:?}");
    let rest: Vec<String> = (1..=10)
        .map(|i| format!("EMP-{i}"))
        .filter(|r| !sent.contains(r))
        .collect();
    let b = Workspace::new();
    let mut text = String::from(
        "reference,product_code,face_value,currency,distribution,email,payment_currency,country,department\n",
    );
    for r in &rest {
        text.push_str(&format!(
            "{r},AMZ-US,10.00,USD,PAYOUT_LINK,,,US,Engineering\n"
        ));
    }
    b.write("bonus.csv", &text);
    let out = run_file(&b, &sim, "bonus.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "B paid before A's window"
    );

    let out = run_a.await.expect("A's run");
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows paid twice: {twice:?}; A exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    let text = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("5 orders held back"), "{text}");
}
