//! `paybatch completions SHELL`: a completion script generated from the same definitions as the
//! command line itself, printed on stdout.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::exit::Exit;

use super::CliError;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Print a shell completion script on stdout, generated from paybatch's own \
command-line definitions.";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn execute(args: CompletionsArgs) -> Result<Exit, CliError> {
    let mut cmd = super::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "paybatch", &mut std::io::stdout());
    Ok(Exit::Ok)
}
