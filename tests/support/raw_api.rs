//! The simulator's tests: a raw HTTP client (reqwest) that sends exactly the bytes and headers a
//! test chooses, and the order bodies it sends. The simulator itself is started with
//! [`super::start_sim`].

use std::str::FromStr;
use std::time::Duration;

use paybatch::sim::{self, SimConfig, SimHandle};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// Settings for fast tests: short processing, fixed seed.
pub fn fast() -> SimConfig {
    SimConfig {
        seed: 42,
        processing_min: Duration::from_millis(50),
        processing_max: Duration::from_millis(150),
        ..SimConfig::default()
    }
}

/// One answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "answer {} is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The `type` of an error body, after checking the published error shape: `type` and
    /// `message`, `help` a text when present (the service leaves it out for some types), and
    /// for 422 `details` as a list of `{type, message, location}`.
    pub fn error_type(&self) -> String {
        let v = self.json();
        for field in ["type", "message"] {
            assert!(
                v[field].as_str().is_some_and(|s| !s.is_empty()),
                "error body without {field}: {v}"
            );
        }
        if let Some(help) = v.get("help") {
            assert!(
                help.as_str().is_some_and(|s| !s.is_empty()),
                "help is a text when present: {v}"
            );
        }
        if self.status == 422 {
            let details = v["details"].as_array().expect("422 details is a list");
            assert!(!details.is_empty(), "{v}");
            for d in details {
                assert!(d["type"].is_string() && d["message"].is_string(), "{d}");
                assert!(
                    d["location"]
                        .as_array()
                        .is_some_and(|l| l.iter().all(Value::is_string)),
                    "{d}"
                );
            }
        }
        v["type"].as_str().unwrap_or_default().to_string()
    }

    /// The `location`s of a 422 answer's `details`, each joined with dots (`items.0.face_value`).
    pub fn locations(&self) -> Vec<String> {
        self.assert_error(422, "validation_error");
        self.json()["details"]
            .as_array()
            .map(|details| {
                details
                    .iter()
                    .map(|d| {
                        d["location"]
                            .as_array()
                            .map(|l| {
                                l.iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(".")
                            })
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Asserts the published 429 answer: `{"error": "rate exceeded"}` and `Retry-After: 5`.
    pub fn assert_rate_exceeded(&self) {
        assert_eq!(self.status, 429, "{}", String::from_utf8_lossy(&self.body));
        assert_eq!(self.json(), json!({"error": "rate exceeded"}));
        assert_eq!(self.header("retry-after").as_deref(), Some("5"));
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// Asserts an error answer: status and type.
    pub fn assert_error(&self, status: u16, kind: &str) {
        assert_eq!(
            (self.status, self.error_type().as_str()),
            (status, kind),
            "{}",
            String::from_utf8_lossy(&self.body)
        );
    }
}

/// A raw client of one simulator, with a key and a version (both optional).
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub root: String,
    pub key: Option<String>,
    pub version: Option<String>,
}

impl Api {
    pub fn new(sim: &SimHandle) -> Self {
        Api {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("http client"),
            root: format!("http://{}", sim.addr()),
            key: Some(sim::DEFAULT_KEY.to_string()),
            version: None,
        }
    }

    pub fn key(mut self, key: Option<&str>) -> Self {
        self.key = key.map(str::to_string);
        self
    }

    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_string());
        self
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.root));
        if let Some(k) = &self.key {
            r = r.header("X-Api-Key", k);
        }
        if let Some(v) = &self.version {
            r = r.header("X-Api-Version", v);
        }
        r
    }

    pub async fn send(&self, r: reqwest::RequestBuilder) -> Result<Reply, reqwest::Error> {
        let resp = r.send().await?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await?.to_vec();
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// `GET {root}{path}` (path starts with `/v2/...` or `/_sim/...`).
    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(reqwest::Method::GET, path))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST /v2/order` with exactly these body bytes; the error is the transport error.
    pub async fn try_post_order(
        &self,
        idempotency_key: Option<&str>,
        mode: Option<&str>,
        body: &[u8],
    ) -> Result<Reply, reqwest::Error> {
        let mut r = self
            .request(reqwest::Method::POST, "/v2/order")
            .header("Content-Type", "application/json")
            .body(body.to_vec());
        if let Some(k) = idempotency_key {
            r = r.header("X-Idempotency-Key", k);
        }
        if let Some(m) = mode {
            r = r.header("X-Execution-Mode", m);
        }
        self.send(r).await
    }

    pub async fn post_order(
        &self,
        idempotency_key: &str,
        mode: Option<&str>,
        body: &[u8],
    ) -> Reply {
        self.try_post_order(Some(idempotency_key), mode, body)
            .await
            .unwrap_or_else(|e| panic!("POST /v2/order: {e}"))
    }

    /// Polls `GET /v2/order/{id}` until the order leaves PROCESSING (bounded: 100 x 30 ms).
    pub async fn wait_done(&self, id: &str) -> Value {
        for _ in 0..100 {
            let r = self.get(&format!("/v2/order/{id}")).await;
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let v = r.json();
            if v["status"] != "PROCESSING" {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        panic!("order {id} still PROCESSING after 3 s");
    }

    pub async fn balance(&self, currency: &str) -> String {
        let r = self.get(&format!("/v2/balance?currency={currency}")).await;
        assert_eq!(r.status, 200);
        r.json()["balance"].as_str().unwrap_or_default().to_string()
    }
}

/// An exact JSON number (the text is kept: `10.50` stays `10.50`).
pub fn num(text: &str) -> Value {
    Value::Number(serde_json::Number::from_str(text).expect("a JSON number"))
}

/// One PAYOUT_LINK item of one product.
pub fn item(code: &str, face_value: Value) -> Value {
    json!({
        "face_value": face_value,
        "distribution_method": {"type": "PAYOUT_LINK"},
        "products": {"type": "SINGLE", "value": code}
    })
}

/// An order paid from the balance in `currency`.
pub fn order(currency: &str, items: Vec<Value>) -> Value {
    json!({
        "payment_method": {"type": "ACCOUNT_BALANCE", "currency": currency},
        "items": items
    })
}

pub fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("serialise")
}

/// A one-item USD order of AMZ-US (face value as a JSON number).
pub fn amz(face_value: &str) -> Vec<u8> {
    bytes(&order("USD", vec![item("AMZ-US", num(face_value))]))
}

pub fn dec(text: &str) -> rust_decimal::Decimal {
    rust_decimal::Decimal::from_str(text).expect("decimal")
}
