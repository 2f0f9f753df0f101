//! The columns of a batch file's header: which known column each name stands for (aliases, case
//! and spacing ignored), the columns carried through unread, and what is refused with a hint —
//! a name twice, two names for one column, a name the result file uses, a required column
//! missing (with the column most like it), a known column misspelt ("did you mean").

use super::problem::Problem;

/// The columns the result file adds after the input columns (an input file may not use
/// them: see [`ColumnMap`]).
pub const RESULT_COLUMNS: [&str; 17] = [
    "status",
    "order_id",
    "item_id",
    "payout_url",
    "price",
    "discount",
    "error_type",
    "error_message",
    "completed_at",
    "payment_method",
    "debited_amount",
    "debited_currency",
    "payout_status",
    "payout_status_since",
    "payout_expires_at",
    "reissue_of",
    "charged_all_attempts",
];

/// Which index of a record holds which column paybatch knows (the default: none found yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnMap {
    pub reference: usize,
    pub product_code: usize,
    pub face_value: usize,
    pub currency: usize,
    pub distribution: Option<usize>,
    pub email: Option<usize>,
    pub payment_currency: Option<usize>,
    pub country: Option<usize>,
    pub card_id: Option<usize>,
}

/// The columns paybatch knows, with the header names accepted for each (after normalisation:
/// trimmed, lower case, spaces and hyphens as `_`). The first name is the canonical one.
pub const KNOWN_COLUMNS: [(&str, &[&str]); 9] = [
    ("reference", &["reference", "ref", "id", "row_id"]),
    (
        "product_code",
        &["product_code", "product", "code", "products"],
    ),
    ("face_value", &["face_value", "amount", "value"]),
    ("currency", &["currency"]),
    (
        "distribution",
        &["distribution", "distribution_method", "delivery"],
    ),
    ("email", &["email", "email_address"]),
    ("payment_currency", &["payment_currency", "pay_currency"]),
    ("country", &["country"]),
    ("card_id", &["card_id"]),
];

const REQUIRED: [&str; 4] = ["reference", "product_code", "face_value", "currency"];

/// What leaving a known column out changes, said when a header seems to be a misspelling of it.
fn without(canonical: &str) -> &'static str {
    match canonical {
        "email" => "no row has an email address, so every row is paid as a PAYOUT_LINK",
        "distribution" => {
            "every row's delivery is guessed: EMAIL when an email is given, else PAYOUT_LINK"
        }
        "payment_currency" => "every row is paid from the balance in its product's currency",
        "country" => "no row's country is checked against its product",
        "card_id" => "every row is paid from the balance instead of the card",
        _ => "the column is missing",
    }
}

/// A header name as compared for closeness: lower case, without spaces, `-` and `_`.
fn squeeze(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The known column (its index in [`KNOWN_COLUMNS`]) a header that is none of the names
/// paybatch knows is a likely misspelling of: equal to one of its names once case, spaces, `-`
/// and `_` are ignored, or within two edits of one (one for a name of four letters, none for
/// shorter ones such as `id` and `ref`, which too many other names are close to).
fn misspelling_of(header: &str) -> Option<usize> {
    let squeezed = squeeze(header);
    if squeezed.is_empty() {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for (k, (_, aliases)) in KNOWN_COLUMNS.iter().enumerate() {
        for alias in aliases.iter() {
            let known = squeeze(alias);
            let allowed = match known.chars().count() {
                0..=3 => 0,
                4 => 1,
                _ => 2,
            };
            if let Some(d) = crate::text::distance_within(&squeezed, &known, allowed)
                && best.is_none_or(|(_, bd)| d < bd)
            {
                best = Some((k, d));
            }
        }
    }
    best.map(|(k, _)| k)
}

/// How far a header (squeezed, see [`squeeze`]) is from a name of a known column (squeezed),
/// when it is close enough to be suggested for it: within the edits a misspelling may have (two,
/// one for a name of four letters, none for shorter ones, as in [`misspelling_of`]), or the name
/// with more written after it (`currency code`, `ref no`; names of three letters or more) or
/// before it (`total amount`; names of six letters or more). The distance is the number of edits,
/// or of letters added.
fn closeness(header: &str, name: &str) -> Option<usize> {
    let length = name.chars().count();
    let allowed = match length {
        0..=3 => 0,
        4 => 1,
        _ => 2,
    };
    let edits = crate::text::distance_within(header, name, allowed);
    let added = header.chars().count().saturating_sub(length);
    let extended = (length >= 3 && header.starts_with(name)
        || length >= 6 && header.ends_with(name))
    .then_some(added);
    edits.into_iter().chain(extended).min()
}

/// Among `headers` (index, name) that are none of the known names, the one nearest to the known
/// column `k` by [`closeness`] to one of its names (case, spaces, `-` and `_` ignored); the first
/// of two as near.
fn nearest_for(k: usize, headers: &[(usize, &String)]) -> Option<(usize, String)> {
    let names: Vec<String> = KNOWN_COLUMNS[k].1.iter().map(|a| squeeze(a)).collect();
    headers
        .iter()
        .filter_map(|(i, h)| {
            let squeezed = squeeze(h);
            names
                .iter()
                .filter_map(|n| closeness(&squeezed, n))
                .min()
                .map(|d| (d, *i, (*h).clone()))
        })
        .min_by_key(|(d, i, _)| (*d, *i))
        .map(|(_, i, h)| (i, h))
}

/// A header name as compared: trimmed, lower case, spaces and hyphens turned into `_`.
pub fn normalize_header(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == ' ' || c == '-' { '_' } else { c })
        .collect()
}

/// The canonical name of the known column `name` stands for, if any.
pub fn canonical_column(name: &str) -> Option<&'static str> {
    let n = normalize_header(name);
    KNOWN_COLUMNS
        .iter()
        .find(|(_, aliases)| aliases.contains(&n.as_str()))
        .map(|(canonical, _)| *canonical)
}

