//! How a command fails: a [`CliError`] says what went wrong, what to do about it and how the
//! process exits. Commands return it (`?` turns the operations' errors into one); `main` prints
//! it once, `error: ...` then `help: ...`, and exits with its code.

use crate::environment::UsageError;
use crate::exit::Exit;
use crate::input::problem::Problems;
use crate::ledger::LedgerError;
use crate::ops::error::{Failure, OpError};
use crate::ops::status::StatusError;

/// A command that did not do what it was asked: the message, the help and the exit.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.message.as_deref().unwrap_or("failed"))]
pub struct CliError {
    /// What went wrong; none when it was said already (clap's own usage errors).
    message: Option<String>,
    help: Option<String>,
    /// The problems of an input file, listed before the message.
    problems: Option<Box<Problems>>,
    pub exit: Exit,
}

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>, help: Option<&str>) -> Self {
        CliError {
            message: Some(message.into()),
            help: help.filter(|h| !h.is_empty()).map(str::to_string),
            problems: None,
            exit,
        }
    }

    /// A flag, a setting or an argument that cannot be used (exit 2).
    pub fn usage(message: impl Into<String>, help: &str) -> Self {
        CliError::new(Exit::Usage, message, Some(help))
    }

    /// Anything unexpected (exit 1), with nothing to advise.
    pub fn unexpected(message: impl Into<String>) -> Self {
        CliError::new(Exit::Unexpected, message, None)
    }

    /// An exit whose reason was printed already (clap prints its own errors).
    pub fn reported(exit: Exit) -> Self {
        CliError {
            message: None,
            help: None,
            problems: None,
            exit,
        }
    }

    /// What went wrong, as printed after `error: `.
    pub fn message(&self) -> &str {
        self.message.as_deref().unwrap_or_default()
    }

    /// What to do about it, as printed after `help: `.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// How many problems the input file has (0 when the error is not about its rows).
    pub fn problems_total(&self) -> usize {
        self.problems.as_ref().map_or(0, |p| p.total)
    }

    /// Prints the error on stderr: the problems of the input, then `error: ...` and `help: ...`.
    pub fn print(&self) {
        if let Some(problems) = &self.problems {
            super::print_problems(problems);
            errln!();
        }
        if let Some(message) = &self.message {
            super::print_error(message, self.help());
        }
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> Self {
        CliError::usage(e.to_string(), e.help())
    }
}

impl From<LedgerError> for CliError {
    fn from(e: LedgerError) -> Self {
        CliError::unexpected(e.to_string())
    }
}

impl From<StatusError> for CliError {
    fn from(e: StatusError) -> Self {
        match e {
            StatusError::NoLedger(path) => CliError::usage(
                format!(
                    "no ledger at {}: nothing has been run here (--ledger PATH to read another)",
                    path.display()
                ),
                "give the ledger the batches were run with: --ledger PATH, PAYBATCH_LEDGER or `ledger` in paybatch.toml",
            ),
            StatusError::NoBatch { ref known, .. } => {
                let help = if known.is_empty() {
                    "this ledger has no batch yet; `paybatch run FILE` names a batch after its file unless --batch is given".to_string()
                } else {
                    format!("batches in this ledger: {}", known.join(", "))
                };
                CliError::usage(e.to_string(), &help)
            }
            StatusError::Ledger(e) => e.into(),
        }
    }
}

impl From<OpError> for CliError {
    fn from(e: OpError) -> Self {
        let help = match &e {
            // Orders went out: the help ends with the command that resumes.
            OpError::AfterSending { .. } => e.help().map(|h| format!("{h}: {}", this_command())),
            _ => e.help(),
        };
        let mut error = CliError::new(exit_of(e.failure()), e.to_string(), help.as_deref());
        if let OpError::Invalid { problems, .. } = e {
            error.problems = Some(Box::new(problems));
        }
        error
    }
}

/// The command this process runs, as a shell reads it (`paybatch run nov.csv --ledger l.db`):
/// run again, it resumes what this one began.
pub fn this_command() -> String {
    std::iter::once("paybatch".to_string())
        .chain(
            std::env::args_os()
                .skip(1)
                .map(|a| crate::text::shell_word(&a.to_string_lossy()).into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ")
}

/// The exit of what stopped a run.
pub fn exit_of(f: Failure) -> Exit {
    match f {
        Failure::Usage => Exit::Usage,
        Failure::Locked => Exit::Locked,
        Failure::Invalid => Exit::Invalid,
        Failure::Incomplete => Exit::Incomplete,
        Failure::Unexpected => Exit::Unexpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_error_keeps_its_words_and_its_exit() {
        let e = CliError::from(UsageError::new("unknown environment `x`", "use --env sim"));
        assert_eq!(
            (e.exit, e.message(), e.help()),
            (
                Exit::Usage,
                "unknown environment `x`",
                Some("use --env sim")
            )
        );
        let e = CliError::from(OpError::Refused {
            message: "the file changed".into(),
            help: "validate again".into(),
        });
        assert_eq!(
            (e.exit, e.message(), e.help()),
            (Exit::Invalid, "the file changed", Some("validate again"))
        );
        assert_eq!(CliError::reported(Exit::Usage).message(), "");
        assert_eq!(CliError::new(Exit::Usage, "m", Some("")).help(), None);
    }
}
