//! The crate's error types: each says what was wrong and where.

use thiserror::Error;

/// A bad endpoint configuration or segment header.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// A size out of its range.
    #[error("endpoint config: {what} = {value} must be {rule}")]
    Size {
        /// The field.
        what: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        rule: String,
    },
    /// A segment header that does not describe a valid layout.
    #[error("endpoint segment header: {0}")]
    Header(String),
    /// A layout given with a segment that it does not describe: offsets
    /// that are not its configuration's, or a segment too short for it.
    #[error("endpoint layout: {0}")]
    Layout(String),
}
