//! Money as written in a batch file: currency codes, their decimal places, and amounts.
//!
//! Amounts are parsed from their text straight into [`Decimal`] (never through `f64`) and keep
//! the scale they were written with: `10.50` stays `10.50`, and that is the text the service
//! receives. Only plain decimals are accepted; anything a spreadsheet or a locale could have
//! turned into something else (`1,000`, `10,50`, `1e3`, `$10`) is refused with the reason and,
//! where one is unambiguous, the spelling to use instead.

use std::str::FromStr;

use rust_decimal::Decimal;

/// The most digits (integer and fraction together) an amount may have.
pub const MAX_AMOUNT_DIGITS: usize = 18;

/// ISO 4217 currencies whose minor unit is not 2, with their number of decimal places.
const NON_TWO_DECIMALS: &[(&str, u32)] = &[
    // No minor unit.
    ("BIF", 0),
    ("CLP", 0),
    ("DJF", 0),
    ("GNF", 0),
    ("ISK", 0),
    ("JPY", 0),
    ("KMF", 0),
    ("KRW", 0),
    ("PYG", 0),
    ("RWF", 0),
    ("UGX", 0),
    ("UYI", 0),
    ("VND", 0),
    ("VUV", 0),
    ("XAF", 0),
    ("XOF", 0),
    ("XPF", 0),
    // Thousandths.
    ("BHD", 3),
    ("IQD", 3),
    ("JOD", 3),
    ("KWD", 3),
    ("LYD", 3),
    ("OMR", 3),
    ("TND", 3),
    // Ten-thousandths (units of account).
    ("CLF", 4),
    ("UYW", 4),
];

/// The number of decimal places ISO 4217 gives `currency` (2 for codes not in the table).
pub fn minor_units(currency: &str) -> u32 {
    NON_TWO_DECIMALS
        .iter()
        .find(|(code, _)| *code == currency)
        .map_or(2, |(_, places)| *places)
}

/// Why a text is not an acceptable amount. Each message quotes the text; [`AmountError::help`]
/// says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("the amount is empty")]
    Empty,
    #[error("`{0}` has a sign; amounts are positive numbers written without `+` or `-`")]
    Sign(String),
    #[error("`{0}` is written with an exponent")]
    Exponent(String),
    #[error("`{0}` is not a number")]
    NotANumber(String),
    #[error("`{text}` contains a thousands separator")]
    ThousandsSeparator { text: String, suggestion: String },
    #[error("`{text}` uses a comma as the decimal separator")]
    CommaDecimal { text: String, suggestion: String },
    #[error("`{0}` contains a currency symbol or code")]
    CurrencySymbol(String),
    #[error("`{0}` has more than {MAX_AMOUNT_DIGITS} digits")]
    TooManyDigits(String),
    #[error("`{text}` is not a plain decimal number")]
    Malformed {
        text: String,
        suggestion: Option<String>,
    },
}

impl AmountError {
    /// What to do about it.
    pub fn help(&self) -> Option<String> {
        match self {
            AmountError::Empty => Some("write the amount as a plain decimal, e.g. `25` or `10.50`".into()),
            AmountError::Sign(_) => Some("write the amount without a sign, e.g. `25`; a payout cannot be negative".into()),
            AmountError::Exponent(_) => Some("write the amount out in full, e.g. `1000`; a spreadsheet may have formatted the cell as scientific, set it to plain number or text".into()),
            AmountError::NotANumber(_) => Some("write the amount as a plain decimal, e.g. `25` or `10.50`".into()),
            AmountError::ThousandsSeparator { suggestion, .. } => {
                let mark = if suggestion.contains(',') { ',' } else { '.' };
                Some(format!(
                    "write `{suggestion}`: no thousands separators, and `{mark}` as the decimal separator"
                ))
            }
            AmountError::CommaDecimal { suggestion, .. } => {
                Some(format!("write `{suggestion}`: the decimal separator is `.`"))
            }
            AmountError::CurrencySymbol(_) => Some(
                "write only the number (e.g. `25`) and put the currency code in the `currency` column"
                    .into(),
            ),
            AmountError::TooManyDigits(_) => {
                Some("check the cell: no payout amount needs that many digits".into())
            }
            AmountError::Malformed {
                suggestion: Some(s),
                ..
            } => Some(format!("write `{s}`")),
            AmountError::Malformed {
                suggestion: None, ..
            } => Some("write the amount as a plain decimal, e.g. `25` or `10.50`".into()),
        }
    }
}

