//! Order creation in the simulator: validation, prices and currencies, balances, sync and async
//! modes, lazy transitions, both versions' shapes, and state kept across a restart.

use crate::support::raw_api::*;
use crate::support::start_sim;
use paybatch::api::models::OrderStatus;
use paybatch::sim::SimConfig;
use serde_json::{Value, json};

fn with(mut body: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut body;
    for p in &path[..path.len() - 1] {
        at = match p.parse::<usize>() {
            Ok(i) => &mut at[i],
            Err(_) => &mut at[*p],
        };
    }
    at[path[path.len() - 1]] = value;
    body
}

#[tokio::test]
async fn every_validation_rule_names_its_field() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let usd = |code: &str, fv: &str| order("USD", vec![item(code, num(fv))]);
    let email_item = |address: Value| {
        json!({"face_value": 10, "distribution_method": {"type": "EMAIL", "email_address": address},
               "products": {"type": "SINGLE", "value": "AMZ-US"}})
    };
    let multiple = |values: Value, fv: Value| {
        json!({"face_value": fv, "distribution_method": {"type": "PAYOUT_LINK"},
               "products": {"type": "MULTIPLE", "values": values}})
    };
    let with_metadata = |metadata: Value| with(usd("AMZ-US", "10"), &["metadata"], metadata);
    let many_pairs: serde_json::Map<String, Value> =
        (0..21).map(|i| (format!("k{i}"), json!("v"))).collect();
    let long_key = format!("metadata.{}", "k".repeat(41));
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no items", order("USD", vec![]), "items"),
        (
            "201 items",
            order("USD", vec![item("AMZ-US", num("1")); 201]),
            "items",
        ),
        (
            "not in the list",
            order("GBP", vec![item("TESCO-GB", num("15"))]),
            "items.0.face_value",
        ),
        ("below minimum", usd("AMZ-US", "0.50"), "items.0.face_value"),
        (
            "huge",
            usd("AMZ-US", "79228162514264337593543950335"),
            "items.0.face_value",
        ),
        (
            "above maximum",
            usd("AMZ-US", "2000.01"),
            "items.0.face_value",
        ),
        ("zero", usd("AMZ-US", "0"), "items.0.face_value"),
        ("below 0.01", usd("AMZ-US", "0.001"), "items.0.face_value"),
        (
            "too many decimals",
            usd("AMZ-US", "10.005"),
            "items.0.face_value",
        ),
        (
            "not a plan price",
            usd("SPOTIFY-US", "11.00"),
            "items.0.face_value",
        ),
        (
            "email without address",
            order(
                "USD",
                vec![with(
                    email_item(Value::Null),
                    &["distribution_method", "email_address"],
                    Value::Null,
                )],
            ),
            "items.0.distribution_method.email_address",
        ),
        (
            "invalid email",
            order("USD", vec![email_item("not-an-address".into())]),
            "items.0.distribution_method.email_address",
        ),
        (
            "long description",
            with(
                usd("AMZ-US", "10"),
                &["description"],
                "x".repeat(129).into(),
            ),
            "description",
        ),
        (
            "21 metadata pairs",
            with_metadata(Value::Object(many_pairs)),
            "metadata",
        ),
        (
            "long metadata key",
            with_metadata(json!({"k".repeat(41): "v"})),
            &long_key,
        ),
        (
            "long metadata value",
            with_metadata(json!({"rows": "1,".repeat(101)})),
            "metadata.rows",
        ),
        (
            "metadata value not a string",
            with_metadata(json!({"row": 7})),
            "metadata.row",
        ),
        (
            "payment currency",
            usd("AMZ-US", "10").pipe(|b| with(b, &["payment_method", "currency"], "JPY".into())),
            "payment_method.currency",
        ),
        (
            "no payment currency",
            json!({"payment_method": {"type": "ACCOUNT_BALANCE"}, "items": [item("AMZ-US", num("10"))]}),
            "payment_method.currency",
        ),
        (
            "single without value",
            order(
                "USD",
                vec![
                    json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"}, "products": {"type": "SINGLE"}}),
                ],
            ),
            "items.0.products.value",
        ),
        (
            "multiple without values",
            order(
                "USD",
                vec![
                    json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"}, "products": {"type": "MULTIPLE"}}),
                ],
            ),
            "items.0.products.values",
        ),
        (
            "multiple of one product",
            order("USD", vec![multiple(json!(["AMZ-US"]), json!(10))]),
            "items.0.products.values",
        ),
        (
            "multiple of the same product twice",
            order(
                "USD",
                vec![multiple(json!(["AMZ-US", "AMZ-US"]), json!(10))],
            ),
            "items.0.products.values",
        ),
        (
            "multiple with a fraction",
            order(
                "USD",
                vec![multiple(json!(["AMZ-US", "TARGET-US"]), json!(10.5))],
            ),
            "items.0.face_value",
        ),
        (
            "multiple below a minimum",
            order(
                "USD",
                vec![multiple(json!(["AMZ-US", "AIRBNB-US"]), json!(10))],
            ),
            "items.0.face_value",
        ),
        (
            "second item wrong",
            order(
                "USD",
                vec![item("AMZ-US", num("10")), item("STEAM-US", num("7"))],
            ),
            "items.1.face_value",
        ),
    ];
    for (i, (name, body, field)) in cases.into_iter().enumerate() {
        let r = api.post_order(&format!("v-{i}"), None, &bytes(&body)).await;
        let locations = r.locations();
        assert!(
            locations.iter().any(|l| l == field),
            "{name}: expected a problem at {field}, got {locations:?}"
        );
        assert!(r.json().get("help").is_none(), "{name}: no help on 422");
    }
    // Sync orders hold one item.
    let two = order(
        "USD",
        vec![item("AMZ-US", num("10")), item("AMZ-US", num("10"))],
    );
    let r = api.post_order("v-sync-2", Some("sync"), &bytes(&two)).await;
    assert_eq!(r.locations(), ["items"]);
    // The same two items are fine asynchronously, and 200 items are fine.
    assert_eq!(
        api.post_order("v-async-2", None, &bytes(&two)).await.status,
        202
    );
    let many = order("USD", vec![item("AMZ-US", num("1")); 200]);
    assert_eq!(
        api.post_order("v-200", None, &bytes(&many)).await.status,
        202
    );
    // A payout link ignores the email address; a whole-number MULTIPLE at every minimum, 20
    // metadata pairs of 40-character keys and 200-character values, 128 characters of
    // description are all fine.
    let link = order(
        "USD",
        vec![
            json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK", "email_address": "junk"},
                    "products": {"type": "SINGLE", "value": "AMZ-US"}}),
        ],
    );
    assert_eq!(
        api.post_order("v-link", None, &bytes(&link)).await.status,
        202
    );
    let full_pairs: serde_json::Map<String, Value> = (0..20)
        .map(|i| (format!("{i:0>40}"), json!("v".repeat(200))))
        .collect();
    let mut edge = order(
        "USD",
        vec![multiple(json!(["AMZ-US", "AIRBNB-US"]), json!(25))],
    );
    edge["metadata"] = Value::Object(full_pairs);
    edge["description"] = "d".repeat(128).into();
    assert_eq!(
        api.post_order("v-edge", None, &bytes(&edge)).await.status,
        202
    );
    assert_eq!(s.orders().len(), 4, "no invalid order was created");
    s.shutdown().await;
}

