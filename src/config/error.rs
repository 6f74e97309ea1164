//! A configuration mistake: the field, and what to write instead.

use std::fmt;

/// A configuration mistake: where, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub field: String,
    pub message: String,
    /// Line and column of the field in the file, when it was found there.
    pub at: Option<(usize, usize)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, column)) => write!(
                f,
                "{} (line {line}, column {column}): {}",
                self.field, self.message
            ),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// A mistake in `field`, with the fix in `message`.
pub(crate) fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
        at: None,
    }
}
