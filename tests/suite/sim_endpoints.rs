//! The simulator against the published contract: authentication, versions, the catalog and its
//! pagination, single products, countries and categories, balances, not-found answers, the order
//! list and the ground-truth endpoints.

use std::collections::BTreeSet;

use crate::support::raw_api::*;
use crate::support::start_sim;
use paybatch::sim::{self, SimConfig};
use serde_json::Value;

#[tokio::test]
async fn ping_answers_pong_with_a_valid_key_only() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let r = api.get("/v2/ping").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::json!({"message": "pong"}));
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("application/json")
    );

    api.clone()
        .key(None)
        .get("/v2/ping")
        .await
        .assert_error(401, "unauthorized");
    api.clone()
        .key(Some("xx_not_a_known_key"))
        .get("/v2/ping")
        .await
        .assert_error(401, "invalid_api_key");
    let prod = api.clone().key(Some("wg_live_key")).get("/v2/ping").await;
    prod.assert_error(401, "invalid_api_key");
    let message = prod.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(message.contains("production"), "{message}");
    assert!(message.contains("playground"), "{message}");

    // Every /v2 endpoint is authenticated.
    for path in [
        "/v2/product",
        "/v2/product/AMZ-US",
        "/v2/product/countries",
        "/v2/product/categories",
        "/v2/order",
        "/v2/order/O-X",
        "/v2/balance",
    ] {
        api.clone()
            .key(None)
            .get(path)
            .await
            .assert_error(401, "unauthorized");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn versions_are_checked() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    // 2023-07-27 was switched off on 2025-11-14.
    let removed = api.clone().version("2023-07-27").get("/v2/ping").await;
    removed.assert_error(410, "version_removed");
    assert!(
        removed.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("2023-07-27"))
    );
    api.clone()
        .version("2023-07-27")
        .post_order("old", None, &amz("10"))
        .await
        .assert_error(410, "version_removed");
    assert!(s.orders().is_empty());
    assert_eq!(
        api.clone()
            .version("2024-02-05")
            .get("/v2/ping")
            .await
            .status,
        200
    );
    api.clone()
        .version("2020-01-01")
        .get("/v2/ping")
        .await
        .assert_error(400, "invalid_version");
    api.clone()
        .version("latest")
        .get("/v2/product")
        .await
        .assert_error(400, "invalid_version");
    // The version being prepared is not served yet.
    api.clone()
        .version("2026-09-08")
        .get("/v2/ping")
        .await
        .assert_error(400, "invalid_version");
    // Asked for, the older version is still served.
    let old = start_sim(SimConfig {
        version_2023: true,
        ..fast()
    })
    .await;
    assert_eq!(
        Api::new(&old)
            .version("2023-07-27")
            .get("/v2/ping")
            .await
            .status,
        200
    );
    old.shutdown().await;
    s.shutdown().await;
}

