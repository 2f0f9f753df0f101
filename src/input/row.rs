//! One record's syntax: [`parse_record`] checks every known cell of a record and builds what one
//! payout asks for ([`RowSpec`]).
//!
//! Every problem names the line, the column, the value, what was expected and what to do, so a
//! whole file can be corrected in one pass: all the problems of a row are reported, not only the
//! first.

use rust_decimal::Decimal;

use super::columns::ColumnMap;
use super::problem::{Problem, quoted, show};
use super::reader::RawRecord;
use crate::api::DistributionType;
use crate::api::rules;
use crate::api::rules::{PAYMENT_CURRENCIES, is_currency_code, is_payment_currency};
use crate::money::{minor_units, parse_amount, parse_amount_decimal_comma};
use crate::row::RowContent;

/// The longest reference accepted, in characters.
pub const MAX_REFERENCE_CHARS: usize = 100;
/// Characters a reference may hold besides letters and digits.
pub const REFERENCE_PUNCTUATION: &str = "-_.:/# ";
/// The longest email address accepted, in bytes.
pub use crate::api::rules::MAX_EMAIL_BYTES;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Accept rows with the same recipient, products and face value as an earlier row.
    pub allow_duplicates: bool,
    /// The balance currency that pays for rows whose product currency is not a balance currency
    /// and whose `payment_currency` is empty.
    pub default_payment_currency: Option<String>,
    /// A comma is the decimal separator of amounts (`10,99`): where the file's delimiter is
    /// `;` or a tab, or with `--decimal-comma`.
    pub decimal_comma: bool,
}

/// A row whose syntax is valid: what one payout asks for, where it is in the file, and its
/// content as the ledger stores it ([`RowContent`], whose fields it reads as its own).
///
/// In the content: the codes of the `product_code` cell, split on `|` and trimmed; the face
/// value as written (its scale kept: the text the service receives); the balance currency that
/// pays, as given or resolved (see [`parse_record`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RowSpec {
    pub line: u64,
    pub reference: String,
    pub content: RowContent,
    /// Every input cell, in header order, to quote a cell in a problem; empty in the specs
    /// the reading hands on with their rows (the row holds the cells already).
    pub fields: Vec<String>,
    /// Where the known columns are, so later checks can name the column of a problem.
    pub columns: ColumnMap,
}

impl std::ops::Deref for RowSpec {
    type Target = RowContent;

    fn deref(&self) -> &RowContent {
        &self.content
    }
}

impl std::ops::DerefMut for RowSpec {
    fn deref_mut(&mut self) -> &mut RowContent {
        &mut self.content
    }
}

/// Names the known columns of one record, for problems.
struct NamedCells<'a> {
    columns: &'a ColumnMap,
    rec: &'a RawRecord,
    problems: Vec<Problem>,
}

impl NamedCells<'_> {
    fn get(&self, index: usize) -> &str {
        self.rec.fields.get(index).map_or("", String::as_str)
    }

    fn opt(&self, index: Option<usize>) -> &str {
        index.map_or("", |i| self.get(i))
    }

    fn report(&mut self, index: usize, name: &str, message: String, help: impl Into<String>) {
        let p = Problem::at(self.rec.line, index, name, message)
            .with_value(self.get(index))
            .with_help(help);
        self.problems.push(p);
    }
}

/// Checks the syntax of one record and builds its [`RowSpec`]; reports all the problems of the
/// row.
///
/// `payment_currency`, when empty, resolves to the row's currency when that is a balance
/// currency, else to `default_payment_currency`; when neither applies it is a problem.
/// `distribution`, when absent or empty, is `EMAIL` if an email is given, else `PAYOUT_LINK`.
pub fn parse_record(
    columns: &ColumnMap,
    headers: &[String],
    rec: &RawRecord,
    opts: &ValidateOptions,
) -> Result<RowSpec, Vec<Problem>> {
    let (reference, content) = parse_content(columns, headers, rec, opts)?;
    Ok(RowSpec {
        line: rec.line,
        reference,
        content,
        fields: rec.fields.clone(),
        columns: columns.clone(),
    })
}

