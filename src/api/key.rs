//! The API key: a secret that is never printed, logged or stored. Only its fingerprint is.

use std::fmt;

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

#[cfg(test)]
mod tests {
    use super::*;

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
