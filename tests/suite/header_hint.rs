//! A header that lacks a required column names the column found that is most like it.

use paybatch::input::reader::{BatchReader, InputOptions};
use paybatch::input::rules::Problem;

fn header_problem(text: &str) -> Problem {
    match BatchReader::from_bytes(text.as_bytes().to_vec(), &InputOptions::default()) {
        Ok(_) => panic!("the header of {text:?} was accepted"),
        Err(p) => p,
    }
}

#[test]
fn a_misspelt_required_column_is_named_with_its_position() {
    let p =
        header_problem("reference,product,amount,curency,email\nR1,AMZ-US,10,USD,a@b.example\n");
    assert_eq!(
        p.message,
        "the header has no `currency` column; did you mean `curency` (column 4)?"
    );
    assert!(
        p.help
            .as_deref()
            .unwrap_or("")
            .starts_with("rename column 4 to `currency`; "),
        "{p}"
    );
}

#[test]
fn a_required_column_written_with_more_words_is_named() {
    let p = header_problem("ref,product_code,face_value,Currency Code\nR1,AMZ-US,10,USD\n");
    assert_eq!(
        p.message,
        "the header has no `currency` column; did you mean `Currency Code` (column 4)?"
    );
    let p = header_problem("reference number,product_code,face_value,currency\nR1,AMZ-US,10,USD\n");
    assert_eq!(
        p.message,
        "the header has no `reference` column; did you mean `reference number` (column 1)?"
    );
}

#[test]
fn no_column_is_named_when_none_is_close() {
    let p = header_problem("reference,product_code,face_value,notes\nR1,AMZ-US,10,USD\n");
    assert_eq!(p.message, "the header has no `currency` column");
}
