//! `--out-format FORMAT` of `run`, `report` and `payouts --list`: the layout of the CSV file
//! written (delimiter, byte-order mark, line ends), its values listed with what each writes in
//! `--help`, and any other value refused with the list (exit 2).

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::file_format::OutFormat;

/// The help line of `--out-format` (the values follow, each with what it writes).
pub const HELP: &str = "The layout of the CSV file written: its delimiter, byte-order mark (BOM) \
and line ends. By default the batch's: as its input file, unless a run chose another with \
--out-format (recorded with the batch: a resumed run keeps it unless --out-format is given again)";

impl ValueEnum for OutFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &OutFormat::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()).help(self.help()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_offered_under_its_own_name() {
        for f in OutFormat::ALL {
            assert_eq!(OutFormat::from_str(f.as_str(), false), Ok(f));
        }
        assert!(OutFormat::from_str("xlsx", false).is_err());
    }
}
