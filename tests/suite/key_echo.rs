//! A service that quotes the API key back in its answers (`sim serve --echo-key`): whatever
//! the spelling (capitals, base64 in either alphabet with or without padding, without its
//! prefix, percent-encoded), the key reaches neither the ledger (every table: the database
//! file, its WAL and shared memory), nor the result file, nor `status` (text or `--json`), nor
//! the HTML report, nor anything printed.

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine;
use base64::engine::general_purpose as b64;
use paybatch::sim::{KeySpelling, SimConfig};

use crate::support::*;

/// A playground key whose spellings all differ: its length is not a multiple of 3 (base64
/// pads it) and its `???` gives a `/` in standard base64 and a `_` in the URL-safe alphabet.
const KEY: &str = "xx~~~echo???keys1";

/// Every spelling of [`KEY`] looked for, and whether in any case.
fn spellings() -> Vec<(String, bool)> {
    let percent: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    vec![
        (KEY.to_string(), true),
        (KEY["xx".len()..].to_string(), true),
        (percent, true),
        (b64::STANDARD.encode(KEY), false),
        (b64::STANDARD_NO_PAD.encode(KEY), false),
        (b64::URL_SAFE.encode(KEY), false),
        (b64::URL_SAFE_NO_PAD.encode(KEY), false),
    ]
}

/// The spellings of [`KEY`] that `bytes` hold.
fn spelt_in(bytes: &[u8]) -> Vec<String> {
    spellings()
        .into_iter()
        .filter(|(s, any_case)| {
            bytes.windows(s.len()).any(|w| {
                if *any_case {
                    w.eq_ignore_ascii_case(s.as_bytes())
                } else {
                    w == s.as_bytes()
                }
            })
        })
        .map(|(s, _)| s)
        .collect()
}

/// Every file under `dir` but `skip`, with the spellings of the key it holds.
fn files_with_the_key(dir: &Path, skip: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path == skip || !path.is_file() {
            continue;
        }
        let spelt = spelt_in(&std::fs::read(&path).expect("read file"));
        if !spelt.is_empty() {
            found.push((path, spelt));
        }
    }
    found
}

/// `paybatch ARGS` in the workspace with the key file `key` (for the commands that talk to
/// the service) and the workspace's ledger.
async fn paybatch(ws: &Workspace, args: &[&str], service: Option<(&str, &Path)>) -> Output {
    let ledger = ws.ledger();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--ledger", ledger.to_str().expect("utf-8 path")]);
    if let Some((base, key)) = service {
        all.extend_from_slice(&["--base-url", base, "--api-key-file"]);
        all.push(key.to_str().expect("utf-8 path"));
    }
    paybatch_in(ws.dir.path(), &all, &[]).await
}

fn echoing(state: &Path, spelling: KeySpelling) -> SimConfig {
    let mut config = fast_config(Some(state.to_path_buf()));
    config.keys = vec![KEY.to_string()];
    config.faults.hostile.echo_key = Some(spelling);
    config
}

/// One batch against a service that quotes the key spelt `spelling`: its orders FAILED (the
/// message of a finished order), then, retried, refused (403 ordering_restricted: message and
/// help). Returns every output, and the rows' error messages as the ledger holds them after the
/// first run (the failed orders') and at the end (the refusals': how many orders are refused
/// before the stop of the account holds the others back depends on the timing of the sends).
async fn batch_against(name: &str, spelling: KeySpelling) -> (Vec<(String, Output)>, Vec<String>) {
    let ws = Workspace::new();
    let states = tempfile::tempdir().expect("state dir");
    let state = states.path().join("sim.db");
    let key = ws.path("api.key");
    std::fs::write(&key, format!("{KEY}\n")).expect("key file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    ws.copy(SAMPLE, "nov.csv");
    let mut outputs = Vec::new();

    let mut failing = echoing(&state, spelling);
    failing.failure_rate = 1.0;
    let sim = start_sim(failing).await;
    let base = sim.base_url();
    let service = Some((base.as_str(), key.as_path()));
    let first = paybatch(&ws, &["run", "nov.csv", "--items-per-order", "1"], service).await;
    assert_eq!(
        first.status.code(),
        Some(4),
        "{name}: {}",
        output_of(&first)
    );
    outputs.push(("run".to_string(), first));
    // The failed orders' messages, before the retry clears them from the rows.
    let mut messages = error_messages(&ws);
    let retried = paybatch(&ws, &["retry", "--batch", "nov"], None).await;
    assert!(retried.status.success(), "{name}: {}", output_of(&retried));
    outputs.push(("retry".to_string(), retried));

    let mut restricted = echoing(&state, spelling);
    restricted.ordering_restricted = true;
    let sim = restart_sim(sim, restricted).await;
    let second = paybatch(&ws, &["run", "nov.csv", "--items-per-order", "1"], service).await;
    assert_eq!(
        second.status.code(),
        Some(4),
        "{name}: {}",
        output_of(&second)
    );
    outputs.push(("second run".to_string(), second));
    sim.shutdown().await;

    for (what, args) in [
        ("status", vec!["status", "--batch", "nov"]),
        ("status --json", vec!["status", "--batch", "nov", "--json"]),
        ("status of all", vec!["status"]),
        (
            "report",
            vec!["report", "--batch", "nov", "--html", "nov.html"],
        ),
    ] {
        let out = paybatch(&ws, &args, None).await;
        assert!(out.status.success(), "{name} {what}: {}", output_of(&out));
        outputs.push((what.to_string(), out));
    }
    assert!(
        ws.path("nov.html").exists(),
        "{name}: the report was written"
    );

    messages.extend(error_messages(&ws));

    let files = files_with_the_key(ws.dir.path(), &key);
    assert!(files.is_empty(), "{name}: the key is in {files:?}");
    (outputs, messages)
}

/// The rows' error messages as the ledger holds them.
fn error_messages(ws: &Workspace) -> Vec<String> {
    let db = rusqlite::Connection::open(ws.ledger()).expect("ledger");
    db.prepare("SELECT error_message FROM rows WHERE error_message IS NOT NULL")
        .expect("query")
        .query_map([], |r| r.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("messages")
}

#[tokio::test]
async fn a_key_the_service_echoes_in_any_spelling_is_never_stored_or_shown() {
    let each = KeySpelling::EACH
        .iter()
        .map(|(name, spelling)| batch_against(name, *spelling));
    let done = futures::future::join_all(each).await;
    for ((name, _), (outputs, messages)) in KeySpelling::EACH.iter().zip(done) {
        // The service did quote the key: what the ledger kept of its words says where.
        let hidden = paybatch::api::key::CONCEALED;
        let failed = messages.iter().filter(|m| m.contains(hidden)).count();
        assert!(
            failed >= 2 && messages.iter().any(|m| m.contains("ordering")),
            "{name}: the echoed messages were recorded, the key hidden: {messages:?}"
        );
        for (what, out) in &outputs {
            let spelt = spelt_in(format!("{}{}", stdout_of(out), stderr_of(out)).as_bytes());
            assert!(spelt.is_empty(), "{name}: {what} printed {spelt:?}");
        }
    }
}
