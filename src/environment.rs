//! Which service paybatch talks to, with which key; and the connection to it (the embedded
//! simulator is started here when the environment is `sim`).

use std::path::{Path, PathBuf};

use crate::api::{ApiKey, Client, ClientConfig, KeyKind};
use crate::sim;

pub const PRODUCTION_URL: &str = "https://api.runa.io/v2";
pub const PLAYGROUND_URL: &str = "https://playground.runa.io/v2";
/// What the ledger records as the base URL of the embedded simulator: one stable environment,
/// whatever loopback port it listened on in a given run.
pub const EMBEDDED_BASE: &str = "embedded-simulator";
pub use crate::api::key::API_KEY_VAR;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Environment {
    /// The embedded playground simulator (default): nothing real happens.
    Sim,
    Playground,
    Production,
    /// Another address (`--base-url`), e.g. a standalone `paybatch sim serve`.
    Custom(String),
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum UsageError {
    #[error("{message}")]
    Invalid { message: String, help: String },
}

impl UsageError {
    pub fn new(message: impl Into<String>, help: impl Into<String>) -> Self {
        UsageError::Invalid {
            message: message.into(),
            help: help.into(),
        }
    }

    pub fn help(&self) -> &str {
        match self {
            UsageError::Invalid { help, .. } => help,
        }
    }
}

impl Environment {
    /// From `--env` and `--base-url`.
    pub fn resolve(env: Option<&str>, base_url: Option<&str>) -> Result<Self, UsageError> {
        match (env.map(|e| e.trim().to_ascii_lowercase()), base_url) {
            (Some(e), Some(_)) if e != "custom" => Err(UsageError::new(
                format!("--env {e} and --base-url both name the service"),
                "give one of them: --env sim|playground|production, or --base-url URL",
            )),
            (_, Some(url)) => Ok(Environment::Custom(url.trim().to_string())),
            (None, None) => Ok(Environment::Sim),
            (Some(e), None) => match e.as_str() {
                "sim" | "simulator" => Ok(Environment::Sim),
                "playground" => Ok(Environment::Playground),
                "production" | "prod" => Ok(Environment::Production),
                other => Err(UsageError::new(
                    format!("unknown environment `{other}`"),
                    "use --env sim (default), --env playground or --env production, or --base-url URL",
                )),
            },
        }
    }

    /// The name recorded in the ledger and mixed into idempotency keys.
    pub fn name(&self) -> &str {
        match self {
            Environment::Sim => "sim",
            Environment::Playground => "playground",
            Environment::Production => "production",
            Environment::Custom(_) => "custom",
        }
    }

    pub fn is_simulated(&self) -> bool {
        matches!(self, Environment::Sim)
    }

    /// The base URL recorded in the ledger (stable for the embedded simulator).
    pub fn recorded_base_url(&self) -> String {
        match self {
            Environment::Sim => EMBEDDED_BASE.to_string(),
            Environment::Playground => PLAYGROUND_URL.to_string(),
            Environment::Production => PRODUCTION_URL.to_string(),
            Environment::Custom(url) => url.trim_end_matches('/').to_string(),
        }
    }

    /// An identity for caches: environment and address.
    pub fn identity(&self) -> String {
        format!("{}@{}", self.name(), self.recorded_base_url())
    }

    /// The environment a batch was recorded with (its `environment` and `base_url` columns).
    pub fn from_recorded(name: &str, base_url: &str) -> Result<Self, UsageError> {
        match name {
            "custom" => Ok(Environment::Custom(base_url.to_string())),
            other => Environment::resolve(Some(other), None),
        }
    }

    /// The first line of every run.
    pub fn banner(&self) -> String {
        match self {
            Environment::Sim => {
                "environment: SIMULATED (embedded playground simulator; no real money moves)".into()
            }
            Environment::Playground => format!(
                "environment: playground ({PLAYGROUND_URL}; simulated by the service, no real money)"
            ),
            Environment::Production => {
                format!("environment: PRODUCTION ({PRODUCTION_URL}; REAL MONEY)")
            }
            Environment::Custom(url) => format!("environment: custom service at {url}"),
        }
    }

    /// Reads the API key: the embedded simulator's own key for `sim`; otherwise `--api-key-file`
    /// (mode 0600 only) or `PAYBATCH_API_KEY`. The prefix must fit the environment.
    pub fn api_key(&self, key_file: Option<&Path>) -> Result<ApiKey, UsageError> {
        if self.is_simulated() {
            // The simulator has its own key; a key file named anyway still holds a key that is
            // never to be shown (reading it makes it one `api::key::conceal` hides).
            if let Some(path) = key_file {
                let _ = read_key_file(path);
            }
            return ApiKey::new(sim::DEFAULT_KEY).map_err(|e| UsageError::new(e, ""));
        }
        let key = match key_file {
            Some(path) => read_key_file(path)?,
            None => match std::env::var(API_KEY_VAR) {
                Ok(v) if !v.trim().is_empty() => ApiKey::new(&v).map_err(|e| {
                    UsageError::new(
                        format!("{API_KEY_VAR}: {e}"),
                        "set it to the key exactly as the dashboard showed it",
                    )
                })?,
                _ => {
                    return Err(UsageError::new(
                        format!("no API key for the {} environment", self.name()),
                        format!(
                            "set {API_KEY_VAR}, or pass --api-key-file FILE (a file of mode 0600 holding the key)"
                        ),
                    ));
                }
            },
        };
        match (self, key.kind()) {
            (Environment::Production, KeyKind::Production)
            | (Environment::Playground, KeyKind::Playground) => Ok(key),
            // A production key goes to the production service only, and only through
            // `--env production` (where `run` asks for confirmation, or --yes and the digest):
            // another address could be anyone's, or the production service reached around
            // that guard.
            (Environment::Custom(url), KeyKind::Production) => Err(UsageError::new(
                format!(
                    "the API key ({}) is a production key (it starts with `wg`), and the service \
                     address is {}: a production key is sent to the production service only, \
                     with --env production",
                    key.fingerprint(),
                    url
                ),
                "for real payouts use --env production (and no base_url, --base-url or \
                 PAYBATCH_BASE_URL); for another service use its own key (a playground key \
                 starts with `xx`)",
            )),
            (Environment::Custom(_), _) => Ok(key),
            (Environment::Production, _) => Err(UsageError::new(
                format!(
                    "the API key ({}) is not a production key (production keys start with `wg`)",
                    key.fingerprint()
                ),
                "use the production key for --env production; playground keys start with `xx`",
            )),
            (Environment::Playground, _) => Err(UsageError::new(
                format!(
                    "the API key ({}) is not a playground key (playground keys start with `xx`)",
                    key.fingerprint()
                ),
                "use a playground key for --env playground; a production key (`wg`) must never be used there",
            )),
            (Environment::Sim, _) => Ok(key),
        }
    }
}

/// Reads a key file, refusing one that others can read.
pub fn read_key_file(path: &Path) -> Result<ApiKey, UsageError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        UsageError::new(
            format!("cannot read the API key file {}: {e}", path.display()),
            "check the path given to --api-key-file",
        )
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(UsageError::new(
                format!(
                    "the API key file {} has mode {mode:o}; others could read the key",
                    path.display()
                ),
                format!("run: chmod 600 {}", path.display()),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError::new(
            format!("cannot read the API key file {}: {e}", path.display()),
            "the file must hold the key as text",
        )
    })?;
    ApiKey::new(&text).map_err(|e| {
        UsageError::new(
            format!("{}: {e}", path.display()),
            "the file must hold only the key",
        )
    })
}

