//! `run --expect-digest`: a run held to the approved plan records so with its batch
//! ([`crate::ledger::approvals`]), before it sends anything: the digest, when, by which user on
//! which host, and which run.

use crate::batch::options::RunOptions;
use crate::batch::progress::Reporter;
use crate::ledger::approvals::NewApproval;
use crate::ledger::{BatchRecord, Ledger};
use crate::ops::error::OpError;

/// Records that this run of `batch` was held to the approved `digest` (committed before it
/// returns) and says so.
pub(super) fn record(
    ledger: &mut Ledger,
    batch: &BatchRecord,
    digest: &str,
    reporter: &Reporter,
) -> Result<(), OpError> {
    // What the machine says, kept to a name's length: a user or host name of thousands of
    // characters is not a name.
    let (user, host) = (bounded(login_name()), bounded(host_name()));
    let run = ulid::Ulid::new().to_string();
    let approval = NewApproval {
        digest,
        user: &user,
        host: &host,
        run: &run,
    };
    let at = ledger.record_approval(batch.id, &approval)?;
    reporter.line(format!(
        "approval on record: {} at {at} by {}@{} (run {run})",
        crate::input::scan::short_digest(digest),
        crate::text::escape(&user),
        crate::text::escape(&host)
    ));
    Ok(())
}

/// With `--second-person`, a run is held to an approved digest: refused (nothing is read or
/// sent) without `--expect-digest`.
pub(super) fn require_digest(opts: &RunOptions) -> Result<(), OpError> {
    if !opts.second_person || opts.expect_digest.is_some() {
        return Ok(());
    }
    Err(OpError::Refused {
        message: "this run requires a plan approved by a second person (--second-person, or `second_person = true` in paybatch.toml), and no --expect-digest was given; nothing was submitted".into(),
        help: "run `paybatch validate` on the file, have another user approve its digest with `paybatch approve FILE --expect-digest DIGEST`, then run with --expect-digest DIGEST".into(),
    })
}

/// With `--second-person`, the approved `digest` of the run's batch must have been approved
/// (`paybatch approve`) by another user than the one running it; otherwise the run is
/// refused, before the ledger's batch is touched. Without it, nothing is checked.
pub(super) fn check_second_person(
    opts: &RunOptions,
    ledger: &Ledger,
    digest: &str,
) -> Result<(), OpError> {
    if !opts.second_person {
        return Ok(());
    }
    let runner = bounded(login_name());
    let approvals = ledger.plan_approvals(&opts.batch_name(), opts.environment.name(), digest)?;
    if approvals.iter().any(|a| a.user != runner) {
        return Ok(());
    }
    let short = crate::input::scan::short_digest(digest);
    let who = if approvals.is_empty() {
        "nobody approved it with `paybatch approve`".to_string()
    } else {
        format!(
            "only {} approved it, the user running it",
            crate::text::escape(&runner)
        )
    };
    Err(OpError::Refused {
        message: format!(
            "this run requires a plan approved by a second person, and {who} (plan {short}); nothing was submitted"
        ),
        help: format!(
            "another user approves it with `paybatch approve FILE --expect-digest {digest}` (same --batch, environment and ledger), then run again"
        ),
    })
}

/// The longest user or host name recorded, in characters (longer ones are cut, with `…`).
const NAME_CHARS: usize = 256;

pub fn bounded(name: String) -> String {
    if name.chars().count() <= NAME_CHARS {
        return name;
    }
    let mut cut: String = name.chars().take(NAME_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Who runs this: the login name (`$USER`, else `$LOGNAME`), else the name `/etc/passwd`
/// gives the user id, else the numeric user id.
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
    let uid = rustix::process::getuid().as_raw().to_string();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| name_of_uid(&passwd, &uid))
        .unwrap_or(uid)
}

/// The name of the user whose id is `uid` in the text of an `/etc/passwd`
/// (`name:password:uid:...` lines).
#[cfg(unix)]
fn name_of_uid(passwd: &str, uid: &str) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    })
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

#[cfg(all(test, unix))]
mod tests {
    use super::name_of_uid;

    #[test]
    fn a_name_of_thousands_of_characters_is_cut() {
        let long = "u".repeat(5038);
        let cut = super::bounded(long);
        assert_eq!(cut.chars().count(), super::NAME_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(super::bounded("finance".into()), "finance");
    }

    #[test]
    fn a_user_id_is_named_as_the_password_file_names_it() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\nfinance:x:1000:1000::/home/finance:/bin/sh\n";
        assert_eq!(name_of_uid(passwd, "1000").as_deref(), Some("finance"));
        assert_eq!(name_of_uid(passwd, "0").as_deref(), Some("root"));
        assert_eq!(name_of_uid(passwd, "42"), None);
        assert_eq!(name_of_uid("broken line\n::7", "7"), None);
    }
}
