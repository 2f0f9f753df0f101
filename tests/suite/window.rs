//! The service's order window read from a real simulator on a loopback port: an account with
//! thousands of orders over 40 days, paybatch's and others', finished and still processing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use paybatch::api::{ApiKey, Client, ClientConfig, ExecutionMode};
use paybatch::batch::order_body;
use paybatch::batch::window::{self, ServiceWindow};
use paybatch::sim::{self, SeedOrders, SimConfig, SimHandle};
use serde_json::json;

const K1: &str = "0b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c11";
const K2: &str = "1b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c12";
const K3: &str = "2b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c13";
const K4: &str = "3b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c14";
const K5: &str = "4b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c15";
const K6: &str = "5b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c16";

/// 2,400 finished orders over the last 40 days; orders created later stay PROCESSING for a
/// minute unless sent sync.
fn seeded() -> SimConfig {
    SimConfig {
        seed: 11,
        rate_limit_per_minute: 0,
        processing_min: Duration::from_secs(60),
        processing_max: Duration::from_secs(60),
        seed_orders: Some(SeedOrders {
            count: 2400,
            span: Duration::from_secs(40 * 24 * 3600),
        }),
        ..SimConfig::default()
    }
}

fn client(sim: &SimHandle) -> Client {
    Client::new(ClientConfig::new(
        sim.base_url(),
        ApiKey::new(sim::DEFAULT_KEY).expect("key"),
    ))
    .expect("client")
}

/// Places a one-item order with `description`; its id.
async fn place(client: &Client, key: &str, description: &str, mode: ExecutionMode) -> String {
    let body = json!({
        "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
        "items": [{
            "face_value": 10,
            "distribution_method": {"type": "PAYOUT_LINK"},
            "products": {"type": "SINGLE", "value": "AMZ-US"}
        }],
        "description": description,
    });
    let body = serde_json::to_vec(&body).expect("body");
    client
        .create_order(key, &body, mode)
        .await
        .unwrap_or_else(|e| panic!("order `{description}`: {e}"))
        .id()
        .to_string()
}

fn list_requests(sim: &SimHandle) -> u64 {
    sim.stats().requests.get("GET /order").copied().unwrap_or(0)
}

/// The orders of the ground truth created at or after `since`.
fn truth_since(sim: &SimHandle, since: DateTime<Utc>) -> Vec<sim::SimOrderRecord> {
    sim.orders()
        .into_iter()
        .filter(|o| {
            DateTime::parse_from_rfc3339(&o.created_at)
                .map(|t| t.with_timezone(&Utc) >= since)
                .unwrap_or(true)
        })
        .collect()
}

#[tokio::test]
async fn the_window_is_read_back_to_its_start_and_keeps_paybatchs_orders() {
    let sim = crate::support::start_sim(seeded()).await;
    let c = client(&sim);
    let sync = ExecutionMode::Sync;
    let long = format!("payroll-{}", "x".repeat(100));
    place(
        &c,
        K1,
        &order_body::description(K1, "nov", &["EMP-1"]),
        sync,
    )
    .await;
    place(
        &c,
        K2,
        &order_body::description(K2, "nov", &["EMP-2", "EMP-3"]),
        sync,
    )
    .await;
    place(&c, "k-old", "paybatch batch=nov row=EMP-4", sync).await;
    place(
        &c,
        K3,
        &order_body::description(K3, &long, &["EMP-5"]),
        sync,
    )
    .await;
    place(
        &c,
        K4,
        &order_body::description(K4, "dec", &["EMP-6"]),
        sync,
    )
    .await;
    place(
        &c,
        K5,
        &order_body::description(K5, "dec", &["OTHER-1"]),
        sync,
    )
    .await;
    place(&c, "k-lunch", "Team lunch", sync).await;
    let async_mode = ExecutionMode::Async;
    place(
        &c,
        K6,
        &order_body::description(K6, "nov", &["EMP-7"]),
        async_mode,
    )
    .await;
    place(&c, "k-other", "Someone else's", async_mode).await;

    let since = window::window_since(Utc::now(), None);
    let before = list_requests(&sim);
    let w = window::read_window(&c, since).await.expect("window");
    // 1,860 of the 2,400 seeded orders are in the last 31 days, and 9 newer: the fourth page
    // of 500 reaches the first older order, and the fifth is never asked for.
    assert_eq!((w.pages, w.complete), (4, true));
    assert_eq!(list_requests(&sim) - before, 4);
    assert_eq!(w.since, since);

    // Kept: paybatch's orders of the window and the processing entries, newest first.
    let truth = truth_since(&sim, since);
    let expected: Vec<String> = truth
        .iter()
        .rev()
        .filter(|o| {
            o.status == paybatch::api::OrderStatus::Processing
                || o.description
                    .as_deref()
                    .is_some_and(|d| d.starts_with("paybatch "))
        })
        .map(|o| o.id.clone())
        .collect();
    let kept: Vec<String> = w.orders.iter().map(|o| o.id.clone()).collect();
    assert_eq!(kept, expected);
    assert!(kept.len() > 1000, "{}", kept.len());
    assert!(
        w.orders
            .iter()
            .all(|o| o.is_unnamed() || o.created_at >= Some(since))
    );
    assert_eq!(w.undescribed, 0);

    sim.shutdown().await;
}

#[tokio::test]
async fn a_read_stops_at_its_page_cap_or_at_the_first_older_order() {
    let sim = crate::support::start_sim(seeded()).await;
    let c = client(&sim);
    place(
        &c,
        K1,
        &order_body::description(K1, "nov", &["EMP-1"]),
        ExecutionMode::Async,
    )
    .await;

    // The cap: two pages, not complete.
    let w = window::read_window_pages(&c, DateTime::<Utc>::MIN_UTC, 2)
        .await
        .expect("window");
    assert_eq!((w.pages, w.complete), (2, false));
    let newest_1000 = sim
        .orders()
        .into_iter()
        .rev()
        .take(1000)
        .filter(|o| {
            o.status == paybatch::api::OrderStatus::Processing
                || o.description
                    .as_deref()
                    .is_some_and(|d| d.starts_with("paybatch "))
        })
        .count();
    assert_eq!(w.orders.len(), newest_1000);

    // The whole list: five pages, every paybatch order of the account.
    let w: ServiceWindow = window::read_window(&c, DateTime::<Utc>::MIN_UTC)
        .await
        .expect("window");
    assert_eq!((w.pages, w.complete), (5, true));
    assert_eq!(w.orders.len(), 1 + 3 * 2400 / 5);

    // From tomorrow: the processing order (no creation time) is kept, the first finished one
    // ends the read.
    let tomorrow = Utc::now() + chrono::Duration::days(1);
    let before = list_requests(&sim);
    let w = window::read_window(&c, tomorrow).await.expect("window");
    assert_eq!((w.pages, w.complete, w.orders.len()), (1, true, 1));
    assert!(w.orders[0].is_unnamed());
    assert_eq!(list_requests(&sim) - before, 1);
    sim.shutdown().await;
}
