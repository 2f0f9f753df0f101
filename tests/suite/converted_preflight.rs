//! The balance pre-flight of rows paid from another currency's balance (converted by the
//! service at order time): priced before anything is sent with the service's estimate, else at
//! the rate of the ledger's last converted order of the pair plus a margin, else said plainly.
//! A batch whose known cost exceeds a balance is refused by `run` with nothing sent (exit 3),
//! and `validate` exits 3 with the same words.

use crate::support::*;
use paybatch::sim::{SimConfig, SimHandle};

/// 24.50 USD for the row priced in USD, and 3 rows converted from JPY: 3000 JPY less 3 % is
/// 2910 JPY, which the simulator charges 19.50 USD (2910 / 149.253731, to the cent): 83.00 USD.
const MIXED: &str = "reference,product_code,face_value,currency,payment_currency\n\
    US-1,AMZ-US,25.00,USD,USD\n\
    FX-1,UBER-JP,3000,JPY,USD\n\
    FX-2,UBER-JP,3000,JPY,USD\n\
    FX-3,UBER-JP,3000,JPY,USD\n";

fn with_usd(balance: &str, estimates: bool) -> SimConfig {
    SimConfig {
        balances: vec![("USD".to_string(), balance.parse().expect("amount"))],
        estimates,
        ..fast_config(None)
    }
}

fn text_of(out: &std::process::Output) -> String {
    format!("{}{}", stdout_of(out), stderr_of(out))
}

async fn validate(ws: &Workspace, sim: &SimHandle, file: &str) -> std::process::Output {
    against_url(ws, &sim.base_url(), &["validate", file]).await
}

/// With the service's estimate, converted rows count: a balance that pays the rows priced in
/// its currency but not the converted ones is short, by the right amount. `validate` says so
/// and exits 3; `run` refuses the batch with the same words and sends nothing, read in one
/// pass or in two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converted_rows_that_make_a_balance_short_are_refused_before_any_send() {
    let ws = Workspace::new();
    let sim = start_sim(with_usd("80.00", true)).await;
    ws.write("fx.csv", MIXED);
    let words = "USD: need 83.00 (24.50 for the rows priced in USD, 58.50 for 3 rows converted \
                 from other currencies, estimated by the service), available 80.00, short by 3.00";

    let checked = validate(&ws, &sim, "fx.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(3), "{text}");
    assert!(text.contains(words), "{text}");

    let out = run_file(&ws, &sim, "fx.csv", &[], &[]).await;
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("nothing was submitted"), "{text}");
    assert!(text.contains(words), "{text}");

    // With a row to leave out, the file is read in two passes: refused the same way.
    let mut two = MIXED.to_string();
    two.push_str("BAD-1,AMZ-US,-5,USD,USD\n");
    ws.write("fx2.csv", &two);
    let out = run_file(&ws, &sim, "fx2.csv", &["--skip-invalid"], &[]).await;
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains(words), "{text}");

    assert_eq!(order_posts(&sim), 0, "nothing was sent");
    assert!(sim.orders().is_empty());
    assert_eq!(sim.balance("USD"), "80.00".parse().expect("amount"));
}

/// With just enough balance, `validate` and `run` go ahead, and what the service estimated is
/// what it then charged: the balance ends at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_estimate_of_converted_rows_is_what_the_service_charges() {
    let ws = Workspace::new();
    let sim = start_sim(with_usd("83.00", true)).await;
    ws.write("fx.csv", MIXED);

    let checked = validate(&ws, &sim, "fx.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(0), "{text}");
    assert!(
        text.contains("58.50 USD (estimated by the service)"),
        "{text}"
    );

    let out = run_file(&ws, &sim, "fx.csv", &[], &[]).await;
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "balance USD: 83.00 available, 83.00 needed (of it, 58.50 for 3 rows converted \
             from other currencies, estimated by the service)"
        ),
        "{text}"
    );
    assert_eq!(sim.orders().len(), 4);
    assert_eq!(sim.balance("USD"), rust_decimal::Decimal::ZERO);
}

