//! No bytes make the reader or the validator panic.

mod common;

use paybatch::batch::input::{BatchReader, InputOptions};
use paybatch::batch::validate::{ValidateOptions, Validator, content_hash, parse_record};
use proptest::prelude::*;

/// Reads, parses and checks every record; returns how many rows were accepted.
fn run(data: Vec<u8>, delimiter: Option<u8>) -> usize {
    let catalog = common::catalog();
    let opts = ValidateOptions {
        allow_duplicates: false,
        default_payment_currency: Some("EUR".into()),
    };
    let mut validator = Validator::new(&catalog, opts.clone());
    let Ok(mut reader) = BatchReader::from_bytes(data, &InputOptions { delimiter }) else {
        return 0;
    };
    let headers = reader.headers().to_vec();
    let columns = reader.columns().clone();
    let mut accepted = 0;
    while let Some(rec) = reader.next_record() {
        let Ok(rec) = rec else { continue };
        assert_eq!(rec.fields.len(), headers.len());
        if let Ok(row) = parse_record(&columns, &headers, &rec, &opts) {
            let _ = content_hash(&row);
            let problems = validator.check(&row);
            for p in &problems {
                assert_eq!(p.line, rec.line);
                assert!(p.column.is_some_and(|c| c >= 1 && c <= headers.len()));
                let _ = p.to_string();
            }
            if problems.is_empty() {
                accepted += 1;
            }
        }
    }
    accepted
}

/// CSV-shaped text: a header naming known columns, rows of cells drawn from the characters that
/// matter to the parser and the rules.
fn csv_like() -> impl Strategy<Value = Vec<u8>> {
    let header = prop::sample::subsequence(
        vec![
            "reference",
            "Product",
            "amount",
            "currency",
            "email",
            "delivery",
            "payment_currency",
            "country",
            "card_id",
            "note",
        ],
        3..=10,
    );
    let cell = prop_oneof![
        Just("AMZ-US".to_string()),
        Just("STEAM-US|AMZ-US".to_string()),
        Just("UBER-JP".to_string()),
        Just("USD".to_string()),
        Just("JPY".to_string()),
        Just("a@example.com".to_string()),
        Just("link".to_string()),
        Just("US".to_string()),
        "[0-9]{1,5}(\\.[0-9]{1,3})?",
        "[ -~]{0,12}",
        "\\PC{0,6}",
        "[\",;\t\r\n|=@+-]{0,4}",
    ];
    let delim = prop::sample::select(vec![",", ";", "\t"]);
    (
        header,
        prop::collection::vec(prop::collection::vec(cell, 0..11), 0..8),
        delim,
    )
        .prop_map(|(header, rows, d)| {
            let mut out = header.join(d);
            out.push('\n');
            for (n, row) in rows.iter().enumerate() {
                let cells: Vec<String> = row
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        if (n + k) % 3 == 0 {
                            format!("\"{}\"", c.replace('"', "\"\""))
                        } else {
                            c.clone()
                        }
                    })
                    .collect();
                out.push_str(&cells.join(d));
                out.push_str(if n % 2 == 0 { "\n" } else { "\r\n" });
            }
            out.into_bytes()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..2048), d in prop::option::of(any::<u8>())) {
        run(data, d);
    }

    #[test]
    fn csv_shaped_input_never_panics(data in csv_like()) {
        run(data, None);
    }
}

#[test]
fn a_valid_row_is_accepted_by_the_same_pipeline() {
    let data =
        b"reference,product_code,face_value,currency,email\nR1,AMZ-US,10,USD,a@example.com\n";
    assert_eq!(run(data.to_vec(), None), 1);
}
