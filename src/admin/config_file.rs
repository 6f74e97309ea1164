//! The configuration file as the dashboard changes it: read, written in one step (a new file
//! of mode 600 beside it, synced, then renamed over it, so a request reads the old file or the
//! new one, never half of one), the replaced text kept as `config.json.previous` for one button
//! to put back, and the setup code's file beside it. The thin adapter under the pure forms.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::support::defaults;

/// Why the dashboard could not read or write one of its files: a line for the log, naming
/// the file.
#[derive(Debug)]
pub enum FileError {
    /// The file is not there, and must be.
    Gone { path: PathBuf },
    /// The file could not be read (the file named when known).
    Read {
        path: Option<PathBuf>,
        error: io::Error,
    },
    /// The file is not JSON.
    NotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// The file could not be written.
    Write { path: PathBuf, error: io::Error },
    /// No random bytes for what the file was to hold.
    Random(io::Error),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Gone { path } => write!(f, "{} is gone", path.display()),
            FileError::Read {
                path: Some(path),
                error,
            } => write!(f, "cannot read {}: {error}", path.display()),
            FileError::Read { path: None, error } => write!(f, "{error}"),
            FileError::NotJson { path, error } => {
                write!(f, "{} is not JSON: {error}", path.display())
            }
            FileError::Write { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
            FileError::Random(error) => write!(f, "cannot read random bytes: {error}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Gone { .. } => None,
            FileError::Read { error, .. }
            | FileError::Write { error, .. }
            | FileError::Random(error) => Some(error),
            FileError::NotJson { error, .. } => Some(error),
        }
    }
}

/// The copy of the text a save replaced.
pub fn backup_path(config: &Path) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_owned();
    name.push(defaults::CONFIG_BACKUP_SUFFIX);
    config.with_file_name(name)
}

/// The tokens of the providers not in use, beside the configuration.
pub fn kept_tokens_path(config: &Path) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_owned();
    name.push(defaults::KEPT_TOKENS_SUFFIX);
    config.with_file_name(name)
}

/// The setup code's file, beside the configuration.
pub fn code_path(config: &Path) -> PathBuf {
    config.with_file_name(defaults::SETUP_CODE_FILE)
}

/// The file's text; None when it is not there.
pub fn read(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The file's JSON as it is, for showing its values in a form: `null` when it is missing or
/// does not read.
pub fn json_or_null(path: &Path) -> serde_json::Value {
    read(path)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The file's text and its JSON; `missing` stands for the text of a file that is not there
/// (none: that is a failure). The failure is a line for the log, naming the file.
pub fn read_json(
    path: &Path,
    missing: Option<&str>,
) -> Result<(String, serde_json::Value), FileError> {
    let text = match read(path) {
        Ok(Some(text)) => text,
        Ok(None) => missing.map(str::to_owned).ok_or_else(|| FileError::Gone {
            path: path.to_owned(),
        })?,
        Err(error) => {
            return Err(FileError::Read {
                path: Some(path.to_owned()),
                error,
            });
        }
    };
    let json = serde_json::from_str(&text).map_err(|error| FileError::NotJson {
        path: path.to_owned(),
        error,
    })?;
    Ok((text, json))
}

/// Writes `text` to `path` in one step, mode 600: a fresh file beside it, synced, renamed over.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    crate::support::private_file::replace(path, text.as_bytes())
}

/// Replaces the configuration with `text`, keeping `old` (the text it replaces) as the backup.
pub fn save(config: &Path, old: &str, text: &str) -> std::io::Result<()> {
    write_atomic(&backup_path(config), old)?;
    write_atomic(config, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_save_keeps_the_old_text_and_both_files_are_private() {
        let dir = crate::support::temp::dir("config-file", "save");
        let config = dir.join("config.json");
        std::fs::write(&config, "{\"a\": 1}").unwrap();
        save(&config, "{\"a\": 1}", "{\"a\": 2}").unwrap();
        assert_eq!(read(&config).unwrap().as_deref(), Some("{\"a\": 2}"));
        let backup = backup_path(&config);
        assert_eq!(backup, dir.join("config.json.previous"));
        assert_eq!(read(&backup).unwrap().as_deref(), Some("{\"a\": 1}"));
        for p in [&config, &backup] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            2,
            "no file left over"
        );
        assert_eq!(code_path(&config), dir.join("setup-code.txt"));
        assert_eq!(read(&dir.join("none")).unwrap(), None);
        // Where it cannot write, the error, and the file as it was.
        assert!(write_atomic(&dir.join("missing/config.json"), "x").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_not_read_is_named_with_the_reason() {
        use std::error::Error as _;
        let dir = crate::support::temp::dir("config-file", "errors");
        let config = dir.join("config.json");
        let e = read_json(&config, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{} is gone", config.display()));
        assert!(e.source().is_none());
        assert_eq!(read_json(&config, Some("{}")).unwrap().0, "{}");
        std::fs::write(&config, "{\"a\": ").unwrap();
        let e = read_json(&config, None).unwrap_err();
        let FileError::NotJson { error, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            e.to_string(),
            format!("{} is not JSON: {error}", config.display())
        );
        assert_eq!(e.source().unwrap().to_string(), error.to_string());
        // A directory where the file should be: not readable as one.
        let e = read_json(&dir, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("cannot read {}: ", dir.display())),
            "{e}"
        );
        assert!(e.source().is_some());
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        let e = FileError::Read {
            path: None,
            error: denied(),
        };
        assert_eq!(e.to_string(), denied().to_string());
        assert_eq!(
            FileError::Random(denied()).to_string(),
            format!("cannot read random bytes: {}", denied())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