/// Where the service offers no estimate (its playground), the converted rows are priced at the
/// rate of the ledger's last order converted between the same currencies, plus 3 %: 19.50 USD
/// for 2910 JPY gives 20.09 USD a row (19.50 x 1.03, rounded up), 60.27 for three, 84.77 with
/// the row priced in USD. Short of the 80.00 left, the batch is refused, nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_estimate_the_ledger_rate_of_the_pair_prices_converted_rows() {
    let ws = Workspace::new();
    let sim = start_sim(with_usd("99.50", false)).await;
    ws.write(
        "first.csv",
        "reference,product_code,face_value,currency,payment_currency\n\
         FIRST-1,UBER-JP,3000,JPY,USD\n",
    );
    let first = run_file(&ws, &sim, "first.csv", &[], &[]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text_of(&first));
    assert_eq!(sim.balance("USD"), "80.00".parse().expect("amount"));

    ws.write("fx.csv", MIXED);
    let words = "USD: need 84.77 (24.50 for the rows priced in USD, 60.27 for 3 rows converted \
                 from other currencies, at the rate of the ledger's last order converted from \
                 USD to JPY";
    let checked = validate(&ws, &sim, "fx.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(3), "{text}");
    assert!(text.contains(words), "{text}");
    assert!(
        text.contains("plus 3%), available 80.00, short by 4.77"),
        "{text}"
    );

    let posts = order_posts(&sim);
    let out = run_file(&ws, &sim, "fx.csv", &[], &[]).await;
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains(words), "{text}");

    // Read in two passes (a row to leave out), the rate is read before the batch is written.
    let mut two = MIXED.to_string();
    two.push_str("BAD-1,AMZ-US,-5,USD,USD\n");
    ws.write("fx2.csv", &two);
    let out = run_file(&ws, &sim, "fx2.csv", &["--skip-invalid"], &[]).await;
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains(words), "{text}");
    assert_eq!(order_posts(&sim), posts, "nothing more was sent");
}

/// Where the service offers no estimate and the ledger has no converted order of the pair,
/// `validate` says plainly that the balance may be short, and by how much at most; the rows
/// priced in the balance's currency are still checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_price_validate_says_plainly_how_short_the_balance_may_be() {
    let ws = Workspace::new();
    let sim = start_sim(with_usd("80.00", false)).await;
    ws.write("fx.csv", MIXED);
    let checked = validate(&ws, &sim, "fx.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "warning: the balance may be short: USD: 3 rows converted from 8,730 JPY are not \
             priced here (the service offers no estimate here (POST /order/estimate; its \
             playground does not), and the ledger has no order converted from USD to JPY): \
             55.50 USD is left for them; if they cost more, the run stops part-way and the \
             balance is short by at most what they cost less 55.50 USD"
        ),
        "{text}"
    );

    // What is known is still checked: 24.50 USD against 20.00.
    let ws = Workspace::new();
    let sim = start_sim(with_usd("20.00", false)).await;
    ws.write("fx.csv", MIXED);
    let checked = validate(&ws, &sim, "fx.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(3), "{text}");
    assert!(
        text.contains("USD: need 24.50, available 20.00, short by 4.50"),
        "{text}"
    );
}

/// Beyond the 50 kinds of converted rows a pre-flight asks the service to estimate, the others
/// are priced at the rate those estimates give, plus 3 %: every row counts in the balance check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_beyond_those_estimated_are_priced_at_the_estimates_rate() {
    let ws = Workspace::new();
    let sim = start_sim(with_usd("10.00", true)).await;
    let mut csv = String::from("reference,product_code,face_value,currency,payment_currency\n");
    for i in 0..60 {
        csv.push_str(&format!("DE-{i},AMZ-DE,{},EUR,USD\n", 10 + i));
    }
    ws.write("many.csv", &csv);
    let checked = validate(&ws, &sim, "many.csv").await;
    let text = text_of(&checked);
    assert_eq!(checked.status.code(), Some(3), "{text}");
    assert!(
        text.contains("for 60 rows converted from other currencies, at the rate of the service's estimates of other rows converted from USD to EUR"),
        "{text}"
    );
    assert!(
        text.contains("plus 3%; estimated by the service)"),
        "{text}"
    );
    assert!(!text.contains("not priced here"), "{text}");
}