/// Currency symbols a spreadsheet may leave in an amount cell.
const CURRENCY_SYMBOLS: &[char] = &[
    '$', '€', '£', '¥', '¢', '₩', '₹', '₽', '₺', '₪', '₫', '฿', '₦', '₱', '₴', '₸', '₡', '₲', '₵',
    '₭', '₮', '₼', '₾', '¤', '﹩', '＄', '￡', '￥',
];

/// Characters used as thousands separators besides `,` and `.`.
fn is_group_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{a0}' | '\u{202f}' | '\u{2009}' | '\'' | '’' | '_'
    )
}

/// Parses a plain decimal amount (`10`, `10.5`, `10.50`, `0.99`), keeping the scale as written.
pub fn parse_amount(text: &str) -> Result<Decimal, AmountError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(AmountError::Empty);
    }
    // Digits with at most one dot (almost every cell) pass the checks below: skip them.
    let plain = t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && t.matches('.').count() <= 1;
    if plain {
        return plain_decimal(t);
    }
    if let Some(e) = not_a_plain_number(t).or_else(|| separator_error(t)) {
        return Err(e);
    }
    // Only digits and at most one dot remain.
    plain_decimal(t)
}

/// Parses an amount where a comma is the decimal separator (`10,99`, from a spreadsheet whose
/// decimal mark is a comma), keeping the scale as written: `10,50` is `10.50`. A dot alone is
/// still a decimal point (`10.50`), unless three digits follow it (`1.000`), which a reader of
/// commas takes for a thousands separator: refused, as is any other grouping (`1.234,50`).
pub fn parse_amount_decimal_comma(text: &str) -> Result<Decimal, AmountError> {
    let t = text.trim();
    if !t.contains(',') {
        if let Some((int, frac)) = t.split_once('.')
            && frac.len() == 3
            && !frac.contains('.')
            && !int.is_empty()
            && int != "0"
            && t.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        {
            return Err(AmountError::ThousandsSeparator {
                text: t.to_string(),
                suggestion: format!("{int}{frac}"),
            });
        }
        return parse_amount(t);
    }
    if let Some(e) = not_a_plain_number(t) {
        return Err(e);
    }
    let grouped = t.chars().any(is_group_space) || t.contains('.') || t.matches(',').count() > 1;
    if grouped {
        return Err(AmountError::ThousandsSeparator {
            text: t.to_string(),
            suggestion: ungroup(t).replace('.', ","),
        });
    }
    plain_decimal(&t.replace(',', ".")).map_err(|e| match e {
        AmountError::Malformed { suggestion, .. } => AmountError::Malformed {
            text: t.to_string(),
            suggestion: suggestion.map(|s| s.replace('.', ",")),
        },
        AmountError::TooManyDigits(_) => AmountError::TooManyDigits(t.to_string()),
        other => other,
    })
}

/// What makes `t` (trimmed, not empty) something other than digits and separators: a currency
/// symbol or code, a sign, an exponent, letters or another character.
fn not_a_plain_number(t: &str) -> Option<AmountError> {
    let owned = || t.to_string();
    if t.contains(CURRENCY_SYMBOLS) {
        return Some(AmountError::CurrencySymbol(owned()));
    }
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "nan" | "inf" | "infinity" | "∞") {
        return Some(AmountError::NotANumber(owned()));
    }
    if t.starts_with(['+', '-', '−']) || t.ends_with(['+', '-', '−']) {
        return Some(AmountError::Sign(owned()));
    }
    if t.starts_with('(') && t.ends_with(')') && t.len() > 2 {
        // Accounting notation for a negative amount.
        return Some(AmountError::Sign(owned()));
    }
    if looks_like_exponent(t) {
        return Some(AmountError::Exponent(owned()));
    }
    if t.chars().any(|c| c.is_alphabetic()) {
        let letters: String = t.chars().filter(|c| c.is_alphabetic()).collect();
        let digits = t.chars().any(|c| c.is_ascii_digit());
        if digits && letters.chars().count() == 3 && letters.chars().all(|c| c.is_uppercase()) {
            return Some(AmountError::CurrencySymbol(owned()));
        }
        return Some(AmountError::NotANumber(owned()));
    }
    if t.chars()
        .any(|c| !(c.is_ascii_digit() || c == '.' || c == ',' || is_group_space(c)))
    {
        return Some(AmountError::Malformed {
            text: owned(),
            suggestion: None,
        });
    }
    None
}

