//! Generates a large, valid batch for the simulator's catalog, for benchmarks:
//!
//!     cargo run --release --example gen_batch -- 1000000 > big.csv
//!     cargo run --release --example gen_batch -- 100000 --xlsx big.xlsx
//!
//! Rows cycle through products of four balance currencies, half by email (unique addresses, so
//! no row looks like a duplicate) and half by payout link. Deterministic: same count, same file.
//! With `--xlsx PATH` the same rows are written as a workbook of one sheet: the amounts as number
//! cells, every other cell as text, as a spreadsheet that made them would hold them.

use std::io::{BufWriter, Write};
use std::path::Path;

use rust_xlsxwriter::Workbook;

/// The header of the rows.
const HEADER: [&str; 6] = [
    "reference",
    "product_code",
    "face_value",
    "currency",
    "email",
    "department",
];

const PRODUCTS: &[(&str, &str, &[&str])] = &[
    ("AMZ-US", "USD", &["5.00", "10.00", "25.50", "100"]),
    ("STEAM-US", "USD", &["5", "10", "20", "50"]),
    ("AMZ-DE", "EUR", &["5", "15.00", "50"]),
    ("TESCO-GB", "GBP", &["10", "20", "25"]),
    ("PAYPAL-CA", "CAD", &["5", "12.34", "100"]),
    ("VISA-PREPAID-US", "USD", &["10", "99.99", "250"]),
];

/// Row `i`: its six cells, in the order of [`HEADER`].
fn row(i: u64) -> [String; 6] {
    let (code, currency, values) = PRODUCTS[(i % PRODUCTS.len() as u64) as usize];
    let value = values[((i / 7) % values.len() as u64) as usize];
    let email = if i.is_multiple_of(2) {
        format!("employee{i}@example.com")
    } else {
        String::new()
    };
    let department = ["Engineering", "Sales", "Operations", "Finance"][(i % 4) as usize];
    [
        format!("EMP-{i:08}-2026-11"),
        code.to_string(),
        value.to_string(),
        currency.to_string(),
        email,
        department.to_string(),
    ]
}

fn csv(count: u64, out: impl Write) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, out);
    writeln!(out, "{}", HEADER.join(","))?;
    for i in 0..count {
        writeln!(out, "{}", row(i).join(","))?;
    }
    out.flush()
}

/// The rows as a workbook at `path`, written in constant memory.
fn xlsx(count: u64, path: &Path) -> Result<(), rust_xlsxwriter::XlsxError> {
    let mut book = Workbook::new();
    let sheet = book.add_worksheet_with_constant_memory()?;
    for (c, h) in HEADER.iter().enumerate() {
        sheet.write_string(0, c as u16, *h)?;
    }
    for i in 0..count {
        let r =
            u32::try_from(i + 1).map_err(|_| rust_xlsxwriter::XlsxError::RowColumnLimitError)?;
        for (c, cell) in row(i).iter().enumerate() {
            if c == 2 {
                let amount: f64 = cell.parse().unwrap_or_default();
                sheet.write_number(r, 2, amount)?;
            } else if !cell.is_empty() {
                sheet.write_string(r, c as u16, cell)?;
            }
        }
    }
    book.save(path)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let count: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    match args.iter().position(|a| a == "--xlsx") {
        Some(at) => {
            let path = args.get(at + 1).ok_or("--xlsx needs a path")?;
            xlsx(count, Path::new(path))?;
        }
        None => csv(count, std::io::stdout().lock())?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use paybatch::input::reader::{BatchReader, InputOptions};
    use rust_decimal::Decimal;

    /// The records of `path` as paybatch reads them: reference and amount.
    fn read(path: &Path) -> Vec<(String, Decimal)> {
        let reader = BatchReader::open(path, &InputOptions::default()).expect("readable");
        reader
            .map(|r| {
                let r = r.expect("a valid record");
                (r.fields[0].clone(), r.fields[2].parse().expect("an amount"))
            })
            .collect()
    }

    #[test]
    fn the_workbook_holds_the_rows_of_the_csv() {
        let dir = tempfile::tempdir().expect("a directory");
        let book = dir.path().join("rows.xlsx");
        let text = dir.path().join("rows.csv");
        xlsx(50, &book).expect("a workbook");
        csv(50, std::fs::File::create(&text).expect("a file")).expect("written");
        let (from_book, from_text) = (read(&book), read(&text));
        assert_eq!(from_book.len(), 50);
        assert_eq!(from_book, from_text);
    }
}