fn codes(v: &Value) -> Vec<String> {
    v["catalog"]
        .as_array()
        .expect("catalog array")
        .iter()
        .map(|p| p["code"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn the_catalog_holds_the_products_the_samples_rely_on() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let r = api.get("/v2/product").await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["pagination"]["page"]["limit"], 500, "default page size");
    let all = codes(&v);
    assert!(all.len() >= 30, "{} products", all.len());
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "stable order by code");

    let products: Vec<&Value> = v["catalog"].as_array().unwrap().iter().collect();
    let find = |code: &str| {
        *products
            .iter()
            .find(|p| p["code"] == code)
            .unwrap_or_else(|| panic!("{code} missing"))
    };
    let currencies: BTreeSet<&str> = products
        .iter()
        .filter_map(|p| p["currency"].as_str())
        .collect();
    assert!(currencies.len() >= 5, "{currencies:?}");
    let types: BTreeSet<&str> = products
        .iter()
        .filter_map(|p| p["payout_type"].as_str())
        .collect();
    assert_eq!(types.len(), 3);
    for p in &products {
        let kind = p["payout_type"].as_str().unwrap();
        assert!(p[kind].is_object(), "{} has its {kind} object", p["code"]);
        assert!(p.get("approval_state").is_none() && p["categories"].is_array());
        assert!(p["customer_service"]["website_url"].is_string());
        let multiplier = p["discount_multiplier"].as_str().unwrap();
        let (units, places) = multiplier.split_once('.').expect("two places");
        assert!(!units.is_empty() && places.len() == 2, "{multiplier}");
        assert!(p[kind]["content_resources"]["locale"].is_string());
        let state = p["state"].as_str().unwrap();
        assert!(
            ["LIVE", "TEMPORARILY_DISABLED", "TEMPORARILY_DEGRADED"].contains(&state),
            "{state}"
        );
        if kind != "payment" {
            assert!(p[kind]["expiry"]["in_months"].is_i64());
            assert!(p[kind]["assets"]["card_image_url"].is_string());
        }
    }

    let amz = find("AMZ-US");
    assert_eq!(amz["payout_type"], "gift_card");
    assert_eq!(amz["currency"], "USD");
    assert_eq!(amz["discount_multiplier"], "0.02");
    assert_eq!(amz["countries_redeemable_in"], serde_json::json!(["US"]));
    assert_eq!(
        dec(amz["gift_card"]["denominations"]["minimum_value"]
            .as_str()
            .unwrap()),
        dec("1")
    );
    assert_eq!(
        dec(amz["gift_card"]["denominations"]["maximum_value"]
            .as_str()
            .unwrap()),
        dec("2000")
    );
    let amz_de = find("AMZ-DE");
    assert_eq!(
        amz_de["countries_redeemable_in"],
        serde_json::json!(["DE", "AT"])
    );
    let tesco: Vec<_> = find("TESCO-GB")["gift_card"]["denominations"]["available_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| dec(v.as_str().unwrap()))
        .collect();
    assert_eq!(tesco, ["10", "20", "25", "50", "100"].map(dec));
    let steam = find("STEAM-US");
    assert_eq!(
        steam["countries_redeemable_in"],
        serde_json::json!(["US", "CA"])
    );
    let plans: Vec<_> = find("SPOTIFY-US")["subscription"]["subscription_plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| dec(p["price"].as_str().unwrap()))
        .collect();
    assert_eq!(plans, ["10.99", "32.97", "119.88"].map(dec));
    assert_eq!(find("NETFLIX-GB")["currency"], "GBP");
    assert_eq!(find("VISA-PREPAID-US")["payout_type"], "payment");
    assert_eq!(find("PAYPAL-CA")["currency"], "CAD");
    assert_eq!(find("UBER-JP")["currency"], "JPY");
    assert_eq!(
        find("ZALANDO-FR")["countries_redeemable_in"],
        serde_json::json!(["FR", "DE"])
    );
    assert_eq!(find("RETIRED-US")["is_orderable"], false);
    assert_eq!(find("RETIRED-US")["state"], "TEMPORARILY_DISABLED");
    assert_eq!(find("XBOX-GB")["state"], "LIVE");
    assert_eq!(find("XBOX-GB")["is_orderable"], false);
    assert_eq!(find("IKEA-FR")["state"], "TEMPORARILY_DEGRADED");
    assert_eq!(find("IKEA-FR")["is_orderable"], true);
    assert_eq!(find("AIRBNB-US")["discount_multiplier"], "0.00");
    s.shutdown().await;
}

#[tokio::test]
async fn one_product_by_its_code() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let r = api.get("/v2/product/TESCO-GB").await;
    assert_eq!(r.status, 200);
    let p = r.json();
    assert_eq!(p["code"], "TESCO-GB");
    assert_eq!(p["currency"], "GBP");
    let content = &p["gift_card"]["content_resources"];
    assert!(content["description_markdown_url"].is_string());
    assert_eq!(content["locale"], "en_GB");
    // The content in the forms `content` asks for.
    let md = api.get("/v2/product/TESCO-GB?content=md").await.json();
    let content = &md["gift_card"]["content_resources"];
    assert!(
        content["description_md"].is_string() && content.get("description_markdown_url").is_none()
    );
    let html = api.get("/v2/product/TESCO-GB?content=html").await.json();
    assert!(
        html["gift_card"]["content_resources"]["terms_consumer_html"]
            .as_str()
            .is_some_and(|h| h.starts_with("<p>"))
    );
    api.get("/v2/product/TESCO-GB?content=pdf")
        .await
        .assert_error(400, "bad_request");
    // A product that cannot be ordered is still described.
    assert_eq!(
        api.get("/v2/product/RETIRED-US").await.json()["is_orderable"],
        false
    );
    api.get("/v2/product/NO-SUCH")
        .await
        .assert_error(404, "not_found");
    s.shutdown().await;
}

#[tokio::test]
async fn the_catalog_filters() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let all = codes(&api.get("/v2/product?limit=500").await.json());
    let orderable = api
        .get("/v2/product?is_orderable=true&limit=500")
        .await
        .json();
    assert!(
        orderable["catalog"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["is_orderable"] == true)
    );
    let orderable = codes(&orderable);
    assert!(!orderable.contains(&"RETIRED-US".to_string()));
    assert!(orderable.len() < all.len());
    assert_eq!(
        codes(
            &api.get("/v2/product?is_orderable=false&limit=500")
                .await
                .json()
        ),
        all
    );

    let jp_ca = api
        .get("/v2/product?countries_redeemable_in=JP&countries_redeemable_in=CA&limit=500")
        .await
        .json();
    for p in jp_ca["catalog"].as_array().unwrap() {
        let countries = p["countries_redeemable_in"].as_array().unwrap();
        assert!(
            countries.iter().any(|c| c == "JP" || c == "CA"),
            "{}",
            p["code"]
        );
    }
    let jp_ca = codes(&jp_ca);
    assert!(jp_ca.contains(&"UBER-JP".to_string()) && jp_ca.contains(&"PAYPAL-CA".to_string()));
    assert!(
        jp_ca.contains(&"STEAM-US".to_string()),
        "redeemable in any of the countries"
    );

    let music = api.get("/v2/product?categories=music").await.json();
    assert!(!music["catalog"].as_array().unwrap().is_empty());
    for p in music["catalog"].as_array().unwrap() {
        assert!(
            p["categories"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "music")
        );
    }

    api.get("/v2/product?countries_redeemable_in=usa")
        .await
        .assert_error(400, "bad_request");
    api.get("/v2/product?countries_redeemable_in=us")
        .await
        .assert_error(400, "bad_request");
    api.get("/v2/product?is_orderable=maybe")
        .await
        .assert_error(400, "bad_request");

    // `code` is not a filter of the published list: like any parameter the list does not
    // declare, it is ignored (one product is GET /product/{product_code}).
    let ignored = api.get("/v2/product?code=TESCO-GB").await;
    assert_eq!(ignored.status, 200);
    assert_eq!(codes(&ignored.json()), all);
    assert_eq!(
        codes(&api.get("/v2/product?code=NO-SUCH&colour=red").await.json()),
        all
    );
    s.shutdown().await;
}

