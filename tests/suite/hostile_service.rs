//! Hostile or broken answers from the service: each is a clear transient or final error, never
//! a panic, never an order taken as created without an id.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use paybatch::api::models::ExecutionMode;
use paybatch::api::{ApiError, ApiKey, Client, ClientConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server on 127.0.0.1 that answers every request with `response` (raw HTTP bytes; `None`
/// closes the connection without answering). Counts the requests it saw.
async fn serve(response: Option<Vec<u8>>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        for _ in 0..50 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buf)).await
                    {
                        Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                if let Some(bytes) = response {
                    let _ = socket.write_all(&bytes).await;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/v2"), seen)
}

fn http(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn client(base: &str) -> Client {
    let mut config = ClientConfig::new(base, ApiKey::new("xx_test_key").unwrap());
    config.timeout = Duration::from_secs(10);
    Client::new(config).unwrap()
}

#[tokio::test]
async fn truncated_json_is_a_transient_protocol_error() {
    let (base, _) = serve(Some(http(
        "200 OK",
        "application/json",
        br#"{"message":"po"#,
    )))
    .await;
    let e = client(&base).ping().await.unwrap_err();
    assert!(matches!(e, ApiError::Protocol { .. }), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn an_html_page_with_200_is_not_a_success() {
    let (base, _) = serve(Some(http(
        "200 OK",
        "text/html",
        b"<html><body>Maintenance</body></html>",
    )))
    .await;
    let e = client(&base).ping().await.unwrap_err();
    assert!(matches!(e, ApiError::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("Maintenance"), "{e}");
}

#[tokio::test]
async fn a_200_with_an_error_body_is_not_a_success() {
    let body = br#"{"type":"internal_server_error","message":"boom","help":""}"#;
    let (base, _) = serve(Some(http("200 OK", "application/json", body))).await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Async)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::Protocol { .. }), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn an_order_answer_without_an_id_is_never_taken_as_created() {
    let (base, _) = serve(Some(http(
        "200 OK",
        "application/json",
        br#"{"status":"COMPLETED"}"#,
    )))
    .await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Sync)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::Protocol { .. }), "{e:?}");
}

#[tokio::test]
async fn a_huge_body_is_refused_without_buffering_it_whole() {
    let big = vec![b' '; paybatch::api::client::MAX_BODY_BYTES + 1024];
    let (base, _) = serve(Some(http("200 OK", "application/json", &big))).await;
    let e = client(&base).ping().await.unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
}

#[tokio::test]
async fn a_redirect_to_another_host_is_refused_and_not_followed() {
    let redirect = b"HTTP/1.1 302 Found\r\nLocation: http://evil.example/v2/ping\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec();
    let (base, seen) = serve(Some(redirect)).await;
    let e = client(&base).ping().await.unwrap_err();
    assert!(e.to_string().contains("redirect"), "{e}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_closed_without_an_answer_is_transient() {
    let (base, _) = serve(None).await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Async)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::Transport(_)), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn an_html_502_is_transient_and_an_html_404_final() {
    let (base, _) = serve(Some(http(
        "502 Bad Gateway",
        "text/html",
        b"<h1>bad gateway</h1>",
    )))
    .await;
    assert!(client(&base).ping().await.unwrap_err().is_transient());
    let (base, _) = serve(Some(http("404 Not Found", "text/html", b"<h1>nope</h1>"))).await;
    assert!(!client(&base).ping().await.unwrap_err().is_transient());
}

// ---------------------------------------------------------------------------------------------
// Answers the published contract allows: each is read, with its type, never as "no error body".

#[tokio::test]
async fn a_validation_error_with_help_null_keeps_its_type_and_shows_each_location() {
    let body = br#"{"type":"validation_error","message":"There were one or more problems processing your request, see details key.","help":null,"details":[{"type":"value_error","message":"at most 200 characters","location":["body","metadata","paybatch_rows"]},{"type":"missing","message":"field required","location":["body","items",3,"face_value"]}]}"#;
    let (base, _) = serve(Some(http(
        "422 Unprocessable Entity",
        "application/json",
        body,
    )))
    .await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Async)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "validation_error", "{e:?}");
    assert!(!e.is_transient());
    let m = e.message();
    assert!(
        m.contains("body.metadata.paybatch_rows: at most 200 characters"),
        "{m}"
    );
    assert!(
        m.contains("body.items[3].face_value: field required"),
        "{m}"
    );
    assert!(!m.contains("without an error body"), "{m}");
}

