//! The rules the service checks on the fields of an order, as its published contract states
//! them (OpenAPI 2024-02-05), in one place: the validator checks a file's rows with them before
//! anything is sent, and the simulator refuses an order with them, so a row the validator passes
//! is one the simulator takes, and the reverse.
//!
//! Where the contract is unclear, the strictest reading is the rule, and each refusal names the
//! rule that refused. An e-mail address is `format: email` in the contract, which the service
//! reads strictly: an address with a letter outside ASCII (`marcus.garcía@example.com`) is
//! refused. The rule here is the plain form of RFC 5321: an ASCII dot-atom before the `@`, no
//! quoting, no comments, no IP literal, and a domain of ASCII letters, digits and hyphens.

use std::fmt;

use rust_decimal::Decimal;

/// The longest address, in bytes (RFC 5321's path of 256 less the angle brackets).
pub const MAX_EMAIL_BYTES: usize = 254;
/// The longest part before the `@`, in bytes (RFC 5321).
pub const MAX_EMAIL_LOCAL_BYTES: usize = 64;
/// The longest label of a domain, in bytes (RFC 1035).
pub const MAX_DOMAIN_LABEL_BYTES: usize = 63;
/// Characters an address may hold before the `@` besides ASCII letters, digits and dots
/// (RFC 5322's `atext`).
pub const EMAIL_LOCAL_PUNCTUATION: &str = "!#$%&'*+-/=?^_`{|}~";

/// The smallest face value (`NewOrderItemDetails.face_value`, `minimum: 0.01`).
pub const MIN_FACE_VALUE: Decimal = Decimal::from_parts(1, 0, 0, false, 2);

/// The currencies an order can be paid in (`payment_method.currency`): the balances an account
/// can hold.
pub const PAYMENT_CURRENCIES: [&str; 4] = ["EUR", "GBP", "USD", "CAD"];

/// Most items an order holds (`NewOrderDetails.items`, `maxItems`).
pub const MAX_ITEMS: usize = 200;
/// Most items one estimate prices (`OrderPriceRequest.items`, `maxItems`).
pub const MAX_ESTIMATE_ITEMS: usize = 500;
/// Longest `description`, in characters (`OrderDescription`).
pub const MAX_DESCRIPTION: usize = 128;
/// Most `metadata` pairs (`OrderMetadata`, `maxProperties`).
pub const MAX_METADATA_PAIRS: usize = 20;
/// Longest `metadata` key, in characters.
pub const MAX_METADATA_KEY: usize = 40;
/// Longest `metadata` value, in characters.
pub const MAX_METADATA_VALUE: usize = 200;
/// Longest `recipient_reference` (`RecipientDistribution`).
pub const MAX_RECIPIENT_REFERENCE: usize = 255;

/// Why an address breaks the e-mail rule: each names the part of the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailProblem {
    TooLong(usize),
    NoAt,
    SeveralAts,
    EmptyLocal,
    LocalTooLong(usize),
    /// A character outside ASCII before the `@`.
    NonAsciiLocal(char),
    /// An ASCII character RFC 5322's `atext` does not allow before the `@` (a space, a quote,
    /// a bracket, a control character).
    BadLocalChar(char),
    /// A leading, trailing or doubled `.` before the `@`.
    MisplacedDot,
    EmptyDomain,
    /// A domain of one label (`a@localhost`).
    NoDot,
    EmptyLabel,
    LabelTooLong(usize),
    /// A character outside ASCII in the domain (an internationalised name not written as
    /// `xn--`).
    NonAsciiDomain(char),
    BadDomainChar(char),
    MisplacedHyphen,
    /// A top-level label that is not two letters or more, nor an `xn--` name.
    BadTopLevel(String),
}

impl EmailProblem {
    /// The rule it breaks, for a person.
    pub fn rule(&self) -> &'static str {
        use EmailProblem::*;
        match self {
            TooLong(_) | LocalTooLong(_) | LabelTooLong(_) => "RFC 5321 lengths",
            NoAt | SeveralAts | EmptyLocal | EmptyDomain => "one `@` between a name and a domain",
            NonAsciiLocal(_) | NonAsciiDomain(_) => "ASCII only (the service's format: email)",
            BadLocalChar(_) | MisplacedDot => "RFC 5321 dot-atom before the `@`, no quoting",
            NoDot | EmptyLabel | BadDomainChar(_) | MisplacedHyphen | BadTopLevel(_) => {
                "a domain of letters, digits and hyphens, with a top-level name"
            }
        }
    }
}

