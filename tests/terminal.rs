//! What the batch file, the ledger and the service say reaches the terminal as text, never as
//! control sequences: a cell, a batch name, a product name or a service message holding ESC
//! (colours, clearing the screen, retitling the window) or BEL is shown escaped (`\u{1b}`).

mod common;

use common::*;

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
    let mut products = common::products();
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
