//! The layout of the files written from a batch (the result file of `run` and `report`, the list
//! of `payouts --list --out`): by default the input file's delimiter, byte-order mark and line
//! ends, recorded in the ledger so `report` rebuilds the same bytes once the input is gone;
//! `--out-format` chooses another; a batch of an earlier version stays plain CSV. Through the
//! real binary, on the embedded simulator and a real ledger in a temporary directory.

use std::process::Output;

use crate::support::*;
use crate::support::{paybatch_in as paybatch, stderr_of as stderr, stdout_of as stdout};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The department of the sample's first row in the files written here: a cell holding `;`.
const WITH_SEMICOLON: &str = "R&D; Paris";

/// The sample's rows (header first), the first row's department holding a `;`.
fn sample_rows() -> Vec<Vec<String>> {
    let mut rows = read_csv(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SAMPLE));
    let department = col(&rows[0], "department");
    rows[1][department] = WITH_SEMICOLON.to_string();
    rows
}

/// `rows` written with `delimiter`, `\r\n` or `\n` line ends, and a BOM or not.
fn written(rows: &[Vec<String>], delimiter: u8, crlf: bool, bom: bool) -> Vec<u8> {
    let mut out = if bom { BOM.to_vec() } else { Vec::new() };
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .terminator(if crlf {
            csv::Terminator::CRLF
        } else {
            csv::Terminator::Any(b'\n')
        })
        .from_writer(&mut out);
    for row in rows {
        w.write_record(row).expect("in memory");
    }
    w.flush().expect("in memory");
    drop(w);
    out
}

/// The rows of `bytes` read with `delimiter`, after a BOM if it has one.
fn parsed(bytes: &[u8], delimiter: u8) -> Vec<Vec<String>> {
    let body = bytes.strip_prefix(BOM).unwrap_or(bytes);
    csv::ReaderBuilder::new()
        .has_headers(false)
        .delimiter(delimiter)
        .from_reader(body)
        .records()
        .map(|r| r.expect("a record").iter().map(str::to_string).collect())
        .collect()
}

/// Every line of `bytes` ends with `\r\n` (and there is at least one).
fn every_line_ends_crlf(bytes: &[u8]) -> bool {
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    !lines.is_empty() && lines.iter().all(|l| l.ends_with(b"\r\n"))
}

/// `assert_eq!` of two byte strings, shown as text when they differ.
macro_rules! assert_bytes {
    ($got:expr, $want:expr $(,)?) => {
        assert_bytes!($got, $want, "{}", stringify!($got))
    };
    ($got:expr, $want:expr, $($what:tt)+) => {{
        let got: &[u8] = &$got;
        let want: &[u8] = &$want;
        assert!(
            got == want,
            "{}\n--- got\n{:?}\n--- expected\n{:?}",
            format!($($what)+),
            String::from_utf8_lossy(got),
            String::from_utf8_lossy(want)
        );
    }};
}

fn no_crlf(bytes: &[u8]) -> bool {
    !bytes.windows(2).any(|w| w == b"\r\n")
}

/// A workspace holding `nov.csv` as Excel writes it where the list separator is `;`: a BOM,
/// `;` between cells, CRLF line ends.
fn excel_semicolon_input() -> Workspace {
    let ws = Workspace::new();
    std::fs::write(
        ws.path("nov.csv"),
        written(&sample_rows(), b';', true, true),
    )
    .expect("input");
    ws
}

/// `paybatch ARGS --ledger ledger.db` in the workspace (the embedded simulator's environment).
async fn pb(ws: &Workspace, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--ledger", "ledger.db"]);
    paybatch(ws.dir.path(), &all, &[]).await
}