/// The refusals that are not about the shape of the body: `400` with the published types.
#[tokio::test]
async fn products_currencies_and_payment_methods_are_refused_with_their_types() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let cases: Vec<(&str, Value, Option<&str>, &str)> = vec![
        (
            "unknown product",
            order("USD", vec![item("NO-SUCH", num("10"))]),
            None,
            "product_validation_error",
        ),
        (
            "not orderable",
            order("USD", vec![item("RETIRED-US", num("10"))]),
            None,
            "product_validation_error",
        ),
        (
            "a payout selection template",
            order(
                "USD",
                vec![
                    json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                            "products": {"type": "TEMPLATE", "template_id": "T-1"}}),
                ],
            ),
            None,
            "product_validation_error",
        ),
        (
            "another currency, async",
            order("USD", vec![item("UBER-JP", num("3000"))]),
            None,
            "currency_mismatch",
        ),
        (
            "another currency, two items",
            order(
                "USD",
                vec![item("AMZ-US", num("10")), item("AMZ-DE", num("10"))],
            ),
            None,
            "currency_mismatch",
        ),
        (
            "products of two currencies",
            order(
                "USD",
                vec![
                    json!({"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                            "products": {"type": "MULTIPLE", "values": ["AMZ-US", "AMZ-DE"]}}),
                ],
            ),
            Some("sync"),
            "currency_mismatch",
        ),
        (
            "card",
            json!({"payment_method": {"type": "CARD", "card_id": "card_sim_visa", "currency": "USD"},
                   "items": [item("AMZ-US", num("10"))]}),
            None,
            "payment_method_unavailable",
        ),
    ];
    for (i, (name, body, mode, kind)) in cases.into_iter().enumerate() {
        let r = api.post_order(&format!("r-{i}"), mode, &bytes(&body)).await;
        r.assert_error(400, kind);
        let message = r.json()["message"].as_str().unwrap_or_default().to_string();
        assert!(!message.is_empty(), "{name}");
        if kind != "currency_mismatch" {
            assert!(
                r.json().get("help").is_none(),
                "{name}: the published help is None"
            );
        }
    }
    assert!(s.orders().is_empty());
    // A degraded product is still orderable.
    let degraded = order("EUR", vec![item("IKEA-FR", num("20"))]);
    assert_eq!(
        api.post_order("degraded", None, &bytes(&degraded))
            .await
            .status,
        202
    );
    s.shutdown().await;
}

