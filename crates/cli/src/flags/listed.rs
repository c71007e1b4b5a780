//! A clap value parser for string options whose help lists their possible values while
//! the command itself checks the value (see [`Listed`]).

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use std::ffi::OsStr;

/// A string option whose help lists its possible values, which the command checks itself:
/// clap would refuse an unknown value with an error of its own on several lines, where the
/// commands print one line `sectorcrypt: ...` and exit 2.
#[derive(Debug, Clone, Copy)]
pub struct Listed(pub fn() -> Vec<PossibleValue>);

impl TypedValueParser for Listed {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.0().into_iter()))
    }
}