#[tokio::test]
async fn the_catalog_pages_forward_and_back() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let all = codes(&api.get("/v2/product?limit=500").await.json());
    let mut walked = Vec::new();
    let mut pages = Vec::new();
    let mut next = "/v2/product?limit=7".to_string();
    for _ in 0..20 {
        let v = api.get(&next).await.json();
        assert_eq!(v["pagination"]["page"]["limit"], 7);
        walked.extend(codes(&v));
        pages.push(v.clone());
        match v["pagination"]["cursors"]["after"].as_str() {
            Some(after) => next = format!("/v2/product?limit=7&after={after}"),
            None => break,
        }
    }
    assert_eq!(walked, all, "paging loses or repeats nothing");
    assert!(pages.len() >= 5);
    assert!(
        pages[0]["pagination"]["cursors"]["before"].is_null(),
        "no page before the first"
    );
    let before = pages[1]["pagination"]["cursors"]["before"]
        .as_str()
        .expect("before cursor");
    let back = api
        .get(&format!("/v2/product?limit=7&before={before}"))
        .await
        .json();
    assert_eq!(codes(&back), codes(&pages[0]));

    for bad in ["limit=0", "limit=501", "limit=abc", "limit=1.5", "limit=-1"] {
        api.get(&format!("/v2/product?{bad}"))
            .await
            .assert_error(400, "pagination_error");
    }
    api.get("/v2/product?after=x&before=y")
        .await
        .assert_error(400, "pagination_error");
    api.get("/v2/product?after=garbage")
        .await
        .assert_error(400, "pagination_error");
    api.get("/v2/product?before=%FF%FE")
        .await
        .assert_error(400, "pagination_error");
    s.shutdown().await;
}