/// [`parse_record`] of a record the caller gives up: its cells move into the spec instead of
/// being copied (a record with problems is handed back with them).
pub fn parse_record_owned(
    columns: &ColumnMap,
    headers: &[String],
    rec: RawRecord,
    opts: &ValidateOptions,
) -> Result<RowSpec, (RawRecord, Vec<Problem>)> {
    match parse_content(columns, headers, &rec, opts) {
        Ok((reference, content)) => Ok(RowSpec {
            line: rec.line,
            reference,
            content,
            fields: rec.fields,
            columns: columns.clone(),
        }),
        Err(problems) => Err((rec, problems)),
    }
}

/// The reference and content of a record whose syntax is valid, else all its problems.
fn parse_content(
    columns: &ColumnMap,
    headers: &[String],
    rec: &RawRecord,
    opts: &ValidateOptions,
) -> Result<(String, RowContent), Vec<Problem>> {
    let mut c = NamedCells {
        columns,
        rec,
        problems: Vec::new(),
    };
    if rec.fields.len() != headers.len() {
        // The reader refuses such records; a record built elsewhere is checked all the same.
        c.problems.push(Problem::file(
            rec.line,
            format!(
                "this row has {} fields but the header has {}",
                rec.fields.len(),
                headers.len()
            ),
        ));
    }
    let reference = parse_reference(&mut c);
    let product_codes = parse_codes(&mut c);
    let currency = parse_currency(&mut c);
    let face_value = parse_face_value(&mut c, currency.as_deref(), opts.decimal_comma);
    let email = parse_email(&mut c);
    let distribution = parse_distribution(&mut c, email.is_some());
    let payment_currency = parse_payment_currency(&mut c, currency.as_deref(), opts);
    let country = parse_country(&mut c);
    let card_id = parse_card_id(&mut c);

    match (
        reference,
        product_codes,
        currency,
        face_value,
        distribution,
        payment_currency,
    ) {
        (
            Some(reference),
            Some(product_codes),
            Some(currency),
            Some(face_value),
            Some(distribution),
            Some(payment_currency),
        ) if c.problems.is_empty() => Ok((
            reference,
            RowContent {
                product_codes,
                face_value,
                currency,
                distribution,
                email,
                payment_currency,
                country,
                card_id,
            },
        )),
        _ => {
            let mut problems = c.problems;
            problems.sort_by_key(|p| p.column);
            Err(problems)
        }
    }
}

fn parse_reference(c: &mut NamedCells) -> Option<String> {
    let i = c.columns.reference;
    let v = c.get(i).to_string();
    let example = "e.g. `EMP-1042-2026-11`";
    if v.is_empty() {
        c.report(
            i,
            "reference",
            "the reference is empty".into(),
            format!("give every row its own reference, {example}: it is what makes the payout happen once"),
        );
        return None;
    }
    let chars = v.chars().count();
    if chars > MAX_REFERENCE_CHARS {
        c.report(
            i,
            "reference",
            format!(
                "{} is {chars} characters long; the limit is {MAX_REFERENCE_CHARS}",
                quoted(&v)
            ),
            format!("use a shorter reference, {example}"),
        );
        return None;
    }
    let allowed = |ch: char| ch.is_alphanumeric() || REFERENCE_PUNCTUATION.contains(ch);
    if let Some(bad) = v.chars().find(|ch| !allowed(*ch)) {
        c.report(
            i,
            "reference",
            format!(
                "{} contains `{}`; a reference holds letters, digits, spaces and `- _ . : / #`",
                quoted(&v),
                bad.escape_default()
            ),
            format!("use a plain identifier, {example}"),
        );
        return None;
    }
    if !v.starts_with(char::is_alphanumeric) {
        c.report(
            i,
            "reference",
            format!("{} does not start with a letter or digit", quoted(&v)),
            format!("use a plain identifier, {example}"),
        );
        return None;
    }
    Some(v)
}

