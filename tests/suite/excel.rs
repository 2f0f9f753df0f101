//! Excel both ways: amounts written with a decimal comma (read where the delimiter is `;` or a
//! tab, or with `--decimal-comma`, and written back with it), workbooks read (`.xlsx`, a sheet
//! of the rows) and written (`--out FILE.xlsx`). Through the real binary, on the embedded
//! simulator and a real ledger in a temporary directory.

use std::path::Path;
use std::process::Output;

use calamine::{Data, Reader, Xlsx, open_workbook};
use rust_xlsxwriter::{Formula, Workbook};

use crate::support::*;
use crate::support::{paybatch_in as paybatch, stdout_of as stdout};

const HEADER: [&str; 6] = [
    "reference",
    "product_code",
    "face_value",
    "currency",
    "email",
    "note",
];

/// The rows of the tests: amounts with two decimals, one of them whole, a note that looks
/// like a formula.
const ROWS: [[&str; 6]; 3] = [
    ["XL-1", "AMZ-DE", "10.99", "EUR", "a@example.com", "=1+1"],
    ["XL-2", "AMZ-DE", "25", "EUR", "b@example.com", "plain"],
    ["XL-3", "AMZ-US", "7.5", "USD", "c@example.com", "@home"],
];

/// `paybatch ARGS --ledger ledger.db` in the workspace (the embedded simulator's environment).
async fn pb(ws: &Workspace, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--ledger", "ledger.db"]);
    paybatch(ws.dir.path(), &all, &[]).await
}

/// The rows as a `delimiter`-separated file, each amount's `.` written as `mark`.
fn text_file(delimiter: char, mark: char) -> String {
    let mut text = HEADER.join(&delimiter.to_string());
    text.push('\n');
    for row in ROWS {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 2 {
                    c.replace('.', &mark.to_string())
                } else {
                    c.to_string()
                }
            })
            .collect();
        text.push_str(&cells.join(&delimiter.to_string()));
        text.push('\n');
    }
    text
}

/// The rows as a workbook: amounts as number cells, everything else as text.
fn workbook(path: &Path, amount_cell: impl Fn(usize) -> Option<&'static str>) {
    let mut book = Workbook::new();
    let sheet = book.add_worksheet();
    sheet.set_name("Nov payouts").expect("a name");
    for (c, h) in HEADER.iter().enumerate() {
        sheet.write_string(0, c as u16, *h).expect("header");
    }
    for (r, row) in ROWS.iter().enumerate() {
        let line = r as u32 + 1;
        for (c, cell) in row.iter().enumerate() {
            if c == 2 {
                match amount_cell(r) {
                    Some(formula) => {
                        sheet
                            .write_formula(line, 2, Formula::new(formula).set_result(*cell))
                            .expect("formula");
                    }
                    None => {
                        sheet
                            .write_number(line, 2, cell.parse::<f64>().expect("a number"))
                            .expect("number");
                    }
                }
            } else {
                sheet.write_string(line, c as u16, *cell).expect("text");
            }
        }
    }
    book.save(path).expect("saved");
}