#[tokio::test]
async fn countries_and_categories() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let c = api.get("/v2/product/countries").await;
    assert_eq!(c.status, 200);
    let countries = c.json()["countries"]
        .as_array()
        .cloned()
        .expect("countries array");
    assert!(countries.len() >= 8);
    assert!(countries.iter().any(|c| c == "US"));
    for c in &countries {
        let code = c.as_str().expect("a country is its code");
        assert!(code.len() == 2 && code.bytes().all(|b| b.is_ascii_uppercase()));
    }
    let cat = api.get("/v2/product/categories").await;
    assert_eq!(cat.status, 200);
    let names: Vec<String> = cat.json()["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect();
    assert!(names.len() >= 5 && names.contains(&"food".to_string()));
    // Every category names at least one product through the filter.
    for name in &names {
        let v = api
            .get(&format!("/v2/product?categories={name}"))
            .await
            .json();
        assert!(!codes(&v).is_empty(), "{name}");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn the_older_version_lists_products_in_its_shape_when_asked_for() {
    let s = start_sim(SimConfig {
        version_2023: true,
        ..fast()
    })
    .await;
    let api = Api::new(&s).version("2023-07-27");
    let v = api.get("/v2/product").await.json();
    for p in v["catalog"].as_array().unwrap() {
        assert!(p.get("approval_state").is_none(), "{}", p["code"]);
        assert!(p.get("categories").is_none(), "{}", p["code"]);
    }
    api.get("/v2/product/countries")
        .await
        .assert_error(404, "not_found");
    s.shutdown().await;
}

#[tokio::test]
async fn balances() {
    let config = SimConfig {
        balances: vec![
            ("USD".into(), dec("2500")),
            ("EUR".into(), dec("10.5")),
            ("GBP".into(), dec("0")),
        ],
        ..fast()
    };
    let s = start_sim(config).await;
    let api = Api::new(&s);
    let usd = api.get("/v2/balance?currency=USD").await;
    assert_eq!(usd.status, 200);
    assert_eq!(
        usd.json(),
        serde_json::json!({"balance": "2500.00", "currency": "USD"})
    );
    assert_eq!(api.balance("EUR").await, "10.50");
    assert_eq!(
        api.balance("JPY").await,
        "0.00",
        "a currency without balance"
    );
    let all = api.get("/v2/balance").await.json();
    let all = all.as_array().expect("array without currency");
    let currencies: Vec<&str> = all
        .iter()
        .map(|b| b["currency"].as_str().unwrap())
        .collect();
    assert_eq!(currencies, ["EUR", "USD"], "only balances greater than 0");
    for b in all {
        let text = b["balance"].as_str().unwrap();
        let (units, cents) = text.split_once('.').expect("two decimals");
        assert!(!units.is_empty() && units.bytes().all(|c| c.is_ascii_digit()));
        assert!(cents.len() == 2 && cents.bytes().all(|c| c.is_ascii_digit()));
    }
    for bad in ["usd", "US", "USDD", "U1D"] {
        api.get(&format!("/v2/balance?currency={bad}"))
            .await
            .assert_error(400, "bad_request");
    }
    assert_eq!(s.balance("USD"), dec("2500"));
    s.shutdown().await;
}

#[tokio::test]
async fn missing_things_are_not_found() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    api.get("/v2/order/O-01H5WQGHKCBB85MQFM68S9KJ5Q")
        .await
        .assert_error(404, "not_found");
    let links = api
        .get("/v2/order/O-01H5WQGHKCBB85MQFM68S9KJ5Q/links")
        .await;
    links.assert_error(404, "not_found");
    api.get("/v2/no-such-endpoint")
        .await
        .assert_error(404, "not_found");
    api.get("/v2/order/estimate")
        .await
        .assert_error(404, "not_found");
    s.shutdown().await;
    // Started as the playground is, the price estimate is not offered.
    let s = start_sim(SimConfig {
        estimates: false,
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let body = order("USD", vec![estimate_item("UBER-JP", "3000")]);
    estimate(&api, &body).await.assert_error(404, "not_found");
    s.shutdown().await;
}

/// `POST /v2/order/estimate` with this body.
async fn estimate(api: &Api, body: &Value) -> Reply {
    api.send(
        api.http
            .post(format!("{}/v2/order/estimate", api.root))
            .header("X-Api-Key", paybatch::sim::DEFAULT_KEY)
            .header("Content-Type", "application/json")
            .body(bytes(body)),
    )
    .await
    .expect("answer")
}

/// An item of an estimate: products and face value, no distribution method.
fn estimate_item(code: &str, face_value: &str) -> Value {
    serde_json::json!({"face_value": num(face_value), "products": {"type": "SINGLE", "value": code}})
}

/// The estimate of an order is what the same order is then charged: the total price (rate and
/// rounding of embedded FX included), each item's price, and what leaves the balance.
#[tokio::test]
async fn an_estimate_is_what_the_same_order_is_charged() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let cases = [
        ("USD", "UBER-JP", "3000"),
        ("USD", "AMZ-DE", "25"),
        ("GBP", "AMZ-US", "10"),
        ("EUR", "TESCO-GB", "20"),
        ("USD", "AMZ-US", "10"),
    ];
    for (i, (pay, code, fv)) in cases.into_iter().enumerate() {
        let body = order(pay, vec![estimate_item(code, fv)]);
        let reply = estimate(&api, &body).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        let e = reply.json();
        assert!(e["total_price"].is_number(), "{e}");
        assert_eq!(e["currency"], pay);
        assert_eq!(e["payment_method"]["type"], "ACCOUNT_BALANCE");
        let estimated = dec(&e["total_price"].to_string());
        let before = dec(&api.balance(pay).await);
        let placed = api
            .post_order(
                &format!("estimate-{i}"),
                Some("sync"),
                &bytes(&order(pay, vec![item(code, num(fv))])),
            )
            .await;
        assert_eq!(
            placed.status,
            200,
            "{}",
            String::from_utf8_lossy(&placed.body)
        );
        let o = placed.json();
        assert_eq!(
            estimated,
            dec(o["total_price"].as_str().unwrap()),
            "{pay} {code} {fv}: estimate {e} order {o}"
        );
        assert_eq!(dec(&api.balance(pay).await), before - estimated);
        assert_eq!(
            dec(&e["items"][0]["price"].to_string()),
            dec(o["items"][0]["price"].as_str().unwrap())
        );
        assert_eq!(e["transaction_detail"], o["transaction_detail"]);
    }
    // Several items are priced together, as an order of them.
    let two = order(
        "USD",
        vec![estimate_item("AMZ-US", "10"), estimate_item("AMZ-US", "25")],
    );
    let e = estimate(&api, &two).await.json();
    assert_eq!(dec(&e["total_price"].to_string()), dec("34.30"), "{e}");
    s.shutdown().await;
}

/// The estimate refuses what `POST /order` refuses, each time with a 422 (the only refusal of a
/// body it publishes), saying where.
#[tokio::test]
async fn an_estimate_refuses_with_a_422_saying_where() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let cases: Vec<(Value, &str)> = vec![
        (serde_json::json!({}), "payment_method"),
        (order("USD", vec![]), "items"),
        (order("USD", vec![estimate_item("NOPE-US", "10")]), "items"),
        // Embedded FX only in an order of one item.
        (
            order(
                "USD",
                vec![
                    estimate_item("UBER-JP", "3000"),
                    estimate_item("AMZ-US", "10"),
                ],
            ),
            "payment_method.currency",
        ),
        (
            order("USD", vec![estimate_item("AMZ-US", "0")]),
            "items.0.face_value",
        ),
        (
            serde_json::json!({"payment_method": {"type": "CARD", "currency": "USD", "card_id": "card_sim_visa"},
                               "items": [estimate_item("AMZ-US", "10")]}),
            "payment_method.type",
        ),
    ];
    for (body, at) in cases {
        let reply = estimate(&api, &body).await;
        reply.assert_error(422, "validation_error");
        assert!(
            reply.locations().iter().any(|l| l == at),
            "{at} in {:?} for {body}",
            reply.locations()
        );
    }
    let not_json = api
        .send(
            api.http
                .post(format!("{}/v2/order/estimate", api.root))
                .header("X-Api-Key", paybatch::sim::DEFAULT_KEY)
                .body("{"),
        )
        .await
        .expect("answer");
    not_json.assert_error(422, "validation_error");
    assert!(s.orders().is_empty(), "an estimate places nothing");
    s.shutdown().await;
}

#[tokio::test]
async fn the_order_list_is_newest_first_paginated_and_per_key() {
    let config = SimConfig {
        keys: vec![sim::DEFAULT_KEY.into(), "xx_second_key".into()],
        ..fast()
    };
    let s = start_sim(config).await;
    let api = Api::new(&s);
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut body = order("USD", vec![item("AMZ-US", num("10"))]);
        body["description"] = format!("row {i}").into();
        body["metadata"] = serde_json::json!({"batch": "b1", "row": i.to_string()});
        let r = api
            .post_order(&format!("list-{i}"), Some("sync"), &bytes(&body))
            .await;
        assert_eq!(r.status, 200);
        ids.push(r.json()["id"].as_str().unwrap().to_string());
    }
    let other = Api::new(&s).key(Some("xx_second_key"));
    let theirs = other
        .post_order("list-other", Some("sync"), &amz("5"))
        .await;
    assert_eq!(theirs.status, 200);
    let their_id = theirs.json()["id"].as_str().unwrap().to_string();

    let full = api.get("/v2/order").await.json();
    assert_eq!(
        full["pagination"]["page"]["limit"], 100,
        "default page size"
    );
    let listed: Vec<&str> = full["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, newest_first, "newest first, only this key's orders");
    let first = &full["items"][0];
    let fields: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields,
        [
            "id",
            "status",
            "created_at",
            "completed_at",
            "description",
            "payment_method",
            "currency",
            "total_price",
            "total_discount",
        ],
        "basic details only: no metadata, no items"
    );
    assert_eq!(first["description"], "row 4");

    // Walk pages of two.
    let mut walked = Vec::new();
    let mut next = "/v2/order?limit=2".to_string();
    let mut second_page_before = None;
    for page in 0..10 {
        let v = api.get(&next).await.json();
        walked.extend(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_string()),
        );
        if page == 1 {
            second_page_before = v["pagination"]["cursors"]["before"]
                .as_str()
                .map(str::to_string);
        }
        match v["pagination"]["cursors"]["after"].as_str() {
            Some(after) => next = format!("/v2/order?limit=2&after={after}"),
            None => break,
        }
    }
    assert_eq!(walked, newest_first);
    let back = api
        .get(&format!(
            "/v2/order?limit=2&before={}",
            second_page_before.expect("before cursor")
        ))
        .await
        .json();
    let back: Vec<&str> = back["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(back, newest_first[..2]);

    for bad in [
        "limit=0",
        "limit=501",
        "limit=x",
        "after=a&before=b",
        "after=nonsense",
    ] {
        api.get(&format!("/v2/order?{bad}"))
            .await
            .assert_error(400, "pagination_error");
    }
    // Orders are visible only to the key that created them.
    api.get(&format!("/v2/order/{their_id}"))
        .await
        .assert_error(404, "not_found");
    assert_eq!(
        other.get(&format!("/v2/order/{their_id}")).await.status,
        200
    );
    s.shutdown().await;
}

