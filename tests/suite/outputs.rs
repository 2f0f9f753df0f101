//! An output file never destroys what paybatch keeps or reads: `--out` (and `report --html`)
//! naming the ledger, one of its files or the input is refused (exit 2) and nothing is written.

use crate::support::*;

fn sqlite_header(path: &std::path::Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"SQLite format 3\0"))
}

#[tokio::test]
async fn outputs_naming_the_ledger_its_files_or_the_input_are_refused() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let input = ws.copy(SAMPLE, "nov.csv");
    let original = std::fs::read(&input).expect("input");
    let out = run_file(&ws, &sim, "nov.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let ledger = ws.ledger();
    let ledger_text = ledger.to_str().expect("utf-8").to_string();
    let wal = format!("{ledger_text}-wal");
    let lock = format!("{ledger_text}.lock");
    // The ledger reached another way: a link to it.
    let link = ws.path("link.db");
    std::os::unix::fs::symlink(&ledger, &link).expect("link");
    let link_text = link.to_str().expect("utf-8").to_string();

    for target in [
        ledger_text.as_str(),
        wal.as_str(),
        lock.as_str(),
        link_text.as_str(),
        "nov.csv",
    ] {
        let out = run_file(&ws, &sim, "nov.csv", &["--out", target], &[]).await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "run --out {target}: {}",
            output_of(&out)
        );
        assert!(
            stderr_of(&out).contains("would destroy it"),
            "{}",
            stderr_of(&out)
        );
        let out = against_url(
            &ws,
            &sim.base_url(),
            &["report", "--batch", "nov", "--out", target],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "report --out {target}: {}",
            output_of(&out)
        );
        let out = against_url(
            &ws,
            &sim.base_url(),
            &["report", "--batch", "nov", "--html", target],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "report --html {target}: {}",
            output_of(&out)
        );
    }
    assert!(sqlite_header(&ledger), "the ledger is still a ledger");
    assert_eq!(
        std::fs::read(&input).expect("input"),
        original,
        "the input is untouched"
    );
    let status = against_url(&ws, &sim.base_url(), &["status", "--batch", "nov"]).await;
    assert_eq!(status.status.code(), Some(0), "{}", output_of(&status));

    // `run --out -` writes no file named `-`.
    let out = run_file(&ws, &sim, "nov.csv", &["--out", "-"], &[]).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_of(&out));
    assert!(stderr_of(&out).contains("report --batch NAME --out -"));
    assert!(!ws.path("-").exists());
    // Another file is fine.
    let out = run_file(&ws, &sim, "nov.csv", &["--out", "elsewhere.csv"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(ws.path("elsewhere.csv").exists());
}

/// Output into a closed pipe ends quietly: no panic, the command's own exit code.
#[tokio::test]
async fn output_into_a_closed_pipe_is_no_panic() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = run_file(&ws, &sim, "nov.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8");
    for command in [
        "status",
        "status --batch nov",
        "history --reference EMP-1042-2026-11",
        "payouts --batch nov --no-read --list ACTIVE",
        "man",
    ] {
        // The reader is gone before paybatch writes (`true` reads nothing).
        let ledger_flag = if command == "man" {
            String::new()
        } else {
            format!("--ledger '{ledger}'")
        };
        let script = format!("set -o pipefail; '{BIN}' {command} {ledger_flag} | true");
        let out = tokio::process::Command::new("bash")
            .args(["-c", &script])
            .current_dir(ws.dir.path())
            .output()
            .await
            .expect("bash runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{command}: {err}");
        assert_eq!(out.status.code(), Some(0), "{command}: {err}");
    }
}

/// The default rehearsal keeps its simulator's state beside the ledger: an output naming it (or
/// its write-ahead log) is refused like the ledger's own files, and the state stays a database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_naming_the_embedded_simulators_state_is_refused() {
    let ws = Workspace::new();
    ws.copy(SAMPLE, "nov.csv");
    let out = paybatch_in(ws.dir.path(), &["run", "nov.csv"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let state = ws.path("paybatch.sim.db");
    assert!(sqlite_header(&state), "the rehearsal keeps its state");
    for target in ["paybatch.sim.db", "./paybatch.sim.db-wal"] {
        let out = paybatch_in(ws.dir.path(), &["run", "nov.csv", "--out", target], &[]).await;
        assert_eq!(out.status.code(), Some(2), "{target}: {}", output_of(&out));
        assert!(
            stderr_of(&out).contains("embedded simulator's state"),
            "{}",
            stderr_of(&out)
        );
        let out = paybatch_in(
            ws.dir.path(),
            &["report", "--batch", "nov", "--out", target],
            &[],
        )
        .await;
        assert_eq!(out.status.code(), Some(2), "{target}: {}", output_of(&out));
    }
    assert!(sqlite_header(&state), "the state is still a database");
    let again = paybatch_in(ws.dir.path(), &["status"], &[]).await;
    assert_eq!(again.status.code(), Some(0), "{}", output_of(&again));
}
