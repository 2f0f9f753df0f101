//! Checking rows against the catalog and against the rows checked before them
//! ([`Validator::check`]): a reference used once, products the catalog has and can pay, no likely
//! duplicate; what the catalog asks of the currency, the face value and the country is in
//! [`super::catalog_rules`].

use std::hash::Hash;

use super::catalog_index::CatalogIndex;
use super::catalog_rules::{check_country, check_currency, check_face_value, product_problem};
use super::problem::{Problem, quoted};
use super::row::{RowSpec, ValidateOptions, problem_at};
use super::seen::Seen;
use crate::api::Product;
use crate::reference::Folded;

/// Unknown product codes for which a close catalog code is looked for: the look-up goes
/// through the whole catalog, and only the first problems of a kind are shown.
const SUGGESTIONS: usize = 200;

/// Checks rows against the catalog and against the rows checked before them.
#[derive(Debug)]
pub struct Validator<'a> {
    catalog: &'a CatalogIndex,
    opts: ValidateOptions,
    references: Seen,
    contents: Seen,
    suggestions_left: usize,
}

impl<'a> Validator<'a> {
    pub fn new(catalog: &'a CatalogIndex, opts: ValidateOptions) -> Self {
        Self::for_rows(catalog, opts, 0)
    }

    /// A validator of a file of about `rows` rows: its tables of the rows before are made that
    /// large at once, not grown (each growth holds the old table and the new at once).
    pub fn for_rows(catalog: &'a CatalogIndex, opts: ValidateOptions, rows: usize) -> Self {
        Validator {
            catalog,
            opts,
            references: Seen::for_values(rows),
            contents: Seen::for_values(rows),
            suggestions_left: SUGGESTIONS,
        }
    }

    /// The line of the first checked row with this reference, in any spelling that folds to it
    /// ([`crate::reference::fold_reference`]).
    pub fn reference_line(&self, reference: &str) -> Option<u64> {
        self.references
            .get_kind(&Folded(reference), &reference)
            .map(|(line, _)| line)
    }

    /// The references of the rows checked, by the line each was first seen on (by its fold,
    /// with whether the first row spelt it alike: [`Seen::get_kind`]).
    pub fn into_references(self) -> Seen {
        self.references
    }

    /// All the problems of `row`; empty when it can be paid. Rows are expected in file order:
    /// a repeated reference or a likely duplicate is reported on the later row.
    pub fn check(&mut self, row: &RowSpec) -> Vec<Problem> {
        let mut problems = Vec::new();
        let repeated_reference = self.check_reference(row, &mut problems);
        let products = self.check_products(row, &mut problems);
        check_currency(row, &products, &mut problems);
        check_face_value(row, &products, &mut problems);
        check_country(row, &products, &mut problems);
        if !repeated_reference {
            self.check_duplicate(row, &mut problems);
        }
        problems.sort_by_key(|p| p.column);
        problems
    }

    /// Reference: unique in the batch, as a person reads it: two references that fold to one
    /// ([`crate::reference::fold_reference`]: case, width, look-alike letters) are one. True
    /// when an earlier row has it.
    fn check_reference(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) -> bool {
        let reference = row.reference.as_str();
        let Some((first, alike)) =
            self.references
                .first_of_kind(&Folded(reference), &reference, row.line)
        else {
            return false;
        };
        let (message, help) = if alike {
            (
                format!(
                    "reference {} is already used on line {first}",
                    quoted(reference)
                ),
                "every row needs its own reference (it is what makes a payout happen once); \
                 if this is a second payout, give it a new reference, e.g. with `-2` added"
                    .to_string(),
            )
        } else {
            (
                format!(
                    "reference {} is already used on line {first}, spelt another way there: \
                     references are one in any case, width and look-alike letters",
                    quoted(reference)
                ),
                format!(
                    "every row needs its own reference (it is what makes a payout happen once), \
                     and `EMP-1`, `emp-1`, full-width `ＥＭＰ-１` and `ЕМР-1` in Cyrillic letters \
                     are one reference; if line {first} and this row are two payouts, give this \
                     one a new reference, e.g. with `-2` added"
                ),
            )
        };
        problems.push(problem_at(
            row,
            row.columns.reference,
            "reference",
            message,
            help,
        ));
        true
    }

