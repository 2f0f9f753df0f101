//! The settings file, `paybatch.toml`: defaults for the service settings that environment
//! variables (`PAYBATCH_*`) and flags override, in that order. It is read from the current
//! directory, or from `--config FILE` (`PAYBATCH_CONFIG`). Relative paths in it are relative to
//! the file's own directory, so a cron job finds the same ledger whatever its working directory.
//!
//! It never holds the API key itself: an `api_key` entry is refused; `api_key_file` names a file
//! of mode 0600 that does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::environment::UsageError;

/// The settings file looked for in the current directory.
pub const FILE_NAME: &str = "paybatch.toml";

/// The variable that shortens, for a simulator only, how long reconciliation waits after an
/// in-doubt intent's last send before it may give up its key (rehearsals and tests): seconds.
pub const SETTLE_SECONDS_VAR: &str = "PAYBATCH_SETTLE_SECONDS";

/// The settling time [`SETTLE_SECONDS_VAR`] gives, read once by the operation that reconciles
/// and passed to [`crate::batch::reconcile::reconcile`], which takes it for a simulator's batch
/// only. `None` when the variable is unset or holds no number of seconds.
pub fn settle_override() -> Option<Duration> {
    settle_seconds(std::env::var(SETTLE_SECONDS_VAR).ok().as_deref())
}

/// The settling time a value of [`SETTLE_SECONDS_VAR`] gives: a number of seconds a duration can
/// hold, else `None`.
pub fn settle_seconds(value: Option<&str>) -> Option<Duration> {
    value
        .and_then(|s| s.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// The variable that makes a run read the service's order list again, while it sends, after
/// fewer orders than it does by default (`batch::watch::READ_EVERY`): a number of orders from 1
/// (rehearsals and tests; a larger number than the default is taken as the default).
pub const SERVICE_READ_EVERY_VAR: &str = "PAYBATCH_SERVICE_READ_EVERY";

/// The orders [`SERVICE_READ_EVERY_VAR`] gives, `None` when unset or not a number from 1.
pub fn service_read_every() -> Option<u64> {
    std::env::var(SERVICE_READ_EVERY_VAR)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
}

/// What a settings file may hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `sim`, `playground` or `production` (as `--env`).
    pub env: Option<String>,
    /// Another service address (as `--base-url`).
    pub base_url: Option<String>,
    /// A file of mode 0600 holding the API key (as `--api-key-file`).
    pub api_key_file: Option<PathBuf>,
    /// The ledger database (as `--ledger`).
    pub ledger: Option<PathBuf>,
    /// Every `paybatch run` pays only a plan approved by another user than the one running it
    /// (as `run --second-person`).
    pub second_person: Option<bool>,
}

/// A settings file that was found and read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub settings: Settings,
}

/// Where an effective setting came from, lowest precedence first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    #[default]
    Default,
    File,
    Env,
    Flag,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Env => "env",
            Source::Flag => "flag",
        }
    }
}

/// Reads `explicit` (which must exist) or, without it, `./paybatch.toml` when there is one.
pub fn load(explicit: Option<&Path>) -> Result<Option<ConfigFile>, UsageError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let p = PathBuf::from(FILE_NAME);
            if !p.exists() {
                return Ok(None);
            }
            p
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        UsageError::new(
            format!("cannot read the settings file {}: {e}", path.display()),
            "check the path given to --config (or PAYBATCH_CONFIG)",
        )
    })?;
    let mut settings = parse(&path, &text)?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let absolute_base = std::path::absolute(&base).unwrap_or(base);
    for p in [&mut settings.api_key_file, &mut settings.ledger]
        .into_iter()
        .flatten()
    {
        if p.is_relative() {
            *p = absolute_base.join(&*p);
        }
    }
    let path = std::path::absolute(&path).unwrap_or(path);
    Ok(Some(ConfigFile { path, settings }))
}

/// Parses the text of a settings file named `path` (for messages).
pub fn parse(path: &Path, text: &str) -> Result<Settings, UsageError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
    if let Some(key) = table
        .keys()
        .find(|k| k.eq_ignore_ascii_case("api_key") || k.eq_ignore_ascii_case("api-key"))
    {
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(key.as_str()))
            .map(|n| format!(", line {}", n + 1))
            .unwrap_or_default();
        return Err(UsageError::new(
            format!(
                "{}{line}: `{key}` holds the API key itself; the settings file must never hold it",
                path.display()
            ),
            "remove that line (and rotate the key if the file was shared), then put the key in a file of mode 0600 and name it with `api_key_file = \"/path/to/key\"`, or set PAYBATCH_API_KEY",
        ));
    }
    toml::from_str::<Settings>(text).map_err(|e| syntax_error(path, text, &e))
}

fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> UsageError {
    let at = e
        .span()
        .and_then(|span| text.get(..span.start))
        .map(|before| format!(", line {}", before.matches('\n').count() + 1))
        .unwrap_or_default();
    UsageError::new(
        format!("{}{at}: {}", path.display(), e.message().trim_end()),
        "the settings file knows env, base_url, api_key_file, ledger and second_person, e.g. `env = \"playground\"`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Settings, String> {
        parse(Path::new("paybatch.toml"), text).map_err(|e| format!("{e} / {}", e.help()))
    }

    #[test]
    fn reads_the_four_settings() {
        let s = parse_text(
            "env = \"playground\"\napi_key_file = \"/etc/paybatch/key\"\nledger = \"pb.db\"\n",
        )
        .expect("valid");
        assert_eq!(s.env.as_deref(), Some("playground"));
        assert_eq!(s.api_key_file, Some(PathBuf::from("/etc/paybatch/key")));
        assert_eq!(s.ledger, Some(PathBuf::from("pb.db")));
        assert_eq!(s.base_url, None);
        assert_eq!(s.second_person, None);
        let s = parse_text("second_person = true\n").expect("valid");
        assert_eq!(s.second_person, Some(true));
        assert!(parse_text("second_person = \"yes\"\n").is_err());
    }

    #[test]
    fn refuses_the_key_itself_naming_the_line() {
        let e = parse_text("env = \"production\"\napi_key = \"wg_secret\"\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("must never hold"), "{e}");
        assert!(!e.contains("wg_secret"), "the key is not repeated: {e}");
    }

    #[test]
    fn refuses_unknown_settings_and_bad_syntax_with_the_line() {
        let e = parse_text("env = \"sim\"\nledgr = \"x.db\"\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("ledgr"), "{e}");
        let e = parse_text("env = sim\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }
}