/// `paybatch run nov.csv` on the embedded simulator, every row completed.
async fn run_nov(ws: &Workspace, extra: &[&str]) -> Output {
    let mut args = vec!["run", "nov.csv"];
    args.extend_from_slice(extra);
    let out = pb(ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    out
}

fn result_of(ws: &Workspace) -> Vec<u8> {
    std::fs::read(ws.path("nov.SIMULATED.result.csv")).expect("the result file")
}

/// `report --batch nov --out FILE` and more: the bytes written.
async fn rebuilt(ws: &Workspace, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["report", "--batch", "nov", "--out", "rebuilt.csv"];
    args.extend_from_slice(extra);
    let out = pb(ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    std::fs::read(ws.path("rebuilt.csv")).expect("the rebuilt file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semicolon_bom_crlf_input_gets_its_result_file_in_the_same_layout() {
    let ws = excel_semicolon_input();
    let out = run_nov(&ws, &[]).await;
    assert!(
        stdout(&out).contains("(`;`, BOM, CRLF: as the input)"),
        "the summary names the layout: {}",
        stdout(&out)
    );
    let result = result_of(&ws);
    assert!(result.starts_with(BOM), "starts with the BOM");
    assert!(every_line_ends_crlf(&result), "every line ends CRLF");
    let text = String::from_utf8_lossy(&result);
    assert!(
        text.contains(&format!("\"{WITH_SEMICOLON}\"")),
        "a cell holding `;` is quoted: {text}"
    );

    // Read with `;`, the same columns and values as the comma file of the same batch.
    let rows = parsed(&result, b';');
    let comma = rebuilt(&ws, &["--out-format", "csv"]).await;
    assert_eq!(rows, parsed(&comma, b','));
    let sample = sample_rows();
    assert_eq!(rows.len(), sample.len());
    assert_eq!(rows[0][..sample[0].len()], sample[0][..]);
    assert_eq!(rows[0].len(), sample[0].len() + 17, "{:?}", rows[0]);
    let status = col(&rows[0], "status");
    assert!(rows[1..].iter().all(|r| r[status] == "COMPLETED"), "{text}");
    for (got, input) in rows[1..].iter().zip(&sample[1..]) {
        assert_eq!(got[..input.len()], input[..]);
    }

    // `report` rebuilds the same bytes, to a file and on stdout, also once the input is gone.
    assert_bytes!(rebuilt(&ws, &[]).await, result, "report --out");
    let on_stdout = pb(&ws, &["report", "--batch", "nov", "--out", "-"]).await;
    assert_eq!(
        on_stdout.status.code(),
        Some(0),
        "{}",
        output_of(&on_stdout)
    );
    assert_bytes!(on_stdout.stdout, result, "report --out -");
    std::fs::remove_file(ws.path("nov.csv")).expect("input removed");
    std::fs::remove_file(ws.path("nov.SIMULATED.result.csv")).expect("result removed");
    assert_bytes!(rebuilt(&ws, &[]).await, result, "without the input file");
    let out = pb(&ws, &["report", "--batch", "nov"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_bytes!(result_of(&ws), result, "report beside the input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_out_format_writes_exactly_its_bytes() {
    let ws = excel_semicolon_input();
    run_nov(&ws, &[]).await;
    let rows = parsed(&result_of(&ws), b';');
    for (format, delimiter, crlf, bom) in [
        ("csv", b',', false, false),
        ("excel", b',', true, true),
        ("excel-semicolon", b';', true, true),
        ("tsv", b'\t', false, false),
    ] {
        let got = rebuilt(&ws, &["--out-format", format]).await;
        assert_bytes!(
            got,
            written(&rows, delimiter, crlf, bom),
            "--out-format {format}"
        );
    }
    let semicolon = rebuilt(&ws, &["--out-format", "excel-semicolon"]).await;
    assert!(String::from_utf8_lossy(&semicolon).contains(&format!("\"{WITH_SEMICOLON}\"")));
    let csv = rebuilt(&ws, &["--out-format", "csv"]).await;
    assert!(
        String::from_utf8_lossy(&csv).contains(&format!(",{WITH_SEMICOLON},")),
        "not quoted where `;` is not the delimiter"
    );
    assert_bytes!(
        rebuilt(&ws, &["--out-format", "same"]).await,
        result_of(&ws)
    );

    // A run chooses too, and its batch keeps the choice when it is resumed without one.
    let out = run_nov(&ws, &["--out-format", "tsv"]).await;
    assert!(
        stdout(&out).contains("(tab, no BOM, LF: --out-format tsv)"),
        "{}",
        stdout(&out)
    );
    let tsv = written(&rows, b'\t', false, false);
    assert_bytes!(result_of(&ws), tsv);
    run_nov(&ws, &[]).await;
    assert_bytes!(result_of(&ws), tsv, "resumed: the recorded layout");
    assert_bytes!(rebuilt(&ws, &[]).await, tsv, "report: the recorded layout");
    let out = run_nov(&ws, &["--out-format", "csv"]).await;
    assert_bytes!(result_of(&ws), written(&rows, b',', false, false));
    assert!(
        stdout(&out).contains("result file: nov.SIMULATED.result.csv\n"),
        "plain CSV is not named: {}",
        stdout(&out)
    );

    // The list of `payouts --list --out FILE` is written as the batch's result file.
    run_nov(&ws, &["--out-format", "same"]).await;
    let listed = pb(
        &ws,
        &[
            "payouts",
            "--batch",
            "nov",
            "--no-read",
            "--expiring-within",
            "0",
            "--list",
            "ACTIVE",
            "--out",
            "list.csv",
        ],
    )
    .await;
    assert!(listed.status.success(), "{}", output_of(&listed));
    let list = std::fs::read(ws.path("list.csv")).expect("the list");
    assert!(list.starts_with(BOM) && every_line_ends_crlf(&list));
    let list_rows = parsed(&list, b';');
    assert_eq!(list_rows[0][0], "reference", "{list_rows:?}");
    assert!(list_rows.len() > 1, "ACTIVE links listed: {list_rows:?}");
    let listed = pb(
        &ws,
        &[
            "payouts",
            "--batch",
            "nov",
            "--no-read",
            "--expiring-within",
            "0",
            "--list",
            "ACTIVE",
            "--out",
            "list.csv",
            "--out-format",
            "csv",
        ],
    )
    .await;
    assert!(listed.status.success(), "{}", output_of(&listed));
    let plain = std::fs::read(ws.path("list.csv")).expect("the list");
    assert!(!plain.starts_with(BOM) && no_crlf(&plain));
    assert_eq!(parsed(&plain, b','), list_rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_without_a_recorded_layout_stays_plain_csv() {
    let ws = excel_semicolon_input();
    run_nov(&ws, &[]).await;
    let rows = parsed(&result_of(&ws), b';');
    // A ledger of an earlier version: no layout recorded.
    let conn = rusqlite::Connection::open(ws.path("ledger.db")).expect("ledger");
    conn.execute(
        "UPDATE batches SET input_format = NULL, result_format = NULL",
        [],
    )
    .expect("forget the layouts");
    drop(conn);
    let plain = written(&rows, b',', false, false);
    assert_bytes!(rebuilt(&ws, &[]).await, plain);
    assert_bytes!(rebuilt(&ws, &["--out-format", "same"]).await, plain);
    let out = pb(&ws, &["report", "--batch", "nov", "--out", "-"]).await;
    assert_bytes!(out.stdout, plain, "{}", stderr(&out));
    // Resumed without --out-format, it keeps what it always wrote.
    run_nov(&ws, &[]).await;
    assert_bytes!(result_of(&ws), plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_out_format_is_refused_with_the_values() {
    let ws = excel_semicolon_input();
    for args in [
        &["run", "nov.csv", "--out-format", "xlsx"][..],
        &["report", "--batch", "nov", "--out-format", "xlsx"][..],
        &[
            "payouts",
            "--batch",
            "nov",
            "--list",
            "ACTIVE",
            "--out-format",
            "xlsx",
        ][..],
    ] {
        let out = pb(&ws, args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", output_of(&out));
        let err = stderr(&out);
        assert!(
            err.contains("xlsx") && err.contains("same, csv, excel, excel-semicolon, tsv"),
            "{args:?}: {err}"
        );
    }
    assert!(!ws.path("ledger.db").exists(), "nothing was started");
    // --help says what each value writes.
    for command in ["run", "report", "payouts"] {
        // Values aligned as clap aligns them: compared word by word.
        let help = help_of(&[command, "--help"])
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for value in [
            "same: as the input file",
            "csv: `,`, LF, no BOM",
            "excel: `,`, CRLF, BOM",
            "excel-semicolon: `;`, CRLF, BOM",
            "tsv: tab, LF, no BOM",
        ] {
            assert!(help.contains(value), "{command} --help: {value}: {help}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_only_run_writes_its_planned_rows_in_the_inputs_layout() {
    let ws = excel_semicolon_input();
    // Written while the file is read, in one pass.
    let out = pb(&ws, &["run", "nov.csv", "--plan-only"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    let result = result_of(&ws);
    assert!(result.starts_with(BOM) && every_line_ends_crlf(&result));
    let rows = parsed(&result, b';');
    let status = col(&rows[0], "status");
    assert_eq!(rows.len(), sample_rows().len());
    assert!(rows[1..].iter().all(|r| r[status] == "PLANNED"), "{rows:?}");
    assert_bytes!(rebuilt(&ws, &[]).await, result, "as report rebuilds it");
}
