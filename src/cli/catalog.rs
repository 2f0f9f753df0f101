//! `paybatch catalog sync|list`: the service's catalog as cached in the ledger database.

use clap::{Args, Subcommand};

use crate::api::models::{PayoutType, Product};
use crate::catalog::{self, CatalogSource};
use crate::environment::Connection;
use crate::exit;
use crate::ledger::Ledger;

use super::{ServiceArgs, config_failure, print_error};

#[derive(Debug, Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Fetch the whole catalog (all pages) and replace the local cache.
    Sync {
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// List products from the cache (fetched first when missing or stale).
    List {
        #[command(flatten)]
        service: ServiceArgs,
        /// Only products redeemable in this country (ISO 3166 alpha-2).
        #[arg(long)]
        country: Option<String>,
        /// Only products in this category.
        #[arg(long)]
        category: Option<String>,
        /// Only this payout type: gift_card, subscription or payment.
        #[arg(long = "type", value_name = "TYPE")]
        payout_type: Option<String>,
        /// Only orderable products.
        #[arg(long)]
        orderable: bool,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub async fn execute(args: CatalogArgs) -> i32 {
    let (service, force) = match &args.command {
        CatalogCommand::Sync { service } => (service, true),
        CatalogCommand::List { service, .. } => (service, false),
    };
    let environment = match service.environment() {
        Ok(e) => e,
        Err(e) => return config_failure(&e),
    };
    let identity = environment.identity();
    let mut ledger = match Ledger::open(&service.ledger) {
        Ok(l) => l,
        Err(e) => {
            print_error(&e.to_string(), None);
            return exit::UNEXPECTED;
        }
    };
    let conn = match Connection::open(
        environment,
        service.api_key_file.as_deref(),
        &service.ledger,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return config_failure(&e),
    };
    let (products, source) = match catalog::load(
        &mut ledger,
        &conn.client,
        &identity,
        catalog::DEFAULT_TTL,
        force,
    )
    .await
    {
        Ok(x) => x,
        Err(e) => {
            print_error(
                &e.to_string(),
                Some("check the key and environment with `paybatch ping`"),
            );
            return exit::UNEXPECTED;
        }
    };
    match args.command {
        CatalogCommand::Sync { .. } => {
            errln!(
                "catalog: {} products {} for {identity}",
                products.len(),
                if source == CatalogSource::Service {
                    "fetched and cached"
                } else {
                    "cached"
                }
            );
            exit::OK
        }
        CatalogCommand::List {
            country,
            category,
            payout_type,
            orderable,
            json,
            ..
        } => {
            let wanted_type = match payout_type
                .as_deref()
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                None => None,
                Some("gift_card") | Some("giftcard") => Some(PayoutType::GiftCard),
                Some("subscription") => Some(PayoutType::Subscription),
                Some("payment") => Some(PayoutType::Payment),
                Some(other) => {
                    print_error(
                        &format!("unknown payout type `{other}`"),
                        Some("use gift_card, subscription or payment"),
                    );
                    return exit::USAGE;
                }
            };
            let list: Vec<&Product> = products
                .iter()
                .filter(|p| !orderable || p.is_orderable)
                .filter(|p| wanted_type.is_none_or(|t| p.payout_type == t))
                .filter(|p| {
                    country.as_deref().is_none_or(|c| {
                        p.countries_redeemable_in
                            .iter()
                            .any(|x| x.eq_ignore_ascii_case(c))
                    })
                })
                .filter(|p| {
                    category.as_deref().is_none_or(|c| {
                        p.categories
                            .as_ref()
                            .is_some_and(|cs| cs.iter().any(|x| x.eq_ignore_ascii_case(c)))
                    })
                })
                .collect();
            if json {
                match serde_json::to_string_pretty(&list) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        print_error(&e.to_string(), None);
                        return exit::UNEXPECTED;
                    }
                }
            } else {
                outln!(
                    "{:<18} {:<13} {:<4} {:<9} {:<22} NAME",
                    "CODE",
                    "TYPE",
                    "CUR",
                    "ORDERABLE",
                    "VALUES"
                );
                for p in list {
                    outln!(
                        "{:<18} {:<13} {:<4} {:<9} {:<22} {}",
                        p.code,
                        p.payout_type.as_str(),
                        p.currency,
                        if p.is_orderable { "yes" } else { "no" },
                        describe_values(p),
                        p.name
                    );
                }
            }
            exit::OK
        }
    }
}

fn describe_values(p: &Product) -> String {
    if let Some(d) = p.denominations() {
        if let Some(list) = &d.available_list {
            return list
                .iter()
                .map(|v| v.0.to_string())
                .collect::<Vec<_>>()
                .join(",");
        }
        if let (Some(min), Some(max)) = (d.minimum_value, d.maximum_value) {
            return format!("{min}..{max}");
        }
    }
    let plans = p.subscription_plans();
    if !plans.is_empty() {
        return plans
            .iter()
            .map(|pl| pl.price.to_string())
            .collect::<Vec<_>>()
            .join(",");
    }
    "-".into()
}