fn parse_codes(c: &mut NamedCells) -> Option<Vec<String>> {
    let i = c.columns.product_code;
    let v = c.get(i).to_string();
    if v.is_empty() {
        c.report(
            i,
            "product_code",
            "the product code is empty".into(),
            "write the code of a catalog product, e.g. `AMZ-US`, or several separated by `|` to \
             let the recipient choose",
        );
        return None;
    }
    let codes: Vec<String> = v.split('|').map(|s| s.trim().to_string()).collect();
    if codes.iter().any(String::is_empty) {
        c.report(
            i,
            "product_code",
            format!("{} has an empty product code in its `|` list", quoted(&v)),
            "separate the codes with single `|`, e.g. `AMZ-US|STEAM-US`",
        );
        return None;
    }
    for (n, code) in codes.iter().enumerate() {
        if codes[..n].contains(code) {
            c.report(
                i,
                "product_code",
                format!("{} names `{}` twice", quoted(&v), show(code)),
                "list each product of a choice once",
            );
            return None;
        }
    }
    Some(codes)
}

fn parse_currency(c: &mut NamedCells) -> Option<String> {
    let i = c.columns.currency;
    let v = c.get(i).to_string();
    if v.is_empty() {
        c.report(
            i,
            "currency",
            "the currency is empty".into(),
            "write the ISO 4217 code of the product's currency, e.g. `USD`",
        );
        return None;
    }
    if is_currency_code(&v) {
        return Some(v);
    }
    let upper = v.to_uppercase();
    let help = if is_currency_code(&upper) {
        format!("write it in capitals: `{upper}`")
    } else {
        "write a three-letter ISO 4217 code in capitals, e.g. `USD`, `EUR`, `GBP`".to_string()
    };
    c.report(
        i,
        "currency",
        format!("{} is not an ISO 4217 currency code", quoted(&v)),
        help,
    );
    None
}

fn parse_face_value(
    c: &mut NamedCells,
    currency: Option<&str>,
    decimal_comma: bool,
) -> Option<Decimal> {
    let i = c.columns.face_value;
    let v = c.get(i).to_string();
    let parsed = if decimal_comma {
        parse_amount_decimal_comma(&v)
    } else {
        parse_amount(&v)
    };
    let mark = |text: String| {
        if decimal_comma {
            text.replace('.', ",")
        } else {
            text
        }
    };
    let amount = match parsed {
        Ok(a) => a,
        Err(e) => {
            let help = e.help().unwrap_or_default();
            let message = match e {
                crate::money::AmountError::Empty => "the face value is empty".to_string(),
                other => other.to_string(),
            };
            c.report(i, "face_value", message, help);
            return None;
        }
    };
    if amount.is_zero() {
        c.report(
            i,
            "face_value",
            format!("{} is zero; a payout needs a positive amount", quoted(&v)),
            "write the amount of the payout, or remove the row",
        );
        return None;
    }
    if let Some(why) = rules::face_value_problem(amount) {
        c.report(
            i,
            "face_value",
            format!("{} is too small: {why}", quoted(&v)),
            format!("write at least {}", rules::MIN_FACE_VALUE),
        );
        return None;
    }
    if let Some(cur) = currency {
        let places = minor_units(cur);
        if amount.scale() > places {
            let normal = amount.normalize();
            let help = if normal.scale() <= places {
                let mut fixed = normal;
                fixed.rescale(places);
                format!("write `{}`", mark(fixed.to_string()))
            } else if places == 0 {
                format!("{cur} has no decimal places: write a whole amount")
            } else {
                format!("round it to {places} decimal places")
            };
            c.report(
                i,
                "face_value",
                format!(
                    "{} has more decimal places than {cur} allows ({places})",
                    quoted(&v)
                ),
                help,
            );
            return None;
        }
    }
    Some(amount)
}

/// Why `s` is not an address the service takes, if it is not: what is wrong, then the rule
/// that refused it ([`crate::api::rules::email_problem`], the simulator's rule too).
pub fn email_problem(s: &str) -> Option<String> {
    rules::email_problem(s).map(|p| format!("{p} (rule: {})", p.rule()))
}

