//! A rewriting proxy on a loopback port in front of the real simulator: the service answering
//! what a test chooses (a finished order changed, ids carrying escape sequences, a refusal),
//! made from what the simulator answers.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use paybatch::sim::SimHandle;
use serde_json::Value;

/// Rewrites one answer: (method, path, status, JSON body) → new JSON body.
pub type Rewrite = Arc<dyn Fn(&Method, &str, u16, &mut Value) + Send + Sync>;

/// Answers a request in the service's place, without forwarding it: (method, request body) →
/// `Some((status, JSON body))`, or `None` to forward it.
pub type Answer = Arc<dyn Fn(&Method, &[u8]) -> Option<(StatusCode, Value)> + Send + Sync>;

/// What the proxy does to what passes through it.
#[derive(Clone)]
pub struct Rules {
    /// Rewrites every answer that is JSON (others pass unchanged).
    pub rewrite: Rewrite,
    /// Answers some requests itself.
    pub answer: Option<Answer>,
    /// The request path is cut at the first occurrence of this text before it is forwarded.
    pub cut_path_at: Option<&'static str>,
}

struct Proxy {
    upstream: String,
    http: reqwest::Client,
    rules: Rules,
}

async fn forward(
    State(p): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some((code, answer)) = p.rules.answer.as_ref().and_then(|a| a(&method, &body)) {
        return (
            code,
            [("content-type", "application/json")],
            answer.to_string(),
        )
            .into_response();
    }
    let path = uri.path().trim_start_matches("/v2");
    let path = match p.rules.cut_path_at {
        Some(cut) => path.split(cut).next().unwrap_or(path),
        None => path,
    };
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let mut request = p
        .http
        .request(method.clone(), format!("{}{path}{query}", p.upstream))
        .body(body.to_vec());
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let Ok(answer) = request.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.unwrap_or_default();
    let out = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut json) => {
            (p.rules.rewrite)(&method, path, status, &mut json);
            serde_json::to_vec(&json).unwrap_or_default()
        }
        Err(_) => bytes.to_vec(),
    };
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    (code, [("content-type", "application/json")], out).into_response()
}

/// Starts a proxy in front of `sim` that rewrites its JSON answers with `rewrite`; returns its
/// base URL.
pub async fn start(sim: &SimHandle, rewrite: Rewrite) -> String {
    start_with(
        sim,
        Rules {
            rewrite,
            answer: None,
            cut_path_at: None,
        },
    )
    .await
}

/// Starts a proxy in front of `sim` that follows `rules`; returns its base URL.
pub async fn start_with(sim: &SimHandle, rules: Rules) -> String {
    let state = Arc::new(Proxy {
        upstream: sim.base_url().trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        rules,
    });
    let app = axum::Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v2")
}

/// A proxy in front of `sim` whose first answer to the order list is one empty last page (as
/// the list read just before another machine's orders were made would be); every later read
/// shows everything. Returns its base URL.
pub async fn first_list_read_empty(sim: &SimHandle) -> String {
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        if *method != Method::GET || path != "/order" || status != 200 {
            return;
        }
        if reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            empty_last_page(json);
        }
    });
    start(sim, rewrite).await
}

/// Makes an answer of the order list one empty last page: no orders, no cursor after it.
pub fn empty_last_page(json: &mut serde_json::Value) {
    json["items"] = serde_json::json!([]);
    if let Some(c) = json
        .pointer_mut("/pagination/cursors")
        .and_then(|c| c.as_object_mut())
    {
        c.remove("after");
    }
}
