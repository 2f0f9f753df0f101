//! How two references compare: as a person reads them. `EMP-1`, `emp-1`, `ＥＭＰ-１` (full-width)
//! and `ЕМР-1` (Cyrillic letters that look like Latin ones) are one reference to a reader, so they
//! are one reference to paybatch: within a file, across the batches of a ledger, and wherever
//! else a reference is looked for ([`fold_reference`]). References equal once `-`, `_` and
//! spaces are left out too (`EMP_1`, `EMP 1`, `EMP1`) are most likely one, and are named as such,
//! never taken as one ([`loose_reference`]).
//!
//! The fold, a character at a time, after the Unicode compatibility forms are folded (NFKC:
//! full-width letters and digits, ligatures, mathematical letters, the no-break space):
//!
//! - letters are taken in lower case (Unicode's, not only ASCII's);
//! - a letter or sign outside ASCII that Unicode's table of confusables (UTS #39, its skeletons)
//!   gives the look of an ASCII one becomes that ASCII one, of its own kind: a capital the
//!   capital (Cyrillic `І` is Latin `I`, not the digit `1` that looks the same), a digit a
//!   digit. A letter is mapped by its capital where it has one, so that its two cases fold
//!   alike (Cyrillic `м` as `М`, Latin `M`);
//! - ASCII is never mapped to other ASCII: `0` and `O`, `1` and `l`, `rn` and `m` stay apart.
//!
//! What a fold makes is for comparing only: the idempotency key of a row is made from its
//! reference as written, and the ledger and the result file keep that spelling.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use unicode_normalization::UnicodeNormalization;

/// What a loose comparison ([`loose_reference`]) leaves out.
pub const LOOSE_SEPARATORS: [char; 3] = ['-', '_', ' '];

/// The reference as a person reads it: compared with another's, equal when the two are one
/// reference (see the module's notes). The same text always folds to the same text.
pub fn fold_reference(reference: &str) -> String {
    folded(reference).collect()
}

/// The reference folded ([`fold_reference`]) without its `-`, `_` and spaces: two references of
/// one loose form but not one fold are most likely one reference spelt two ways.
pub fn loose_reference(reference: &str) -> String {
    loose(reference).collect()
}

/// A 64-bit hash of the loose form of a reference ([`loose_reference`]), the same on every
/// machine (64-bit FNV-1a of its UTF-8), made without the form: what a batch keeps of each
/// reference of the other batches to find those that fold or loosely fold to one of its own.
/// Two references of one hash are compared before anything is said, so a collision costs a
/// comparison.
pub fn loose_hash(reference: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut utf8 = [0u8; 4];
    for c in loose(reference) {
        for &b in c.encode_utf8(&mut utf8).as_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h as i64
}

/// Whether two references are one as a person reads them: their folds are equal
/// ([`fold_reference`]), compared without making them.
pub fn same_reference(a: &str, b: &str) -> bool {
    a == b || folded(a).eq(folded(b))
}

/// A reference that hashes as its fold ([`fold_reference`]), without making it: for tables of
/// the references seen, keyed by what a person reads.
#[derive(Debug, Clone, Copy)]
pub struct Folded<'a>(pub &'a str);

impl Hash for Folded<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for c in folded(self.0) {
            state.write_u32(u32::from(c));
        }
        // Not a character: the reference ends here.
        state.write_u32(u32::MAX);
    }
}

/// The loose form, a character at a time.
fn loose(reference: &str) -> impl Iterator<Item = char> + '_ {
    folded(reference).filter(|c| !LOOSE_SEPARATORS.contains(c))
}

/// The fold, a character at a time: ASCII without the look-up of the rest.
fn folded(reference: &str) -> Fold<'_> {
    if reference.is_ascii() {
        Fold::Ascii(reference.bytes())
    } else {
        Fold::Unicode(Box::new(
            reference
                .chars()
                .nfkc()
                .flat_map(char::to_lowercase)
                .map(twin),
        ))
    }
}

enum Fold<'a> {
    Ascii(std::str::Bytes<'a>),
    Unicode(Box<dyn Iterator<Item = char> + 'a>),
}

impl Iterator for Fold<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        match self {
            Fold::Ascii(bytes) => bytes.next().map(|b| char::from(b.to_ascii_lowercase())),
            Fold::Unicode(chars) => chars.next(),
        }
    }
}

/// A character in lower case as it folds: itself, or the ASCII character it looks like.
fn twin(c: char) -> char {
    if c.is_ascii() {
        return c;
    }
    let mut upper = c.to_uppercase();
    let capital = match (upper.next(), upper.next()) {
        (Some(u), None) if u != c => Some(u),
        _ => None,
    };
    capital
        .and_then(|u| ascii_twin(u, Kind::Capital))
        .or_else(|| ascii_twin(c, Kind::of(c)))
        .unwrap_or(c)
}

/// What a character is, to pick its twin among ASCII characters that look alike.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Capital,
    Small,
    Digit,
    Other,
}

impl Kind {
    fn of(c: char) -> Self {
        if c.is_uppercase() {
            Kind::Capital
        } else if c.is_lowercase() {
            Kind::Small
        } else if c.is_numeric() {
            Kind::Digit
        } else {
            Kind::Other
        }
    }

    fn fits(self, a: char) -> bool {
        match self {
            Kind::Capital => a.is_ascii_uppercase(),
            Kind::Small => a.is_ascii_lowercase(),
            Kind::Digit => a.is_ascii_digit(),
            Kind::Other => !a.is_ascii_alphanumeric(),
        }
    }
}

