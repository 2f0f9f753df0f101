//! Paying by card: `--card-id` and a `card_id` column, end to end against the simulator taking
//! cards as the interface document describes them (`cards_accepted`, `paybatch sim serve
//! --cards-accepted`), including a resumed run; card orders never touch the balance and say so in
//! the result file. By default the simulator answers card orders as the published contract does
//! (`400 payment_method_unavailable`), and the rows are refused without a charge.

use std::path::Path;
use std::process::Output;

use crate::support::*;
use paybatch::api::PaymentMethodType;
use paybatch::sim::SimHandle;
use rust_decimal::Decimal;

const CARD: &str = "card_sim_visa";

async fn run(
    ws: &Workspace,
    sim: &SimHandle,
    file: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    run_file(ws, sim, file, extra, envs).await
}

/// The fast simulator, taking cards.
fn cards_taken(state: Option<std::path::PathBuf>) -> paybatch::sim::SimConfig {
    paybatch::sim::SimConfig {
        cards_accepted: true,
        ..fast_config(state)
    }
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn result_column(path: &Path, name: &str) -> Vec<String> {
    let rows = read_csv(path);
    let c = col(&rows[0], name);
    rows[1..].iter().map(|r| r[c].clone()).collect()
}

const BATCH: &str = "reference,product_code,face_value,currency,email\n\
    C-1,AMZ-US,25.00,USD,ann@example.com\n\
    C-2,STEAM-US,20,USD,\n\
    C-3,TESCO-GB,10,GBP,\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_paid_batch_never_touches_the_balance_even_when_resumed() {
    let ws = Workspace::new();
    let mut config = cards_taken(None);
    // Far too little on the balance: card rows must not be checked against it.
    config.balances = vec![("USD".into(), Decimal::ONE), ("GBP".into(), Decimal::ONE)];
    let sim = start_sim(config).await;
    ws.write("cards.csv", BATCH);
    let killed = run(
        &ws,
        &sim,
        "cards.csv",
        &["--card-id", CARD],
        &[("PAYBATCH_FAILPOINT", "after_send:2")],
    )
    .await;
    assert_eq!(
        killed.status.code(),
        None,
        "killed after a send: {}",
        err(&killed)
    );
    let out = run(&ws, &sim, "cards.csv", &["--card-id", CARD], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let orders = sim.orders();
    assert_eq!(
        orders.len(),
        3,
        "one order per row, the killed one included"
    );
    for o in &orders {
        assert_eq!(o.payment_method.kind, PaymentMethodType::Card);
        assert_eq!(o.payment_method.card_id.as_deref(), Some(CARD));
    }
    assert_eq!(sim.balance("USD"), Decimal::ONE);
    assert_eq!(sim.balance("GBP"), Decimal::ONE);
    let methods = result_column(&ws.path("cards.result.csv"), "payment_method");
    assert!(
        methods.iter().all(|m| m == &format!("CARD:{CARD}")),
        "{methods:?}"
    );
    assert!(
        output_of(&out).contains("by card"),
        "the summary says how rows were paid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_id_column_pays_some_rows_by_card_and_the_rest_from_the_balance() {
    let ws = Workspace::new();
    let sim = start_sim(cards_taken(None)).await;
    let before = sim.balance("USD");
    ws.write(
        "mixed.csv",
        "reference,product_code,face_value,currency,email,card_id\n\
         M-1,AMZ-US,25.00,USD,ann@example.com,card_sim_visa\n\
         M-2,AMZ-US,30.00,USD,bob@example.com,\n",
    );
    let out = run(&ws, &sim, "mixed.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let methods = result_column(&ws.path("mixed.result.csv"), "payment_method");
    assert_eq!(methods, ["CARD:card_sim_visa", "ACCOUNT_BALANCE:USD"]);
    // Only the balance row was charged: 30.00 less AMZ-US's 2 % discount.
    assert_eq!(
        before - sim.balance("USD"),
        "29.40".parse::<Decimal>().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_card_is_rejected_by_the_service_and_nothing_is_charged() {
    let ws = Workspace::new();
    let sim = start_sim(cards_taken(None)).await;
    let before = sim.balance("USD");
    ws.write("cards.csv", BATCH);
    let out = run(&ws, &sim, "cards.csv", &["--card-id", "card_nobody"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", err(&out));
    let statuses = result_column(&ws.path("cards.result.csv"), "status");
    assert!(statuses.iter().all(|s| s == "REJECTED"), "{statuses:?}");
    let types = result_column(&ws.path("cards.result.csv"), "error_type");
    assert!(types.iter().all(|t| t == "validation_error"), "{types:?}");
    assert_eq!(sim.balance("USD"), before);
    assert!(sim.orders().is_empty());
}

/// The published contract takes only the account balance: a card order is answered
/// `400 payment_method_unavailable`; the rows are refused with that type and nothing is charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_orders_are_refused_where_the_service_takes_no_cards() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let before = sim.balance("USD");
    ws.write("cards.csv", BATCH);
    let out = run(&ws, &sim, "cards.csv", &["--card-id", CARD], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", err(&out));
    let statuses = result_column(&ws.path("cards.result.csv"), "status");
    assert!(statuses.iter().all(|s| s == "REJECTED"), "{statuses:?}");
    let types = result_column(&ws.path("cards.result.csv"), "error_type");
    assert!(
        types.iter().all(|t| t == "payment_method_unavailable"),
        "{types:?}"
    );
    let messages = result_column(&ws.path("cards.result.csv"), "error_message");
    assert!(
        messages
            .iter()
            .all(|m| m.contains("no longer lists card payments")),
        "{messages:?}"
    );
    assert_eq!(sim.balance("USD"), before);
    assert!(sim.orders().is_empty());
}
