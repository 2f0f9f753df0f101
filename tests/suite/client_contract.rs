//! The client against the real simulator on a loopback port: every endpoint, every error path,
//! the idempotency rules and the fault modes, read as a caller of the library would.

use std::time::Duration;

use crate::support::*;
use paybatch::api::client::{PageQuery, ProductQuery};
use paybatch::api::models::*;
use paybatch::api::{ApiError, ApiKey, Client, ClientConfig, CreateOutcome, ErrorClass};
use paybatch::sim::{self, Faults, SimHandle};

fn client(sim: &SimHandle) -> Client {
    client_with(sim, sim::DEFAULT_KEY, API_VERSION)
}

fn client_with(sim: &SimHandle, key: &str, version: &str) -> Client {
    let mut config = ClientConfig::new(sim.base_url(), ApiKey::new(key).unwrap());
    config.api_version = version.to_string();
    config.timeout = Duration::from_secs(10);
    Client::new(config).unwrap()
}

fn body(items: Vec<NewOrderItem>) -> Vec<u8> {
    serde_json::to_vec(&NewOrder {
        payment_method: PaymentMethod {
            kind: PaymentMethodType::AccountBalance,
            card_id: None,
            currency: Some("USD".into()),
        },
        items,
        description: Some("contract test".into()),
        metadata: None,
    })
    .unwrap()
}

fn item(code: &str, value: &str) -> NewOrderItem {
    NewOrderItem {
        face_value: value.parse().unwrap(),
        distribution_method: DistributionMethod {
            kind: DistributionType::PayoutLink,
            email_address: None,
            template_id: None,
        },
        products: ProductSelection::of(&[code.to_string()]),
    }
}

async fn wait_terminal(c: &Client, id: &str) -> Order {
    for _ in 0..100 {
        if let OrderView::Done(o) = c.order(id).await.unwrap() {
            return *o;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("order {id} did not finish within 5 s");
}

#[tokio::test]
async fn ping_answers_pong_and_keys_are_checked() {
    let sim = start_sim(fast_config(None)).await;
    assert_eq!(client(&sim).ping().await.unwrap().message, "pong");
    let e = client_with(&sim, "xxUnknownKey", API_VERSION)
        .ping()
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(401));
    assert_eq!(e.class(), ErrorClass::Final);
    let e = client_with(&sim, "wgProductionKey", API_VERSION)
        .ping()
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(401));
}

#[tokio::test]
async fn versions_are_checked() {
    let sim = start_sim(fast_config(None)).await;
    let e = client_with(&sim, sim::DEFAULT_KEY, "2020-01-01")
        .ping()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_version");
    assert!(!e.is_transient());
    // 2023-07-27 was switched off: 410, final.
    let e = client_with(&sim, sim::DEFAULT_KEY, API_VERSION_2023)
        .ping()
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.kind()), (Some(410), "version_removed"));
    assert!(!e.is_transient());
    let old = start_sim(sim::SimConfig {
        version_2023: true,
        ..fast_config(None)
    })
    .await;
    client_with(&old, sim::DEFAULT_KEY, API_VERSION_2023)
        .ping()
        .await
        .unwrap();
}

