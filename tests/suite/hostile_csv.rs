//! Hostile and broken batch files, through the real binary against a real simulator: each is
//! refused with exit code 3, an `error:` line that names where the problem is (line and column,
//! or the line for a problem of the file as a whole), a last `error:` line that names the file
//! and says nothing was submitted, and not a single request to create an order.
//!
//! The text cases live in `tests/corpus/*.csv`; cases a text file cannot hold safely (invalid
//! UTF-8, UTF-16, NUL bytes, a 1 MB field, a record of over 1 MiB) are generated here. Every
//! file of the corpus is also run by `every_corpus_file_is_refused_before_any_order`, so a file
//! added to the corpus is tested even before it gets its own case.

use std::path::Path;

use crate::support::*;
use paybatch::sim::SimHandle;

const HEADER: &str = "reference,product_code,face_value,currency,email,note\n";
const GOOD_ROW: &str = "R-1,AMZ-US,25.00,USD,ann@example.com,first row is fine\n";

/// Where a case's input comes from.
enum Input {
    /// A file of `tests/corpus`.
    Corpus(&'static str),
    /// Bytes made by the test.
    Bytes(fn() -> Vec<u8>),
}

/// A file whose third line is `R-2,AMZ-US,25.00,USD,bob@example.com,` followed by `note`.
fn with_bad_note(note: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(HEADER.as_bytes());
    out.extend_from_slice(GOOD_ROW.as_bytes());
    out.extend_from_slice(b"R-2,AMZ-US,25.00,USD,bob@example.com,");
    out.extend_from_slice(note);
    out.extend_from_slice(b"\n");
    out
}

fn utf16(with_bom: bool) -> Vec<u8> {
    let text = format!("{HEADER}{GOOD_ROW}");
    let mut out = if with_bom {
        vec![0xFF, 0xFE]
    } else {
        Vec::new()
    };
    for unit in text.encode_utf16() {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

/// Runs the binary on `input` against a fresh simulator; returns stderr and the simulator.
async fn run_on(file_name: &str, bytes: &[u8]) -> (Option<i32>, String, SimHandle, Workspace) {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    std::fs::write(ws.path(file_name), bytes).expect("write input");
    let out = run_file(&ws, &sim, file_name, &[], &[]).await;
    (out.status.code(), stderr_of(&out), sim, ws)
}

fn read_input(input: &Input) -> (String, Vec<u8>) {
    match input {
        Input::Corpus(name) => {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/corpus")
                .join(name);
            let bytes = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("corpus file {}: {e}", path.display()));
            (name.to_string(), bytes)
        }
        Input::Bytes(make) => ("generated.csv".to_string(), make()),
    }
}

/// The assertions every refused file must pass: exit 3, nothing ordered, nothing written, the
/// last error naming the file.
fn assert_refused_before_any_order(
    case: &str,
    file_name: &str,
    code: Option<i32>,
    err: &str,
    sim: &SimHandle,
    ws: &Workspace,
) {
    assert_eq!(code, Some(3), "{case}: exit code\n{err}");
    assert!(
        err.lines().any(|l| l.starts_with("error: ")
            && l.contains(file_name)
            && l.ends_with("nothing was submitted")),
        "{case}: an error line names the file and says nothing was submitted\n{err}"
    );
    assert!(sim.orders().is_empty(), "{case}: no order at the service");
    assert_eq!(order_posts(sim), 0, "{case}: not one order was even sent");
    let written: Vec<String> = std::fs::read_dir(ws.dir.path())
        .expect("workspace")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains("result"))
        .collect();
    assert!(written.is_empty(), "{case}: no result file: {written:?}");
    assert!(!err.contains("panicked"), "{case}: no panic\n{err}");
}

/// Runs one case: refused, and one `error:` line starts with `location` and holds `message`.
async fn refused(case: &str, input: Input, location: &str, message: &str) {
    let (file_name, bytes) = read_input(&input);
    let (code, err, sim, ws) = run_on(&file_name, &bytes).await;
    assert_refused_before_any_order(case, &file_name, code, &err, &sim, &ws);
    let prefix = format!("error: {location}: ");
    let line = err
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{case}: no line starting `{prefix}`\n{err}"));
    assert!(
        line.contains(message),
        "{case}: `{line}` should say `{message}`"
    );
    sim.shutdown().await;
}

macro_rules! hostile {
    ($($name:ident: $input:expr => $location:literal, $message:literal;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                refused(stringify!($name), $input, $location, $message).await;
            }
        )*
    };
}

