//! `paybatch man`: the manual page, generated from the same definitions as the command line
//! itself: `paybatch.1` on stdout, or one page per command written into a directory.

use std::path::PathBuf;

use clap::{Args, CommandFactory};

use crate::exit;

use super::print_error;

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Print the manual page paybatch.1 on stdout (roff), generated from \
paybatch's own command-line definitions; with --out-dir, write paybatch.1 and one page per \
command (paybatch-run.1, paybatch-validate.1, ...) into that directory.\n\nExamples:\n  paybatch \
man | man -l -\n  paybatch man --out-dir /usr/local/share/man/man1";

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this directory instead of printing paybatch.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn execute(args: ManArgs) -> i32 {
    let cmd = super::Cli::command();
    let result = match &args.out_dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout().lock()),
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .map(|()| eprintln!("manual pages written to {}", dir.display())),
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            print_error(
                &format!("cannot write the manual page: {e}"),
                args.out_dir
                    .as_ref()
                    .map(|_| "check that the directory is writable"),
            );
            exit::UNEXPECTED
        }
    }
}
