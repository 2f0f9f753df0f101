//! Text for a terminal. What a batch file, the ledger or the service says is shown, never obeyed:
//! every print path passes such text through [`escape`] (a value, or a line) or
//! [`escape_message`] (a message paybatch itself laid out over several lines). Control
//! characters (ESC, carriage return, backspace, the C1 codes) and the bidirectional overrides
//! are shown as Rust escapes (`\u{1b}`), so that a cell, a product name or an answer cannot move
//! the cursor, recolour, retitle or rewrite the terminal.
//!
//! And commands printed for a person to copy quote their arguments for a POSIX shell
//! ([`shell_word`]).

use std::borrow::Cow;

/// Whether `c` is shown escaped: a control character (Unicode category Cc: C0, DEL and C1) or a
/// bidirectional formatting character (which can reorder what a line seems to say).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    // Printable ASCII holds nothing unsafe: told from its bytes alone.
    if s.bytes().all(|b| (b' '..b'\x7f').contains(&b)) {
        return Cow::Borrowed(s);
    }
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A value or a single line, safe to print: every control character (line breaks and tabs
/// included) and bidirectional override escaped (`\u{1b}`, `\n`, `\u{202e}`).
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// A message of one or more lines, safe to print: as [`escape`], but its line breaks (`\n`)
/// stay line breaks. For messages paybatch composes over several lines; the values quoted in
/// them are escaped whole where they are put in ([`escape`]).
pub fn escape_message(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\n')
}

/// A line as paybatch prints it: what is or looks like an API key hidden
/// ([`crate::api::key::conceal`]: a cell, a reference or a batch name can hold one), then
/// escaped ([`escape`]). Every line on stdout and stderr goes through it or [`shown_message`].
pub fn shown(s: &str) -> String {
    escape(&crate::api::key::conceal(s)).into_owned()
}

/// A message of one or more lines as paybatch prints it: as [`shown`], its line breaks kept.
pub fn shown_message(s: &str) -> String {
    escape_message(&crate::api::key::conceal(s)).into_owned()
}

/// A cell of a CSV file paybatch writes (the result file): as [`shown`], but a tab (which a
/// cell of the input may hold) and a line feed (which CSV quotes) stay as they are.
pub fn cell(s: &str) -> Cow<'_, str> {
    let keep = |c: char| c == '\t' || c == '\n';
    match crate::api::key::conceal(s) {
        Cow::Borrowed(b) => escape_where(b, keep),
        Cow::Owned(o) => Cow::Owned(escape_where(&o, keep).into_owned()),
    }
}