#[tokio::test]
async fn the_catalog_is_read_through_every_page_and_filtered() {
    let sim = start_sim(fast_config(None)).await;
    let c = client(&sim);
    let one_page = c
        .products(&ProductQuery {
            limit: Some(500),
            ..Default::default()
        })
        .await
        .unwrap();
    let all = c
        .all_products(&ProductQuery {
            limit: Some(4),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(all.len() >= 30, "{} products", all.len());
    assert_eq!(
        all.len(),
        one_page.catalog.len(),
        "paging loses or repeats nothing"
    );
    let types: std::collections::HashSet<_> = all.iter().map(|p| p.payout_type).collect();
    assert_eq!(types.len(), 3);

    let orderable = c
        .all_products(&ProductQuery {
            is_orderable: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(orderable.iter().all(|p| p.is_orderable));
    assert!(orderable.len() < all.len());

    let us_gb = c
        .all_products(&ProductQuery {
            countries: vec!["US".into(), "GB".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!us_gb.is_empty());
    assert!(us_gb.iter().all(|p| {
        p.countries_redeemable_in
            .iter()
            .any(|c| c == "US" || c == "GB")
    }));

    // The list has no `code` filter in the published contract (it ignores the parameter):
    // the client still finds one product by its code in the list.
    let amz = c.product("AMZ-US").await.unwrap().expect("AMZ-US exists");
    assert_eq!(amz.currency, "USD");
    assert!(amz.denominations().is_some());
    assert!(c.product("NO-SUCH-CODE").await.unwrap().is_none());
    let ignored = c
        .products(&ProductQuery {
            code: Some("NO-SUCH-CODE".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ignored.catalog.len(), one_page.catalog.len());
    let e = c.order("O-NO-SUCH-ORDER").await.unwrap_err();
    assert_eq!(e.kind(), "not_found");
    assert!(!e.is_transient());

    assert!(!c.countries().await.unwrap().is_empty());
    assert!(!c.categories().await.unwrap().is_empty());
}

#[tokio::test]
async fn pagination_errors_are_final() {
    let sim = start_sim(fast_config(None)).await;
    let c = client(&sim);
    for q in [
        ProductQuery {
            limit: Some(0),
            ..Default::default()
        },
        ProductQuery {
            limit: Some(501),
            ..Default::default()
        },
        ProductQuery {
            after: Some("a".into()),
            before: Some("b".into()),
            ..Default::default()
        },
    ] {
        let e = c.products(&q).await.unwrap_err();
        assert_eq!(e.kind(), "pagination_error", "{q:?}");
        assert!(!e.is_transient());
    }
    let e = c
        .orders(&PageQuery {
            limit: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "pagination_error");
}

#[tokio::test]
async fn async_and_sync_orders_and_the_order_list() {
    let sim = start_sim(fast_config(None)).await;
    let c = client(&sim);
    let before = c.balance("USD").await.unwrap().balance;
    let created = c
        .create_order(
            "k-async-1",
            &body(vec![item("AMZ-US", "10.00")]),
            ExecutionMode::Async,
        )
        .await
        .unwrap();
    let CreateOutcome::Accepted(accepted) = &created else {
        panic!("async creation answers 202: {created:?}");
    };
    assert!(accepted.id.starts_with("O-"));
    let done = wait_terminal(&c, &accepted.id).await;
    assert_eq!(done.status, OrderStatus::Completed);
    assert_eq!(done.items.len(), 1);
    assert!(done.items[0].payout_url().is_some());
    assert_eq!(done.items[0].price.unwrap(), "9.80".parse().unwrap());
    let after = c.balance("USD").await.unwrap().balance;
    assert_eq!(before - after, "9.80".parse().unwrap());

    let sync = c
        .create_order(
            "k-sync-1",
            &body(vec![item("STEAM-US", "20")]),
            ExecutionMode::Sync,
        )
        .await
        .unwrap();
    let CreateOutcome::Order(full) = sync else {
        panic!("sync creation answers 200 with the order");
    };
    assert!(full.status.is_terminal());

    let e = c
        .create_order(
            "k-sync-2",
            &body(vec![item("STEAM-US", "20"), item("STEAM-US", "10")]),
            ExecutionMode::Sync,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "validation_error", "sync orders hold one item");

    let list = c
        .orders(&PageQuery {
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].id, full.id, "newest first");
    let next = c
        .orders(&PageQuery {
            limit: Some(1),
            after: list.pagination.cursors.after.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(next.items[0].id, accepted.id);

    let all = c.balances().await.unwrap();
    assert!(all.iter().any(|b| b.currency == "USD"));
    let e = c.order("O-NOPE").await.unwrap_err();
    assert_eq!(e.kind(), "not_found");
}

#[tokio::test]
async fn idempotency_replays_and_refuses_another_body() {
    let sim = start_sim(fast_config(None)).await;
    let c = client(&sim);
    let b = body(vec![item("AMZ-US", "15.00")]);
    let first = c
        .create_order("k-idem", &b, ExecutionMode::Async)
        .await
        .unwrap();
    let second = c
        .create_order("k-idem", &b, ExecutionMode::Async)
        .await
        .unwrap();
    assert_eq!(first.id(), second.id());
    let other = body(vec![item("AMZ-US", "16.00")]);
    let e = c
        .create_order("k-idem", &other, ExecutionMode::Async)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "idempotency_validation_error");
    assert!(!e.is_transient());
    assert_eq!(sim.orders().len(), 1);

    // A refused body is replayed as refused.
    let bad = body(vec![item("AMZ-US", "999999")]);
    let e1 = c
        .create_order("k-bad", &bad, ExecutionMode::Async)
        .await
        .unwrap_err();
    let e2 = c
        .create_order("k-bad", &bad, ExecutionMode::Async)
        .await
        .unwrap_err();
    assert_eq!(e1.kind(), "validation_error");
    assert_eq!(e2.kind(), "validation_error");
    if let ApiError::Service { body, .. } = e1 {
        assert!(body.details.is_some(), "422 names the invalid fields");
    }
}

#[tokio::test]
async fn a_request_racing_its_own_key_gets_the_transient_in_progress_answer() {
    let mut config = fast_config(None);
    config.faults = Faults {
        in_progress_delay: Duration::from_millis(800),
        ..Faults::default()
    };
    let sim = start_sim(config).await;
    let c = client(&sim);
    let b = body(vec![item("AMZ-US", "12.00")]);
    let (a, b2) = tokio::join!(c.create_order("k-race", &b, ExecutionMode::Async), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.create_order("k-race", &b, ExecutionMode::Async).await
    });
    assert!(a.is_ok());
    let e = b2.unwrap_err();
    assert_eq!(e.kind(), "idempotency_in_progress");
    assert!(e.is_transient());
}

#[tokio::test]
async fn rate_limit_answers_429_as_transient_with_a_wait() {
    let mut config = fast_config(None);
    config.rate_limit_per_minute = 3;
    let sim = start_sim(config).await;
    let c = client(&sim);
    let b = body(vec![item("AMZ-US", "10.00")]);
    for i in 0..3 {
        c.create_order(&format!("k-rl-{i}"), &b, ExecutionMode::Async)
            .await
            .unwrap();
    }
    let e = c
        .create_order("k-rl-x", &b, ExecutionMode::Async)
        .await
        .unwrap_err();
    assert!(e.is_rate_limited());
    assert!(e.is_transient());
    assert!(e.retry_after().unwrap_or_default() >= Duration::from_secs(1));
}

#[tokio::test]
async fn dropped_connections_are_transient_and_the_retry_finds_the_same_order() {
    let mut config = fast_config(None);
    config.faults = Faults {
        drop_rate: 1.0,
        ..Faults::default()
    };
    let sim = start_sim(config).await;
    let c = client(&sim);
    let b = body(vec![item("AMZ-US", "10.00")]);
    let e = c
        .create_order("k-drop", &b, ExecutionMode::Async)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::Transport(_)), "{e:?}");
    assert!(e.is_transient());
    let created = sim.orders();
    assert_eq!(
        created.len(),
        1,
        "the service created the order before the drop"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn server_errors_are_transient() {
    let mut config = fast_config(None);
    config.faults = Faults {
        error_rate: 1.0,
        ..Faults::default()
    };
    let sim = start_sim(config).await;
    let c = client(&sim);
    let e = c
        .create_order(
            "k-5xx",
            &body(vec![item("AMZ-US", "10.00")]),
            ExecutionMode::Async,
        )
        .await
        .unwrap_err();
    assert!(e.status().unwrap_or(0) >= 500, "{e:?}");
    assert!(e.is_transient());
    assert!(sim.orders().is_empty());
}

#[tokio::test]
async fn the_older_version_carries_redemption_url_and_the_client_reads_it() {
    let sim = start_sim(sim::SimConfig {
        version_2023: true,
        ..fast_config(None)
    })
    .await;
    let c = client_with(&sim, sim::DEFAULT_KEY, API_VERSION_2023);
    let created = c
        .create_order(
            "k-2023",
            &body(vec![item("AMZ-US", "10.00")]),
            ExecutionMode::Async,
        )
        .await
        .unwrap();
    let done = wait_terminal(&c, created.id()).await;
    assert!(done.items[0].redemption_url.is_some());
    assert!(done.items[0].payout.is_none());
    assert!(done.items[0].payout_url().is_some());
}

#[tokio::test]
async fn fixtures_from_the_service_documentation_parse() {
    let order = r#"{
        "id": "O-01H5WQGHKCBB85MQFM68S9KJ5Q", "status": "COMPLETED",
        "created_at": "2023-07-27T10:00:00Z", "completed_at": "2023-07-27T10:00:02Z",
        "description": "November rewards", "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
        "currency": "USD", "total_price": "10.00", "total_discount": "0",
        "items": [{"id": "E-NWPEKW4VL",
                   "distribution_method": {"type": "EMAIL", "email_address": "a@b.example"},
                   "products": {"type": "SINGLE", "value": "AMZ-US"},
                   "face_value": "10", "price": "10.00", "currency": "USD",
                   "payout": {"status": "ACTIVE", "status_updated_at": "2023-07-27T10:00:02Z",
                              "url": "https://example.test/r/abc", "expiry_date": "2024-07-27"}}],
        "transaction_detail": {"USD": {"value": "10.00", "fx": null}},
        "metadata": {"batch": "nov"}, "unknown_extra": 1
    }"#;
    let OrderView::Done(o) = OrderView::from_json(order.as_bytes()).unwrap() else {
        panic!("a COMPLETED order is the full shape");
    };
    assert_eq!(o.items[0].payout_url(), Some("https://example.test/r/abc"));
    assert_eq!(o.items[0].face_value.unwrap(), "10".parse().unwrap());
    let partial = r#"{"id": "O-1", "status": "PROCESSING", "message": "in progress"}"#;
    assert!(matches!(
        OrderView::from_json(partial.as_bytes()).unwrap(),
        OrderView::Processing(_)
    ));
    let accepted: AcceptedOrder =
        serde_json::from_str(r#"{"id":"O-1","status":"PROCESSING"}"#).unwrap();
    assert_eq!(accepted.status, OrderStatus::Processing);
    let err: ErrorBody = serde_json::from_str(
        r#"{"type":"validation_error","message":"bad","help":"fix","details":{"items[0].face_value":"too big"}}"#,
    )
    .unwrap();
    assert_eq!(normalize_error_type(&err.kind), "validation_error");
    let nf: ErrorBody = serde_json::from_str(
        r#"{"type":"not-found","message":"The requested resource was not found","help":"Check the identifier and retry"}"#,
    )
    .unwrap();
    assert_eq!(normalize_error_type(&nf.kind), "not_found");
    let balance: Balance =
        serde_json::from_str(r#"{"balance":"100.50","currency":"USD"}"#).unwrap();
    assert_eq!(balance.balance, "100.50".parse().unwrap());

    // The published shapes of today: a 422 with a list of details and a null help, an embedded
    // FX order, a list holding a processing order, countries as codes.
    let invalid: ErrorBody = serde_json::from_str(
        r#"{"type":"validation_error","message":"There was an issue with the request payload","help":null,
            "details":[{"type":"value_error","message":"too big","location":["items","0","face_value"]}]}"#,
    )
    .unwrap();
    assert_eq!(invalid.help, None);
    assert_eq!(invalid.detail_lines(), ["items.0.face_value: too big"]);
    let fx = r#"{"id": "O-2", "status": "COMPLETED", "created_at": "2023-11-14T14:37:54Z",
        "description": null, "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "GBP"},
        "currency": "GBP", "total_price": "8.49", "total_discount": "0.00",
        "items": [{"id": "E-1", "distribution_method": {"type": "PAYOUT_LINK"},
                   "products": {"type": "MULTIPLE", "values": ["AMZ-US", "AMC-US"]},
                   "face_value": "10.00", "price": "10.00", "currency": "USD",
                   "payout": {"status": "ACTIVE", "status_updated_at": "2023-11-14T15:25:07Z",
                              "url": "https://example.test/r/fx", "expiry_date": null}}],
        "transaction_detail": {"USD": {"value": "10.00", "fx": {"rate": "1.2", "rate_symbol": "GBPUSD",
                                                               "fee": {"value": "0.16", "currency": "GBP"}}}},
        "metadata": null}"#;
    let OrderView::Done(o) = OrderView::from_json(fx.as_bytes()).unwrap() else {
        panic!("a COMPLETED order is the full shape");
    };
    assert_eq!(o.metadata, None);
    assert_eq!(o.items[0].payout_url(), Some("https://example.test/r/fx"));
    let list: OrderList = serde_json::from_str(
        r#"{"items": [{"id": "O-3", "status": "PROCESSING", "message": "being processed"},
                      {"id": "O-2", "status": "COMPLETED", "created_at": "2023-11-14T14:37:54Z",
                       "completed_at": "2023-11-14T15:25:07Z", "description": null,
                       "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "GBP"},
                       "currency": "GBP", "total_price": "8.49", "total_discount": "0.00"}],
            "pagination": {"cursors": {}, "page": {"limit": 100}}}"#,
    )
    .unwrap();
    assert_eq!(list.items[0].status, OrderStatus::Processing);
    assert!(list.items.iter().all(|o| o.metadata.is_none()));
}