/// What is wrong with the separators of `t` (digits, `.`, `,` and group spaces only): grouped
/// thousands, or a comma as the decimal separator.
fn separator_error(t: &str) -> Option<AmountError> {
    let owned = || t.to_string();
    let has_space = t.chars().any(is_group_space);
    let commas = t.matches(',').count();
    let dots = t.matches('.').count();
    if has_space || (commas > 0 && dots > 0) || commas > 1 || dots > 1 {
        return Some(AmountError::ThousandsSeparator {
            text: owned(),
            suggestion: ungroup(t),
        });
    }
    if commas == 1 {
        let after = t.rsplit(',').next().unwrap_or("");
        let before = t.split(',').next().unwrap_or("");
        if after.len() == 3 && !before.is_empty() && before != "0" {
            // `1,000`: read as a thousands separator (a comma decimal would rarely have three places).
            return Some(AmountError::ThousandsSeparator {
                text: owned(),
                suggestion: t.replace(',', ""),
            });
        }
        let suggestion = t.replace(',', ".");
        return Some(AmountError::CommaDecimal {
            text: owned(),
            suggestion: fix_dots(&suggestion).unwrap_or(suggestion),
        });
    }
    None
}

/// `t` (digits and at most one dot) as a decimal of its written scale, unless a part is empty,
/// it has leading zeros or too many digits.
fn plain_decimal(t: &str) -> Result<Decimal, AmountError> {
    let owned = || t.to_string();
    let (int, frac) = match t.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (t, None),
    };
    if int.is_empty() || frac == Some("") {
        return Err(AmountError::Malformed {
            text: owned(),
            suggestion: fix_dots(t),
        });
    }
    if int.len() > 1 && int.starts_with('0') {
        let trimmed = int.trim_start_matches('0');
        let int_fixed = if trimmed.is_empty() { "0" } else { trimmed };
        let suggestion = match frac {
            Some(f) => format!("{int_fixed}.{f}"),
            None => int_fixed.to_string(),
        };
        return Err(AmountError::Malformed {
            text: owned(),
            suggestion: Some(suggestion),
        });
    }
    if int.len() + frac.map_or(0, str::len) > MAX_AMOUNT_DIGITS {
        return Err(AmountError::TooManyDigits(owned()));
    }
    Decimal::from_str(t).map_err(|_| AmountError::Malformed {
        text: owned(),
        suggestion: None,
    })
}

/// `1e3`, `1.5E+2`, `2e-1`: digits, an `e`, an optionally signed exponent.
fn looks_like_exponent(t: &str) -> bool {
    let Some(pos) = t.find(['e', 'E']) else {
        return false;
    };
    let (mantissa, exp) = (&t[..pos], &t[pos + 1..]);
    let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    !mantissa.is_empty()
        && mantissa
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        && mantissa.chars().any(|c| c.is_ascii_digit())
        && !exp.is_empty()
        && exp.chars().all(|c| c.is_ascii_digit())
}

/// `.5` -> `0.5`, `10.` -> `10`.
fn fix_dots(t: &str) -> Option<String> {
    let (int, frac) = t.split_once('.')?;
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int = if int.is_empty() { "0" } else { int };
    Some(if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    })
}