hostile! {
    empty_file: Input::Corpus("empty.csv")
        => "line 1", "the file is empty";
    header_only: Input::Corpus("header_only.csv")
        => "line 1", "the file has a header but no rows";
    missing_required_column: Input::Corpus("missing_columns.csv")
        => "line 1", "the header has no `face_value` column";
    duplicate_header: Input::Corpus("duplicate_headers.csv")
        => "line 1, column 6 (email)", "appears twice in the header";
    two_names_for_one_column: Input::Corpus("duplicate_headers_alias.csv")
        => "line 1, column 7 (amount)", "both stand for `face_value`";
    ragged_row: Input::Corpus("ragged_rows.csv")
        => "line 3", "this row has 3 fields but the header has 6";
    amount_with_exponent: Input::Corpus("amount_exponent.csv")
        => "line 3, column 3 (face_value)", "`1e3` is written with an exponent";
    negative_amount: Input::Corpus("amount_negative.csv")
        => "line 3, column 3 (face_value)", "`-5` has a sign";
    amount_with_too_many_decimals: Input::Corpus("amount_too_many_decimals.csv")
        => "line 3, column 3 (face_value)", "`10.001` has more decimal places than USD allows (2)";
    amount_not_a_number: Input::Corpus("amount_nan.csv")
        => "line 3, column 3 (face_value)", "`NaN` is not a number";
    amount_with_thousands_separator: Input::Corpus("amount_thousands_separator.csv")
        => "line 3, column 3 (face_value)", "`1,000` contains a thousands separator";
    unknown_currency: Input::Corpus("unknown_currency.csv")
        => "line 3, column 4 (currency)", "XYZ cannot pay for an order";
    unknown_currency_with_a_payment_currency: Input::Corpus("unknown_currency_with_payment_currency.csv")
        => "line 3, column 4 (currency)", "`XYZ` is not the currency of AMZ-US (USD)";
    currency_in_lower_case: Input::Corpus("currency_lower_case.csv")
        => "line 3, column 4 (currency)", "`usd` is not an ISO 4217 currency code";
    formula_as_reference: Input::Corpus("formula_reference.csv")
        => "line 3, column 1 (reference)", "`=SUM(A1)` contains `=`";
    invalid_utf8: Input::Bytes(|| with_bad_note(b"caf\xe9 cr\xe8me"))
        => "line 3, column 6 (note)", "invalid UTF-8 at byte 4";
    utf16_with_byte_order_mark: Input::Bytes(|| utf16(true))
        => "line 1", "the file is encoded as UTF-16";
    utf16_without_byte_order_mark: Input::Bytes(|| utf16(false))
        => "line 1, column 1", "NUL byte";
    nul_byte_in_a_field: Input::Bytes(|| with_bad_note(b"a\0b"))
        => "line 3, column 6 (note)", "NUL byte at byte 2 of this field";
    one_megabyte_field: Input::Bytes(|| with_bad_note(&vec![b'x'; 1_000_000]))
        => "line 3, column 6 (note)", "this field is 1000000 bytes long; the limit is 64 KiB";
    unbalanced_quote_swallowing_the_file: Input::Bytes(|| {
        let mut out = with_bad_note(b"\"unclosed");
        for i in 0..60_000 {
            out.extend_from_slice(format!("F-{i},AMZ-US,25.00,USD,x{i}@example.com,filler\n").as_bytes());
        }
        out
    }) => "line 3", "longer than 1024 KiB; reading stopped";
}

/// Every file of the corpus, including any added later without a case of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_file_is_refused_before_any_order() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/corpus")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".csv"))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "the corpus is there: {names:?}");
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).expect("read corpus file");
        let (code, err, sim, ws) = run_on(&name, &bytes).await;
        assert_refused_before_any_order(&name, &name, code, &err, &sim, &ws);
        assert!(
            err.lines().any(|l| l.starts_with("error: line ")),
            "{name}: an error names its line\n{err}"
        );
        sim.shutdown().await;
    }
}

/// `--skip-invalid` cannot help with a broken file, so its help does not offer it; it does for
/// a file with bad rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_help_line_fits_a_broken_file_and_a_file_with_bad_rows() {
    let (code, err, sim, _ws) = run_on("empty.csv", b"").await;
    assert_eq!(code, Some(3), "{err}");
    let help = err
        .lines()
        .rfind(|l| l.starts_with("help: "))
        .unwrap_or_default();
    assert!(help.contains("fix the file"), "{err}");
    assert!(!help.contains("--skip-invalid"), "{err}");
    sim.shutdown().await;

    let rows = b"reference,product_code,face_value,currency\nR-1,AMZ-US,-5,USD\n";
    let (code, err, sim, _ws) = run_on("rows.csv", rows).await;
    assert_eq!(code, Some(3), "{err}");
    let help = err
        .lines()
        .rfind(|l| l.starts_with("help: "))
        .unwrap_or_default();
    assert!(help.contains("--skip-invalid"), "{err}");
    sim.shutdown().await;
}

/// A file of many bad rows is reported in a page, not a line per problem: the first problems
/// of each kind, then how many there are of each. `run` and `validate` alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_bad_rows_are_reported_in_a_bounded_number_of_lines() {
    const ROWS: usize = 20_000;
    let mut bytes = HEADER.as_bytes().to_vec();
    for i in 0..ROWS {
        // Two problems a row (amount, email), and a short row every 100.
        if i % 100 == 99 {
            bytes.extend_from_slice(format!("B-{i},NOPE-US,x\n").as_bytes());
        } else {
            bytes.extend_from_slice(format!("B-{i},NOPE-US,x,USD,not-an-address,n\n").as_bytes());
        }
    }
    let (code, err, sim, ws) = run_on("many.csv", &bytes).await;
    assert_eq!(code, Some(3), "{}", &err[..err.len().min(2000)]);
    assert!(sim.orders().is_empty());
    let lines = err.lines().count();
    assert!(
        lines < 300,
        "{lines} lines:\n{}",
        &err[..err.len().min(4000)]
    );
    assert!(
        err.contains("error: line 2, column 3 (face_value)"),
        "{err}"
    );
    assert!(err.contains("more problem(s) not shown"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.trim_start().starts_with("face_value") && l.ends_with(" 19800")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} problem(s) in many.csv", 19_800 * 2 + 200)),
        "{err}"
    );
    sim.shutdown().await;

    let key = ws.key_file();
    let out = paybatch_in(
        ws.dir.path(),
        &[
            "validate",
            "many.csv",
            "--api-key-file",
            key.to_str().expect("utf-8 path"),
            "--ledger",
            "v.db",
        ],
        &[],
    )
    .await;
    let err = stderr_of(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        &err[..err.len().min(2000)]
    );
    let lines = err.lines().count() + stdout_of(&out).lines().count();
    assert!(
        lines < 300,
        "{lines} lines:\n{}",
        &err[..err.len().min(4000)]
    );
    assert!(err.contains("more problem(s) not shown"), "{err}");
}
