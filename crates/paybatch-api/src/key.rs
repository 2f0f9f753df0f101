//! The API key: a secret that is never printed, logged or stored. Only its fingerprint is.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// The environment variable that holds the API key.
pub const API_KEY_VAR: &str = "PAYBATCH_API_KEY";

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

/// The shortest spelling of a key other than the key itself (without its prefix, in base64)
/// that is looked for: a shorter one would hide common words.
const SPELLING_MIN: usize = 8;

/// One spelling of a configured key, as looked for in a text: its bytes, whether in any case,
/// and each byte also found percent-encoded (`%78` for `x`, `%2F` for `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spelling {
    bytes: Vec<u8>,
    any_case: bool,
}

/// The keys this process was given and every spelling of them looked for ([`spellings`]),
/// longest first; `by_first` holds, for each byte, the spellings a text may spell from it (a
/// `%` may start any of them, percent-encoded), and `shortest` the length of the shortest
/// spelling (a shorter text holds none).
#[derive(Clone)]
struct Known {
    keys: Vec<String>,
    spellings: Vec<Spelling>,
    by_first: Vec<Vec<usize>>,
    shortest: usize,
}

impl Known {
    fn new() -> Self {
        Known {
            keys: Vec::new(),
            spellings: Vec::new(),
            by_first: vec![Vec::new(); 256],
            shortest: usize::MAX,
        }
    }

    fn add(&mut self, key: &str) {
        if key.is_empty() || self.keys.iter().any(|k| k == key) {
            return;
        }
        self.keys.push(key.to_string());
        for s in spellings(key) {
            if !self.spellings.contains(&s) {
                self.spellings.push(s);
            }
        }
        self.spellings
            .sort_by_key(|s| std::cmp::Reverse(s.bytes.len()));
        self.by_first = vec![Vec::new(); 256];
        for (i, s) in self.spellings.iter().enumerate() {
            let first = s.bytes[0];
            let mut firsts = vec![first, b'%'];
            if s.any_case {
                firsts.extend([first.to_ascii_lowercase(), first.to_ascii_uppercase()]);
            }
            firsts.sort_unstable();
            firsts.dedup();
            for b in firsts {
                self.by_first[usize::from(b)].push(i);
            }
        }
        self.shortest = self
            .spellings
            .iter()
            .map(|s| s.bytes.len())
            .min()
            .unwrap_or(usize::MAX);
    }
}

/// The spellings of `key` that a text may hold: the key and the key without its prefix (`xx`,
/// `wg`) in any case, and their base64 in the standard and the URL-safe alphabet, padded or
/// not, at each of the three alignments base64 can put them in when they are part of a longer
/// text (what only the neighbouring bytes decide is left out). Every byte of every spelling may
/// also be percent-encoded ([`spelt_at`]).
fn spellings(key: &str) -> Vec<Spelling> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut sources = vec![key.as_bytes()];
    let prefixed = key
        .get(..2)
        .is_some_and(|p| p.eq_ignore_ascii_case("xx") || p.eq_ignore_ascii_case("wg"));
    if prefixed && key.len() - 2 >= SPELLING_MIN {
        sources.push(&key.as_bytes()[2..]);
    }
    let mut out: Vec<Spelling> = sources
        .iter()
        .map(|s| Spelling {
            bytes: s.to_vec(),
            any_case: true,
        })
        .collect();
    for source in &sources {
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            for lead in 0..3usize {
                let mut bytes = vec![0u8; lead];
                bytes.extend_from_slice(source);
                let text = engine.encode(&bytes);
                // The characters that depend on the source's bits alone.
                let from = (8 * lead).div_ceil(6);
                let to = 8 * (lead + source.len()) / 6;
                if to >= from + SPELLING_MIN {
                    out.push(Spelling {
                        bytes: text.as_bytes()[from..to].to_vec(),
                        any_case: false,
                    });
                }
            }
        }
    }
    out
}

