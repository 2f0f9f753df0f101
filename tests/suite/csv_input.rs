//! The sample batch files, read and validated against a catalog like the simulator's.

use std::path::{Path, PathBuf};

use paybatch::api::DistributionType;
use paybatch::input::reader::{BatchReader, InputOptions};
use paybatch::input::rules::{
    Problem, RowSpec, ValidateOptions, Validator, content_hash, parse_record,
};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name)
}

/// Reads and validates a file the way a batch run does: every row, every problem.
fn validate(path: &Path) -> (Vec<RowSpec>, Vec<Problem>) {
    let catalog = crate::support::catalog();
    let opts = ValidateOptions::default();
    let mut validator = Validator::new(&catalog, opts.clone());
    let mut reader = match BatchReader::open(path, &InputOptions::default()) {
        Ok(r) => r,
        Err(p) => panic!("{}: {p}", path.display()),
    };
    let headers = reader.headers().to_vec();
    let columns = reader.columns().clone();
    let (mut rows, mut problems) = (Vec::new(), Vec::new());
    while let Some(rec) = reader.next_record() {
        let rec = match rec {
            Ok(r) => r,
            Err(p) => {
                problems.push(p);
                continue;
            }
        };
        match parse_record(&columns, &headers, &rec, &opts) {
            Ok(row) => {
                let found = validator.check(&row);
                if found.is_empty() {
                    rows.push(row);
                }
                problems.extend(found);
            }
            Err(found) => problems.extend(found),
        }
    }
    (rows, problems)
}

#[test]
fn the_clean_sample_has_no_problems() {
    let (rows, problems) = validate(&sample("recipients.csv"));
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "{}", shown.join("\n"));
    assert_eq!(rows.len(), 12);

    let choice = &rows[9];
    assert_eq!(choice.reference, "EMP-1051-2026-11");
    assert_eq!(choice.product_codes, ["AMZ-US", "STEAM-US"]);
    assert_eq!(choice.fields[8], "Research, Data");

    let yen = &rows[8];
    assert_eq!(
        (yen.currency.as_str(), yen.payment_currency.as_str()),
        ("JPY", "USD")
    );
    assert_eq!(yen.distribution, DistributionType::PayoutLink);

    // Defaults: an empty distribution with an email is EMAIL; payment in the product currency.
    let last = &rows[11];
    assert_eq!(last.distribution, DistributionType::Email);
    assert_eq!(last.payment_currency, "EUR");
    assert_eq!(rows[0].face_value.to_string(), "50.00");

    for currency in ["USD", "EUR", "GBP", "CAD", "JPY"] {
        assert!(rows.iter().any(|r| r.currency == currency), "{currency}");
    }
    let mut hashes: Vec<String> = rows.iter().map(content_hash).collect();
    hashes.sort();
    hashes.dedup();
    assert_eq!(hashes.len(), rows.len());
}

#[test]
fn the_mistakes_sample_reports_each_mistake_where_it_is() {
    let (rows, problems) = validate(&sample("recipients-with-mistakes.csv"));
    // (line, column, column name, words the message must hold)
    let expected: [(u64, usize, &str, &[&str]); 8] = [
        (2, 2, "product_code", &["`AMZ-UK`", "not in the catalog"]),
        (3, 3, "face_value", &["`750`", "5 to 500 EUR"]),
        (
            4,
            3,
            "face_value",
            &["`10.001`", "more decimal places than USD allows (2)"],
        ),
        (
            5,
            6,
            "email",
            &["`sam.rivera@example`", "not a valid email"],
        ),
        (7, 1, "reference", &["`EMP-2005-2026-11`", "line 6"]),
        (8, 4, "currency", &["`EUR`", "NETFLIX-GB (GBP)"]),
        (9, 2, "product_code", &["`RETIRED-US`", "cannot be ordered"]),
        (10, 8, "country", &["`ES`", "ZALANDO-FR", "FR, DE"]),
    ];
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let shown = shown.join("\n");
    for (line, column, name, words) in expected {
        let found = problems
            .iter()
            .find(|p| p.line == line && p.column == Some(column));
        let Some(p) = found else {
            panic!("no problem at line {line}, column {column}:\n{shown}");
        };
        assert_eq!(p.column_name.as_deref(), Some(name), "{p}");
        for w in words {
            assert!(p.message.contains(w), "`{w}` missing from: {p}");
        }
        assert!(p.value.is_some(), "{p}");
        assert!(p.help.is_some(), "{p}");
        let text = p.to_string();
        assert!(
            text.starts_with(&format!("line {line}, column {column} ({name}): ")),
            "{text}"
        );
        assert!(text.contains("\n  help: "), "{text}");
    }
    assert_eq!(problems.len(), 8, "{shown}");
    let good: Vec<u64> = rows.iter().map(|r| r.line).collect();
    assert_eq!(good, [6, 11, 12]);
}

#[test]
fn the_samples_read_the_same_with_semicolons_and_crlf() {
    let text = std::fs::read_to_string(sample("recipients.csv")).unwrap();
    // Re-delimit with `;` (the sample's only quoted field holds a comma, not a semicolon).
    let converted: String = text
        .lines()
        .map(|l| {
            let mut out = String::new();
            let mut quoted = false;
            for c in l.chars() {
                match c {
                    '"' => {
                        quoted = !quoted;
                        out.push(c);
                    }
                    ',' if !quoted => out.push(';'),
                    other => out.push(other),
                }
            }
            out + "\r\n"
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("semicolons.csv");
    let mut bytes = vec![0xEF, 0xBB, 0xBF];
    bytes.extend_from_slice(converted.as_bytes());
    std::fs::write(&path, bytes).unwrap();
    let (rows, problems) = validate(&path);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(rows.len(), 12);
    assert_eq!(rows[11].line, 13);
    assert_eq!(rows[9].fields[8], "Research, Data");
}