impl fmt::Display for EmailProblem {
    /// What is wrong, to follow "it": `has no `@``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EmailProblem::*;
        match self {
            TooLong(n) => write!(f, "is {n} bytes long; the limit is {MAX_EMAIL_BYTES}"),
            NoAt => write!(f, "has no `@`"),
            SeveralAts => write!(f, "has more than one `@`"),
            EmptyLocal => write!(f, "has nothing before the `@`"),
            LocalTooLong(n) => write!(
                f,
                "has {n} bytes before the `@`; the limit is {MAX_EMAIL_LOCAL_BYTES}"
            ),
            NonAsciiLocal(c) => write!(f, "contains `{c}`, a letter outside ASCII, before the `@`"),
            BadLocalChar(c) => write!(f, "contains `{}` before the `@`", c.escape_default()),
            MisplacedDot => write!(f, "has a misplaced `.` before the `@`"),
            EmptyDomain => write!(f, "has no domain after the `@`"),
            NoDot => write!(f, "has no dot in its domain"),
            EmptyLabel => write!(f, "has an empty part in its domain"),
            LabelTooLong(n) => write!(
                f,
                "has a part of {n} bytes in its domain; the limit is {MAX_DOMAIN_LABEL_BYTES}"
            ),
            NonAsciiDomain(c) => write!(f, "contains `{c}`, a letter outside ASCII, in its domain"),
            BadDomainChar(c) => write!(f, "contains `{}` in its domain", c.escape_default()),
            MisplacedHyphen => write!(f, "has a misplaced `-` in its domain"),
            BadTopLevel(t) => write!(f, "has no valid top-level domain (`{t}`)"),
        }
    }
}

/// Why `address` is not one the service takes, if it is not (see the module's rule).
pub fn email_problem(address: &str) -> Option<EmailProblem> {
    use EmailProblem::*;
    if address.len() > MAX_EMAIL_BYTES {
        return Some(TooLong(address.len()));
    }
    let (local, domain) = match address.split_once('@') {
        None => return Some(NoAt),
        Some((_, d)) if d.contains('@') => return Some(SeveralAts),
        Some(parts) => parts,
    };
    if local.is_empty() {
        return Some(EmptyLocal);
    }
    if let Some(problem) = local_problem(local) {
        return Some(problem);
    }
    domain_problem(domain)
}

fn local_problem(local: &str) -> Option<EmailProblem> {
    use EmailProblem::*;
    if let Some(c) = local.chars().find(|c| !c.is_ascii()) {
        return Some(NonAsciiLocal(c));
    }
    if let Some(c) = local
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || EMAIL_LOCAL_PUNCTUATION.contains(*c)))
    {
        return Some(BadLocalChar(c));
    }
    if local.len() > MAX_EMAIL_LOCAL_BYTES {
        return Some(LocalTooLong(local.len()));
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Some(MisplacedDot);
    }
    None
}

fn domain_problem(domain: &str) -> Option<EmailProblem> {
    use EmailProblem::*;
    if domain.is_empty() {
        return Some(EmptyDomain);
    }
    if let Some(c) = domain.chars().find(|c| !c.is_ascii()) {
        return Some(NonAsciiDomain(c));
    }
    if !domain.contains('.') {
        return Some(NoDot);
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Some(EmptyLabel);
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Some(BadDomainChar(c));
        }
        if label.len() > MAX_DOMAIN_LABEL_BYTES {
            return Some(LabelTooLong(label.len()));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(MisplacedHyphen);
        }
    }
    let top = labels.last().copied().unwrap_or("");
    let letters = top.len() >= 2 && top.bytes().all(|b| b.is_ascii_alphabetic());
    let a_label = top.len() > 4 && top.to_ascii_lowercase().starts_with("xn--");
    if !(letters || a_label) {
        return Some(BadTopLevel(top.to_string()));
    }
    None
}

/// Whether the service takes `address` (see [`email_problem`]).
pub fn is_valid_email(address: &str) -> bool {
    email_problem(address).is_none()
}

/// Why a face value is below what the service takes, if it is.
pub fn face_value_problem(face_value: Decimal) -> Option<String> {
    (face_value < MIN_FACE_VALUE).then(|| {
        format!("{face_value} is below the service's smallest face value, {MIN_FACE_VALUE}")
    })
}

/// Whether `code` is written as a currency code (`^[A-Z]{3}$`).
pub fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// Whether an order can be paid in `currency` ([`PAYMENT_CURRENCIES`]).
pub fn is_payment_currency(currency: &str) -> bool {
    PAYMENT_CURRENCIES.contains(&currency)
}