/// A live connection: the client, and the embedded simulator when the environment is `sim`.
pub struct Connection {
    pub environment: Environment,
    pub client: Client,
    pub key_fingerprint: String,
    /// Kept alive for as long as the connection is.
    pub embedded: Option<sim::SimHandle>,
}

/// Where the embedded simulator keeps its state for a given ledger: beside it, so that an
/// interrupted run can be resumed against the same simulated orders.
pub fn embedded_state_path(ledger: &Path) -> PathBuf {
    let name = ledger
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| crate::ledger::DEFAULT_PATH.into());
    let stem = name.strip_suffix(".db").unwrap_or(&name);
    ledger.with_file_name(format!("{stem}.sim.db"))
}

/// The settings of the embedded simulator with its state in `state` (in memory when none):
/// the published behaviour, and a rehearsal account large enough for any realistic batch (the
/// real balance is checked by the pre-flight of the real environment). `paybatch sim clock`,
/// `sim account` and `sim payouts` open the state beside a ledger with these settings, so that a
/// state they create is the one `run` would have made.
pub fn embedded_sim_config(state: Option<PathBuf>) -> sim::SimConfig {
    let rehearsal_balance = rust_decimal::Decimal::new(10_000_000_000, 2);
    sim::SimConfig {
        state,
        balances: sim::PAYMENT_CURRENCIES
            .iter()
            .map(|c| (c.to_string(), rehearsal_balance))
            .collect(),
        ..sim::SimConfig::default()
    }
}

