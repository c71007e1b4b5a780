//! How results and names reach the user: `--output` targets ([`output`]), progress lines
//! ([`progress`]), the JSON reports ([`json_report`]), locators shown without their
//! secrets ([`locator`]) and text from disk made safe for a terminal ([`escape`]). Imports
//! nothing else of the command's: every other module may use it.

pub mod escape;
pub mod json_report;
pub mod locator;
pub mod output;
pub mod progress;