/// Why a product selection of these codes is not one the service takes, if it is not: one
/// code (`SINGLE`, at least one character), or several distinct codes (`MULTIPLE`, at least
/// two).
pub fn products_problem(codes: &[&str]) -> Option<String> {
    if codes.is_empty() {
        return Some("names no product".into());
    }
    if let Some(n) = codes.iter().position(|c| c.is_empty()) {
        return Some(if codes.len() == 1 {
            "is an empty product code".into()
        } else {
            format!("has an empty product code at place {}", n + 1)
        });
    }
    for (n, code) in codes.iter().enumerate() {
        if codes[..n].contains(code) {
            return Some(format!(
                "names `{code}` twice; a choice holds distinct products"
            ));
        }
    }
    None
}

/// Whether `reference` is a `recipient_reference` the service takes (`^[A-Za-z0-9-_@.]+$`, at
/// most [`MAX_RECIPIENT_REFERENCE`]).
pub fn is_recipient_reference(reference: &str) -> bool {
    !reference.is_empty()
        && reference.len() <= MAX_RECIPIENT_REFERENCE
        && reference
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_@.".contains(c))
}

/// Whether `id` is a spend-rules template id (`^PSR-[0-9A-HJKMNP-TV-Z]{26}$`).
pub fn is_spend_rules_id(id: &str) -> bool {
    id.len() == 30
        && id.starts_with("PSR-")
        && id[4..]
            .chars()
            .all(|c| c.is_ascii_digit() || "ABCDEFGHJKMNPQRSTVWXYZ".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn currency_codes() {
        assert!(is_currency_code("USD"));
        assert!(!is_currency_code("usd"));
        assert!(!is_currency_code("US"));
        assert!(!is_currency_code("USDX"));
        assert!(!is_currency_code("ÜSD"));
    }

    #[test]
    fn addresses_the_service_takes() {
        for good in [
            "a@b.example",
            "first.last+tag@sub.example.com",
            "o'brien@example.co.uk",
            "x@xn--80ak6aa92e.xn--p1ai",
            "UPPER@EXAMPLE.ORG",
        ] {
            assert_eq!(email_problem(good), None, "{good}");
        }
    }

    #[test]
    fn addresses_the_service_refuses_name_the_rule() {
        let p = email_problem("marcus.garcía.10009@example.com").unwrap();
        assert_eq!(p, EmailProblem::NonAsciiLocal('í'));
        assert!(p.rule().contains("ASCII"), "{}", p.rule());
        assert!(p.to_string().contains("outside ASCII"), "{p}");
        assert_eq!(
            email_problem("a@exämple.de"),
            Some(EmailProblem::NonAsciiDomain('ä'))
        );
        for bad in [
            "plainaddress",
            "@example.com",
            "a@b@example.com",
            "a@example",
            "a@.example.com",
            "a@example..com",
            "a @example.com",
            "\"a b\"@example.com",
            "a@[127.0.0.1]",
            "a@-example.com",
            "a@example.c",
            "a@1.2.3.4",
            ".a@example.com",
            "a..b@example.com",
            "a@example.com.",
            "Jane <jane@example.com>",
            "mailto:a@example.com",
            "=HYPERLINK(\"x@example.com\")",
            "jürgen@example.de",
        ] {
            assert!(email_problem(bad).is_some(), "{bad}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(matches!(
            email_problem(&long),
            Some(EmailProblem::TooLong(_))
        ));
        let local = format!("{}@example.com", "a".repeat(65));
        assert_eq!(email_problem(&local), Some(EmailProblem::LocalTooLong(65)));
    }

    #[test]
    fn other_fields() {
        assert!(face_value_problem(Decimal::new(1, 3)).is_some());
        assert!(face_value_problem(Decimal::ZERO).is_some());
        assert_eq!(face_value_problem(Decimal::new(1, 2)), None);
        assert!(products_problem(&["A", "A"]).is_some());
        assert!(products_problem(&[""]).is_some());
        assert!(products_problem(&["A", ""]).is_some());
        assert_eq!(products_problem(&["A", "B"]), None);
        assert!(is_spend_rules_id("PSR-0123456789ABCDEFGHJKMNPQRS"));
        assert!(!is_spend_rules_id("PSR-0123456789ABCDEFGHJKMNPQRI"));
        assert!(is_recipient_reference("user_1@x.example"));
        assert!(!is_recipient_reference("user 1"));
    }
}