fn parse_email(c: &mut NamedCells) -> Option<String> {
    let i = c.columns.email?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if let Some(why) = email_problem(&v) {
        let help = if v.contains('<') || v.contains(' ') {
            "write only the address, e.g. `jane.doe@example.com`"
        } else if !v.is_ascii() {
            "the service takes addresses in ASCII only: check the address with its owner (an \
             address with accents is usually also reachable without them, or by a payout link)"
        } else {
            "check the address: one `@`, a name before it and a domain such as `example.com` after it"
        };
        c.report(
            i,
            "email",
            format!("{} is not a valid email address: it {why}", quoted(&v)),
            help,
        );
    }
    Some(v)
}

fn parse_distribution(c: &mut NamedCells, has_email: bool) -> Option<DistributionType> {
    let written = c.opt(c.columns.distribution).to_string();
    let kind = if written.is_empty() {
        if has_email {
            DistributionType::Email
        } else {
            DistributionType::PayoutLink
        }
    } else {
        let norm: String = written
            .to_lowercase()
            .chars()
            .map(|ch| if ch == ' ' || ch == '-' { '_' } else { ch })
            .collect();
        match norm.as_str() {
            "email" | "e_mail" => DistributionType::Email,
            "payout_link" | "link" => DistributionType::PayoutLink,
            _ => {
                let i = c.columns.distribution.unwrap_or(0);
                c.report(
                    i,
                    "distribution",
                    format!(
                        "{} is not a distribution method; expected `EMAIL` or `PAYOUT_LINK`",
                        quoted(&written)
                    ),
                    "write `EMAIL` to send the payout to the email address, `PAYOUT_LINK` to get \
                     a link to hand over yourself, or leave it empty (EMAIL when an email is given)",
                );
                return None;
            }
        }
    };
    if kind == DistributionType::Email && !has_email {
        let (i, name, help) = match (c.columns.email, c.columns.distribution) {
            (Some(i), _) => (
                i,
                "email",
                "fill in the recipient's email address, or set distribution to `PAYOUT_LINK`",
            ),
            (None, Some(i)) => (
                i,
                "distribution",
                "add an `email` column with the recipient's address, or use `PAYOUT_LINK`",
            ),
            (None, None) => (c.columns.reference, "reference", "add an `email` column"),
        };
        // An invalid email was already reported; only an absent one is reported here.
        let absent = c.opt(c.columns.email).is_empty();
        if absent {
            c.report(
                i,
                name,
                "distribution EMAIL needs an email address, and none is given".into(),
                help,
            );
        }
        return None;
    }
    Some(kind)
}

fn parse_payment_currency(
    c: &mut NamedCells,
    currency: Option<&str>,
    opts: &ValidateOptions,
) -> Option<String> {
    let balance_list = PAYMENT_CURRENCIES.join(", ");
    let written = c.opt(c.columns.payment_currency).to_string();
    if let (false, Some(i)) = (written.is_empty(), c.columns.payment_currency) {
        if is_payment_currency(&written) {
            return Some(written);
        }
        let upper = written.to_uppercase();
        let help = if is_payment_currency(&upper) {
            format!("write it in capitals: `{upper}`")
        } else {
            format!(
                "orders are paid from an account balance in {balance_list}: write one of them, \
                 or leave it empty to pay in the product's currency"
            )
        };
        c.report(
            i,
            "payment_currency",
            format!(
                "{} is not a payment currency; expected one of {balance_list}",
                quoted(&written)
            ),
            help,
        );
        return None;
    }
    let cur = currency?;
    if is_payment_currency(cur) {
        return Some(cur.to_string());
    }
    if let Some(default) = &opts.default_payment_currency
        && is_payment_currency(default)
    {
        return Some(default.clone());
    }
    let (i, name) = match c.columns.payment_currency {
        Some(i) => (i, "payment_currency"),
        None => (c.columns.currency, "currency"),
    };
    let message = if c.columns.payment_currency.is_some() {
        format!(
            "payment_currency is empty, and {cur} cannot pay for an order (balance currencies: \
             {balance_list})"
        )
    } else {
        format!(
            "a {cur} product needs a payment_currency column: {cur} cannot pay for an order \
             (balance currencies: {balance_list})"
        )
    };
    c.problems.push(
        Problem::at(c.rec.line, i, name, message)
            .with_value(c.get(i))
            .with_help(format!(
                "say which balance pays for this row in a `payment_currency` column ({balance_list}), \
                 or set a default payment currency"
            )),
    );
    None
}