/// Where each known column is (by its index in [`KNOWN_COLUMNS`]), if the header has it.
type Found = [Option<usize>; 9];

/// The columns whose names paybatch does not know (index, name as written): carried through,
/// or misspelt.
type Unknown<'h> = Vec<(usize, &'h String)>;

impl ColumnMap {
    /// Maps a header row. Refuses duplicate names, missing required columns and names the result
    /// file uses for its own columns.
    pub fn from_headers(headers: &[String], header_line: u64) -> Result<Self, Problem> {
        let (found, unknown) = find_columns(headers, header_line)?;
        if let Some(problem) = missing_columns(&found, &unknown, headers, header_line) {
            return Err(problem);
        }
        if let Some(problem) = misspelt_column(&found, &unknown, header_line) {
            return Err(problem);
        }
        let req = |k: usize| found[k].unwrap_or(0);
        Ok(ColumnMap {
            reference: req(0),
            product_code: req(1),
            face_value: req(2),
            currency: req(3),
            distribution: found[4],
            email: found[5],
            payment_currency: found[6],
            country: found[7],
            card_id: found[8],
        })
    }
}

/// The known columns of a header, and the columns whose names paybatch does not know (carried
/// through, or misspelt). Refuses a name twice, two names for one column and a name the result
/// file uses.
fn find_columns(headers: &[String], header_line: u64) -> Result<(Found, Unknown<'_>), Problem> {
    let mut found: Found = [None; 9];
    // Each name once, with its first column: a hash map, so that a header of a hundred
    // thousand columns is checked in one pass.
    let mut seen: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(headers.len());
    let mut unknown: Unknown = Vec::new();
    for (i, h) in headers.iter().enumerate() {
        let norm = normalize_header(h);
        if norm.is_empty() {
            continue;
        }
        if let Some(first) = seen.get(&norm) {
            return Err(Problem::at(
                header_line,
                i,
                h,
                format!(
                    "column `{h}` appears twice in the header (first as column {})",
                    first + 1
                ),
            )
            .with_help("rename or remove one of the two columns"));
        }
        seen.insert(norm.clone(), i);
        if RESULT_COLUMNS.contains(&norm.as_str()) {
            return Err(Problem::at(
                header_line,
                i,
                h,
                format!("column `{h}` is a name the result file uses for its own columns"),
            )
            .with_help(
                "rename the column; if this is the result file of an earlier run, use the \
                 original input file instead",
            ));
        }
        match KNOWN_COLUMNS
            .iter()
            .position(|(_, aliases)| aliases.contains(&norm.as_str()))
        {
            Some(k) => {
                if let Some(first) = found[k] {
                    return Err(two_for_one(headers, header_line, k, first, i));
                }
                found[k] = Some(i);
            }
            None => unknown.push((i, h)),
        }
    }
    Ok((found, unknown))
}

/// Columns `first` and `i` of `headers` both stand for the known column `k`.
fn two_for_one(headers: &[String], header_line: u64, k: usize, first: usize, i: usize) -> Problem {
    let canonical = KNOWN_COLUMNS[k].0;
    let h = &headers[i];
    Problem::at(
        header_line,
        i,
        h,
        format!(
            "columns `{}` (column {}) and `{h}` (column {}) both stand for `{canonical}`",
            headers[first],
            first + 1,
            i + 1
        ),
    )
    .with_help("keep one of them and rename or remove the other")
}

