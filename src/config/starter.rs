//! The starter configuration, which the program writes itself the first time it runs without
//! one (a request or a command), so that no archive has to carry a `config.json`: extracting
//! any version anywhere never replaces the owner's settings. It is never written over a file
//! that is there, even by two processes starting at once, nor where a data directory or a
//! `config.json.previous` shows that a configuration was there before: a file moved away by
//! mistake is put back, not met by a new one in its place.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::error::{LoadError, StarterStep};
use crate::support::{defaults, private_file};

/// The starter: the echo provider (nothing is spent), the file store beside it, limits per
/// visitor and spend limits for the whole site. The same values as `deploy.sh` writes.
pub const TEXT: &str = r#"{
  "provider": {"kind": "echo"},
  "store": {"kind": "file", "dir": "ratelimit", "on_error": "allow"},
  "rules": [
    {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
    {"name": "ip-day", "key": "ip", "limit": 300, "window_secs": 86400}
  ],
  "spend": [
    {"name": "day", "limit": 100, "window_secs": 86400},
    {"name": "month", "limit": 1500, "window_secs": 2592000}
  ],
  "allowed_origins": [],
  "client": {"ipv6_prefix": 64, "trusted_proxies": [], "forwarded_header": "X-Forwarded-For"},
  "request": {"max_body_bytes": 8192}
}
"#;

/// Why the starter must not be written in `base`: `config.json` is missing, but what a
/// configuration leaves beside it (its data directory, the copy a dashboard save keeps) is
/// there. The line says what is missing and how to put it back; None when nothing is left.
pub fn missing(base: &Path) -> Option<String> {
    let file = base.join(defaults::CONFIG_FILE_NAME);
    let previous = previous_of(&file);
    let data = base.join(defaults::DATA_DIR_NAME);
    let trace = [&previous, &data]
        .into_iter()
        .find(|p| p.symlink_metadata().is_ok())?;
    let put_back = if previous.exists() {
        format!(
            "rename {} to {} (the settings before the dashboard's last save), or move the \
             config.json you moved away back into {}",
            previous.display(),
            defaults::CONFIG_FILE_NAME,
            base.display()
        )
    } else {
        format!(
            "move the config.json you moved away back into {}",
            base.display()
        )
    };
    Some(format!(
        "the configuration {} is missing, but {} shows the site had one, so no new one is \
         written in its place and every request gets 503 until it is back. To put it back, in \
         cPanel's File Manager {put_back}; to start again with new settings instead, delete {}",
        file.display(),
        trace.display(),
        [&previous, &data]
            .iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" and ")
    ))
}

/// `config.json.previous` beside `config.json`.
pub fn previous_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(defaults::CONFIG_BACKUP_SUFFIX);
    PathBuf::from(name)
}

/// Makes `base` (mode 700) with the starter `config.json` (600) and the data directory (700)
/// in it, where there is no configuration yet; returns the file's path. A file already there
/// is kept as it is: the starter is linked into place, which fails rather than replace. Where
/// a configuration was there before ([`missing`]), nothing is made: the error says so.
pub fn create(base: &Path) -> Result<PathBuf, LoadError> {
    let failed = |action, path: &Path, error| LoadError::Starter {
        action,
        path: path.to_owned(),
        error,
    };
    let dir = |path: &Path| match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(failed(StarterStep::Create, path, e))
        }
        _ => Ok(()),
    };
    let file = base.join(defaults::CONFIG_FILE_NAME);
    if file.exists() {
        return Ok(file);
    }
    if let Some(message) = missing(base) {
        return Err(LoadError::Missing(message));
    }
    dir(base)?;
    // Private even where an archive's extraction made the folder (for its installed.txt).
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| failed(StarterStep::MakePrivate, base, e))?;
    let made = match private_file::create(&file, TEXT.as_bytes()) {
        Ok(()) => Ok(file),
        // Another process made it first.
        Err(_) if file.exists() => Ok(file),
        Err(e) => Err(failed(StarterStep::Create, &file, e)),
    }?;
    // The data directory after the file: a data directory alone means a file that was there.
    let data = base.join(defaults::DATA_DIR_NAME);
    dir(&data)?;
    // Marked as the file store's: deleted later, it is said to be made again.
    crate::store::file::made::mark(&data);
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_starter_is_valid_and_spends_nothing() {
        let c = crate::config::Config::from_json(TEXT, Path::new("/home/u/resolve")).unwrap();
        assert!(!c.pays());
        assert_eq!(c.data_dir, Path::new("/home/u/resolve/ratelimit"));
        assert_eq!(c.budget().len(), 2);
    }

    #[test]
    fn deploy_writes_the_same_values() {
        let deploy = include_str!("../../deploy.sh");
        for line in TEXT
            .lines()
            .filter(|l| !l.contains("provider") && !l.contains("allowed_origins") && l.len() > 3)
        {
            assert!(deploy.contains(line.trim_end_matches(',')), "{line}");
        }
    }

    #[test]
    fn made_once_and_never_over_a_file() {
        let home = crate::support::temp::dir("starter", "made");
        let base = home.join("resolve");
        let file = create(&base).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), TEXT);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&base), 0o700);
        assert_eq!(mode(&base.join("ratelimit")), 0o700);
        std::fs::write(&file, "{\"provider\": {\"kind\": \"echo\"}}").unwrap();
        assert_eq!(create(&base).unwrap(), file);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{\"provider\": {\"kind\": \"echo\"}}",
            "the owner's file is kept"
        );
        assert_eq!(
            std::fs::read_dir(&base).unwrap().count(),
            3,
            "no file left over: the file, the data directory and its mark"
        );
        // Where nothing can be made, the reason.
        let e = create(&home.join("missing/resolve")).unwrap_err();
        assert!(
            matches!(
                e,
                LoadError::Starter {
                    action: StarterStep::Create,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.starts_with("cannot create "), "{e}");
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn never_made_where_a_configuration_was() {
        let home = crate::support::temp::dir("starter", "was");
        let base = home.join("resolve");
        create(&base).unwrap();
        let file = base.join("config.json");
        // The file moved away: its data directory is left.
        std::fs::remove_file(&file).unwrap();
        let e = create(&base).unwrap_err();
        assert!(matches!(e, LoadError::Missing(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.starts_with(&format!(
                "the configuration {} is missing, but {} shows the site had one",
                file.display(),
                base.join("ratelimit").display()
            )),
            "{e}"
        );
        assert!(
            e.contains("move the config.json you moved away back into"),
            "{e}"
        );
        assert!(!file.exists());
        // The dashboard's copy is named first, and how to put it back.
        std::fs::write(base.join("config.json.previous"), "{}").unwrap();
        let e = create(&base).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "rename {}/config.json.previous to config.json",
                base.display()
            )),
            "{e}"
        );
        assert!(e.contains("ratelimit"), "{e}");
        // Only the copy left.
        std::fs::remove_dir(base.join("ratelimit")).unwrap();
        assert!(
            missing(&base)
                .unwrap()
                .contains("config.json.previous shows")
        );
        assert!(!file.exists());
        // Nothing left: a fresh start.
        std::fs::remove_file(base.join("config.json.previous")).unwrap();
        assert_eq!(missing(&base), None);
        assert_eq!(create(&base).unwrap(), file);
        let _ = std::fs::remove_dir_all(&home);
    }
}