    /// Products: known, orderable, live. Returns the products found in the catalog.
    fn check_products(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) -> Vec<&'a Product> {
        let mut products: Vec<&'a Product> = Vec::new();
        for code in &row.product_codes {
            let Some(p) = self.catalog.get(code) else {
                problems.push(self.unknown_product(row, code));
                continue;
            };
            if let Some((message, help)) = product_problem(p) {
                problems.push(
                    problem_at(row, row.columns.product_code, "product_code", message, help)
                        .with_value(code.clone()),
                );
            }
            products.push(p);
        }
        products
    }

    /// A product code the catalog does not have, with a close code while suggestions are left.
    fn unknown_product(&mut self, row: &RowSpec, code: &str) -> Problem {
        let suggestion = if self.suggestions_left > 0 {
            self.suggestions_left -= 1;
            self.catalog.suggest(code)
        } else {
            None
        };
        let help = match suggestion {
            Some(s) => format!("did you mean `{s}`? Codes are case-sensitive"),
            None => "check the code against the catalog (codes are case-sensitive)".into(),
        };
        problem_at(
            row,
            row.columns.product_code,
            "product_code",
            format!("product {} is not in the catalog", quoted(code)),
            help,
        )
        .with_value(code.to_string())
    }

    /// Likely duplicate: same recipient, products and amount as an earlier row.
    fn check_duplicate(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) {
        let Some(email) = &row.email else {
            return;
        };
        let first = self
            .contents
            .first_or_insert(&ContentKey::of(email, row), row.line);
        let Some(first) = first.filter(|_| !self.opts.allow_duplicates) else {
            return;
        };
        let cols = &row.columns;
        problems.push(problem_at(
            row,
            cols.email.unwrap_or(cols.reference),
            if cols.email.is_some() {
                "email"
            } else {
                "reference"
            },
            format!(
                "same recipient, products and face value as line {first}: a likely \
                 duplicate of that row"
            ),
            "remove one of the two rows; if both payouts are intended, allow \
             duplicates (`--allow-duplicates`)"
                .into(),
        ));
    }
}

/// What makes two rows likely duplicates: the recipient's address in any case, the products in
/// any order and the face value at any scale, written once as bytes that two rows share exactly
/// when they are alike ([`ContentKey::of`]); the table of rows seen hashes them twice (its key
/// and its tag) without writing them again.
#[derive(Hash)]
struct ContentKey(Vec<u8>);

