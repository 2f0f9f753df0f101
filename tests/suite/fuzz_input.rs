//! No bytes make the reader or the validator panic.

use paybatch::input::reader::{BatchReader, InputOptions};
use paybatch::input::rules::{ValidateOptions, Validator, content_hash, parse_record};
use proptest::prelude::*;

/// Reads, parses and checks every record; returns how many rows were accepted.
fn run(data: Vec<u8>, delimiter: Option<u8>) -> usize {
    let catalog = crate::support::catalog();
    let opts = ValidateOptions {
        allow_duplicates: false,
        default_payment_currency: Some("EUR".into()),
        decimal_comma: false,
    };
    let mut validator = Validator::new(&catalog, opts.clone());
    let Ok(mut reader) = BatchReader::from_bytes(
        data,
        &InputOptions {
            delimiter,
            sheet: None,
        },
    ) else {
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

/// A cell for the column `name`: mostly values the rules care about, some noise.
fn cell_for(name: &str) -> BoxedStrategy<String> {
    let pick = |values: &[&'static str]| {
        prop::sample::select(values.to_vec())
            .prop_map(str::to_string)
            .boxed()
    };
    let good = match name {
        "reference" => "[A-Z]{3}-[0-9]{1,3}".boxed(),
        "Product" => pick(&[
            "AMZ-US",
            "STEAM-US",
            "AMZ-US|STEAM-US",
            "UBER-JP",
            "SPOTIFY-US",
            "AMZ-DE",
            "RETIRED-US",
            "AMZ-UK",
            "AMZ-US|AMZ-DE",
        ]),
        "amount" => prop_oneof![
            "[1-9][0-9]{0,3}(\\.[0-9]{1,3})?",
            pick(&["10.99", "3000", "20", "1,000", "-5", "1e3"]),
        ]
        .boxed(),
        "currency" => pick(&["USD", "USD", "EUR", "JPY", "usd"]),
        "email" => pick(&[
            "a@example.com",
            "b@example.org",
            "",
            "bad",
            "=x@example.com",
        ]),
        "delivery" => pick(&["", "EMAIL", "link", "fax"]),
        "payment_currency" => pick(&["", "", "USD", "EUR", "JPY"]),
        "country" => pick(&["", "US", "DE", "JP", "us"]),
        "card_id" => pick(&["", "card_1", "a b"]),
        _ => "[ -~]{0,12}".boxed(),
    };
    let noise = prop_oneof!["[ -~]{0,12}", "\\PC{0,6}", "[\",;\t\r\n|=@+-]{0,4}"];
    prop_oneof![6 => good, 1 => noise].boxed()
}

/// CSV-shaped text: a header with the required columns and some others in any order, rows of
/// cells drawn per column (sometimes one short), quoted at random, `\n` or `\r\n`.
fn csv_like() -> impl Strategy<Value = Vec<u8>> {
    let optional = prop::sample::subsequence(
        vec![
            "email",
            "delivery",
            "payment_currency",
            "country",
            "card_id",
            "note",
        ],
        0..=6,
    );
    let header = optional
        .prop_map(|extra| {
            let mut h = vec!["reference", "Product", "amount", "currency"];
            h.extend(extra);
            h
        })
        .prop_shuffle();
    let delim = prop::sample::select(vec![",", ";", "\t"]);
    (header, delim)
        .prop_flat_map(|(header, d)| {
            let row: Vec<BoxedStrategy<String>> = header.iter().map(|c| cell_for(c)).collect();
            let rows = prop::collection::vec((row, any::<u8>()), 0..8);
            (Just(header), rows, Just(d))
        })
        .prop_map(|(header, rows, d)| {
            let mut out = header.join(d);
            out.push('\n');
            for (n, (mut row, dice)) in rows.into_iter().enumerate() {
                if dice % 16 == 0 {
                    row.pop();
                }
                let cells: Vec<String> = row
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        if (usize::from(dice) + k) % 3 == 0
                            || c.contains(['"', '\n', '\r'])
                            || c.contains(d)
                        {
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
