//! The commands a command suggests act on the same ledger and service, and output into a
//! closed pipe (`| head`) ends quietly.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

/// `validate` suggests the run that pays exactly its plan with the flags that chose the
/// ledger, the service and its key: pasting it runs against the same ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_suggests_a_run_on_the_same_ledger_and_service() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    ws.copy(SAMPLE, "nov.csv");
    let out = against_url(
        &ws,
        &sim.base_url(),
        &["validate", "nov.csv", "--batch", "nov"],
    )
    .await;
    let text = stdout_of(&out);
    let line = text
        .lines()
        .find(|l| l.contains("--expect-digest sha256:"))
        .unwrap_or_else(|| panic!("a run to copy in {text}{}", stderr_of(&out)));
    let ledger = ws.ledger().display().to_string();
    let key = ws.key_file().display().to_string();
    for flag in [
        "--batch nov".to_string(),
        format!("--base-url {}", sim.base_url()),
        format!("--api-key-file {key}"),
        format!("--ledger {ledger}"),
    ] {
        assert!(line.contains(&flag), "{flag} in {line}");
    }
}

/// Starts `args` with stdout piped, reads a little of it, closes the pipe, and returns how the
/// command ended and what it said on stderr.
async fn read_a_little(ws: &Workspace, args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = spawn_paybatch(ws.dir.path(), args, &[]);
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(60), stdout.read(&mut first))
        .await
        .expect("output within 60 s")
        .expect("read");
    assert!(n > 0, "{args:?} wrote nothing");
    drop(stdout);
    let mut stderr = child.stderr.take().expect("stderr");
    let mut said = String::new();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        stderr.read_to_string(&mut said).await.expect("stderr");
        child.wait().await.expect("exit")
    })
    .await
    .expect("ends within 60 s after the pipe closed");
    (status, said)
}

/// Output into a pipe whose reader went away (`report --out - | head`, `payouts --list ... |
/// head`, `report --journal - | head`) ends quietly: exit 0 (or 141, killed by SIGPIPE), no
/// error line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_into_a_closed_pipe_ends_quietly() {
    let ws = Workspace::new();
    let sim = start_sim(paybatch::sim::SimConfig {
        rate_limit_per_minute: 0,
        ..fast_config(None)
    })
    .await;
    // Far more than a pipe holds (64 KiB): the writer meets the closed pipe.
    let mut text = String::from("reference,product_code,face_value,currency,note\n");
    let note = "n".repeat(300);
    for i in 1..=1200 {
        text.push_str(&format!("P-{i},AMZ-US,10.00,USD,{note}\n"));
    }
    let mut file = tokio::fs::File::create(ws.path("big.csv"))
        .await
        .expect("file");
    file.write_all(text.as_bytes()).await.expect("write");
    drop(file);
    let out = run_file(&ws, &sim, "big.csv", &["--quiet"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let ledger = ws.ledger().display().to_string();
    let outputs: [&[&str]; 4] = [
        &["report", "--batch", "big", "--out", "-"],
        &[
            "payouts",
            "--batch",
            "big",
            "--no-read",
            "--list",
            "ACTIVE",
            "--with-links",
        ],
        &["report", "--since", "2020-01-01", "--journal", "-"],
        &["report", "--since", "2020-01-01", "--out", "-"],
    ];
    for command in outputs {
        let mut args = command.to_vec();
        args.extend(["--ledger", ledger.as_str()]);
        let (status, said) = read_a_little(&ws, &args).await;
        #[cfg(unix)]
        let by_sigpipe = {
            use std::os::unix::process::ExitStatusExt;
            status.signal() == Some(13)
        };
        #[cfg(not(unix))]
        let by_sigpipe = false;
        assert!(
            status.code() == Some(0) || status.code() == Some(141) || by_sigpipe,
            "{args:?}: {status:?}\n{said}"
        );
        assert!(!said.contains("error"), "{args:?}: {said}");
    }
}

/// `run --json` lists the likely repeats it paid (rows paying a recipient what another batch
/// paid them lately), and `status --json` names what left a balance `paid_by`, as `run --json`
/// does, beside `by`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_lists_likely_repeats_and_status_json_says_paid_by() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let header = "reference,product_code,face_value,currency,email\n";
    ws.write(
        "first.csv",
        &format!(
            "{header}R-1,AMZ-US,10.00,USD,r1@example.com\nR-2,AMZ-US,20.00,USD,r2@example.com\n"
        ),
    );
    ws.write(
        "second.csv",
        &format!(
            "{header}S-1,AMZ-US,10.00,USD,r1@example.com\nS-2,AMZ-US,5.00,USD,r9@example.com\n"
        ),
    );
    let out = run_file(&ws, &sim, "first.csv", &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let out = run_file(&ws, &sim, "second.csv", &["--json"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let likely = &json["likely_repeats"];
    assert_eq!(likely["rows"], 1, "{json}");
    assert_eq!(likely["listed"][0]["reference"], "S-1", "{json}");
    assert_eq!(likely["listed"][0]["earlier_reference"], "R-1", "{json}");
    assert_eq!(likely["listed"][0]["batch"], "first", "{json}");

    let out = against_url(
        &ws,
        &sim.base_url(),
        &["status", "--batch", "second", "--json"],
    )
    .await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let charged = &json["charged"][0];
    assert_eq!(charged["paid_by"], "balance USD", "{json}");
    assert_eq!(charged["by"], charged["paid_by"], "{json}");
}

/// The commands a run and a retry suggest repeat the flags that chose the service, its key and
/// the ledger: a balance the service finds too low (`paybatch retry --batch ...`), then the
/// retry's next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_retry_suggest_commands_on_the_same_ledger_and_service() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.balances = vec![("USD".to_string(), "30.00".parse().expect("amount"))];
    // Converted rows no one prices before sending: the service finds the balance too low.
    config.estimates = false;
    let sim = start_sim(config).await;
    ws.write(
        "low.csv",
        "reference,product_code,face_value,currency,payment_currency\n\
         US-1,AMZ-US,25.00,USD,USD\n\
         FX-1,UBER-JP,3000,JPY,USD\n\
         FX-2,UBER-JP,3000,JPY,USD\n",
    );
    let extra = ["--concurrency", "1"];
    let out = run_file(&ws, &sim, "low.csv", &extra, &[]).await;
    let said = output_of(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    let ledger = ws.ledger().display().to_string();
    let key = ws.key_file().display().to_string();
    let flags = format!(
        " --base-url {} --api-key-file {key} --ledger {ledger}",
        sim.base_url()
    );
    assert!(
        said.contains(&format!("paybatch retry --batch low{flags}")),
        "{said}"
    );
    let out = against_url(&ws, &sim.base_url(), &["retry", "--batch", "low"]).await;
    let said = output_of(&out);
    assert!(
        said.contains(&format!("next: paybatch run low.csv --batch low{flags}")),
        "{said}"
    );
}
