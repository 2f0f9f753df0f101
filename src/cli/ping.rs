//! `paybatch ping`: checks the API key and the environment with `GET /ping`.

use clap::Args;
use serde::Serialize;

use crate::environment::Connection;
use crate::exit::Exit;

use super::{CliError, ServiceArgs};

#[derive(Debug, Args)]
pub struct PingArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ping --json`: the environment and the key's fingerprint beside the service's answer (no ops
/// type holds them together).
#[derive(Serialize)]
struct PingJson<'a> {
    ok: bool,
    environment: &'a str,
    base_url: &'a str,
    key_fingerprint: &'a str,
    message: &'a str,
}

pub async fn execute(args: PingArgs) -> Result<Exit, CliError> {
    let environment = args.service.environment()?;
    let banner = environment.banner();
    let conn = Connection::open(
        environment,
        args.service.api_key_file.as_deref(),
        &args.service.ledger,
    )
    .await?;
    match conn.client.ping().await {
        Ok(p) => {
            if args.json {
                super::out_json(&PingJson {
                    ok: true,
                    environment: conn.environment.name(),
                    base_url: conn.client.base_url().as_str(),
                    key_fingerprint: &conn.key_fingerprint,
                    message: &p.message,
                });
            } else {
                outln!("{banner}");
                outln!(
                    "{} answered `{}` (key {})",
                    conn.client.base_url(),
                    p.message,
                    conn.key_fingerprint
                );
            }
            Ok(Exit::Ok)
        }
        Err(e) => Err(CliError::new(
            if e.is_transient() {
                Exit::Unexpected
            } else {
                Exit::Usage
            },
            format!("ping failed: {e}"),
            Some(
                "check that the key was copied completely, that the environment address is the right one for this key (production keys start with `wg`, playground keys with `xx`), and that the key was not revoked",
            ),
        )),
    }
}