/// A processing order is listed as `{id, status, message}`; a finished order without description
/// lists it as null. The older list (asked for) carries metadata and the details of every order.
#[tokio::test]
async fn the_list_shows_processing_orders_in_their_short_shape() {
    let slow = SimConfig {
        processing_min: std::time::Duration::from_secs(60),
        processing_max: std::time::Duration::from_secs(60),
        ..fast()
    };
    for older in [false, true] {
        let s = start_sim(SimConfig {
            list_metadata: older,
            ..slow.clone()
        })
        .await;
        let api = Api::new(&s);
        assert_eq!(
            api.post_order("done", Some("sync"), &amz("10"))
                .await
                .status,
            200
        );
        let mut body = order("USD", vec![item("AMZ-US", num("10"))]);
        body["metadata"] = serde_json::json!({"row": "2"});
        assert_eq!(
            api.post_order("slow", None, &bytes(&body)).await.status,
            202
        );
        let list = api.get("/v2/order").await.json();
        let (processing, done) = (&list["items"][0], &list["items"][1]);
        assert_eq!(processing["status"], "PROCESSING");
        assert_eq!(done["status"], "COMPLETED");
        assert!(done["description"].is_null() && done.get("description").is_some());
        if older {
            assert_eq!(processing["metadata"]["row"], "2");
            assert!(processing["total_price"].is_string());
            assert_eq!(done["metadata"], serde_json::json!({}));
        } else {
            let keys: Vec<&String> = processing.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["id", "status", "message"], "{processing}");
            assert!(done.get("metadata").is_none());
        }
        s.shutdown().await;
    }
}