/// The required columns the header lacks, if any, with the column found that is nearest to
/// one of them (most likely it, misspelt) and the other names the first may have.
fn missing_columns(
    found: &Found,
    unknown: &[(usize, &String)],
    headers: &[String],
    header_line: u64,
) -> Option<Problem> {
    let missing: Vec<&str> = REQUIRED
        .iter()
        .enumerate()
        .filter(|(k, _)| found[*k].is_none())
        .map(|(_, name)| *name)
        .collect();
    let first = *missing.first()?;
    let quoted: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
    let list = match quoted.as_slice() {
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
        [] => String::new(),
    };
    let aliases = KNOWN_COLUMNS
        .iter()
        .find(|(c, _)| *c == first)
        .map(|(_, a)| {
            a.iter()
                .skip(1)
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let also = if aliases.is_empty() {
        String::new()
    } else {
        format!(" (`{first}` may also be named {aliases})")
    };
    // The column found that is nearest to a missing one: most likely it, misspelt.
    let guess = missing.iter().find_map(|m| {
        let k = KNOWN_COLUMNS.iter().position(|(c, _)| c == m)?;
        nearest_for(k, unknown).map(|(i, h)| (*m, i, h))
    });
    let (did_you_mean, rename) = match &guess {
        Some((m, i, h)) => (
            format!("; did you mean `{h}` (column {})?", i + 1),
            format!("rename column {} to `{m}`; ", i + 1),
        ),
        None => (String::new(), String::new()),
    };
    Some(
        Problem::file(
            header_line,
            format!("the header has no {list} column{did_you_mean}"),
        )
        .with_help(format!(
            "{rename}the first line must name the columns; required: reference, \
             product_code, face_value, currency{also}; found: {}",
            headers.join(", ")
        )),
    )
}

/// A column paybatch does not know is carried through unread: one that is a misspelling of a
/// known column would silently change how the rows are paid.
fn misspelt_column(
    found: &Found,
    unknown: &[(usize, &String)],
    header_line: u64,
) -> Option<Problem> {
    let (i, h, k) = unknown
        .iter()
        .find_map(|(i, h)| misspelling_of(h).map(|k| (*i, *h, k)))?;
    let (canonical, aliases) = KNOWN_COLUMNS[k];
    let others: Vec<String> = aliases
        .iter()
        .filter(|a| **a != canonical)
        .map(|a| format!("`{a}`"))
        .collect();
    let also = if others.is_empty() {
        String::new()
    } else {
        format!(" (or {})", others.join(", "))
    };
    let consequence = if found[k].is_some() {
        format!(
            "it would be carried through unread beside the `{canonical}` column (column {})",
            found[k].map_or(0, |c| c + 1)
        )
    } else {
        format!(
            "a column paybatch does not know is carried through unread: {}",
            without(canonical)
        )
    };
    Some(
        Problem::at(
            header_line,
            i,
            h,
            format!("column `{h}` is not a column paybatch knows; did you mean `{canonical}`?"),
        )
        .with_help(format!(
            "rename it `{canonical}`{also}; {consequence}; a column meant to be carried \
             through needs a name not close to {canonical}"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::fixtures::reader;

    #[test]
    fn maps_aliases_case_insensitively_and_keeps_extra_columns() {
        let r = reader(
            " Ref ;PRODUCT;Amount;Currency;Email Address;Delivery;department\nR1;A;1;USD;;;HR\n",
        )
        .unwrap();
        assert_eq!(r.delimiter(), b';');
        let c = r.columns();
        assert_eq!(
            (c.reference, c.product_code, c.face_value, c.currency),
            (0, 1, 2, 3)
        );
        assert_eq!(c.email, Some(4));
        assert_eq!(c.distribution, Some(5));
        assert_eq!(c.country, None);
        assert_eq!(r.headers()[0], "Ref");
        assert_eq!(r.headers()[6], "department");
    }

    #[test]
    fn duplicate_and_missing_columns_are_named() {
        let e = reader("reference,amount,product_code,value,currency\nR,1,A,1,USD\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert_eq!(e.column, Some(4));
        assert!(e.message.contains("`amount`") && e.message.contains("`value`"));
        assert!(e.help.is_some());

        let e = reader("reference,Email,product_code,face_value,currency,EMAIL\nR,,A,1,USD,\n")
            .unwrap_err();
        assert!(e.message.contains("appears twice"), "{e}");

        let e = reader("ref,amount,email\nR,1,a@example.com\n").unwrap_err();
        assert!(e.message.contains("`product_code`"), "{e}");
        assert!(e.message.contains("`currency`"), "{e}");
        assert!(e.help.as_deref().unwrap_or("").contains("required"));

        let e =
            reader("reference,product_code,face_value,currency,status\nR,A,1,USD,x\n").unwrap_err();
        assert!(e.message.contains("result file"), "{e}");
    }

    #[test]
    fn a_misspelt_known_column_is_refused_with_the_name_meant() {
        // The email column misnamed and no distribution column: every row would have been a
        // payout link.
        let e = reader(
            "reference,product_code,face_value,currency,e-mail address,department\nR,A,1,USD,a@example.com,HR\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (1, Some(5)));
        assert!(e.message.contains("did you mean `email`?"), "{e}");
        assert!(
            e.help.as_deref().unwrap_or("").contains("PAYOUT_LINK"),
            "{e}"
        );
        for (header, meant) in [
            ("Emial", "email"),
            ("mail", "email"),
            ("E_Mail", "email"),
            ("distributon", "distribution"),
            ("Delivry", "distribution"),
            ("paymentcurrency", "payment_currency"),
            ("countr", "country"),
            ("card-no", "card_id"),
            ("cardid", "card_id"),
        ] {
            let e = reader(&format!(
                "reference,product_code,face_value,currency,{header}\nR,A,1,USD,x\n"
            ))
            .unwrap_err();
            assert!(
                e.message.contains(&format!("did you mean `{meant}`?")),
                "{header}: {e}"
            );
        }
        // Names far from every known one are carried through, as before.
        for header in [
            "department",
            "cost_center",
            "note",
            "notes",
            "name",
            "product_name",
            "team",
            "zip",
            "cost",
            "date",
            "comment",
            "employee_id",
            "country_code",
            "amount_usd",
        ] {
            let r = reader(&format!(
                "reference,product_code,face_value,currency,{header}\nR,A,1,USD,x\n"
            ));
            assert!(r.is_ok(), "{header}: {:?}", r.err());
        }
    }

    #[test]
    fn a_missing_required_column_names_the_column_most_like_it() {
        let e = reader("reference,product_code,fase value,currency\nR,A,1,USD\n").unwrap_err();
        assert!(
            e.message
                .contains("no `face_value` column; did you mean `fase value` (column 3)?"),
            "{e}"
        );
        assert!(
            e.help
                .as_deref()
                .unwrap_or("")
                .starts_with("rename column 3 to `face_value`"),
            "{e}"
        );
        let e = reader("ref_no,product_code,face_value,currency\nR,A,1,USD\n").unwrap_err();
        assert!(
            e.message.contains("did you mean `ref_no` (column 1)?"),
            "{e}"
        );
        // Nothing like it: no guess.
        let e = reader("reference,product_code,price,currency\nR,A,1,USD\n").unwrap_err();
        assert!(!e.message.contains("did you mean"), "{e}");
    }

    #[test]
    fn a_missing_required_column_names_a_column_that_extends_its_name() {
        // `currency code`: the name with more after it, too far for a misspelling.
        let e = reader("reference,product_code,face_value,currency code\nR,A,1,USD\n").unwrap_err();
        assert!(
            e.message
                .contains("no `currency` column; did you mean `currency code` (column 4)?"),
            "{e}"
        );
        let e = reader("ref,product_code,total amount,currency\nR,A,1,USD\n").unwrap_err();
        assert!(
            e.message
                .contains("no `face_value` column; did you mean `total amount` (column 3)?"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_required_column_suggests_only_a_column_reasonably_close() {
        // Two edits of `code` (four letters) or of `ref` (three), or `code` after a word: other
        // columns, not misspellings.
        for header in [
            "reference,note,face_value,currency",
            "reference,postcode,face_value,currency",
            "fee,product_code,face_value,currency",
            "no,product_code,face_value,currency",
        ] {
            let e = reader(&format!("{header}\nR,A,1,USD\n")).unwrap_err();
            assert!(e.message.starts_with("the header has no"), "{header}: {e}");
            assert!(!e.message.contains("did you mean"), "{header}: {e}");
        }
    }

    #[test]
    fn a_header_of_many_columns_is_checked_in_one_pass() {
        let mut header: Vec<String> = (0..50_000).map(|i| format!("c{i}")).collect();
        header.extend(["reference", "product_code", "face_value", "currency"].map(String::from));
        let map = ColumnMap::from_headers(&header, 1).expect("valid");
        assert_eq!(map.reference, 50_000);
        header.push("c17".into());
        let e = ColumnMap::from_headers(&header, 1).unwrap_err();
        assert!(e.message.contains("first as column 18"), "{e}");
    }
}
