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

impl std::error::Error for ConfigError {}

/// A mistake in `field`, with the fix in `message`.
pub(crate) fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
        at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_the_field_where_it_is_and_the_fix() {
        let e = err("store.path", "write a directory");
        assert_eq!(e.to_string(), "store.path: write a directory");
        let at = ConfigError {
            at: Some((3, 7)),
            ..e
        };
        assert_eq!(
            at.to_string(),
            "store.path (line 3, column 7): write a directory"
        );
        let boxed: Box<dyn std::error::Error> = Box::new(at);
        assert!(boxed.source().is_none());
    }
}