/// The ASCII character (in lower case) that `c` looks like, of its kind, or the one ASCII
/// character of its look when there is one.
fn ascii_twin(c: char, kind: Kind) -> Option<char> {
    if c.is_ascii() {
        return Some(c.to_ascii_lowercase());
    }
    let prototype = single_skeleton(c)?;
    let alike = looks()?.get(&prototype)?;
    let pick = alike
        .iter()
        .find(|a| kind.fits(**a))
        .or_else(|| (alike.len() == 1).then(|| &alike[0]))?;
    Some(pick.to_ascii_lowercase())
}

/// The skeleton of one character (UTS #39) when it is one character.
fn single_skeleton(c: char) -> Option<char> {
    let mut utf8 = [0u8; 4];
    let mut skeleton = unicode_security::skeleton(c.encode_utf8(&mut utf8));
    match (skeleton.next(), skeleton.next()) {
        (Some(p), None) => Some(p),
        _ => None,
    }
}

/// The ASCII characters of each look: by the skeleton they share (`l` for `1`, `I`, `l` and
/// `|`), made once from the table of confusables.
fn looks() -> Option<&'static HashMap<char, Vec<char>>> {
    static LOOKS: OnceLock<HashMap<char, Vec<char>>> = OnceLock::new();
    Some(LOOKS.get_or_init(|| {
        let mut looks: HashMap<char, Vec<char>> = HashMap::new();
        for a in (0x20u8..0x7f).map(char::from) {
            if let Some(p) = single_skeleton(a) {
                looks.entry(p).or_default().push(a);
            }
        }
        looks
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        let same = fold_reference(a) == fold_reference(b);
        assert_eq!(same_reference(a, b), same, "{a} / {b}");
        same
    }

    #[test]
    fn case_width_and_look_alike_letters_fold_to_one_reference() {
        for other in [
            "emp-1",
            "Emp-1",
            "ＥＭＰ-１", // full-width letters and digits
            "ｅｍｐ-１",
            "\u{415}\u{41c}\u{420}-1", // Cyrillic ЕМР
            "\u{435}\u{43c}\u{440}-1", // Cyrillic емр, in lower case
            "\u{395}\u{39c}\u{3a1}-1", // Greek ΕΜΡ
            "EMP-\u{1d7cf}",           // mathematical bold digit one
        ] {
            assert!(same("EMP-1", other), "{other}: {}", fold_reference(other));
            assert_eq!(fold_reference(other), "emp-1", "{other}");
        }
        // Cyrillic І is the capital I it looks like, not the digit or the small l.
        assert_eq!(fold_reference("\u{406}NV-7"), "inv-7");
        assert_eq!(fold_reference("\u{456}nv-7"), "inv-7");
        // Cyrillic О is the letter O, not the digit 0.
        assert_eq!(fold_reference("\u{41e}RD-5"), "ord-5");
        // Unicode's lower case, not only ASCII's.
        assert!(same("ÉLODIE-1", "élodie-1"));
    }

    #[test]
    fn what_a_person_reads_as_another_reference_stays_another() {
        for (a, b) in [
            ("EMP-1", "EMP-2"),
            ("EMP-10", "EMP-1O"), // ASCII is never mapped to other ASCII
            ("INV-1", "INV-l"),
            ("TURN-3", "TUM-3"),
            ("JOSE-1", "JOSÉ-1"),
            ("EMP-1", "EMP_1"), // a likely repeat, not one reference
            ("EMP-1", "EMP1"),
            ("A.1", "A:1"),
            ("\u{416}-1", "X-1"), // Cyrillic Ж has no Latin twin
        ] {
            assert!(!same(a, b), "{a} / {b}");
        }
    }

    #[test]
    fn the_loose_form_leaves_out_dashes_underscores_and_spaces() {
        let loose = loose_reference("EMP-1");
        for other in [
            "EMP_1",
            "EMP 1",
            "emp1",
            "ＥＭＰ_１",
            "E-M-P 1",
            "EMP\u{3000}1",
        ] {
            assert_eq!(loose_reference(other), loose, "{other}");
            assert_eq!(loose_hash(other), loose_hash("EMP-1"), "{other}");
        }
        assert_eq!(loose, "emp1");
        assert_ne!(loose_hash("EMP-1"), loose_hash("EMP-2"));
        assert_ne!(loose_reference("A.1"), loose_reference("A1"));
    }

    /// The hash is FNV-1a of the loose form, the same on every machine.
    #[test]
    fn the_loose_hash_is_stable() {
        assert_eq!(loose_hash(""), 0xcbf2_9ce4_8422_2325_u64 as i64);
        assert_eq!(loose_hash("a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_eq!(loose_hash("A-"), loose_hash("a"));
    }

    #[test]
    fn a_fold_folds_to_itself_and_hashes_as_its_text() {
        use std::hash::BuildHasher;
        let keys = std::collections::hash_map::RandomState::new();
        for r in [
            "EMP-1",
            "ＥＭＰ-１",
            "\u{415}\u{41c}\u{420}-1",
            "Straße 9",
            "\u{416}\u{416}-\u{406}",
            "ﬁle-2",
        ] {
            let f = fold_reference(r);
            assert_eq!(fold_reference(&f), f, "{r}");
            assert_eq!(keys.hash_one(Folded(r)), keys.hash_one(Folded(&f)), "{r}");
        }
        assert_ne!(keys.hash_one(Folded("AB")), keys.hash_one(Folded("A")));
    }
}
