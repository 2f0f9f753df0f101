//! The subcommands of `paybatch`, one file each.

pub mod sim;