/// Cards, as the interface document describes them, when asked for.
#[tokio::test]
async fn cards_are_taken_when_asked_for() {
    let s = start_sim(SimConfig {
        cards_accepted: true,
        cards: vec!["card_ok".into()],
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let card = |id: Option<&str>| {
        let mut pm = json!({"type": "CARD", "currency": "USD"});
        if let Some(id) = id {
            pm["card_id"] = id.into();
        }
        json!({"payment_method": pm, "items": [item("AMZ-US", num("10"))]})
    };
    let r = api
        .post_order("c-nope", None, &bytes(&card(Some("card_nope"))))
        .await;
    assert_eq!(r.locations(), ["payment_method.card_id"]);
    let r = api.post_order("c-none", None, &bytes(&card(None))).await;
    assert_eq!(r.locations(), ["payment_method.card_id"]);
    let r = api
        .post_order("c-ok", Some("sync"), &bytes(&card(Some("card_ok"))))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["payment_method"],
        json!({"type": "CARD", "card_id": "card_ok", "currency": "USD"})
    );
    s.shutdown().await;
}

/// A recipient (the published `RECIPIENT` distribution) is accepted and answered as sent.
#[tokio::test]
async fn a_recipient_is_a_distribution_method() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let body = order(
        "USD",
        vec![json!({"face_value": 10,
                    "distribution_method": {"type": "RECIPIENT", "recipient_reference": "emp-7",
                                            "email_address": "ann@example.com"},
                    "products": {"type": "SINGLE", "value": "AMZ-US"}})],
    );
    let r = api
        .post_order("recipient", Some("sync"), &bytes(&body))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["items"][0]["distribution_method"],
        json!({"type": "RECIPIENT", "recipient_reference": "emp-7", "email_address": "ann@example.com"})
    );
    let bad = with(
        body,
        &["items", "0", "distribution_method", "recipient_reference"],
        "emp 7".into(),
    );
    let r = api.post_order("recipient-bad", None, &bytes(&bad)).await;
    assert_eq!(
        r.locations(),
        ["items.0.distribution_method.recipient_reference"]
    );
    s.shutdown().await;
}

trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl Pipe for Value {}

