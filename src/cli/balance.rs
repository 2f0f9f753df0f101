//! `paybatch balance [--currency CUR]`: the account's balances at the service (`GET /balance`),
//! to check before a batch or after a top-up.

use clap::Args;
use serde::Serialize;

use crate::api::models::Balance;

use crate::environment::Connection;
use crate::exit::Exit;

use super::{CliError, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Show the account's balances at the service (GET /balance): every currency with \
a balance, or one (--currency). On the embedded simulator: the simulator's balances beside the \
ledger (its defaults when it has not run yet).";

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// Only this currency (ISO 4217, e.g. USD); shown even when it is 0.
    #[arg(long, value_name = "CUR")]
    pub currency: Option<String>,
    /// JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// `balance --json`: the service's balances as it gave them, under the environment they are of
/// (an envelope, not a copy).
#[derive(Serialize)]
struct BalancesJson<'a> {
    environment: &'a str,
    balances: &'a [Balance],
}

pub async fn execute(args: BalanceArgs) -> Result<Exit, CliError> {
    let environment = args.service.environment()?;
    let currency = match &args.currency {
        None => None,
        Some(c) => {
            let upper = c.trim().to_ascii_uppercase();
            if !crate::api::rules::is_currency_code(&upper) {
                return Err(CliError::usage(
                    format!("`{c}` is not a currency code"),
                    "give an ISO 4217 code of three letters, e.g. --currency USD",
                ));
            }
            Some(upper)
        }
    };
    let banner = environment.banner();
    let conn = Connection::open_for_reading(
        environment,
        args.service.api_key_file.as_deref(),
        &args.service.ledger,
    )
    .await?;
    let result = match &currency {
        Some(c) => conn.client.balance(c).await.map(|b| vec![b]),
        None => conn.client.balances().await,
    };
    let balances = result.map_err(|e| {
        let auth = crate::ops::error::is_auth_error(&e);
        CliError::new(
            if auth { Exit::Usage } else { Exit::Unexpected },
            format!("cannot read the balance: {e}"),
            Some("check the key and the environment with `paybatch ping`"),
        )
    })?;
    if args.json {
        super::out_json(&BalancesJson {
            environment: conn.environment.name(),
            balances: &balances,
        });
        return Ok(Exit::Ok);
    }
    outln!("{banner}");
    if balances.is_empty() {
        outln!("no balance in any currency");
        return Ok(Exit::Ok);
    }
    outln!("{:<8} {:>18}", "CURRENCY", "BALANCE");
    for b in &balances {
        outln!(
            "{:<8} {:>18}",
            b.currency,
            crate::money::human_amount(b.balance, &b.currency)
        );
    }
    Ok(Exit::Ok)
}
