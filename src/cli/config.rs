//! `paybatch config`: the effective service settings and where each came from (settings file,
//! `PAYBATCH_*` variable, flag or default), and the API key that would be used, shown only by
//! its fingerprint. Exit 0 when the settings are usable, 2 when they are not.

use clap::Args;
use serde::Serialize;

use crate::environment::{API_KEY_VAR, Environment, UsageError};
use crate::exit::Exit;
use crate::settings::{Accounts, FILE_NAME, Source};

use super::{CliError, InOrder, Provenance, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Show the effective service settings and where each came from, and the API key \
that would be used (its fingerprint only, never the key).\n\nPrecedence, lowest first: default, \
settings file (./paybatch.toml or --config FILE), environment variable (PAYBATCH_ENV, \
PAYBATCH_BASE_URL, PAYBATCH_API_KEY_FILE, PAYBATCH_LEDGER), flag. `env` and `base_url` go \
together: when either is given by a variable or a flag, the file's are not used.\n\nThe settings \
file knows `env`, `base_url`, `api_key_file`, `ledger`, `second_person` (every run pays only a \
plan approved by another user) and an `[accounts]` table: the accounts the double-entry journal \
posts to (`expense`, `expense_ungrouped`, `prepaid`, `suspense`) and how it writes dates \
(`date_format`); all are shown. Relative paths in it are relative to its own directory. It must never hold the key itself.\n\nExit 0 when the settings are usable, 2 \
when they are not (unknown environment, no key, key of the wrong kind).";

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

struct Setting {
    name: &'static str,
    value: Option<String>,
    from: Source,
}

/// The settings in the order they are shown: the service's, then `second_person` and the
/// accounts of the double-entry journal (from the settings file, else their defaults).
fn settings(s: &ServiceArgs, provenance: &Provenance) -> Vec<Setting> {
    let mut all = vec![
        Setting {
            name: "env",
            value: s.env.clone(),
            from: provenance.env,
        },
        Setting {
            name: "base_url",
            value: s.base_url.clone(),
            from: provenance.base_url,
        },
        Setting {
            name: "api_key_file",
            value: s.api_key_file.as_ref().map(|p| p.display().to_string()),
            from: provenance.api_key_file,
        },
        Setting {
            name: "ledger",
            value: Some(s.ledger.display().to_string()),
            from: provenance.ledger,
        },
        Setting {
            name: "second_person",
            value: Some(provenance.second_person.unwrap_or(false).to_string()),
            from: file_or_default(provenance.second_person.is_some()),
        },
    ];
    let accounts = provenance.accounts.clone().unwrap_or_default();
    let defaults = Accounts::default();
    for ((name, value), (_, default)) in accounts.listed().into_iter().zip(defaults.listed()) {
        all.push(Setting {
            name,
            value: Some(value.to_string()),
            from: file_or_default(value != default),
        });
    }
    all
}

/// Where a setting only the settings file gives came from.
fn file_or_default(in_file: bool) -> Source {
    if in_file {
        Source::File
    } else {
        Source::Default
    }
}

/// What the settings come to: the environment, and the key (fingerprint, where it comes from).
struct Effective {
    environment: Result<Environment, UsageError>,
    key: Result<(String, String), UsageError>,
}

impl Effective {
    fn of(s: &ServiceArgs) -> Self {
        let environment = s.environment();
        let key = environment.as_ref().map_err(Clone::clone).and_then(|env| {
            let from = if env.is_simulated() {
                "the embedded simulator's own key (no secret)".to_string()
            } else if s.api_key_file.is_some() {
                "api_key_file".to_string()
            } else {
                format!("environment variable {API_KEY_VAR}")
            };
            env.api_key(s.api_key_file.as_deref())
                .map(|k| (k.fingerprint(), from))
        });
        Effective { environment, key }
    }

    /// Why the settings cannot be used, if they cannot.
    fn problem(&self) -> Option<UsageError> {
        match (&self.environment, &self.key) {
            (Err(e), _) | (_, Err(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

pub async fn execute(args: ConfigArgs, provenance: &Provenance) -> Result<Exit, CliError> {
    let settings = settings(&args.service, provenance);
    let effective = Effective::of(&args.service);
    let problem = effective.problem();
    if args.json {
        super::out_json(&as_json(&settings, &effective, provenance));
        // The object says what is wrong (`usable`, `error`).
        return Ok(if problem.is_none() {
            Exit::Ok
        } else {
            Exit::Usage
        });
    }
    print_text(&settings, &effective, provenance);
    match problem {
        None => Ok(Exit::Ok),
        Some(e) => Err(e.into()),
    }
}

/// `config --json`: the settings with where each came from, and the key's fingerprint, never the
/// key (no ops type: the settings are the command line's).
#[derive(Serialize)]
struct ConfigJson<'a> {
    file: Option<String>,
    settings: InOrder<&'static str, SettingJson<'a>>,
    environment: Option<&'a str>,
    api_key: Option<KeyJson<'a>>,
    usable: bool,
    error: Option<String>,
}

/// One setting: its value and where it came from.
#[derive(Serialize)]
struct SettingJson<'a> {
    value: Option<&'a str>,
    from: &'static str,
}

/// The key that would be used: its fingerprint (never the key) and where it comes from.
#[derive(Serialize)]
struct KeyJson<'a> {
    fingerprint: &'a str,
    from: &'a str,
}

fn as_json<'a>(
    settings: &'a [Setting],
    effective: &'a Effective,
    provenance: &Provenance,
) -> ConfigJson<'a> {
    let problem = effective.problem();
    ConfigJson {
        file: provenance.file.as_ref().map(|p| p.display().to_string()),
        settings: InOrder(
            settings
                .iter()
                .map(|st| {
                    let value = SettingJson {
                        value: st.value.as_deref(),
                        from: st.from.as_str(),
                    };
                    (st.name, value)
                })
                .collect(),
        ),
        environment: effective.environment.as_ref().ok().map(|e| e.name()),
        api_key: effective
            .key
            .as_ref()
            .ok()
            .map(|(fingerprint, from)| KeyJson { fingerprint, from }),
        usable: problem.is_none(),
        error: problem.as_ref().map(|e| e.to_string()),
    }
}

fn print_text(settings: &[Setting], effective: &Effective, provenance: &Provenance) {
    match &provenance.file {
        Some(p) => outln!("settings file: {}", p.display()),
        None => outln!(
            "settings file: none (no ./{FILE_NAME}; --config FILE or PAYBATCH_CONFIG names one)"
        ),
    }
    outln!("{:<26} {:<48} FROM", "SETTING", "VALUE");
    for st in settings {
        let value = match (&st.value, st.name) {
            (Some(v), _) => v.clone(),
            (None, "env") => "sim".to_string(),
            (None, _) => "-".to_string(),
        };
        outln!("{:<26} {:<48} {}", st.name, value, st.from.as_str());
    }
    match &effective.key {
        Ok((fingerprint, from)) => outln!("{:<26} {:<48} {from}", "api key", fingerprint),
        Err(_) => outln!("{:<26} {:<48} -", "api key", "(none usable)"),
    }
    if let Ok(env) = &effective.environment {
        outln!("{}", env.banner());
    }
}