#[tokio::test]
async fn malformed_requests_get_400_or_422_not_a_panic() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    // Not JSON: 400.
    for (i, body) in [&b"{not json"[..], b"", b"\xff\xfe\x00"]
        .into_iter()
        .enumerate()
    {
        api.post_order(&format!("m-{i}"), None, body)
            .await
            .assert_error(400, "bad_request");
    }
    // JSON of another shape: 422, with where.
    for (i, (body, location)) in [
        (&b"[]"[..], ""),
        (
            b"{\"payment_method\": {\"type\": \"GOLD\", \"currency\": \"USD\"}, \"items\": [1]}",
            "payment_method.type",
        ),
        (
            b"{\"payment_method\": {\"type\": \"ACCOUNT_BALANCE\", \"currency\": \"USD\"}, \"items\": [{\"face_value\": \"ten\", \"distribution_method\": {\"type\": \"PAYOUT_LINK\"}, \"products\": {\"type\": \"SINGLE\", \"value\": \"AMZ-US\"}}]}",
            "items.0.face_value",
        ),
        (
            b"{\"payment_method\": {\"type\": \"ACCOUNT_BALANCE\", \"currency\": \"USD\"}, \"items\": [{\"face_value\": 1e400, \"distribution_method\": {\"type\": \"PAYOUT_LINK\"}, \"products\": {\"type\": \"SINGLE\", \"value\": \"AMZ-US\"}}]}",
            "items.0.face_value",
        ),
        (b"{\"items\": []}", "payment_method"),
        (
            b"{\"payment_method\": {\"type\": \"ACCOUNT_BALANCE\", \"currency\": \"USD\"}, \"items\": [{\"face_value\": 10, \"distribution_method\": {\"type\": \"PIGEON\"}, \"products\": {\"type\": \"SINGLE\", \"value\": \"AMZ-US\"}}]}",
            "items.0.distribution_method.type",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let r = api.post_order(&format!("s-{i}"), None, body).await;
        let locations = r.locations();
        assert!(locations.iter().any(|l| l == location), "{location}: {locations:?}");
    }
    // Headers of order creation.
    let r = api
        .try_post_order(None, None, &amz("10"))
        .await
        .expect("answer");
    r.assert_error(400, "bad_request");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("X-Idempotency-Key")
    );
    api.post_order("m-mode", Some("later"), &amz("10"))
        .await
        .assert_error(400, "invalid_execution_mode");
    assert!(s.orders().is_empty());
    s.shutdown().await;
}

#[tokio::test]
async fn a_sync_order_answers_the_full_order() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let mut body = order(
        "USD",
        vec![
            json!({"face_value": "25.00", "distribution_method": {"type": "EMAIL", "email_address": "ann@example.com"},
                    "products": {"type": "SINGLE", "value": "AMZ-US"}}),
        ],
    );
    body["description"] = "November rewards, row 7".into();
    body["metadata"] = json!({"batch": "nov", "row": "7"});
    let r = api
        .post_order("sync-full", Some("sync"), &bytes(&body))
        .await;
    assert_eq!(r.status, 200);
    let o = r.json();
    let id = o["id"].as_str().unwrap();
    assert!(
        id.starts_with("O-") && id.len() == 28,
        "O- and a ULID: {id}"
    );
    assert!(ulid::Ulid::from_string(&id[2..]).is_ok());
    assert_eq!(o["status"], "COMPLETED");
    assert!(o["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(chrono::DateTime::parse_from_rfc3339(o["completed_at"].as_str().unwrap()).is_ok());
    assert_eq!(o["description"], "November rewards, row 7");
    assert_eq!(o["metadata"], json!({"batch": "nov", "row": "7"}));
    assert_eq!(
        o["payment_method"],
        json!({"type": "ACCOUNT_BALANCE", "currency": "USD"})
    );
    assert_eq!(o["currency"], "USD");
    assert_eq!(o["total_price"], "24.50");
    assert_eq!(o["total_discount"], "0.50");
    assert_eq!(
        o["transaction_detail"],
        json!({"USD": {"value": "24.50"}}),
        "no fx without a conversion"
    );
    let it = &o["items"][0];
    let item_id = it["id"].as_str().unwrap();
    assert!(item_id.starts_with("E-") && item_id.len() == 11);
    assert!(
        item_id[2..]
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    );
    assert_eq!(it["distribution_method"]["type"], "EMAIL");
    assert_eq!(it["products"], json!({"type": "SINGLE", "value": "AMZ-US"}));
    assert_eq!(dec(it["face_value"].as_str().unwrap()), dec("25"));
    assert_eq!(it["price"], "24.50");
    assert_eq!(it["currency"], "USD");
    assert_eq!(it["discount_multiplier"], "0.02");
    assert_eq!(it["payout"]["status"], "ACTIVE");
    assert!(
        it["payout"]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://playground.example/redeem/")
    );
    assert!(
        it["payout"]["status_updated_at"].is_string() && it["payout"]["expiry_date"].is_string()
    );
    assert!(it.get("redemption_url").is_none());
    // GET answers the same order.
    let again = api.get(&format!("/v2/order/{id}")).await.json();
    assert_eq!(again, o);
    // Debited at creation.
    assert_eq!(api.balance("USD").await, "99975.50");
    // Without description and metadata, both are null.
    let bare = api
        .post_order("sync-bare", Some("sync"), &amz("10"))
        .await
        .json();
    assert!(
        bare.get("description").is_some_and(Value::is_null),
        "{bare}"
    );
    assert!(bare.get("metadata").is_some_and(Value::is_null), "{bare}");
    assert!(
        bare.get("message").is_none(),
        "a completed order has no message"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn an_async_order_processes_then_completes_lazily() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let r = api.post_order("async-1", None, &amz("10")).await;
    assert_eq!(r.status, 202);
    let accepted = r.json();
    assert_eq!(
        accepted.as_object().unwrap().len(),
        2,
        "only id and status: {accepted}"
    );
    assert_eq!(accepted["status"], "PROCESSING");
    let id = accepted["id"].as_str().unwrap();
    assert_eq!(api.balance("USD").await, "99990.20", "debited at creation");

    let partial = api.get(&format!("/v2/order/{id}")).await;
    assert_eq!(partial.status, 200);
    let partial = partial.json();
    assert_eq!(partial["status"], "PROCESSING");
    let keys: Vec<&String> = partial.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "status", "message"], "the partial shape");

    let done = api.wait_done(id).await;
    assert_eq!(done["status"], "COMPLETED");
    assert!(done["items"][0]["payout"]["url"].is_string());
    let listed = api.get("/v2/order").await.json();
    assert_eq!(listed["items"][0]["status"], "COMPLETED");
    assert_eq!(s.orders()[0].status, OrderStatus::Completed);
    assert_eq!(api.balance("USD").await, "99990.20");
    s.shutdown().await;
}