#[tokio::test]
async fn idempotency_in_progress_as_a_400_with_help_null_is_transient() {
    let body = br#"{"type":"idempotency_in_progress","message":"A request with this key is being processed","help":null}"#;
    let (base, _) = serve(Some(http("400 Bad Request", "application/json", body))).await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Async)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "idempotency_in_progress");
    assert!(e.is_transient(), "the same key is sent again later");
}

#[tokio::test]
async fn the_published_429_body_is_a_rate_limit_with_its_words() {
    let (base, _) = serve(Some(http(
        "429 Too Many Requests",
        "application/json",
        br#"{"error": "rate exceeded"}"#,
    )))
    .await;
    let e = client(&base)
        .create_order("k", b"{}", ExecutionMode::Async)
        .await
        .unwrap_err();
    assert!(e.is_rate_limited() && e.is_transient());
    assert_eq!(e.message(), "rate exceeded");
}

#[tokio::test]
async fn each_published_error_type_keeps_its_class() {
    for (status, kind, transient) in [
        ("410 Gone", "version_removed", false),
        ("403 Forbidden", "ordering_restricted", false),
        ("504 Gateway Timeout", "timeout", true),
        ("400 Bad Request", "insufficient_funds", false),
        ("400 Bad Request", "currency_mismatch", false),
        ("400 Bad Request", "payment_method_unavailable", false),
        ("400 Bad Request", "product_validation_error", false),
        ("400 Bad Request", "insecure_protocol", false),
        ("400 Bad Request", "invalid_execution_mode", false),
    ] {
        let body = format!(r#"{{"type":"{kind}","message":"m","help":null}}"#);
        let (base, _) = serve(Some(http(status, "application/json", body.as_bytes()))).await;
        let e = client(&base)
            .create_order("k", b"{}", ExecutionMode::Async)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), kind);
        assert_eq!(e.is_transient(), transient, "{kind}");
    }
}

#[tokio::test]
async fn unknown_enum_values_in_answers_are_read_as_other() {
    let page = br#"{"catalog":[
        {"name":"Voucher","code":"NEW-US","currency":"USD","state":"SOMETHING_NEW","is_orderable":true,
         "payout_type":"voucher","countries_redeemable_in":["US"]},
        {"name":"Degraded","code":"DEG-US","currency":"USD","state":"TEMPORARILY_DEGRADED","is_orderable":true,
         "payout_type":"payment","countries_redeemable_in":["US"],
         "payment":{"denominations":{"minimum_value":"1","maximum_value":"10"}}}],
        "pagination":{"cursors":{},"page":{"limit":500}}}"#;
    let (base, _) = serve(Some(http("200 OK", "application/json", page))).await;
    let list = client(&base)
        .products(&Default::default())
        .await
        .expect("a page with values this version does not know is still read");
    assert_eq!(list.catalog.len(), 2);
    assert_eq!(
        list.catalog[0].payout_type,
        paybatch::api::PayoutType::Other
    );
    let order = br#"{"id":"O-1","status":"COMPLETED","payment_method":{"type":"SOMETHING_ELSE","currency":"USD"},
        "items":[{"id":"E-1","distribution_method":{"type":"RECIPIENT"},
                  "products":{"type":"TEMPLATE","template_id":"t"},"face_value":"10","price":"10.00","currency":"USD"}]}"#;
    let (base, _) = serve(Some(http("200 OK", "application/json", order))).await;
    let view = client(&base).order("O-1").await.expect("the order is read");
    let paybatch::api::models::OrderView::Done(o) = view else {
        panic!("a finished order")
    };
    use paybatch::api::models::{DistributionType, SelectionType};
    assert_eq!(o.items[0].distribution_method.kind, DistributionType::Other);
    assert_eq!(o.items[0].products.kind, SelectionType::Other);
}