/// Removes grouping: the last of `.`/`,` is the decimal separator when both appear, or when it is
/// followed by other than three digits; every other separator is dropped.
fn ungroup(t: &str) -> String {
    let no_space: String = t.chars().filter(|c| !is_group_space(*c)).collect();
    let last_sep = no_space.rfind(['.', ',']);
    let commas = no_space.matches(',').count();
    let dots = no_space.matches('.').count();
    let decimal_at = match last_sep {
        Some(i) if commas > 0 && dots > 0 => Some(i),
        Some(i) if commas + dots == 1 && no_space.len() - i - 1 != 3 => Some(i),
        _ => None,
    };
    no_space
        .char_indices()
        .filter_map(|(i, c)| match c {
            '.' | ',' if Some(i) == decimal_at => Some('.'),
            '.' | ',' => None,
            other => Some(other),
        })
        .collect()
}

/// An amount with its currency's decimal places, the form every output shows it in (text, CSV
/// and JSON): at least them (`75` CAD is `75.00`), and zeros beyond them dropped (`3000.00` JPY
/// is `3000`). Never rounds: a digit that is not zero is kept (`12.345` USD stays `12.345`).
pub fn in_currency(value: Decimal, currency: &str) -> Decimal {
    let places = minor_units(currency);
    let mut v = value;
    if v.scale() > places {
        let trimmed = v.normalize();
        v = if trimmed.scale() < places {
            let mut t = trimmed;
            t.rescale(places);
            t
        } else {
            trimmed
        };
    }
    if v.scale() < places {
        v.rescale(places);
    }
    v
}

/// [`in_currency`] as text, for CSV and JSON: no grouping (`99999925.00`).
pub fn display_amount(value: Decimal, currency: &str) -> String {
    in_currency(value, currency).to_string()
}

/// [`in_currency`] as text for people: thousands grouped with commas (`99,999,925.00`,
/// `-1,250` JPY). Never in a file or JSON a program reads.
pub fn human_amount(value: Decimal, currency: &str) -> String {
    group_thousands(&display_amount(value, currency))
}

/// `text` with the amount it starts with grouped by thousands (`99999925.00 USD` reads
/// `99,999,925.00 USD`); text that does not start with an amount is left as it is.
pub fn grouped_text(text: &str) -> String {
    let digits_end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && c == '-')))
        .map_or(text.len(), |(i, _)| i);
    let (amount, rest) = text.split_at(digits_end);
    let stands_alone = rest.is_empty() || rest.starts_with(' ');
    if !stands_alone || Decimal::from_str_exact(amount).is_err() {
        return text.to_string();
    }
    format!("{}{rest}", group_thousands(amount))
}

