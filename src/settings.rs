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
    /// The accounts the double-entry journal posts to (`[accounts]`).
    pub accounts: Option<Accounts>,
}

/// The accounts of the double-entry journal (`report --journal-format double-entry`), as names
/// or codes of the accounting tool's chart of accounts. `{group}` (or `{cost_centre}`) stands
/// for the value of the journal's group column, `{currency}` for the paying balance's currency.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Accounts {
    /// Debited with what a paid row charged, per value of the group column.
    pub expense: String,
    /// Debited instead of `expense` for a row whose group column is empty (or absent).
    pub expense_ungrouped: String,
    /// Credited with what left the paying balance.
    pub prepaid: String,
    /// Debited with what a charge that is not believed yet cost (a MISMATCH order, one whose
    /// total or order could not be confirmed).
    pub suspense: String,
    /// How the `date` column is written (strftime, as chrono reads it).
    pub date_format: String,
}

impl Default for Accounts {
    fn default() -> Self {
        Accounts {
            expense: "Rewards expense:{cost_centre}".to_string(),
            expense_ungrouped: "Rewards expense".to_string(),
            prepaid: "Prepaid rewards balance {currency}".to_string(),
            suspense: "Rewards suspense {currency}".to_string(),
            date_format: "%Y-%m-%d".to_string(),
        }
    }
}

impl Accounts {
    /// The settings in the order `paybatch config` shows them: (name, value).
    pub fn listed(&self) -> [(&'static str, &str); 5] {
        [
            ("accounts.expense", &self.expense),
            ("accounts.expense_ungrouped", &self.expense_ungrouped),
            ("accounts.prepaid", &self.prepaid),
            ("accounts.suspense", &self.suspense),
            ("accounts.date_format", &self.date_format),
        ]
    }

    /// The expense account of a value of the group column.
    pub fn expense_of(&self, group: &str) -> String {
        if group.is_empty() {
            return self.expense_ungrouped.clone();
        }
        self.expense
            .replace("{group}", group)
            .replace("{cost_centre}", group)
    }

    /// The prepaid balance account of a currency.
    pub fn prepaid_of(&self, currency: &str) -> String {
        self.prepaid.replace("{currency}", currency)
    }

    /// The suspense account of a currency.
    pub fn suspense_of(&self, currency: &str) -> String {
        self.suspense.replace("{currency}", currency)
    }

    /// What is wrong with the settings: an empty account, a date format chrono cannot write.
    pub fn problem(&self) -> Option<String> {
        if let Some((name, _)) = self.listed().iter().find(|(_, v)| v.trim().is_empty()) {
            return Some(format!("`{name}` is empty"));
        }
        let items = chrono::format::StrftimeItems::new(&self.date_format);
        let bad = items
            .clone()
            .any(|i| matches!(i, chrono::format::Item::Error));
        let has_date = items.into_iter().any(|i| {
            !matches!(
                i,
                chrono::format::Item::Literal(_)
                    | chrono::format::Item::OwnedLiteral(_)
                    | chrono::format::Item::Space(_)
                    | chrono::format::Item::OwnedSpace(_)
            )
        });
        (bad || !has_date).then(|| {
            format!(
                "`accounts.date_format` = \"{}\" is not a date format (such as \"%Y-%m-%d\" or \"%m/%d/%Y\")",
                self.date_format
            )
        })
    }
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
    let settings = toml::from_str::<Settings>(text).map_err(|e| syntax_error(path, text, &e))?;
    if let Some(problem) = settings.accounts.as_ref().and_then(Accounts::problem) {
        return Err(UsageError::new(
            format!("{}: {problem}", path.display()),
            "give each account of [accounts] a name or code, and `date_format` as strftime (`%Y-%m-%d`)",
        ));
    }
    Ok(settings)
}

fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> UsageError {
    let at = e
        .span()
        .and_then(|span| text.get(..span.start))
        .map(|before| format!(", line {}", before.matches('\n').count() + 1))
        .unwrap_or_default();
    UsageError::new(
        format!("{}{at}: {}", path.display(), e.message().trim_end()),
        "the settings file knows env, base_url, api_key_file, ledger, second_person and an [accounts] table (expense, expense_ungrouped, prepaid, suspense, date_format), e.g. `env = \"playground\"`",
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
    fn reads_the_accounts_with_defaults_for_those_not_given() {
        let s = parse_text("env = \"sim\"\n").expect("valid");
        assert_eq!(s.accounts, None);
        let s = parse_text(
            "[accounts]\nexpense = \"6100 {cost_centre}\"\nprepaid = \"1410-{currency}\"\ndate_format = \"%m/%d/%Y\"\n",
        )
        .expect("valid");
        let a = s.accounts.expect("accounts");
        assert_eq!(a.expense_of("MKT"), "6100 MKT");
        assert_eq!(a.expense_of(""), "Rewards expense");
        assert_eq!(a.prepaid_of("USD"), "1410-USD");
        assert_eq!(a.suspense_of("EUR"), "Rewards suspense EUR");
        assert_eq!(a.date_format, "%m/%d/%Y");
        let e = parse_text("[accounts]\nexpnse = \"x\"\n").unwrap_err();
        assert!(e.contains("expnse"), "{e}");
        let e = parse_text("[accounts]\ndate_format = \"%Q\"\n").unwrap_err();
        assert!(e.contains("date_format"), "{e}");
        let e = parse_text("[accounts]\ndate_format = \"day\"\n").unwrap_err();
        assert!(e.contains("date_format"), "{e}");
        let e = parse_text("[accounts]\nprepaid = \" \"\n").unwrap_err();
        assert!(e.contains("accounts.prepaid"), "{e}");
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