/// The value of the two hexadecimal digits at the start of `hex`.
fn hex_pair(hex: &[u8]) -> Option<u8> {
    let digit = |b: u8| char::from(b).to_digit(16);
    let (hi, lo) = (digit(*hex.first()?)?, digit(*hex.get(1)?)?);
    u8::try_from(hi * 16 + lo).ok()
}

/// Where `spelling` ends when `text` spells it from `at` on, each byte as it is or
/// percent-encoded.
fn spelt_at(text: &[u8], at: usize, spelling: &Spelling) -> Option<usize> {
    let mut j = at;
    for &want in &spelling.bytes {
        let same = |b: u8| {
            if spelling.any_case {
                b.eq_ignore_ascii_case(&want)
            } else {
                b == want
            }
        };
        let here = *text.get(j)?;
        if same(here) {
            j += 1;
        } else if here == b'%' && hex_pair(text.get(j + 1..)?).is_some_and(same) {
            j += 3;
        } else {
            return None;
        }
    }
    Some(j)
}

/// The keys this process was given: every key read (from `PAYBATCH_API_KEY` or a key file), and
/// `PAYBATCH_API_KEY` itself even where the environment needs no key. Each change is published
/// as a new snapshot ([`PUBLISHED`], [`GENERATION`]) that the threads looking for the keys read
/// without taking this lock ([`known`]).
fn configured() -> &'static Mutex<Known> {
    static KEYS: OnceLock<Mutex<Known>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut known = Known::new();
        if let Ok(v) = std::env::var(API_KEY_VAR) {
            known.add(v.trim());
        }
        publish(&known);
        Mutex::new(known)
    })
}

/// The last snapshot of the configured keys, and how many were published (a thread's copy of
/// an older one is read again).
static PUBLISHED: Mutex<Option<std::sync::Arc<Known>>> = Mutex::new(None);
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The length of the shortest spelling of the keys published ([`Known::shortest`]): a text
/// shorter than it is passed without a look at the keys.
static SHORTEST: AtomicUsize = AtomicUsize::new(usize::MAX);

fn publish(known: &Known) {
    *PUBLISHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::new(known.clone()));
    SHORTEST.store(known.shortest, Ordering::SeqCst);
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

fn remember(key: &str) {
    let mut known = configured().lock().unwrap_or_else(|e| e.into_inner());
    known.add(key);
    publish(&known);
}

thread_local! {
    /// This thread's copy of the last snapshot, and its generation.
    static SNAPSHOT: std::cell::RefCell<(u64, std::sync::Arc<Known>)> =
        std::cell::RefCell::new((u64::MAX, std::sync::Arc::new(Known::new())));
}

/// Runs `look` on the configured keys as last published, from this thread's copy (read again
/// when another was published since).
fn known<R>(look: impl FnOnce(&Known) -> R) -> R {
    configured();
    let generation = GENERATION.load(Ordering::SeqCst);
    SNAPSHOT.with(|snapshot| {
        let mut snapshot = snapshot.borrow_mut();
        if snapshot.0 != generation {
            let published = PUBLISHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
            *snapshot = (
                generation,
                published.unwrap_or_else(|| std::sync::Arc::new(Known::new())),
            );
        }
        look(&snapshot.1)
    })
}

/// `text` with every spelling of every configured key in it ([`ApiKey::new`],
/// `PAYBATCH_API_KEY`) replaced by [`CONCEALED`]: the key in any case, without its prefix, in
/// base64 (standard or URL-safe, padded or not) and percent-encoded ([`spellings`]). `None`
/// when it holds none (the common case, found without an allocation).
fn conceal_configured(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() < SHORTEST.load(Ordering::SeqCst) {
        // No key (usize::MAX) or a text too short to spell one; `configured` reads the
        // environment's key the first time it is asked.
        if GENERATION.load(Ordering::SeqCst) != 0 {
            return None;
        }
        configured();
        if text.len() < SHORTEST.load(Ordering::SeqCst) {
            return None;
        }
    }
    known(|known| conceal_in(known, text))
}