/// JSON text safe to print, equal in value: the characters [`escape`] shows escaped that JSON
/// may carry raw (DEL, the C1 codes such as CSI `U+009B`, the bidirectional overrides) written
/// as JSON escapes (`\u009b`, `\u202e`). serde_json escapes C0 in strings (a raw line break is
/// the white space between values of pretty JSON, and stays); every other character outside
/// strings is ASCII punctuation or white space, so the text stays valid JSON.
pub fn json(text: &str) -> Cow<'_, str> {
    let raw = |c: char| is_unsafe(c) && c >= ' ';
    if !text.chars().any(raw) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if raw(c) {
            // Every such character is in the Basic Multilingual Plane: one `\uXXXX`.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A word as a POSIX shell reads it: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a quote inside written `'\''`). Control characters stay
/// as they are: the line the word is printed in goes through [`escape`].
pub fn shell_word(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !s.is_empty() && s.chars().all(plain) && !s.starts_with('=') {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

/// Levenshtein distance between `a` and `b` (only the first 64 characters of `a` count), or
/// `None` when it is more than `max` (cheap for long names: their lengths alone tell). Used for
/// "did you mean": column names, product codes.
pub fn distance_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: String = a.chars().take(64).collect();
    if a.chars().count().abs_diff(b.chars().count()) > max {
        return None;
    }
    Some(strsim::levenshtein(&a, b)).filter(|d| *d <= max)
}

/// `1 row`, `2 rows`: a count of rows in words.
pub fn rows<N: std::fmt::Display + PartialEq + From<u8>>(n: N) -> String {
    if n == N::from(1) {
        "1 row".to_string()
    } else {
        format!("{n} rows")
    }
}

/// `1 batch`, `2 batches`: a count of things in words, `one` or `many` as `n` says.
pub fn count<N: std::fmt::Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    if n == N::from(1) {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_say_one_thing_or_many() {
        assert_eq!(count(1usize, "batch", "batches"), "1 batch");
        assert_eq!(count(0usize, "batch", "batches"), "0 batches");
        assert_eq!(count(2i64, "batch", "batches"), "2 batches");
    }

    #[test]
    fn control_characters_and_bidi_overrides_are_shown_not_obeyed() {
        assert_eq!(escape("plain text, ümlaut €"), "plain text, ümlaut €");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("\x1b[31mred\x1b[0m"), "\\u{1b}[31mred\\u{1b}[0m");
        assert_eq!(escape("a\rb\x08c\x07"), "a\\rb\\u{8}c\\u{7}");
        assert_eq!(escape("two\nlines\tx"), "two\\nlines\\tx");
        // C1 CSI, DEL, and a right-to-left override.
        assert_eq!(escape("\u{9b}2J\u{7f}"), "\\u{9b}2J\\u{7f}");
        assert_eq!(escape("abc\u{202e}fdp.exe"), "abc\\u{202e}fdp.exe");
        // No escape sequence survives, whatever the input.
        for s in ["\x1b]0;title\x07", "\x1bc", "x\x1b[2K\ry"] {
            let shown = escape(s);
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
        }
    }

    #[test]
    fn messages_keep_their_own_line_breaks_only() {
        assert_eq!(
            escape_message("first\n  second \x1b[2J\r"),
            "first\n  second \\u{1b}[2J\\r"
        );
    }

    #[test]
    fn json_carries_every_value_escaped_and_equal() {
        let value = serde_json::json!({
            "message": "\u{1b}]8;;http://evil\u{7}\u{9b}2J\u{7f}\u{202e}\u{2066}x",
            "list": ["a\nb", "ü€"],
        });
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let safe = json(&text);
            assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
            assert!(safe.contains("\\u009b2J\\u007f\\u202e\\u2066x"), "{safe}");
            let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
            assert_eq!(back, value);
        }
        assert!(matches!(json("{\"a\":1}"), Cow::Borrowed(_)));
    }

    #[test]
    fn cells_keep_their_tabs_and_line_feeds_only() {
        assert_eq!(cell("a\tb\nc"), "a\tb\nc");
        assert_eq!(cell("x\u{1b}[2J\u{202e}\r"), "x\\u{1b}[2J\\u{202e}\\r");
        assert_eq!(cell("xx_abcdefghijklmnopq"), crate::api::key::CONCEALED);
        assert_eq!(cell("EMP-1042-2026-11"), "EMP-1042-2026-11");
    }

    #[test]
    fn shell_words_are_quoted_when_a_shell_would_read_them_otherwise() {
        assert_eq!(shell_word("samples/nov.csv"), "samples/nov.csv");
        assert_eq!(shell_word("2026-11"), "2026-11");
        assert_eq!(shell_word("http://127.0.0.1:9/v2"), "http://127.0.0.1:9/v2");
        assert_eq!(shell_word("my file.csv"), "'my file.csv'");
        assert_eq!(shell_word("nov $HOME"), "'nov $HOME'");
        assert_eq!(shell_word("$(rm -rf x)"), "'$(rm -rf x)'");
        assert_eq!(shell_word("a;b&c|d"), "'a;b&c|d'");
        assert_eq!(shell_word("`id`"), "'`id`'");
        assert_eq!(shell_word("*.csv"), "'*.csv'");
        assert_eq!(shell_word("~user"), "'~user'");
        assert_eq!(shell_word("it's.csv"), r"'it'\''s.csv'");
        assert_eq!(shell_word(""), "''");
        // `=x` at the start of a word is expanded by zsh.
        assert_eq!(shell_word("=ls"), "'=ls'");
    }
}
