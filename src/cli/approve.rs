//! `paybatch approve FILE --expect-digest DIGEST`: a person approves the plan `paybatch
//! validate` showed. The file is checked as `validate` checks it; when it still gives that
//! digest, who approved it (user and host), when, and what it pays per currency are recorded in
//! the ledger, and `status`, the HTML report and the period report show them beside who ran it.
//! With `--second-person` (or `second_person = true` in paybatch.toml), `paybatch run` pays only
//! a plan another user than the one running it approved.

use clap::Args;

use crate::exit::Exit;
use crate::money::human_amount;
use crate::ops::approve;

use super::CliError;
use super::plan_args::PlanArgs;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Approve the plan of a CSV batch: the file is checked exactly as \
`paybatch validate` checks it, and when its plan digest is still DIGEST, the approval is \
recorded in the ledger: who (the user, from $USER or $LOGNAME, and the host), when, the digest, \
and what the plan pays per currency. `paybatch status`, the HTML report and the period report \
show who approved a plan beside who ran it.\n\nWith `paybatch run --second-person` (or \
`second_person = true` in paybatch.toml) a run pays only a plan approved by another user than \
the one running it. Give the same --batch, environment and ledger as the run. Exit 0 when the \
approval is recorded, 3 when the file is not valid or its plan is not DIGEST (nothing recorded).";

#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The plan digest approved (from `paybatch validate`): recorded only if the file still
    /// gives it.
    #[arg(long, value_name = "DIGEST", value_parser = super::run::parse_digest)]
    pub expect_digest: String,
}

pub async fn execute(args: ApproveArgs, quiet: bool) -> Result<Exit, CliError> {
    let opts = args.plan.options()?;
    opts.environment.api_key(opts.api_key_file.as_deref())?;
    let a = approve::approve(&opts, &args.expect_digest).await?;
    let totals: Vec<String> = a
        .totals
        .iter()
        .map(|(currency, value)| format!("{currency} {}", human_amount(*value, currency)))
        .collect();
    let totals = if totals.is_empty() {
        "nothing left to pay".to_string()
    } else {
        totals.join(" + ")
    };
    if !quiet {
        outln!("paybatch approve: {}", opts.environment.banner());
    }
    outln!(
        "approved: plan {} of batch {} by {}@{} at {} ({}: {totals})",
        a.digest,
        crate::text::shown(&a.preview.batch),
        a.user,
        a.host,
        a.approved_at,
        crate::text::rows(a.rows)
    );
    if !quiet {
        outln!("pay exactly this plan with:");
        outln!("  {}", super::validate::run_command(&args.plan, &a.digest));
    }
    Ok(Exit::Ok)
}