impl ContentKey {
    fn of(email: &str, row: &RowSpec) -> Self {
        let mut bytes = Vec::with_capacity(email.len() + 40);
        // The address in lower case, then a byte no UTF-8 text holds (the address ends here).
        if email.is_ascii() {
            bytes.extend(email.bytes().map(|b| b.to_ascii_lowercase()));
        } else {
            let mut utf8 = [0u8; 4];
            for c in email.chars().flat_map(char::to_lowercase) {
                bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        bytes.push(0xFF);
        // The codes in order, each with its length: none can imitate a boundary.
        let mut put = |code: &str| {
            bytes.extend_from_slice(&(code.len() as u64).to_le_bytes());
            bytes.extend_from_slice(code.as_bytes());
        };
        if let [code] = row.product_codes.as_slice() {
            put(code);
        } else {
            let mut codes: Vec<&str> = row.product_codes.iter().map(String::as_str).collect();
            codes.sort_unstable();
            codes.into_iter().for_each(put);
        }
        // The face value without its trailing zeros: one encoding a value.
        bytes.extend_from_slice(&row.face_value.normalize().serialize());
        ContentKey(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::fixtures::*;

    /// Two addresses equal in lower case are one recipient, whatever their length, their case
    /// and their characters (`K`, the Kelvin sign, is `k` in lower case); others are not.
    #[test]
    fn likely_duplicates_compare_addresses_in_lower_case() {
        let cat = catalog();
        let long = format!("Ann@{}com", "Abcdefghij.".repeat(8));
        let pairs = [
            ("a@example.com", "A@EXAMPLE.COM", true),
            // Addresses are ASCII (`api::rules`): case is all there is to fold.
            ("Kim@Example.com", "kim@example.com", true),
            (long.as_str(), &long.to_uppercase(), true),
            (long.as_str(), &format!("{long}x"), false),
            ("a@example.com", "b@example.com", false),
            ("ab@example.com", "a@bexample.com", false),
        ];
        for (first, second, same) in pairs {
            let mut v = Validator::new(&cat, ValidateOptions::default());
            let cells = |r, e| [r, "AMZ-US", "10", "USD", "", e, "", ""];
            assert!(check(&mut v, 2, cells("R1", first)).is_empty(), "{first}");
            let found = check(&mut v, 3, cells("R2", second));
            assert_eq!(
                found.len(),
                usize::from(same),
                "{first} / {second}: {found:?}"
            );
        }
    }

    /// Two rows are alike when their addresses are equal in lower case, their codes in any
    /// order and their face values at any scale; no code or address can imitate a boundary.
    #[test]
    fn the_key_of_a_likely_duplicate_is_its_recipient_products_and_value() {
        let key = |email: &str, codes: &[&str], value: &str| {
            let mut spec = row(2, ["R1", "AMZ-US", value, "USD", "", "", "", ""]);
            spec.content.product_codes = codes.iter().map(|c| c.to_string()).collect();
            ContentKey::of(email, &spec).0
        };
        let one = key("a@example.com", &["AMZ-US"], "10");
        assert_eq!(one, key("A@Example.COM", &["AMZ-US"], "10.00"));
        assert_eq!(
            key("\u{212a}im@x.io", &["B", "A"], "5"),
            key("kim@x.io", &["A", "B"], "5.0")
        );
        assert_ne!(one, key("a@example.com", &["AMZ-US"], "10.01"));
        assert_ne!(one, key("a@example.com", &["AMZ-UK"], "10"));
        assert_ne!(
            key("a@x.io", &["AB", "C"], "5"),
            key("a@x.io", &["A", "BC"], "5")
        );
        assert_ne!(key("a@x.io", &["A"], "5"), key("a@x.io", &["A", "A"], "5"));
        assert_ne!(key("ab@x.io", &["C"], "5"), key("a", &["b@x.io", "C"], "5"));
    }

    /// A reference in another spelling (case, full-width, look-alike letters of another
    /// script) is the reference of the earlier row, named with its line; `-` for `_` is not.
    #[test]
    fn references_in_another_spelling_are_one_reference() {
        let cat = catalog();
        for other in ["emp-1", "ＥＭＰ-１", "\u{415}\u{41c}\u{420}-1", "EMP-1"] {
            let mut v = Validator::new(&cat, ValidateOptions::default());
            let cells = |r| [r, "AMZ-US", "10", "USD", "", "", "", ""];
            assert!(check(&mut v, 2, cells("EMP-1")).is_empty());
            let ps = check(&mut v, 4, cells(other));
            assert_eq!(ps.len(), 1, "{other}: {ps:?}");
            assert_eq!((ps[0].line, ps[0].column), (4, Some(1)), "{other}");
            assert!(ps[0].message.contains("line 2"), "{}", ps[0]);
            assert!(ps[0].message.contains(other), "{}", ps[0]);
            assert_eq!(
                ps[0].message.contains("spelt another way"),
                other != "EMP-1",
                "{}",
                ps[0]
            );
            assert_eq!(v.reference_line(other), Some(2));
            assert!(check(&mut v, 5, cells("EMP_1")).is_empty(), "{other}");
        }
    }

    #[test]
    fn repeated_references_and_likely_duplicates() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(
            check(
                &mut v,
                2,
                ["R1", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
        let ps = check(
            &mut v,
            5,
            ["R1", "AMZ-US", "20", "USD", "", "b@example.com", "", ""],
        );
        assert_eq!(ps.len(), 1);
        assert_eq!((ps[0].line, ps[0].column), (5, Some(1)));
        assert!(ps[0].message.contains("line 2"), "{}", ps[0]);

        let ps = check(
            &mut v,
            6,
            ["R2", "AMZ-US", "10.00", "USD", "", "A@Example.com", "", ""],
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
        assert_eq!(ps[0].column, Some(6));
        assert!(ps[0].message.contains("line 2"), "{}", ps[0]);
        // Payout links without an email are not duplicates of each other.
        assert!(check(&mut v, 7, ["R3", "AMZ-US", "10", "USD", "", "", "", ""]).is_empty());
        assert!(check(&mut v, 8, ["R4", "AMZ-US", "10", "USD", "", "", "", ""]).is_empty());

        let mut v = Validator::new(
            &cat,
            ValidateOptions {
                allow_duplicates: true,
                default_payment_currency: None,
                decimal_comma: false,
            },
        );
        assert!(
            check(
                &mut v,
                2,
                ["R1", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
        assert!(
            check(
                &mut v,
                3,
                ["R2", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
    }
}
