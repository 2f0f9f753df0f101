//! Generates a large, valid batch for the simulator's catalog, for benchmarks:
//!
//!     cargo run --release --example gen_batch -- 1000000 > big.csv
//!
//! Rows cycle through products of four balance currencies, half by email (unique addresses, so
//! no row looks like a duplicate) and half by payout link. Deterministic: same count, same file.

use std::io::{BufWriter, Write};

const PRODUCTS: &[(&str, &str, &[&str])] = &[
    ("AMZ-US", "USD", &["5.00", "10.00", "25.50", "100"]),
    ("STEAM-US", "USD", &["5", "10", "20", "50"]),
    ("AMZ-DE", "EUR", &["5", "15.00", "50"]),
    ("TESCO-GB", "GBP", &["10", "20", "25"]),
    ("PAYPAL-CA", "CAD", &["5", "12.34", "100"]),
    ("VISA-PREPAID-US", "USD", &["10", "99.99", "250"]),
];

fn main() -> std::io::Result<()> {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    writeln!(
        out,
        "reference,product_code,face_value,currency,email,department"
    )?;
    for i in 0..count {
        let (code, currency, values) = PRODUCTS[(i % PRODUCTS.len() as u64) as usize];
        let value = values[((i / 7) % values.len() as u64) as usize];
        let email = if i % 2 == 0 {
            format!("employee{i}@example.com")
        } else {
            String::new()
        };
        let department = ["Engineering", "Sales", "Operations", "Finance"][(i % 4) as usize];
        writeln!(
            out,
            "EMP-{i:08}-2026-11,{code},{value},{currency},{email},{department}"
        )?;
    }
    out.flush()
}