impl Connection {
    /// The clock of the books on this connection: the embedded simulator's simulated clock;
    /// `None` elsewhere (the wall clock).
    pub fn books_clock(&self) -> Option<crate::ledger::books::BooksClock> {
        let sim = self.embedded.as_ref()?;
        Some(std::sync::Arc::new(sim.clock()))
    }

    /// Connects to the environment. For `sim`, starts the embedded simulator on a loopback port
    /// with its state file beside the ledger.
    pub async fn open(
        environment: Environment,
        key_file: Option<&Path>,
        ledger_path: &Path,
    ) -> Result<Self, UsageError> {
        let state = Some(embedded_state_path(ledger_path));
        Self::open_with_state(environment, key_file, state).await
    }

    /// Like [`Connection::open`], for commands that only read (validate, balance): the embedded
    /// simulator uses its state file beside the ledger when there is one, and otherwise starts
    /// from its defaults in memory, so that reading creates no simulator file.
    pub async fn open_for_reading(
        environment: Environment,
        key_file: Option<&Path>,
        ledger_path: &Path,
    ) -> Result<Self, UsageError> {
        let state = Some(embedded_state_path(ledger_path)).filter(|p| p.exists());
        Self::open_with_state(environment, key_file, state).await
    }

    async fn open_with_state(
        environment: Environment,
        key_file: Option<&Path>,
        state: Option<PathBuf>,
    ) -> Result<Self, UsageError> {
        let key = environment.api_key(key_file)?;
        let (base_url, embedded) = match &environment {
            Environment::Sim => {
                let config = embedded_sim_config(state);
                let handle = sim::start(
                    config,
                    "127.0.0.1:0"
                        .parse()
                        .map_err(|_| UsageError::new("bad loopback address", ""))?,
                )
                .await
                .map_err(|e| {
                    UsageError::new(
                        format!("cannot start the embedded simulator: {e}"),
                        "check that the directory of the ledger is writable",
                    )
                })?;
                (handle.base_url(), Some(handle))
            }
            Environment::Playground => (PLAYGROUND_URL.to_string(), None),
            Environment::Production => (PRODUCTION_URL.to_string(), None),
            Environment::Custom(url) => (url.clone(), None),
        };
        let client = Client::new(ClientConfig::new(base_url, key.clone())).map_err(|e| {
            UsageError::new(
                e.to_string(),
                "give an https:// base URL (plain http only for loopback)",
            )
        })?;
        Ok(Connection {
            environment,
            client,
            key_fingerprint: key.fingerprint(),
            embedded,
        })
    }
}