#[tokio::test]
async fn ground_truth_and_counters() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let mut body = order("USD", vec![item("AMZ-US", num("20"))]);
    body["description"] = "gt".into();
    body["metadata"] = serde_json::json!({"k": "v"});
    let r = api.post_order("gt-1", Some("sync"), &bytes(&body)).await;
    assert_eq!(r.status, 200);
    let id = r.json()["id"].as_str().unwrap().to_string();
    api.get("/v2/ping").await;

    let admin = api.clone().key(None).get("/_sim/orders").await;
    assert_eq!(admin.status, 200, "no key needed");
    let text = String::from_utf8_lossy(&admin.body).to_string();
    assert!(!text.contains(sim::DEFAULT_KEY), "never the key itself");
    let records = s.orders();
    assert_eq!(serde_json::to_value(&records).unwrap(), admin.json());
    assert_eq!(records.len(), 1);
    let rec = &records[0];
    assert_eq!(rec.id, id);
    assert_eq!(rec.idempotency_key, "gt-1");
    assert!(rec.api_key_fingerprint.starts_with("sha256:"));
    assert_eq!(rec.status, paybatch::api::models::OrderStatus::Completed);
    assert_eq!(rec.description.as_deref(), Some("gt"));
    assert_eq!(rec.metadata.get("k").map(String::as_str), Some("v"));
    assert_eq!(rec.total_price, dec("19.60"));
    assert_eq!(rec.items.len(), 1);
    assert_eq!(rec.items[0].face_value, dec("20"));
    assert_eq!(rec.items[0].price, dec("19.60"));
    assert!(rec.items[0].id.starts_with("E-"));
    assert!(
        rec.items[0]
            .payout_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://playground.example/redeem/"))
    );

    let stats = api.clone().key(None).get("/_sim/stats").await;
    assert_eq!(stats.status, 200);
    let counters = s.stats();
    assert_eq!(serde_json::to_value(&counters).unwrap(), stats.json());
    assert_eq!(counters.requests.get("POST /order"), Some(&1));
    assert_eq!(counters.requests.get("GET /ping"), Some(&1));
    assert_eq!(counters.orders_created, 1);
    s.shutdown().await;
}
