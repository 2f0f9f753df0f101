//! Where outputs may be written: never over a symbolic link or a special file, never two
//! outputs of one report at one path, never over a batch's result file; the journal on stdout.
//! Through the binary on the embedded simulator and a real ledger.

use std::os::unix::fs::FileTypeExt;

use crate::support::{Workspace, paybatch_in, stderr_of, stdout_of};

async fn pb(ws: &Workspace, args: &[&str]) -> std::process::Output {
    paybatch_in(ws.dir.path(), args, &[]).await
}

const TWO_ROWS: &str = "reference,product_code,face_value,currency\n\
                        R-1,AMZ-US,10.00,USD\n\
                        R-2,AMZ-US,12.00,USD\n";

async fn paid(ws: &Workspace) {
    ws.write("b.csv", TWO_ROWS);
    let out = pb(ws, &["run", "b.csv", "--batch", "b", "-q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A special file as `report --out` (a fifo, standing for a device such as `/dev/null`, which
/// the unit tests of `batch::output` check without writing anything) is refused (exit 2) and
/// is still a fifo afterwards: the check comes before any write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_special_file_is_refused_and_left_as_it_was() {
    let ws = Workspace::new();
    paid(&ws).await;
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path("device.csv"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let out = pb(&ws, &["report", "--batch", "b", "--out", "device.csv"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let said = stderr_of(&out);
    assert!(
        said.contains("device.csv is a fifo (named pipe)") && said.contains("`-` writes to stdout"),
        "{said}"
    );
    let kind = std::fs::symlink_metadata(ws.path("device.csv"))
        .expect("device.csv")
        .file_type();
    assert!(kind.is_fifo(), "still a fifo");
}

/// A run whose result file would go through a symbolic link is refused before it pays
/// anything, and the link is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_result_file_is_a_link_pays_nothing() {
    let ws = Workspace::new();
    ws.write("b.csv", TWO_ROWS);
    ws.write("elsewhere.csv", "kept\n");
    std::os::unix::fs::symlink(ws.path("elsewhere.csv"), ws.path("out.csv")).expect("a link");
    let out = pb(&ws, &["run", "b.csv", "--batch", "b", "--out", "out.csv"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("is a symbolic link"),
        "{}",
        stderr_of(&out)
    );
    assert!(
        std::fs::symlink_metadata(ws.path("out.csv"))
            .expect("out.csv")
            .is_symlink()
    );
    let status = pb(&ws, &["status", "--batch", "b"]).await;
    assert_ne!(status.status.code(), Some(0), "no batch was recorded");
}

/// A fifo as `payouts --list --out` is refused (exit 2) and stays a fifo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_not_replaced_by_a_list() {
    let ws = Workspace::new();
    paid(&ws).await;
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path("pipe.csv"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let out = pb(
        &ws,
        &[
            "payouts",
            "--batch",
            "b",
            "--no-read",
            "--list",
            "ACTIVE",
            "--out",
            "pipe.csv",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let kind = std::fs::symlink_metadata(ws.path("pipe.csv"))
        .expect("pipe.csv")
        .file_type();
    assert!(kind.is_fifo());
}

/// `report --batch`: `--out` and `--html` at one path are refused, and the HTML page may not
/// replace the batch's result file (its `--out` may: it rebuilds it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_report_keeps_its_outputs_apart() {
    let ws = Workspace::new();
    paid(&ws).await;
    let result = ws.path("b.SIMULATED.result.csv");
    let before = std::fs::read(&result).expect("the result file");
    let both = pb(
        &ws,
        &[
            "report", "--batch", "b", "--out", "x.csv", "--html", "x.csv",
        ],
    )
    .await;
    assert_eq!(both.status.code(), Some(2), "{}", stderr_of(&both));
    assert!(!ws.path("x.csv").exists(), "nothing was written");
    let html = pb(
        &ws,
        &["report", "--batch", "b", "--html", "b.SIMULATED.result.csv"],
    )
    .await;
    assert_eq!(html.status.code(), Some(2), "{}", stderr_of(&html));
    assert_eq!(std::fs::read(&result).expect("the result file"), before);
    let rebuilt = pb(
        &ws,
        &["report", "--batch", "b", "--out", "b.SIMULATED.result.csv"],
    )
    .await;
    assert_eq!(rebuilt.status.code(), Some(0), "{}", stderr_of(&rebuilt));
    assert_eq!(std::fs::read(&result).expect("the result file"), before);
}

const PERIOD: [&str; 4] = ["--since", "2000-01-01", "--until", "2100-12-31"];

/// `--journal -` prints the journal on stdout (the same bytes as the file), and is refused with
/// `--json` or `--out -`; one batch is "1 batch"; a journal in a missing directory is named as
/// given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_on_stdout_is_the_file() {
    let ws = Workspace::new();
    paid(&ws).await;
    let period = |extra: &[&'static str]| {
        let mut args = PERIOD.to_vec();
        args.insert(0, "report");
        args.extend(extra);
        args
    };
    let file = pb(&ws, &period(&["--journal", "j.csv"])).await;
    assert_eq!(file.status.code(), Some(0), "{}", stderr_of(&file));
    assert!(
        stderr_of(&file).contains(": lines of 1 batch booked"),
        "{}",
        stderr_of(&file)
    );
    let printed = pb(&ws, &period(&["--journal", "-"])).await;
    assert_eq!(printed.status.code(), Some(0), "{}", stderr_of(&printed));
    let journal = std::fs::read(ws.path("j.csv")).expect("the journal");
    assert_eq!(printed.stdout, journal);
    for other in [&["--json"][..], &["--out", "-"][..]] {
        let mut extra = vec!["--journal", "-"];
        extra.extend(other);
        let out = pb(&ws, &period(&extra)).await;
        assert_eq!(out.status.code(), Some(2), "{other:?}: {}", stderr_of(&out));
        assert!(stdout_of(&out).is_empty(), "{other:?}");
    }
    let missing = pb(&ws, &period(&["--journal", "nodir/j.csv"])).await;
    assert_ne!(missing.status.code(), Some(0));
    let said = stderr_of(&missing);
    assert!(
        said.contains("nodir/j.csv") && !said.contains(".tmp"),
        "{said}"
    );
    assert!(!ws.path("-").exists());
}

/// `--journal .` (a directory) is refused with what it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_is_no_journal() {
    let ws = Workspace::new();
    paid(&ws).await;
    let mut args = vec!["report"];
    args.extend(PERIOD);
    args.extend(["--journal", "."]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--journal . is a directory"),
        "{}",
        stderr_of(&out)
    );
}
