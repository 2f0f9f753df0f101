//! What the batch file, the ledger and the service say reaches the terminal as text, never as
//! control sequences: a cell, a batch name, a product name or a service message holding ESC
//! (colours, clearing the screen, retitling the window) or BEL is shown escaped (`\u{1b}`).

use crate::support::*;

/// The control bytes a terminal obeys (C0 but line feed and tab, DEL); none of them may be in
/// `bytes`. (C1 codes are multi-byte in UTF-8: their lead byte 0xC2 is checked by the tests
/// that use them.)
fn control_bytes(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .copied()
        .filter(|b| (*b < 0x20 && *b != b'\n' && *b != b'\t') || *b == 0x7f)
        .collect()
}

fn assert_no_control(what: &str, out: &std::process::Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let found = control_bytes(bytes);
        assert!(
            found.is_empty(),
            "{what}: {stream} holds control bytes {found:?}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
}

const ESC_NAME: &str = "nov\u{1b}]0;owned\u{7}\u{1b}[2J";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_and_batch_names_with_control_characters_are_shown_escaped() {
    let ws = Workspace::new();
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency,email,department\n\
         R1,AMZ-US,10,USD,a@example.com,\"Sales\u{1b}[2J\u{1b}[31m\"\n\
         R2,AMZ-US,10,USD,b@example.com,Ops\n",
    );
    let out = paybatch_in(
        ws.dir.path(),
        &[
            "validate", "nov.csv", "--ledger", "l.db", "--batch", ESC_NAME,
        ],
        &[],
    )
    .await;
    let err = stderr_of(&out);
    // A control character in any cell, a carried-through one too, is a problem of the file.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("line 2, column 6 (department): the control character `\\u{1b}`"),
        "{err}"
    );
    assert_no_control("validate", &out);
    assert!(stdout_of(&out).contains("batch: nov\\u{1b}]0;owned\\u{7}"));

    // A batch name with control characters, paid on the simulator, then shown by status.
    ws.copy(SAMPLE, "ok.csv");
    let run = paybatch_in(
        ws.dir.path(),
        &["run", "ok.csv", "--ledger", "l.db", "--batch", ESC_NAME],
        &[],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
    assert_no_control("run", &run);
    for args in [
        &["status", "--ledger", "l.db"][..],
        &["status", "--ledger", "l.db", "--batch", ESC_NAME],
        &["report", "--ledger", "l.db", "--batch", ESC_NAME],
        &["status", "--ledger", "l.db", "--batch", "nov\u{1b}[31m"],
    ] {
        let out = paybatch_in(ws.dir.path(), args, &[]).await;
        assert_no_control(&format!("{args:?}"), &out);
        assert!(
            (stdout_of(&out) + &stderr_of(&out)).contains("nov\\u{1b}"),
            "{args:?}: {}{}",
            stdout_of(&out),
            stderr_of(&out)
        );
    }
}