fn parse_country(c: &mut NamedCells) -> Option<String> {
    let i = c.columns.country?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if v.len() == 2 && v.bytes().all(|b| b.is_ascii_uppercase()) {
        return Some(v);
    }
    let upper = v.to_uppercase();
    let help = if upper.len() == 2 && upper.bytes().all(|b| b.is_ascii_uppercase()) {
        format!("write it in capitals: `{upper}`")
    } else {
        "write the ISO 3166 alpha-2 code, e.g. `US`, `DE`, `GB`, or leave it empty".to_string()
    };
    c.report(
        i,
        "country",
        format!("{} is not an ISO 3166 alpha-2 country code", quoted(&v)),
        help,
    );
    None
}

fn parse_card_id(c: &mut NamedCells) -> Option<String> {
    let i = c.columns.card_id?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if v.chars().any(|ch| ch.is_control() || ch.is_whitespace()) || v.chars().count() > 200 {
        c.report(
            i,
            "card_id",
            format!("{} is not a card identifier", quoted(&v)),
            "write the identifier of the card as the account shows it, or leave it empty to pay \
             from the balance",
        );
        return None;
    }
    Some(v)
}

/// A problem of `row` in the column at 0-based `index`, with the cell's value and `help`.
pub(super) fn problem_at(
    row: &RowSpec,
    index: usize,
    name: &str,
    message: String,
    help: String,
) -> Problem {
    let cell = row.fields.get(index).cloned().unwrap_or_default();
    Problem::at(row.line, index, name, message)
        .with_value(cell)
        .with_help(help)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::fixtures::*;

    #[test]
    fn a_good_row_parses_with_defaults_resolved() {
        let r = row(
            2,
            [
                "R1",
                "AMZ-US",
                "10.50",
                "USD",
                "",
                "a@example.com",
                "",
                "US",
            ],
        );
        assert_eq!(r.reference, "R1");
        assert_eq!(r.product_codes, ["AMZ-US"]);
        assert_eq!(r.face_value.to_string(), "10.50");
        assert_eq!(r.distribution, DistributionType::Email);
        assert_eq!(r.payment_currency, "USD");
        assert_eq!(r.country.as_deref(), Some("US"));
        assert_eq!(r.fields.len(), 8);

        let r = row(
            2,
            [
                "R2",
                " AMZ-US | STEAM-US ",
                "20",
                "USD",
                "link",
                "",
                "EUR",
                "",
            ],
        );
        assert_eq!(r.product_codes, ["AMZ-US", "STEAM-US"]);
        assert_eq!(r.distribution, DistributionType::PayoutLink);
        assert_eq!(r.payment_currency, "EUR");
        assert_eq!(r.country, None);
        assert_eq!(r.email, None);

        let r = row(2, ["R3", "AMZ-US", "5", "USD", "", "", "", ""]);
        assert_eq!(r.distribution, DistributionType::PayoutLink);
        for (w, k) in [
            ("EMAIL", DistributionType::Email),
            ("e-mail", DistributionType::Email),
            ("Payout_Link", DistributionType::PayoutLink),
            ("payout link", DistributionType::PayoutLink),
        ] {
            let r = row(2, ["R", "A", "5", "USD", w, "a@example.com", "", ""]);
            assert_eq!(r.distribution, k, "{w}");
        }
    }

    #[test]
    fn all_problems_of_a_row_are_reported_with_their_columns() {
        let ps = problems(["", "", "1,000", "usd", "fax", "not-an-email", "JPY", "usa"]);
        let cols: Vec<Option<usize>> = ps.iter().map(|p| p.column).collect();
        assert_eq!(
            cols,
            [
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
                Some(7),
                Some(8)
            ],
            "{ps:#?}"
        );
        for p in &ps {
            assert_eq!(p.line, 7);
            assert!(p.help.is_some(), "{p}");
            assert!(p.column_name.is_some());
        }
        assert!(ps[3].help.as_deref().unwrap().contains("`USD`"));
        assert_eq!(ps[2].value.as_deref(), Some("1,000"));
    }

    #[test]
    fn problem_display_is_cargo_style() {
        let ps = problems(["R", "AMZ-US", "10.001", "USD", "", "", "", ""]);
        assert_eq!(
            ps[0].to_string(),
            "line 7, column 3 (face_value): `10.001` has more decimal places than USD allows (2)\n  help: round it to 2 decimal places"
        );
        let ps = problems(["R", "UBER-JP", "1000.00", "JPY", "", "", "USD", ""]);
        assert_eq!(ps[0].help.as_deref(), Some("write `1000`"));
        let ps = problems(["R", "A", "10,50", "EUR", "", "", "", ""]);
        assert!(
            ps[0].to_string().contains("help: write `10.50`"),
            "{}",
            ps[0]
        );
        assert_eq!(Problem::file(0, "whole file").to_string(), "whole file");
        assert_eq!(
            Problem::file(3, "x").with_help("y").to_string(),
            "line 3: x\n  help: y"
        );
    }

    #[test]
    fn references_are_plain_identifiers() {
        assert!(parse(["EMP-1042-2026-11", "A", "1", "USD", "", "", "", ""]).is_ok());
        assert!(parse(["Müller 2026/11#3", "A", "1", "USD", "", "", "", ""]).is_ok());
        for bad in ["=SUM(A1:A3)", "-5", "+1", "@x", "a\tb", "x;y", "'quoted'"] {
            let ps = problems([bad, "A", "1", "USD", "", "", "", ""]);
            assert_eq!(ps[0].column, Some(1), "{bad}");
        }
        let long = "R".repeat(MAX_REFERENCE_CHARS + 1);
        assert!(parse([&long, "A", "1", "USD", "", "", "", ""]).is_err());
    }

    #[test]
    fn product_code_lists() {
        for bad in ["A||B", "A|", "A|A"] {
            let ps = problems(["R", bad, "1", "USD", "", "", "", ""]);
            assert_eq!(ps[0].column, Some(2), "{bad}");
        }
    }

    #[test]
    fn emails() {
        // The rules themselves are the api crate's (`rules::tests`, every case there); here,
        // the input stage's wording of them: nothing for an address the service takes, the
        // reason and its rule for one it refuses.
        assert_eq!(email_problem("first.last+tag@sub.example.org"), None);
        for bad in ["plainaddress", "jane@exämple.de"] {
            let why = email_problem(bad).unwrap_or_default();
            assert!(why.contains("(rule: "), "{bad}: {why}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(email_problem(&long).is_some());
        // The address the service refused: the reason names the rule.
        let ps = problems([
            "R",
            "A",
            "1",
            "USD",
            "EMAIL",
            "marcus.garcía.10009@example.com",
            "",
            "",
        ]);
        assert_eq!(ps[0].column, Some(6));
        assert!(ps[0].message.contains("outside ASCII"), "{}", ps[0]);
        assert!(ps[0].message.contains("rule: ASCII only"), "{}", ps[0]);
        let ps = problems(["R", "A", "0.001", "KWD", "", "", "USD", ""]);
        assert!(ps[0].message.contains("smallest face value"), "{}", ps[0]);
        let ps = problems(["R", "A", "1", "USD", "EMAIL", "", "", ""]);
        assert_eq!(ps[0].column, Some(6));
        assert!(ps[0].message.contains("needs an email"), "{}", ps[0]);
        // An invalid address is reported once, not also as missing.
        let ps = problems(["R", "A", "1", "USD", "EMAIL", "nope", "", ""]);
        assert_eq!(ps.len(), 1, "{ps:?}");
    }

    #[test]
    fn payment_currency_resolution() {
        let ps = problems(["R", "UBER-JP", "1000", "JPY", "", "", "", ""]);
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].column, Some(7));
        assert!(ps[0].message.contains("JPY"), "{}", ps[0]);
        let opts = ValidateOptions {
            allow_duplicates: false,
            default_payment_currency: Some("EUR".into()),
            decimal_comma: false,
        };
        let r = parse_record(
            &columns(),
            &headers(),
            &rec(2, ["R", "UBER-JP", "1000", "JPY", "", "", "", ""]),
            &opts,
        )
        .unwrap();
        assert_eq!(r.payment_currency, "EUR");
        let ps = problems(["R", "A", "1", "USD", "", "", "JPY", ""]);
        assert_eq!(ps[0].column, Some(7));
        let ps = problems(["R", "A", "1", "USD", "", "", "cad", ""]);
        assert!(ps[0].help.as_deref().unwrap().contains("`CAD`"));

        // Without the column, the problem points at the currency.
        let cols = ColumnMap {
            payment_currency: None,
            ..columns()
        };
        let ps = parse_record(
            &cols,
            &headers(),
            &rec(2, ["R", "UBER-JP", "1000", "JPY", "", "", "", ""]),
            &ValidateOptions::default(),
        )
        .unwrap_err();
        assert_eq!(ps[0].column, Some(4));
        assert!(
            ps[0].message.contains("payment_currency column"),
            "{}",
            ps[0]
        );
    }
}

