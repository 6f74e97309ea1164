//! A configuration mistake: the field, and what to write instead; and why no configuration
//! could be had at all (not found, not made, not read).

use std::fmt;
use std::io;
use std::path::PathBuf;

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

/// Why no configuration could be had: its place not found, the starter not made, the file
/// not read, or a mistake in it.
#[derive(Debug)]
pub enum LoadError {
    /// The account's home directory could not be found (the effective user id, if known).
    NoHome { uid: Option<u32> },
    /// `config.json` is gone but what it leaves beside it is there: the sentence that says
    /// what is missing and how to put it back (the starter's `missing`).
    Missing(String),
    /// The starter's folder or file could not be made (or the folder made private).
    Starter {
        action: StarterStep,
        path: PathBuf,
        error: io::Error,
    },
    /// The file could not be read; `described` names it and where it was found.
    Unreadable { described: String, error: io::Error },
    /// The file was read, and has a mistake.
    Invalid { path: PathBuf, error: ConfigError },
}

/// What making the starter was doing when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StarterStep {
    /// Creating a folder or the file.
    Create,
    /// Making the folder private (mode 700).
    MakePrivate,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NoHome { uid } => write!(
                f,
                "cannot find the home directory of this account (uid {uid:?}): pass --config FILE or set {}",
                crate::support::defaults::CONFIG_ENV
            ),
            LoadError::Missing(sentence) => f.write_str(sentence),
            LoadError::Starter {
                action: StarterStep::Create,
                path,
                error,
            } => write!(f, "cannot create {}: {error}", path.display()),
            LoadError::Starter {
                action: StarterStep::MakePrivate,
                path,
                error,
            } => write!(f, "cannot make {} private: {error}", path.display()),
            LoadError::Unreadable { described, error } => {
                write!(f, "cannot read the configuration {described}: {error}")
            }
            LoadError::Invalid { path, error } => {
                write!(f, "configuration {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::NoHome { .. } | LoadError::Missing(_) => None,
            LoadError::Starter { error, .. } | LoadError::Unreadable { error, .. } => Some(error),
            LoadError::Invalid { error, .. } => Some(error),
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

    #[test]
    fn a_configuration_not_had_says_why_and_keeps_the_cause() {
        use std::error::Error as _;
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        let e = LoadError::Unreadable {
            described: "/home/u/resolve/config.json (from --config)".to_owned(),
            error: denied(),
        };
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read the configuration /home/u/resolve/config.json (from --config): {}",
                denied()
            )
        );
        assert_eq!(e.source().unwrap().to_string(), denied().to_string());
        let e = LoadError::Invalid {
            path: PathBuf::from("/home/u/resolve/config.json"),
            error: err("rules[0].limit", "write a number above 0"),
        };
        assert_eq!(
            e.to_string(),
            "configuration /home/u/resolve/config.json: rules[0].limit: write a number above 0"
        );
        assert_eq!(
            e.source().unwrap().to_string(),
            "rules[0].limit: write a number above 0"
        );
        let e = LoadError::Starter {
            action: StarterStep::MakePrivate,
            path: PathBuf::from("/home/u/resolve"),
            error: denied(),
        };
        assert_eq!(
            e.to_string(),
            format!("cannot make /home/u/resolve private: {}", denied())
        );
        assert!(e.source().is_some());
        let e = LoadError::NoHome { uid: Some(1001) };
        assert_eq!(
            e.to_string(),
            "cannot find the home directory of this account (uid Some(1001)): pass --config FILE \
             or set RESOLVE_CONFIG"
        );
        assert!(e.source().is_none());
        assert_eq!(LoadError::Missing("gone".to_owned()).to_string(), "gone");
    }
}