/// [`conceal_configured`] with the keys `known`.
fn conceal_in(known: &Known, text: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let (mut at, mut kept) = (0, 0);
    while at < text.len() {
        let end = known.by_first[usize::from(text[at])]
            .iter()
            .find_map(|&i| spelt_at(text, at, &known.spellings[i]));
        match end {
            Some(end) => {
                let o = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
                o.extend_from_slice(&text[kept..at]);
                o.extend_from_slice(CONCEALED.as_bytes());
                (at, kept) = (end, end);
            }
            None => at += 1,
        }
    }
    let mut out = out?;
    out.extend_from_slice(&text[kept..]);
    Some(out)
}

/// An answer of the service (its body, or a header it sent) with every spelling of every
/// configured key in it hidden, as [`conceal`] hides them: the client reads every answer
/// through it, so that nothing the service says (a message, a help, a detail, any field of
/// an order) can bring the key into the ledger or any output.
pub fn conceal_answer(body: &[u8]) -> Cow<'_, [u8]> {
    match conceal_configured(body) {
        Some(concealed) => Cow::Owned(concealed),
        None => Cow::Borrowed(body),
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

/// `text` with every configured key in it ([`ApiKey::new`], `PAYBATCH_API_KEY`) in any of its
/// spellings ([`conceal_answer`]), and every word that starts like a key (`xx` for the playground, `wg` for production, 16 characters or more),
/// replaced by [`CONCEALED`]. Every text of an input file that paybatch echoes (a cell, a header,
/// a line, in a problem, a hint or a message) goes through it: a key file given as the input, or
/// a key pasted into a cell, is never printed.
pub fn conceal(text: &str) -> Cow<'_, str> {
    // Only ASCII is ever replaced: the text stays UTF-8.
    let out: Cow<'_, str> = match conceal_configured(text.as_bytes()) {
        Some(bytes) => Cow::Owned(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
        None => Cow::Borrowed(text),
    };
    // A word that starts like a key is as long as one and holds `xx` or `wg`: a text without
    // either (nearly every cell of a result file) is looked at no further.
    let may_hold_key_like = out.len() >= KEY_LIKE_MIN && (out.contains("xx") || out.contains("wg"));
    let has_key_like = || {
        out.split(|c: char| !key_char(c))
            .any(|w| key_like(w) && w != CONCEALED)
    };
    if !may_hold_key_like || !has_key_like() {
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
    fn every_spelling_of_a_configured_key_is_hidden() {
        use base64::Engine;
        use base64::engine::general_purpose as b64;
        let key = "xx~~~echo???keys1";
        let _ = ApiKey::new(key).unwrap();
        let percent: String = key.bytes().map(|b| format!("%{b:02x}")).collect();
        let spelt = [
            key.to_ascii_uppercase(),
            "~~~ECHO???keys1".to_string(),
            b64::STANDARD.encode(key),
            b64::STANDARD_NO_PAD.encode(key),
            b64::URL_SAFE.encode(key),
            b64::URL_SAFE_NO_PAD.encode(key),
            b64::STANDARD.encode(format!("user:{key}")),
            b64::URL_SAFE.encode(format!("{{\"k\":\"{key}\"}}")),
            percent.clone(),
            "xx~~~echo%3F%3F%3Fkeys1".to_string(),
            b64::STANDARD.encode(key).replace('/', "%2F"),
        ];
        for s in &spelt {
            let text = format!("refused ({s}) here");
            let shown = conceal(&text);
            assert!(!shown.contains(s.as_str()), "{s}: {shown}");
            assert!(
                shown.starts_with("refused (") && shown.ends_with(") here"),
                "{shown}"
            );
            let body = conceal_answer(text.as_bytes());
            assert!(!String::from_utf8_lossy(&body).contains(s.as_str()), "{s}");
        }
        // A text around it stays as it was, multi-byte characters included.
        let text = format!("é {} ü", key.to_ascii_uppercase());
        assert_eq!(conceal(&text), format!("é {CONCEALED} ü"));
        assert!(matches!(
            conceal_answer(b"{\"id\":\"01J\"}"),
            Cow::Borrowed(_)
        ));
        // Percent signs that spell nothing are left alone.
        assert_eq!(conceal("100% %zz %7"), "100% %zz %7");
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
