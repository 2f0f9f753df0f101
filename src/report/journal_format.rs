//! The journal of a period in the format asked (`report --journal-format`): the plain journal
//! ([`super::journal`]) or the double-entry one ([`super::double_entry`]), each given every paid
//! attempt as the same [`JournalLine`].

use std::io;
use std::path::Path;

use crate::file_format::FileFormat;
use crate::report::double_entry::DoubleEntry;
use crate::report::journal::{Journal, JournalLine};
use crate::settings::Accounts;

/// The journal's format (`--journal-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum JournalFormat {
    /// One line per paid attempt, then the totals per environment and balance currency.
    #[default]
    Plain,
    /// Entries that balance: a debit and a credit line per paid attempt, for an accounting
    /// tool's manual-journal import.
    DoubleEntry,
}

/// The journal of a period in the format asked: each paid attempt is given to it as a
/// [`JournalLine`], whatever the format.
pub enum JournalWriter {
    Plain(Journal),
    DoubleEntry(Box<DoubleEntry>),
}

impl JournalWriter {
    /// Starts the journal at `path` in `format`, its cells laid out as `layout`; `group`
    /// names the group column; `accounts` are those the double-entry journal posts to.
    pub fn create(
        path: &Path,
        group: Option<&str>,
        format: JournalFormat,
        layout: FileFormat,
        accounts: &Accounts,
    ) -> io::Result<Self> {
        Ok(match format {
            JournalFormat::Plain => JournalWriter::Plain(Journal::create_as(path, group, layout)?),
            JournalFormat::DoubleEntry if crate::batch::workbook::is_workbook(path) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the double-entry journal is written as CSV, the form accounting tools import: give a path ending in .csv",
                ));
            }
            JournalFormat::DoubleEntry => JournalWriter::DoubleEntry(Box::new(
                DoubleEntry::create(path, group, layout, accounts.clone())?,
            )),
        })
    }

    /// Books one paid attempt.
    pub fn add(&mut self, line: &JournalLine<'_>) -> io::Result<()> {
        match self {
            JournalWriter::Plain(j) => j.add(line),
            JournalWriter::DoubleEntry(j) => j.add(line),
        }
    }

    /// Ends the journal and puts it in place.
    pub fn finish(self) -> io::Result<()> {
        match self {
            JournalWriter::Plain(j) => j.finish(),
            JournalWriter::DoubleEntry(j) => j.finish(),
        }
    }
}