#[tokio::test]
async fn failed_orders_are_refunded_and_carry_no_payout() {
    let s = start_sim(SimConfig {
        failure_rate: 1.0,
        processing_min: std::time::Duration::from_millis(300),
        processing_max: std::time::Duration::from_millis(400),
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let r = api.post_order("fail-async", None, &amz("100")).await;
    assert_eq!(r.status, 202);
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        api.balance("USD").await,
        "99902.00",
        "debited while processing"
    );
    let done = api.wait_done(&id).await;
    assert_eq!(done["status"], "FAILED");
    assert!(done["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(done["items"][0].get("payout").is_none());
    assert_eq!(
        api.balance("USD").await,
        "100000.00",
        "refunded when it failed"
    );
    assert!(s.orders()[0].items[0].payout_url.is_none());

    let sync = api.post_order("fail-sync", Some("sync"), &amz("50")).await;
    assert_eq!(sync.status, 200);
    assert_eq!(sync.json()["status"], "FAILED");
    assert_eq!(api.balance("USD").await, "100000.00");
    s.shutdown().await;
}

#[tokio::test]
async fn the_balance_must_cover_the_order() {
    let s = start_sim(SimConfig {
        balances: vec![("USD".into(), dec("5.00"))],
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let r = api.post_order("poor", None, &amz("10")).await;
    r.assert_error(400, "insufficient_funds");
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("9.80") && message.contains("5.00") && message.contains("USD"),
        "{message}"
    );
    assert!(s.orders().is_empty());
    assert_eq!(api.balance("USD").await, "5.00");
    s.shutdown().await;

    // Cards (when taken) do not use the balance.
    let s = start_sim(SimConfig {
        balances: vec![("USD".into(), dec("5.00"))],
        cards_accepted: true,
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let card = json!({"payment_method": {"type": "CARD", "card_id": "card_sim_visa", "currency": "USD"},
                      "items": [item("AMZ-US", num("10"))]});
    let r = api.post_order("card", Some("sync"), &bytes(&card)).await;
    assert_eq!(r.status, 200);
    assert_eq!(api.balance("USD").await, "5.00");
    assert_eq!(s.balance("USD"), dec("5"));
    s.shutdown().await;
}

#[tokio::test]
async fn prices_are_converted_into_the_payment_currency() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    // 3000 JPY less 3 % = 2910 JPY; at 0.0067 USD per JPY = 19.497 -> 19.50 USD.
    let r = api
        .post_order(
            "fx-jpy",
            Some("sync"),
            &bytes(&order("USD", vec![item("UBER-JP", num("3000"))])),
        )
        .await;
    assert_eq!(r.status, 200);
    let o = r.json();
    assert_eq!(o["items"][0]["price"], "2910");
    assert_eq!(o["items"][0]["currency"], "JPY");
    assert_eq!(o["currency"], "USD");
    assert_eq!(o["total_price"], "19.50");
    assert_eq!(o["total_discount"], "0.60");
    // The published shape: the bought amount in the product's currency, the rate of the pair
    // payment/product and the fee in the payment currency.
    assert_eq!(
        o["transaction_detail"],
        json!({"JPY": {"value": "2910", "fx": {
            "rate": "149.253731", "rate_symbol": "USDJPY", "fee": {"value": "0.00", "currency": "USD"}
        }}})
    );
    assert_eq!(api.balance("USD").await, "99980.50");
    // Face value as a string or a number: both exact.
    let as_string = api
        .post_order(
            "fx-str",
            Some("sync"),
            &bytes(&order("GBP", vec![item("TESCO-GB", "20.00".into())])),
        )
        .await;
    assert_eq!(as_string.status, 200);
    assert_eq!(as_string.json()["total_price"], "19.20");
    let subscription = api
        .post_order(
            "sub",
            Some("sync"),
            &bytes(&order("USD", vec![item("SPOTIFY-US", num("32.97"))])),
        )
        .await;
    assert_eq!(subscription.status, 200);
    assert_eq!(subscription.json()["items"][0]["price"], "31.32");
    s.shutdown().await;
}

#[tokio::test]
async fn the_older_version_carries_redemption_url() {
    let s = start_sim(SimConfig {
        version_2023: true,
        ..fast()
    })
    .await;
    let api = Api::new(&s).version("2023-07-27");
    let r = api.post_order("old", Some("sync"), &amz("10")).await;
    assert_eq!(r.status, 200);
    let it = &r.json()["items"][0];
    assert!(
        it["redemption_url"]
            .as_str()
            .unwrap()
            .starts_with("https://playground.example/redeem/")
    );
    assert!(it.get("payout").is_none());
    let id = r.json()["id"].as_str().unwrap().to_string();
    // The same order read with the current version carries payout.
    let now = Api::new(&s).get(&format!("/v2/order/{id}")).await.json();
    assert_eq!(now["items"][0]["payout"]["url"], it["redemption_url"]);
    assert!(now["items"][0].get("redemption_url").is_none());
    s.shutdown().await;
}

#[tokio::test]
async fn the_state_file_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sim-state.db");
    let config = SimConfig {
        state: Some(state.clone()),
        ..fast()
    };
    let s = start_sim(config.clone()).await;
    let api = Api::new(&s);
    let body = amz("40");
    let r = api.post_order("persist", None, &body).await;
    assert_eq!(r.status, 202);
    let accepted = r.body.clone();
    let id = r.json()["id"].as_str().unwrap().to_string();
    api.post_order("persist-bad", None, &amz("0"))
        .await
        .assert_error(422, "validation_error");
    s.shutdown().await;

    // Restart with other initial balances: the file's balances win.
    let s = start_sim(SimConfig {
        balances: vec![("USD".into(), dec("1.00"))],
        ..config
    })
    .await;
    let api = Api::new(&s);
    let done = api.wait_done(&id).await;
    assert_eq!(
        done["status"], "COMPLETED",
        "settled lazily after the restart"
    );
    assert_eq!(api.balance("USD").await, "99960.80");
    let replay = api.post_order("persist", None, &body).await;
    assert_eq!(
        (replay.status, replay.body),
        (202, accepted),
        "idempotency records survive"
    );
    api.post_order("persist-bad", None, &amz("0"))
        .await
        .assert_error(422, "validation_error");
    assert_eq!(s.orders().len(), 1);
    s.shutdown().await;
}

/// Two simulators sharing one state file (the embedded simulator of two paybatch processes, one
/// after the other or side by side) never draw the same order id, item id or payout link, although
/// they run with the same seed.
#[tokio::test]
async fn simulators_sharing_a_state_file_draw_distinct_identifiers() {
    let dir = tempfile::tempdir().unwrap();
    let config = SimConfig {
        state: Some(dir.path().join("sim-state.db")),
        ..fast()
    };
    let create = |api: Api, tag: &'static str| async move {
        for i in 0..3 {
            let r = api
                .post_order(&format!("{tag}-{i}"), Some("sync"), &amz("10"))
                .await;
            assert_eq!(
                r.status,
                200,
                "{tag}-{i}: {}",
                String::from_utf8_lossy(&r.body)
            );
        }
    };
    // One after the other.
    for tag in ["first", "second"] {
        let s = start_sim(config.clone()).await;
        create(Api::new(&s), tag).await;
        s.shutdown().await;
    }
    // Side by side.
    let (a, b) = (
        start_sim(config.clone()).await,
        start_sim(config.clone()).await,
    );
    tokio::join!(create(Api::new(&a), "left"), create(Api::new(&b), "right"));
    let orders = a.orders();
    a.shutdown().await;
    b.shutdown().await;

    assert_eq!(orders.len(), 12);
    let mut ids = std::collections::BTreeSet::new();
    for o in &orders {
        assert!(ids.insert(o.id.clone()), "order id {} twice", o.id);
        for it in &o.items {
            assert!(ids.insert(it.id.clone()), "item id {} twice", it.id);
            let url = it.payout_url.clone().expect("completed");
            assert!(ids.insert(url.clone()), "payout link {url} twice");
        }
    }
}

/// On a new state, a seed still reproduces the identifiers of a run.
#[tokio::test]
async fn a_seed_reproduces_identifiers_on_a_new_state() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let s = start_sim(fast()).await;
        let r = Api::new(&s)
            .post_order("same", Some("sync"), &amz("10"))
            .await;
        assert_eq!(r.status, 200);
        runs.push(r.json()["items"][0]["id"].as_str().unwrap().to_string());
        s.shutdown().await;
    }
    assert_eq!(runs[0], runs[1]);
}

/// With `seed_paybatch_items`, every seeded order is a COMPLETED order of paybatch's whose
/// description and metadata are exactly what paybatch writes for its rows (read back by
/// paybatch's own reader), 200 rows or one.
#[tokio::test]
async fn seeded_paybatch_orders_name_every_row_as_paybatch_writes_them() {
    use paybatch::batch::order_body;
    for items in [200, 1] {
        let mut config = fast();
        config.seed_orders = Some(paybatch::sim::SeedOrders {
            count: 6,
            span: std::time::Duration::from_secs(24 * 3600),
        });
        config.seed_paybatch_items = Some(items);
        let s = start_sim(config).await;
        let mut orders = s.orders();
        orders.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        assert_eq!(orders.len(), 6);
        for (i, o) in orders.iter().enumerate() {
            let batch = format!("seed-{}", (i / 5) % 3);
            let refs: Vec<String> = (0..items).map(|j| format!("SEED-{i}-{j}")).collect();
            let rows: Vec<(&str, i64)> = refs.iter().map(|r| (r.as_str(), 1)).collect();
            let named: Vec<&str> = refs.iter().map(String::as_str).collect();
            assert_eq!(o.status, OrderStatus::Completed);
            assert_eq!(o.items.len(), items);
            assert_eq!(
                o.description.as_deref(),
                Some(order_body::description(&o.idempotency_key, &batch, &named).as_str())
            );
            assert_eq!(o.metadata, order_body::metadata(&batch, &rows));
            assert!(o.metadata.len() <= order_body::MAX_METADATA_PAIRS);
            assert_eq!(order_body::references_in_metadata(&o.metadata), refs);
            assert_eq!(
                order_body::rows_in_metadata(&batch, &o.metadata).map(|r| r.len()),
                Some(items)
            );
        }
        s.shutdown().await;
    }
}