/// The digest `validate` prints for FILE, as batch `nov`.
async fn digest(ws: &Workspace, file: &str) -> String {
    let out = pb(ws, &["validate", file, "--batch", "nov"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    stdout(&out)
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap_or_else(|| panic!("a digest in {}", stdout(&out)))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_commas_are_read_where_they_are_the_mark_and_the_digest_is_the_same() {
    let ws = Workspace::new();
    ws.write("dots.csv", &text_file(',', '.'));
    ws.write("commas.csv", &text_file(';', ','));
    ws.write("tabs.csv", &text_file('\t', ','));
    // A comma-separated file with quoted decimal commas, with the flag.
    let quoted = text_file(',', '#')
        .replace("10#99", "\"10,99\"")
        .replace("7#5", "\"7,5\"");
    ws.write("flagged.csv", &quoted);
    let dots = digest(&ws, "dots.csv").await;
    assert_eq!(
        digest(&ws, "commas.csv").await,
        dots,
        "`;` and decimal commas"
    );
    assert_eq!(
        digest(&ws, "tabs.csv").await,
        dots,
        "tabs and decimal commas"
    );
    let out = pb(
        &ws,
        &[
            "validate",
            "flagged.csv",
            "--batch",
            "nov",
            "--decimal-comma",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(stdout(&out).contains(&dots), "{}", stdout(&out));
    // The command it suggests pays the same plan: it reads the amounts the same way.
    assert!(
        stdout(&out)
            .contains("paybatch run flagged.csv --batch nov --ledger ledger.db --decimal-comma"),
        "{}",
        stdout(&out)
    );
    // Without the flag a comma-separated file's decimal comma is refused as before.
    let out = pb(&ws, &["validate", "flagged.csv", "--batch", "nov"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("uses a comma as the decimal separator"),
        "{}",
        output_of(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousands_separator_with_a_decimal_comma_is_refused_naming_the_cell() {
    let ws = Workspace::new();
    let text = text_file(';', ',').replace("25;EUR", "1.234,50;EUR");
    ws.write("nov.csv", &text);
    let out = pb(&ws, &["validate", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let all = output_of(&out);
    assert!(
        all.contains("line 3, column 3 (face_value): `1.234,50` contains a thousands separator"),
        "{all}"
    );
    assert!(all.contains("write `1234,50`"), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amounts_added_to_the_result_file_take_the_input_decimal_comma() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(';', ','));
    let out = pb(&ws, &["run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let result = std::fs::read_to_string(ws.path("nov.SIMULATED.result.csv")).expect("result");
    let rows: Vec<Vec<&str>> = result.lines().map(|l| l.split(';').collect()).collect();
    let price = rows[0].iter().position(|h| *h == "price").expect("price");
    let debited = rows[0]
        .iter()
        .position(|h| *h == "debited_amount")
        .expect("debited_amount");
    let all = rows[0]
        .iter()
        .position(|h| *h == "charged_all_attempts")
        .expect("charged_all_attempts");
    for row in &rows[1..] {
        for i in [price, debited, all] {
            assert!(
                row[i].contains(',') && !row[i].contains('.'),
                "{} is `{}` in {row:?}",
                rows[0][i],
                row[i]
            );
        }
    }
    // `report` writes the same with the same layout, and `csv` with dots.
    let out = pb(&ws, &["report", "--batch", "nov", "--out", "again.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(
        std::fs::read_to_string(ws.path("again.csv")).expect("again"),
        result
    );
    let out = pb(
        &ws,
        &[
            "report",
            "--batch",
            "nov",
            "--out",
            "dots.csv",
            "--out-format",
            "csv",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let dots = read_csv(&ws.path("dots.csv"));
    assert!(dots[1][col(&dots[0], "price")].contains('.'), "{dots:?}");
    // The journals in the input's layout (`--out-format same`) take its decimal comma too.
    for (name, format, amount) in [
        ("plain.csv", "plain", "debit_amount"),
        ("entries.csv", "double-entry", "debit"),
    ] {
        let out = pb(
            &ws,
            &[
                "report",
                "--since",
                "2000-01-01",
                "--journal",
                name,
                "--journal-format",
                format,
                "--out-format",
                "same",
            ],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
        let text = std::fs::read_to_string(ws.path(name)).expect("journal");
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.trim_start_matches('\u{feff}').split(';').collect())
            .collect();
        let at = lines[0].iter().position(|h| *h == amount).expect(amount);
        let amounts: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l[at])
            .filter(|a| !a.is_empty())
            .collect();
        assert!(!amounts.is_empty(), "{text}");
        assert!(
            amounts.iter().all(|a| a.contains(',') && !a.contains('.')),
            "{format}: {amounts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workbook_is_read_as_its_rows_and_has_the_digest_of_the_same_rows_in_csv() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(',', '.'));
    workbook(&ws.path("nov.xlsx"), |_| None);
    assert_eq!(digest(&ws, "nov.xlsx").await, digest(&ws, "nov.csv").await);
    // A sheet that is not there is named with those that are.
    let out = pb(&ws, &["validate", "nov.xlsx", "--sheet", "Dec"]).await;
    assert_ne!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("`Nov payouts`"),
        "{}",
        output_of(&out)
    );
    // The command `validate` suggests reads the same sheet.
    let out = pb(&ws, &["validate", "nov.xlsx", "--sheet", "Nov payouts"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert!(
        stdout(&out).contains("--sheet 'Nov payouts'"),
        "{}",
        stdout(&out)
    );
    // And paid: the rows are the workbook's.
    let out = pb(&ws, &["run", "nov.xlsx", "--sheet", "Nov payouts"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amount_that_is_a_formula_or_has_too_many_decimals_is_refused_with_its_cell() {
    let ws = Workspace::new();
    workbook(&ws.path("nov.xlsx"), |r| (r == 1).then_some("=20+5"));
    let out = pb(&ws, &["validate", "nov.xlsx"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let all = output_of(&out);
    assert!(
        all.contains("'Nov payouts'!C3") && all.contains("formula"),
        "{all}"
    );
    // A date in an amount cell.
    let mut book = Workbook::new();
    let sheet = book.add_worksheet();
    for (c, h) in HEADER.iter().enumerate() {
        sheet.write_string(0, c as u16, *h).expect("header");
    }
    for (c, cell) in ["XL-8", "AMZ-DE"].iter().enumerate() {
        sheet.write_string(1, c as u16, *cell).expect("text");
    }
    let date = rust_xlsxwriter::ExcelDateTime::from_ymd(2026, 11, 10).expect("a date");
    let shown = rust_xlsxwriter::Format::new().set_num_format("yyyy-mm-dd");
    sheet
        .write_datetime_with_format(1, 2, &date, &shown)
        .expect("date");
    sheet.write_string(1, 3, "EUR").expect("text");
    book.save(ws.path("date.xlsx")).expect("saved");
    let out = pb(&ws, &["validate", "date.xlsx"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let all = output_of(&out);
    assert!(
        all.contains("Sheet1!C2 (face_value): the amount is a date"),
        "{all}"
    );
    // A number cell of more decimals than the currency has.
    let mut book = Workbook::new();
    let sheet = book.add_worksheet();
    for (c, h) in HEADER.iter().enumerate() {
        sheet.write_string(0, c as u16, *h).expect("header");
    }
    for (c, cell) in ["XL-9", "AMZ-DE"].iter().enumerate() {
        sheet.write_string(1, c as u16, *cell).expect("text");
    }
    sheet.write_number(1, 2, 10.125).expect("number");
    sheet.write_string(1, 3, "EUR").expect("text");
    book.save(ws.path("long.xlsx")).expect("saved");
    let out = pb(&ws, &["validate", "long.xlsx"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let all = output_of(&out);
    assert!(
        all.contains("Sheet1!C2 (face_value): `10.125` has more decimal places than EUR allows"),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_xlsx_writes_a_private_workbook_of_numbers_and_text_never_formulas() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(',', '.'));
    let out = pb(&ws, &["run", "nov.csv", "--out", "nov.xlsx"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let path = ws.path("nov.xlsx");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut book: Xlsx<_> = open_workbook(&path).expect("a workbook");
    let name = book.sheet_names()[0].clone();
    let range = book.worksheet_range(&name).expect("the sheet");
    let rows: Vec<Vec<Data>> = range.rows().map(|r| r.to_vec()).collect();
    let header: Vec<String> = rows[0].iter().map(|c| c.to_string()).collect();
    assert_eq!(rows.len(), 1 + ROWS.len());
    let price = col(&header, "price");
    let note = col(&header, "note");
    assert!(
        matches!(rows[1][price], Data::Float(_)),
        "{:?}",
        rows[1][price]
    );
    assert_eq!(rows[1][note], Data::String("=1+1".into()));
    assert_eq!(rows[3][note], Data::String("@home".into()));
    let formulas = book.worksheet_formula(&name).expect("formulas");
    assert!(
        formulas.used_cells().all(|(_, _, f)| f.is_empty()),
        "no cell is a formula"
    );
    // The header row is frozen.
    let mut zip =
        zip::ZipArchive::new(std::fs::File::open(&path).expect("the workbook")).expect("a zip");
    let mut xml = String::new();
    std::io::Read::read_to_string(
        &mut zip.by_name("xl/worksheets/sheet1.xml").expect("the sheet"),
        &mut xml,
    )
    .expect("read");
    assert!(
        xml.contains("ySplit=\"1\"") && xml.contains("state=\"frozen\""),
        "{xml}"
    );
    // `report --out FILE.xlsx` writes the batch's workbook again.
    let out = pb(&ws, &["report", "--batch", "nov", "--out", "again.xlsx"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(sheet_rows(&ws.path("again.xlsx")), rows);
}

/// The cells of the first sheet of the workbook at `path`, header first.
fn sheet_rows(path: &Path) -> Vec<Vec<Data>> {
    let mut book: Xlsx<_> = open_workbook(path).expect("a workbook");
    let name = book.sheet_names()[0].clone();
    let range = book.worksheet_range(&name).expect("the sheet");
    range.rows().map(|r| r.to_vec()).collect()
}

/// The index of the column `name` in a sheet's header row.
fn sheet_col(header: &[Data], name: &str) -> usize {
    header
        .iter()
        .position(|h| matches!(h, Data::String(s) if s == name))
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_list_takes_the_decimal_comma_and_writes_a_workbook() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(';', ','));
    let out = pb(&ws, &["run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let list = [
        "payouts",
        "--batch",
        "nov",
        "--no-read",
        "--list",
        "ACTIVE,CLAIMED",
    ];
    let mut args = list.to_vec();
    args.extend(["--out", "links.csv"]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let text = std::fs::read_to_string(ws.path("links.csv")).expect("the list");
    assert!(text.contains("10,99"), "{text}");
    assert!(!text.contains("10.99"), "{text}");
    let mut args = list.to_vec();
    args.extend(["--out", "links.xlsx"]);
    let out = pb(&ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let rows = sheet_rows(&ws.path("links.xlsx"));
    assert_eq!(rows.len(), 1 + ROWS.len(), "{rows:?}");
    let face_value = sheet_col(&rows[0], "face_value");
    let reference = sheet_col(&rows[0], "reference");
    let first = rows
        .iter()
        .find(|r| r[reference] == Data::String("XL-1".into()))
        .expect("XL-1");
    assert_eq!(first[face_value], Data::Float(10.99));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_is_written_as_a_workbook_with_its_amounts_as_numbers() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(',', '.'));
    let out = pb(&ws, &["run", "nov.csv"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let out = pb(
        &ws,
        &[
            "report",
            "--since",
            "2000-01-01",
            "--until",
            "2100-12-31",
            "--journal",
            "books.xlsx",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let path = ws.path("books.xlsx");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let rows = sheet_rows(&path);
    let amount = sheet_col(&rows[0], "debit_amount");
    // Three payments and a total per balance currency (EUR, USD).
    assert_eq!(rows.len(), 1 + 3 + 2, "{rows:?}");
    assert!(
        rows[1..]
            .iter()
            .all(|r| matches!(r[amount], Data::Float(_))),
        "{rows:?}"
    );
}

/// The rows as an OpenDocument spreadsheet (`.ods`) of one sheet `Rows`: amounts as float
/// cells, the rest as strings; the amount of `formula_row` (0-based) a formula.
fn ods(path: &Path, formula_row: Option<usize>) {
    use std::io::Write as _;
    let cell = |text: &str| {
        format!(
            "<table:table-cell office:value-type=\"string\"><text:p>{text}</text:p></table:table-cell>"
        )
    };
    let mut rows = String::from("<table:table-row>");
    for h in HEADER {
        rows.push_str(&cell(h));
    }
    rows.push_str("</table:table-row>");
    for (r, row) in ROWS.iter().enumerate() {
        rows.push_str("<table:table-row>");
        for (c, text) in row.iter().enumerate() {
            if c == 2 {
                let formula = if formula_row == Some(r) {
                    " table:formula=\"of:=20+5\""
                } else {
                    ""
                };
                rows.push_str(&format!(
                    "<table:table-cell{formula} office:value-type=\"float\" office:value=\"{text}\"><text:p>{text}</text:p></table:table-cell>"
                ));
            } else {
                rows.push_str(&cell(&text.replace('@', "&#64;")));
            }
        }
        rows.push_str("</table:table-row>");
    }
    let content = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <office:document-content xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" \
         xmlns:table=\"urn:oasis:names:tc:opendocument:xmlns:table:1.0\" \
         xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" office:version=\"1.2\">\
         <office:body><office:spreadsheet><table:table table:name=\"Rows\">{rows}</table:table>\
         </office:spreadsheet></office:body></office:document-content>"
    );
    let manifest = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
        <manifest:manifest xmlns:manifest=\"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0\" manifest:version=\"1.2\">\
        <manifest:file-entry manifest:full-path=\"/\" manifest:media-type=\"application/vnd.oasis.opendocument.spreadsheet\"/>\
        <manifest:file-entry manifest:full-path=\"content.xml\" manifest:media-type=\"text/xml\"/>\
        </manifest:manifest>";
    let file = std::fs::File::create(path).expect("a file");
    let mut zip = zip::ZipWriter::new(file);
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in [
        ("mimetype", "application/vnd.oasis.opendocument.spreadsheet"),
        ("META-INF/manifest.xml", manifest),
        ("content.xml", content.as_str()),
    ] {
        zip.start_file(name, stored).expect("an entry");
        zip.write_all(data.as_bytes()).expect("written");
    }
    zip.finish().expect("finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ods_sheet_is_read_as_its_rows_and_a_formula_amount_is_refused() {
    let ws = Workspace::new();
    ws.write("nov.csv", &text_file(',', '.'));
    ods(&ws.path("nov.ods"), None);
    assert_eq!(digest(&ws, "nov.ods").await, digest(&ws, "nov.csv").await);
    ods(&ws.path("formula.ods"), Some(2));
    let out = pb(&ws, &["validate", "formula.ods"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    let all = output_of(&out);
    assert!(
        all.contains("Rows!C4 (face_value)") && all.contains("formula"),
        "{all}"
    );
}
