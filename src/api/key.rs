//! The API key: a secret that is never printed, logged or stored. Only its fingerprint is.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// Which environment a key belongs to, read from its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `wg...`
    Production,
    /// `xx...`
    Playground,
    Unknown,
}

/// An API key. `Debug` and `Display` show only the fingerprint.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Accepts a key after trimming surrounding white space (a trailing newline from a file).
    /// Refuses an empty key or one with characters that cannot go in an HTTP header.
    pub fn new(raw: &str) -> Result<Self, String> {
        let key = raw.trim();
        if key.is_empty() {
            return Err("the API key is empty".into());
        }
        if !key.chars().all(|c| c.is_ascii_graphic()) {
            return Err("the API key holds characters that cannot be sent in a header (spaces or non-ASCII); was it copied completely?".into());
        }
        remember(key);
        Ok(ApiKey(key.to_string()))
    }

    pub fn kind(&self) -> KeyKind {
        if self.0.starts_with("wg") {
            KeyKind::Production
        } else if self.0.starts_with("xx") {
            KeyKind::Playground
        } else {
            KeyKind::Unknown
        }
    }

    /// `sha256:` and the first 16 hex digits of the key's SHA-256: safe to store and show.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        format!("sha256:{}", &hex::encode(digest)[..16])
    }

    /// The secret itself, for the `X-Api-Key` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({})", self.fingerprint())
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.fingerprint())
    }
}

/// What is shown instead of a value that is, holds or looks like an API key.
pub const CONCEALED: &str = "(a value that looks like an API key, not shown)";

/// The shortest value taken for a key by its prefix alone ([`conceal`]).
const KEY_LIKE_MIN: usize = 16;

/// The keys this process was given: every key read (from `PAYBATCH_API_KEY` or a key file), and
/// `PAYBATCH_API_KEY` itself even where the environment needs no key.
fn configured() -> &'static Mutex<Vec<String>> {
    static KEYS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Vec::new();
        if let Ok(v) = std::env::var(crate::environment::API_KEY_VAR) {
            let v = v.trim();
            if !v.is_empty() {
                keys.push(v.to_string());
            }
        }
        Mutex::new(keys)
    })
}

fn remember(key: &str) {
    let mut keys = configured().lock().unwrap_or_else(|e| e.into_inner());
    if !keys.iter().any(|k| k == key) {
        keys.push(key.to_string());
    }
}

/// A character a key may hold (for cutting a text into words; a configured key is found
/// whatever its characters).
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-.+/=~".contains(c)
}

/// Whether `word` starts like a key (`xx` or `wg`, in lower case: the service's keys do, and a
/// key is told from its prefix that way, [`ApiKey::kind`]) and is as long as one (a run
/// of `x` alone is a placeholder, not a key). References in capitals such as
/// `WG-2026-11-EMP-1042` stay readable; the configured key is hidden in any case.
fn key_like(word: &str) -> bool {
    word.len() >= KEY_LIKE_MIN
        && word.get(..2).is_some_and(|p| p == "xx" || p == "wg")
        && word.chars().any(|c| c != 'x')
}

/// `text` with every configured key in it ([`ApiKey::new`], `PAYBATCH_API_KEY`), and every word
/// that starts like a key (`xx` for the playground, `wg` for production, 16 characters or more),
/// replaced by [`CONCEALED`]. Every text of an input file that paybatch echoes (a cell, a header,
/// a line, in a problem, a hint or a message) goes through it: a key file given as the input, or
/// a key pasted into a cell, is never printed.
pub fn conceal(text: &str) -> Cow<'_, str> {
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    {
        let keys = configured().lock().unwrap_or_else(|e| e.into_inner());
        for key in keys.iter() {
            // Every cell of a result file and every printed line comes here: the common case,
            // no key in it, is found without an allocation.
            let held = !key.is_empty()
                && out
                    .as_bytes()
                    .windows(key.len())
                    .any(|w| w.eq_ignore_ascii_case(key.as_bytes()));
            if !held {
                continue;
            }
            let lower = out.to_ascii_lowercase();
            let needle = key.to_ascii_lowercase();
            let mut replaced = String::with_capacity(out.len());
            let mut rest = 0;
            // ASCII lowercasing keeps every byte offset.
            for (at, _) in lower.match_indices(&needle) {
                if at < rest {
                    continue;
                }
                replaced.push_str(&out[rest..at]);
                replaced.push_str(CONCEALED);
                rest = at + needle.len();
            }
            replaced.push_str(&out[rest..]);
            out = Cow::Owned(replaced);
        }
    }
    let has_key_like = || {
        out.split(|c: char| !key_char(c))
            .any(|w| key_like(w) && w != CONCEALED)
    };
    if !has_key_like() {
        return out;
    }
    let mut replaced = String::with_capacity(out.len());
    let mut word = String::new();
    let flush = |word: &mut String, into: &mut String| {
        if key_like(word) {
            into.push_str(CONCEALED);
        } else {
            into.push_str(word);
        }
        word.clear();
    };
    for c in out.chars() {
        if key_char(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut replaced);
            replaced.push(c);
        }
    }
    flush(&mut word, &mut replaced);
    Cow::Owned(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conceal_hides_keys_and_what_looks_like_one() {
        assert_eq!(conceal("R-001"), "R-001");
        assert!(matches!(conceal("plain text"), Cow::Borrowed(_)));
        assert_eq!(conceal("wg-01"), "wg-01");
        assert_eq!(conceal(&"x".repeat(40)), "x".repeat(40));
        assert_eq!(
            conceal("found: xx_abcdefghijklmnop, email"),
            format!("found: {CONCEALED}, email")
        );
        assert_eq!(
            conceal("`wg_ABCDEFGHIJKLMNOPQ` is not"),
            format!("`{CONCEALED}` is not")
        );
        // A reference in capitals that starts like a key's prefix is a reference.
        assert_eq!(conceal("WG-2026-11-EMP-1042"), "WG-2026-11-EMP-1042");
        assert_eq!(conceal("XXL-SHIRT-ORDER-000123"), "XXL-SHIRT-ORDER-000123");
        let _ = ApiKey::new("k3y:configured!ABC").unwrap();
        assert_eq!(
            conceal("a K3Y:CONFIGURED!abc b"),
            format!("a {CONCEALED} b")
        );
    }

    #[test]
    fn debug_and_display_never_show_the_key() {
        let k = ApiKey::new("xxSECRETSECRET\n").unwrap();
        assert!(!format!("{k:?}").contains("SECRET"));
        assert!(!format!("{k}").contains("SECRET"));
        assert_eq!(k.kind(), KeyKind::Playground);
        assert_eq!(k.expose(), "xxSECRETSECRET");
        assert!(k.fingerprint().starts_with("sha256:"));
    }

    #[test]
    fn refuses_empty_and_spaced_keys() {
        assert!(ApiKey::new("  ").is_err());
        assert!(ApiKey::new("xx abc").is_err());
        assert_eq!(ApiKey::new("wgabc").unwrap().kind(), KeyKind::Production);
    }
}