/// Whatever the validator accepts of the fields the service checks, the simulator accepts, and
/// the reverse: both read the rules of `api::rules`.
#[cfg(test)]
mod parity {
    use proptest::prelude::*;

    use crate::input::fixtures::parse;

    /// The order the row would be sent as: one item, e-mailed, the codes as the plan writes
    /// them (trimmed; one code `SINGLE`, several `MULTIPLE`).
    fn body(codes: &str, face_value: &str, email: &str, payment: &str) -> serde_json::Value {
        let codes: Vec<String> = codes.split('|').map(|c| c.trim().to_string()).collect();
        let products = serde_json::to_value(crate::api::ProductSelection::of(&codes)).unwrap();
        let text = format!(
            r#"{{"payment_method":{{"type":"ACCOUNT_BALANCE","currency":{}}},
                "items":[{{"face_value":{face_value},
                           "distribution_method":{{"type":"EMAIL","email_address":{}}},
                           "products":{products}}}]}}"#,
            serde_json::Value::String(payment.into()),
            serde_json::Value::String(email.into()),
        );
        serde_json::from_str(&text).unwrap()
    }

    fn addresses() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9]{1,8}(\\.[a-z0-9+_'-]{1,6})?@[a-z0-9-]{1,8}\\.[a-z]{2,4}",
            "[a-zA-Z0-9.íüé +_\"(),<>!#%&*=?^`{|}~-]{0,10}@[a-zA-Z0-9.äö_-]{0,10}",
            "[a-z.]{0,6}@?[a-z.@]{0,6}\\.(com|c|1|xn--p1ai|de-)",
            "[a-z]{1,70}@example\\.com",
        ]
    }

    fn face_values() -> impl Strategy<Value = String> {
        (0u32..20_000, 0u32..=2)
            .prop_map(|(n, scale)| rust_decimal::Decimal::new(i64::from(n), scale).to_string())
    }

    fn codes() -> impl Strategy<Value = String> {
        proptest::collection::vec(prop_oneof!["AMZ-US", "STEAM-US", " ", "AIRBNB-US"], 1..=3)
            .prop_map(|c| c.join("|"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn validator_and_simulator_accept_the_same_fields(
            email in addresses(),
            face_value in face_values(),
            codes in codes(),
            payment in prop_oneof!["", "USD", "EUR", "usd", "JPY", "EURO"],
        ) {
            let row = parse(["R-1", &codes, &face_value, "USD", "EMAIL", &email, &payment, "US"]);
            let sent = if payment.is_empty() { "USD" } else { payment.as_str() };
            let refused = crate::sim::shape_problems(&body(&codes, &face_value, &email, sent));
            prop_assert_eq!(
                row.is_ok(),
                refused.is_empty(),
                "validator: {:?}; simulator: {:?}",
                row.as_ref().err(),
                refused
            );
        }
    }
}