/// Groups the whole part of a plain decimal text by thousands with commas.
fn group_thousands(plain: &str) -> String {
    let (sign, digits) = plain
        .strip_prefix('-')
        .map_or(("", plain), |rest| ("-", rest));
    let (whole, fraction) = digits
        .split_once('.')
        .map_or((digits, None), |(w, f)| (w, Some(f)));
    let mut grouped = String::with_capacity(plain.len() + whole.len() / 3);
    grouped.push_str(sign);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if let Some(f) = fraction {
        grouped.push('.');
        grouped.push_str(f);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        match parse_amount(s) {
            Ok(d) => d.to_string(),
            Err(e) => panic!("{s:?} refused: {e}"),
        }
    }

    #[test]
    fn amounts_have_their_currencys_places_and_never_lose_a_digit() {
        let d = |t: &str| Decimal::from_str_exact(t).expect("a decimal");
        assert_eq!(display_amount(d("75"), "CAD"), "75.00");
        assert_eq!(display_amount(d("75.5"), "CAD"), "75.50");
        assert_eq!(display_amount(d("3000.00"), "JPY"), "3000");
        assert_eq!(display_amount(d("2910"), "JPY"), "2910");
        assert_eq!(display_amount(d("12.3450"), "USD"), "12.345");
        assert_eq!(display_amount(d("12.3000"), "USD"), "12.30");
        assert_eq!(display_amount(d("12.345"), "BHD"), "12.345");
        assert_eq!(display_amount(d("0"), "EUR"), "0.00");
        assert_eq!(display_amount(d("-4.1"), "EUR"), "-4.10");
    }

    #[test]
    fn people_read_thousands_grouped() {
        let d = |t: &str| Decimal::from_str_exact(t).expect("a decimal");
        assert_eq!(human_amount(d("99999925"), "CAD"), "99,999,925.00");
        assert_eq!(human_amount(d("100000000.00"), "USD"), "100,000,000.00");
        assert_eq!(human_amount(d("999.99"), "USD"), "999.99");
        assert_eq!(human_amount(d("1000"), "JPY"), "1,000");
        assert_eq!(human_amount(d("-1250.5"), "EUR"), "-1,250.50");
        assert_eq!(human_amount(d("123456.789"), "BHD"), "123,456.789");
        assert_eq!(human_amount(d("0.5"), "GBP"), "0.50");
        assert_eq!(grouped_text("99999925.00 USD"), "99,999,925.00 USD");
        assert_eq!(grouped_text("3000"), "3,000");
        assert_eq!(grouped_text("-1250.50 EUR"), "-1,250.50 EUR");
        assert_eq!(grouped_text("12.5%"), "12.5%");
        assert_eq!(grouped_text("n/a"), "n/a");
        assert_eq!(grouped_text("2026-11-30"), "2026-11-30");
        assert_eq!(grouped_text(""), "");
    }

    #[test]
    fn a_decimal_comma_is_read_where_it_is_the_mark_and_grouping_is_refused() {
        let ok = |s: &str| parse_amount_decimal_comma(s).map(|d| d.to_string());
        assert_eq!(ok("10,99"), Ok("10.99".into()));
        assert_eq!(ok(" 10,50 "), Ok("10.50".into()));
        assert_eq!(ok("1,000"), Ok("1.000".into()));
        assert_eq!(ok("25"), Ok("25".into()));
        assert_eq!(ok("10.5"), Ok("10.5".into()));
        assert_eq!(ok("0.125"), Ok("0.125".into()));
        for grouped in ["1.234,50", "1 234,50", "1,234,50", "1.000", "12.345"] {
            assert!(
                matches!(
                    parse_amount_decimal_comma(grouped),
                    Err(AmountError::ThousandsSeparator { .. })
                ),
                "{grouped}"
            );
        }
        let e = parse_amount_decimal_comma("1.234,50").unwrap_err();
        assert_eq!(e.to_string(), "`1.234,50` contains a thousands separator");
        assert!(e.help().unwrap_or_default().contains("1234,50"), "{e:?}");
        assert!(matches!(
            parse_amount_decimal_comma("-1,5"),
            Err(AmountError::Sign(_))
        ));
        assert!(matches!(
            parse_amount_decimal_comma("10,"),
            Err(AmountError::Malformed { .. })
        ));
        // Without the decimal comma, the comma is refused as today.
        assert!(matches!(
            parse_amount("10,99"),
            Err(AmountError::CommaDecimal { .. })
        ));
    }

    #[test]
    fn plain_decimals_keep_their_scale() {
        assert_eq!(ok("10"), "10");
        assert_eq!(ok("10.5"), "10.5");
        assert_eq!(ok("10.50"), "10.50");
        assert_eq!(ok("0.99"), "0.99");
        assert_eq!(ok("0"), "0");
        assert_eq!(ok(" 25.00 "), "25.00");
        assert_eq!(ok("123456789012345678"), "123456789012345678");
    }

    #[test]
    fn refuses_with_a_specific_reason() {
        assert_eq!(parse_amount(""), Err(AmountError::Empty));
        assert_eq!(parse_amount("  "), Err(AmountError::Empty));
        assert!(matches!(parse_amount("-5"), Err(AmountError::Sign(_))));
        assert!(matches!(parse_amount("+5"), Err(AmountError::Sign(_))));
        assert!(matches!(parse_amount("5-"), Err(AmountError::Sign(_))));
        assert!(matches!(parse_amount("(5.00)"), Err(AmountError::Sign(_))));
        assert!(matches!(parse_amount("1e3"), Err(AmountError::Exponent(_))));
        assert!(matches!(
            parse_amount("1.5E+2"),
            Err(AmountError::Exponent(_))
        ));
        assert!(matches!(
            parse_amount("NaN"),
            Err(AmountError::NotANumber(_))
        ));
        assert!(matches!(
            parse_amount("inf"),
            Err(AmountError::NotANumber(_))
        ));
        assert!(matches!(
            parse_amount("-Infinity"),
            Err(AmountError::NotANumber(_))
        ));
        assert!(matches!(
            parse_amount("ten"),
            Err(AmountError::NotANumber(_))
        ));
        assert!(matches!(
            parse_amount("$10"),
            Err(AmountError::CurrencySymbol(_))
        ));
        assert!(matches!(
            parse_amount("10 €"),
            Err(AmountError::CurrencySymbol(_))
        ));
        assert!(matches!(
            parse_amount("USD 10"),
            Err(AmountError::CurrencySymbol(_))
        ));
        assert!(matches!(
            parse_amount("10EUR"),
            Err(AmountError::CurrencySymbol(_))
        ));
        assert!(matches!(
            parse_amount("1234567890123456789"),
            Err(AmountError::TooManyDigits(_))
        ));
        assert!(matches!(
            parse_amount("0.0000000000000000001"),
            Err(AmountError::TooManyDigits(_))
        ));
        assert!(matches!(
            parse_amount("1/2"),
            Err(AmountError::Malformed { .. })
        ));
        assert!(matches!(
            parse_amount("="),
            Err(AmountError::Malformed { .. })
        ));
    }

    fn suggestion(s: &str) -> String {
        match parse_amount(s) {
            Err(AmountError::ThousandsSeparator { suggestion, .. })
            | Err(AmountError::CommaDecimal { suggestion, .. })
            | Err(AmountError::Malformed {
                suggestion: Some(suggestion),
                ..
            }) => suggestion,
            other => panic!("{s:?}: {other:?}"),
        }
    }

    #[test]
    fn separators_are_refused_with_the_spelling_to_use() {
        assert!(matches!(
            parse_amount("10,50"),
            Err(AmountError::CommaDecimal { .. })
        ));
        assert_eq!(suggestion("10,50"), "10.50");
        assert_eq!(suggestion("0,5"), "0.5");
        assert_eq!(suggestion(",5"), "0.5");
        assert!(matches!(
            parse_amount("1,000"),
            Err(AmountError::ThousandsSeparator { .. })
        ));
        assert_eq!(suggestion("1,000"), "1000");
        assert_eq!(suggestion("1 000"), "1000");
        assert_eq!(suggestion("1\u{a0}000,50"), "1000.50");
        assert_eq!(suggestion("1.000,00"), "1000.00");
        assert_eq!(suggestion("1,000.50"), "1000.50");
        assert_eq!(suggestion("1.000.000"), "1000000");
        assert_eq!(suggestion("1'000"), "1000");
        assert_eq!(suggestion(".5"), "0.5");
        assert_eq!(suggestion("10."), "10");
        assert_eq!(suggestion("007"), "7");
        assert_eq!(suggestion("00.50"), "0.50");
    }

    #[test]
    fn every_refusal_has_help() {
        for s in ["", "-5", "1e3", "NaN", "1,000", "10,50", "$10", "1/2", ".5"] {
            let err = parse_amount(s).unwrap_err();
            assert!(err.help().is_some(), "{s:?}");
            assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn minor_units_follow_iso_4217() {
        for (c, n) in [
            ("USD", 2),
            ("EUR", 2),
            ("GBP", 2),
            ("CAD", 2),
            ("JPY", 0),
            ("KRW", 0),
            ("CLP", 0),
            ("ISK", 0),
            ("VND", 0),
            ("BHD", 3),
            ("KWD", 3),
            ("JOD", 3),
            ("OMR", 3),
            ("TND", 3),
        ] {
            assert_eq!(minor_units(c), n, "{c}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics_and_round_trips(s in "\\PC{0,24}") {
            if let Ok(d) = parse_amount(&s) {
                proptest::prop_assert_eq!(d.to_string(), s.trim());
            }
        }

        #[test]
        fn any_plain_decimal_is_accepted_as_written(int in "[1-9][0-9]{0,8}|0", frac in proptest::option::of("[0-9]{1,4}")) {
            let text = match &frac { Some(f) => format!("{int}.{f}"), None => int.clone() };
            proptest::prop_assert_eq!(parse_amount(&text).map(|d| d.to_string()), Ok(text));
        }
    }
}