/// A service on 127.0.0.1 whose product names and error messages hold escape sequences.
async fn hostile_service() -> String {
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut products = crate::support::products();
    products[0].name = "Amazon\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m".into();
    products[1].code = "EVIL\u{1b}[31m-DE".into();
    let list = paybatch::api::models::ProductList {
        catalog: products,
        pagination: Default::default(),
    };
    let list = serde_json::to_string(&list).unwrap();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri| {
        let list = list.clone();
        async move {
            let mut headers = HeaderMap::new();
            headers.insert("content-type", "application/json".parse().unwrap());
            if method == Method::GET && uri.path() == "/v2/product" {
                return (StatusCode::OK, headers, list);
            }
            let body = r#"{"type":"unauthorized","message":"key revoked \u001b[2J\u001b]0;owned\u0007","help":"\u001b[31mcall us"}"#;
            (StatusCode::UNAUTHORIZED, headers, body.to_string())
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v2")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn product_names_and_service_messages_with_control_characters_are_shown_escaped() {
    let ws = Workspace::new();
    let base = hostile_service().await;
    let key = [("PAYBATCH_API_KEY", "xx_test_key")];
    let service = ["--base-url", base.as_str(), "--ledger", "l.db"];
    let with = |head: &[&'static str]| -> Vec<String> {
        head.iter()
            .chain(service.iter())
            .map(|s| s.to_string())
            .collect()
    };
    // The list shows the names and codes, escaped.
    let args = with(&["catalog", "list"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(ws.dir.path(), &args, &key).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_no_control("catalog list", &out);
    let listed = stdout_of(&out);
    assert!(
        listed.contains("Amazon\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{9b}31m"),
        "{listed}"
    );
    assert!(listed.contains("EVIL\\u{1b}[31m-DE"), "{listed}");
    // A row naming the product: its problem quotes the code escaped.
    ws.write(
        "nov.csv",
        "reference,product_code,face_value,currency\nR1,EVIL\u{1b}[31m-DE,10,EUR\n",
    );
    // The service's error message and help, escaped.
    for head in [&["ping"][..], &["balance"], &["validate", "nov.csv"]] {
        let args = with(head);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = paybatch_in(ws.dir.path(), &args, &key).await;
        assert_ne!(out.status.code(), Some(0), "{head:?}: {}", stderr_of(&out));
        assert_no_control(&format!("{head:?}"), &out);
    }
    let args = with(&["ping"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(ws.dir.path(), &args, &key).await;
    assert!(
        stderr_of(&out).contains("key revoked \\u{1b}[2J"),
        "{}",
        stderr_of(&out)
    );
}

/// What a hostile service appends to every id, link, name and message it answers: an OSC 8
/// hyperlink, a screen clear, a C1 CSI, a right-to-left override and a left-to-right isolate.
const HOSTILE: &str = "\u{1b}]8;;http://evil\u{7}\u{1b}[2J\u{9b}31m\u{202e}\u{2066}";

/// Whether `text` holds a character a terminal or a viewer would obey: ESC, BEL (any C0 but
/// line feed, carriage return and tab), DEL, a C1 code, a bidirectional override or isolate.
fn obeyed(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

fn assert_nothing_obeyed(what: &str, text: &str) {
    let found = obeyed(text);
    assert!(found.is_empty(), "{what}: holds {found:?}: {text}");
}

mod hostile {
    use std::sync::Arc;

    use axum::http::{Method, StatusCode};

    use super::HOSTILE;
    use crate::support::rewriting::{self, Rules};

    /// Every order id (`O-...`) and item id (`E-...`) without the suffix gets it.
    fn ids(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for (name, v) in map.iter_mut() {
                    if let serde_json::Value::String(s) = v {
                        let id = name == "id" && (s.starts_with("O-") || s.starts_with("E-"));
                        if (id || name == "url" || name == "redemption_url" || name == "name")
                            && !s.contains(HOSTILE)
                        {
                            s.push_str(HOSTILE);
                        }
                    } else {
                        ids(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(ids),
            _ => {}
        }
    }

    /// Starts a proxy in front of `sim` that forwards with the suffix taken off the path (the
    /// client sends it percent-encoded, from its ESC on), and puts it on ids, links and product
    /// names of the answer. An order for `reject@` is answered 422 with a hostile message.
    /// Returns its base URL.
    pub async fn start(sim: &paybatch::sim::SimHandle) -> String {
        rewriting::start_with(
            sim,
            Rules {
                rewrite: Arc::new(|_, _, _, json| ids(json)),
                answer: Some(Arc::new(|method, body| {
                    let reject = *method == Method::POST
                        && String::from_utf8_lossy(body).contains("reject@");
                    reject.then(|| {
                        let answer = serde_json::json!({
                            "type": "validation_error",
                            "message": format!("refused{HOSTILE}"),
                            "details": {"items": format!("bad{HOSTILE}")},
                        });
                        (StatusCode::UNPROCESSABLE_ENTITY, answer)
                    })
                })),
                cut_path_at: Some("%1B"),
            },
        )
        .await
    }
}

const HOSTILE_ROWS: &str = "reference,product_code,face_value,currency,distribution,email\n\
H-1,AMZ-US,10,USD,email,h1@example.com\n\
H-2,AMZ-US,20,USD,payout_link,\n\
H-3,AMZ-US,30,USD,email,reject@example.com\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_service_says_is_escaped_in_every_output_and_file() {
    let sim = start_sim(fast_config(None)).await;
    let base = hostile::start(&sim).await;
    let ws = Workspace::new();
    ws.write("pay.csv", HOSTILE_ROWS);
    ws.write(
        "more.csv",
        &HOSTILE_ROWS.replace("H-", "M-").replace("h1@", "m1@"),
    );
    let mut outputs: Vec<(String, std::process::Output)> = Vec::new();
    let mut json_outputs: Vec<(String, serde_json::Value)> = Vec::new();
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", "pay.csv", "--poll-timeout", "60"],
        vec!["run", "more.csv", "--poll-timeout", "60", "--json"],
        vec!["validate", "pay.csv"],
        vec!["validate", "more.csv", "--json"],
        vec!["catalog", "list"],
        vec!["catalog", "list", "--json"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["status", "--batch", "pay"],
        vec!["status", "--batch", "pay", "--json"],
        vec!["history", "--reference", "H-1"],
        vec!["history", "--reference", "H-1", "--json"],
        vec!["history", "--reference", "H-3", "--json"],
        vec!["report", "--batch", "pay", "--out", "-"],
        vec![
            "report",
            "--batch",
            "pay",
            "--out",
            "again.csv",
            "--html",
            "pay.html",
        ],
        vec!["reconcile", "--json"],
        vec!["reconcile"],
        vec!["retry", "--batch", "pay", "--json"],
    ];
    for args in &commands {
        let out = against_url(&ws, &base, args).await;
        let name = format!("{args:?}");
        if args.contains(&"--json") {
            let value: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", stdout_of(&out)));
            json_outputs.push((name.clone(), value));
        }
        outputs.push((name, out));
    }
    let (_, first_run) = &outputs[0];
    assert_ne!(first_run.status.code(), Some(0), "{}", stderr_of(first_run));
    for (name, out) in &outputs {
        assert_nothing_obeyed(&format!("{name} stdout"), &stdout_of(out));
        assert_nothing_obeyed(&format!("{name} stderr"), &stderr_of(out));
    }
    let shown = "\\u{1b}]8;;http://evil\\u{7}\\u{1b}[2J\\u{9b}31m\\u{202e}\\u{2066}";
    let all_text: String = outputs
        .iter()
        .map(|(_, o)| stdout_of(o) + &stderr_of(o))
        .collect();
    for needle in [
        "O-".to_string(),
        format!("refused{shown}"),
        shown.to_string(),
    ] {
        assert!(all_text.contains(&needle), "{needle}: {all_text}");
    }
    // JSON carries the value itself, written with JSON escapes.
    let json_text: String = outputs
        .iter()
        .filter(|(n, _)| n.contains("--json"))
        .map(|(_, o)| stdout_of(o))
        .collect();
    assert!(
        json_text.contains("\\u001b]8;;http://evil\\u0007"),
        "{json_text}"
    );
    assert!(
        json_text.contains("\\u009b31m\\u202e\\u2066"),
        "{json_text}"
    );
    let history = &json_outputs
        .iter()
        .find(|(n, _)| n.contains("H-1"))
        .expect("history of H-1")
        .1;
    assert!(history.to_string().contains("O-"), "{history}");
    assert!(
        format!("{history:?}").contains("\\u{202e}"),
        "the parsed value holds the service's order id as it was: {history}"
    );
    // The files: result file (written by run and by report), the HTML report.
    for file in ["pay.result.csv", "again.csv", "pay.html"] {
        let text = std::fs::read_to_string(ws.path(file)).expect(file);
        assert_nothing_obeyed(file, &text);
        assert!(text.contains(shown), "{file}: {text}");
    }
    let result = read_csv(&ws.path("pay.result.csv"));
    let link = col(&result[0], "payout_url");
    let order = col(&result[0], "order_id");
    let error = col(&result[0], "error_message");
    // A link with escape sequences in it is no web address: the row is held for a person, the
    // link shown escaped in the reason, none in the link column.
    let held = result.iter().find(|r| r[0] == "H-2").expect("the row H-2");
    assert_eq!(held[col(&result[0], "status")], "MISMATCH", "{held:?}");
    assert!(held[link].is_empty(), "{held:?}");
    assert!(held[error].contains("not a web address"), "{held:?}");
    assert!(held[error].contains(shown), "{held:?}");
    assert!(held[order].ends_with(shown), "{held:?}");
    let refused = result.iter().find(|r| r[0] == "H-3").expect("the row H-3");
    assert!(
        refused[error].contains(&format!("refused{shown}")),
        "{refused:?}"
    );
    // `report --out -` prints what the file holds.
    let again = std::fs::read_to_string(ws.path("again.csv")).expect("again.csv");
    let printed = stdout_of(&outputs[13].1);
    assert_eq!(printed, again);
    // The ledger keeps what the service said, as it was.
    let conn = rusqlite::Connection::open(ws.ledger()).expect("ledger");
    let raw: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM orders WHERE service_order_id LIKE '%' || char(27) || ']8;;%'",
            [],
            |r| r.get(0),
        )
        .expect("query");
    assert!(raw >= 1, "the ledger holds the raw order ids");
}
