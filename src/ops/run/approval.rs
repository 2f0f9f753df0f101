//! `run --expect-digest`: a run held to the approved plan records so with its batch
//! ([`crate::ledger::approvals`]), before it sends anything: the digest, when, by which user on
//! which host, and which run.

use crate::batch::outcome::OpError;
use crate::batch::progress::Reporter;
use crate::ledger::approvals::NewApproval;
use crate::ledger::{BatchRecord, Ledger};

/// Records that this run of `batch` was held to the approved `digest` (committed before it
/// returns) and says so.
pub(super) fn record(
    ledger: &mut Ledger,
    batch: &BatchRecord,
    digest: &str,
    reporter: &Reporter,
) -> Result<(), OpError> {
    let (user, host) = (login_name(), host_name());
    let run = ulid::Ulid::new().to_string();
    let approval = NewApproval {
        digest,
        user: &user,
        host: &host,
        run: &run,
    };
    let at = ledger.record_approval(batch.id, &approval)?;
    reporter.line(format!(
        "approval on record: {} at {at} by {user}@{host} (run {run})",
        crate::input::scan::short_digest(digest)
    ));
    Ok(())
}

/// Who runs this: the login name (`$USER`, else `$LOGNAME`), else the numeric user id.
pub fn login_name() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|name| name.to_string_lossy().into_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(user_id)
}

#[cfg(unix)]
fn user_id() -> String {
    rustix::process::getuid().as_raw().to_string()
}

#[cfg(not(unix))]
fn user_id() -> String {
    "unknown".to_string()
}

/// The host name this runs on (`unknown` when it has none).
pub fn host_name() -> String {
    let name = system_host_name();
    if name.is_empty() {
        "unknown".to_string()
    } else {
        name
    }
}

#[cfg(unix)]
fn system_host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(not(unix))]
fn system_host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}
