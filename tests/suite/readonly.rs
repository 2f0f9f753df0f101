//! The read-only commands (`status`, `report`, `history`, `balance`, `catalog list`, `config`)
//! create no ledger where there is none, and say what is missing, through the real binary in an
//! empty temporary directory (on the embedded simulator: nothing leaves the machine).

use crate::support::{Workspace, paybatch_in as paybatch, stderr_of as stderr};

/// The files in the workspace, recursively (relative names).
fn files(ws: &Workspace) -> Vec<String> {
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            out.push(
                path.strip_prefix(base)
                    .expect("prefix")
                    .display()
                    .to_string(),
            );
            if path.is_dir() {
                walk(&path, base, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(ws.dir.path(), ws.dir.path(), &mut out);
    out.sort();
    out
}

const COMMANDS: [&[&str]; 7] = [
    &["status"],
    &["status", "--batch", "nov"],
    &["report", "--batch", "nov"],
    &["history", "--email", "jane.doe@example.com"],
    &["balance"],
    &["catalog", "list"],
    &["config"],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_create_no_ledger() {
    for ledger in [None, Some("ledgers/other.db")] {
        for command in COMMANDS {
            let ws = Workspace::new();
            let mut args = command.to_vec();
            if let Some(l) = ledger {
                args.extend_from_slice(&["--ledger", l]);
            }
            let out = paybatch(ws.dir.path(), &args, &[]).await;
            assert_eq!(
                files(&ws),
                Vec::<String>::new(),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ledger_they_say_what_is_missing() {
    let ws = Workspace::new();
    let out = paybatch(ws.dir.path(), &["status"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(
            "error: no ledger at paybatch.db: nothing has been run here (--ledger PATH to read another)"
        ),
        "{}",
        stderr(&out)
    );
    for args in [
        &["report", "--batch", "nov"][..],
        &["report", "--batch", "nov", "--html", "nov.html"],
        &["report", "--batch", "nov", "--out", "-"],
    ] {
        let out = paybatch(ws.dir.path(), args, &[]).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            stderr(&out).starts_with("error: no ledger at paybatch.db"),
            "{}",
            stderr(&out)
        );
    }
    // `catalog list` still lists, from the service, and says it cached nothing.
    let out = paybatch(ws.dir.path(), &["catalog", "list"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!out.stdout.is_empty());
    assert!(
        stderr(&out).contains(
            "no ledger at paybatch.db: the catalog is read from the service and not cached"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(files(&ws), Vec::<String>::new());
}