/// A service on 127.0.0.1 that lists the simulator's catalog when `catalog` is set and answers
/// every other request with 429 and `Retry-After: 100000000` (more than three years). Counts
/// the order creations it refused.
async fn throttling_service(catalog: bool) -> (String, Arc<AtomicUsize>) {
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let products = paybatch::api::models::ProductList {
        catalog: crate::support::products(),
        pagination: Default::default(),
    };
    let products = serde_json::to_string(&products).unwrap();
    let creations = Arc::new(AtomicUsize::new(0));
    let counter = creations.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri| {
        let products = products.clone();
        let counter = counter.clone();
        async move {
            let mut headers = HeaderMap::new();
            headers.insert("content-type", "application/json".parse().unwrap());
            if catalog && method == Method::GET && uri.path() == "/v2/product" {
                return (StatusCode::OK, headers, products);
            }
            // The order list a new batch reads before it sends: empty.
            if catalog && method == Method::GET && uri.path() == "/v2/order" {
                let empty = r#"{"items":[],"pagination":{"cursors":{"before":null,"after":null}}}"#;
                return (StatusCode::OK, headers, empty.to_string());
            }
            if method == Method::POST {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            headers.insert("retry-after", "100000000".parse().unwrap());
            let body = r#"{"type":"too_many_requests","message":"slow down","help":""}"#;
            (StatusCode::TOO_MANY_REQUESTS, headers, body.to_string())
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v2"), creations)
}

/// `Retry-After: 100000000` does not hold a run (and the ledger) for years: a pause the service
/// asks for is honoured up to a minute, and never past the run's deadline (`--poll-timeout`):
/// the run ends incomplete (exit 5), to be run again. Both while reading the catalog and while
/// sending orders. (The test's own bound is 120 s per command; without the cap the run sleeps
/// for years.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_retry_after_ends_the_run_at_its_deadline() {
    use crate::support::*;
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let key = [("PAYBATCH_API_KEY", "xx_test_key")];
    let dir = ws.dir.path();

    // The catalog cannot be read.
    let (base, _) = throttling_service(false).await;
    let out = paybatch_in(
        dir,
        &[
            "run",
            "nov.csv",
            "--base-url",
            &base,
            "--ledger",
            "a.db",
            "--poll-timeout",
            "5",
        ],
        &key,
    )
    .await;
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("too_many_requests"), "{err}");
    assert!(err.contains("run the same command again"), "{err}");

    // The catalog and the order list can be read, no order can be created (paid by card: no
    // balance to read).
    let (base, creations) = throttling_service(true).await;
    let out = paybatch_in(
        dir,
        &[
            "run",
            "nov.csv",
            "--base-url",
            &base,
            "--ledger",
            "b.db",
            "--card-id",
            "card_x",
            "--poll-timeout",
            "5",
        ],
        &key,
    )
    .await;
    let err = output_of(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        creations.load(Ordering::SeqCst) >= 1,
        "orders were sent: {err}"
    );
    assert!(err.contains("--poll-timeout 5s"), "{err}");
    assert!(
        err.contains("run the same command again to resume"),
        "{err}"
    );
}

/// A `--poll-timeout` too large to be a time is refused by the command line (exit 2), not a
/// panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_timeout_too_large_is_refused_not_a_panic() {
    use crate::support::*;
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    for value in ["18446744073709551615", "604801"] {
        let out = paybatch_in(
            ws.dir.path(),
            &[
                "run",
                "nov.csv",
                "--ledger",
                "l.db",
                "--poll-timeout",
                value,
            ],
            &[],
        )
        .await;
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains("--poll-timeout"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = paybatch_in(
        ws.dir.path(),
        &[
            "run",
            "nov.csv",
            "--ledger",
            "l.db",
            "--poll-timeout",
            "604800",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// An estimate of nothing or less, or in another currency than the paying balance's, prices
/// nothing: it is an answer that cannot be read (the pre-flight then prices the rows from the
/// ledger, or says the balance may be short), never a batch made to look affordable.
#[tokio::test]
async fn an_estimate_that_is_not_a_price_in_the_paying_currency_is_refused() {
    let item = || {
        vec![(
            paybatch::api::models::ProductSelection::of(&["AMZ-DE".to_string()]),
            "25".parse::<rust_decimal::Decimal>().unwrap(),
        )]
    };
    for body in [
        br#"{"total_price":"-1000.00","currency":"USD"}"#.as_slice(),
        br#"{"total_price":"0","currency":"USD"}"#.as_slice(),
        br#"{"total_price":"3.00","currency":"JPY"}"#.as_slice(),
    ] {
        let (base, _) = serve(Some(http("200 OK", "application/json", body))).await;
        let e = client(&base).estimate("USD", &item()).await.unwrap_err();
        assert!(
            matches!(e, ApiError::Protocol { .. }),
            "{}: {e:?}",
            String::from_utf8_lossy(body)
        );
    }
    let (base, _) = serve(Some(http(
        "200 OK",
        "application/json",
        br#"{"total_price":"26.46","currency":"USD"}"#,
    )))
    .await;
    let price = client(&base).estimate("USD", &item()).await.unwrap();
    assert_eq!(price.to_string(), "26.46");
}
