//! Finding the configuration file without help from the environment: under suEXEC a CGI
//! program gets no custom variables and no HOME, so the default is looked up from the account
//! the program runs as, in /etc/passwd. Never a place under the web root.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::config::error::LoadError;
use crate::support::defaults;

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--config FILE`.
    Flag(PathBuf),
    /// The `RESOLVE_CONFIG` environment variable.
    Env(PathBuf),
    /// `~/resolve/config.json` of the account running the program.
    Home(PathBuf),
}

impl Source {
    pub fn path(&self) -> &Path {
        match self {
            Source::Flag(p) | Source::Env(p) | Source::Home(p) => p,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Source::Flag(p) => format!("{} (from --config)", p.display()),
            Source::Env(p) => format!("{} (from {})", p.display(), defaults::CONFIG_ENV),
            Source::Home(p) => format!("{} (the account's home directory)", p.display()),
        }
    }
}

/// The outcome of looking: a file to read, or the directory defaults live in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    File(Source),
    /// No file: defaults apply, with the data directory under this directory.
    Defaults {
        base: PathBuf,
    },
}

impl Located {
    /// The configuration as each log line names it.
    pub fn describe(&self) -> String {
        match self {
            Located::File(source) => source.describe(),
            Located::Defaults { base } => format!(
                "none: {} is not there, defaults apply",
                base.join(defaults::CONFIG_FILE_NAME).display()
            ),
        }
    }
}

/// The effective user id, from /proc (no libc call needed).
pub fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The home directory of `uid` in a passwd file's text.
pub fn home_in_passwd(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7
            && fields[2].parse::<u32>().ok() == Some(uid)
            && fields[5].starts_with('/'))
        .then(|| PathBuf::from(fields[5]))
    })
}

/// The home directory of the account running this program.
pub fn home_dir() -> Option<PathBuf> {
    let from_passwd = effective_uid().and_then(|uid| {
        let passwd = fs::read_to_string("/etc/passwd").ok()?;
        home_in_passwd(&passwd, uid)
    });
    from_passwd.or_else(|| {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
    })
}

/// Where the configuration is: `--config`, then `RESOLVE_CONFIG`, then
/// `~/resolve/config.json`; without any, defaults beside that file's place.
pub fn locate(flag: Option<PathBuf>, env: Option<OsString>) -> Result<Located, LoadError> {
    if let Some(p) = flag {
        return Ok(Located::File(Source::Flag(absolute(&p))));
    }
    if let Some(p) = env.filter(|v| !v.is_empty()) {
        return Ok(Located::File(Source::Env(absolute(Path::new(&p)))));
    }
    let home = home_dir().ok_or_else(|| LoadError::NoHome {
        uid: effective_uid(),
    })?;
    let base = home.join(defaults::HOME_SUBDIR);
    let file = base.join(defaults::CONFIG_FILE_NAME);
    Ok(if file.exists() {
        Located::File(Source::Home(file))
    } else {
        Located::Defaults { base }
    })
}

/// [`locate`], and where the account has no configuration yet, the starter made in its place
/// ([`crate::config::starter`]): the first request or command sets the site up, so that no
/// archive carries a `config.json` to write over the owner's. Where it cannot be made, the
/// defaults apply as before.
pub fn locate_or_start(flag: Option<PathBuf>, env: Option<OsString>) -> Result<Located, LoadError> {
    start(locate(flag, env)?)
}

/// `located`, or where it is the defaults, the starter made in their place. Where the
/// account's configuration was there before (its data directory or `config.json.previous` is
/// left, [`crate::config::starter::missing`]), an error that says how to put it back: the
/// defaults would answer visitors with the echo provider and no origins.
pub fn start(located: Located) -> Result<Located, LoadError> {
    let Located::Defaults { base } = &located else {
        return Ok(located);
    };
    if let Some(message) = crate::config::starter::missing(base) {
        return Err(LoadError::Missing(message));
    }
    match crate::config::starter::create(base) {
        Ok(file) => Ok(Located::File(Source::Home(file))),
        Err(_) => Ok(located),
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

/// Reads and checks the configuration that `located` names.
pub fn load(located: &Located) -> Result<Config, LoadError> {
    load_with(located, None, Config::from_json)
}

/// As [`load`], for a process that answers one request: see [`Config::for_one_request`].
/// `text`: the file's text when it was read already ([`read_text`]).
pub fn load_for_one_request(located: &Located, text: Option<&str>) -> Result<Config, LoadError> {
    load_with(located, text, Config::for_one_request)
}

/// The text of the file `source` names.
pub fn read_text(source: &Source) -> Result<String, LoadError> {
    fs::read_to_string(source.path()).map_err(|error| LoadError::Unreadable {
        described: source.describe(),
        error,
    })
}

fn load_with(
    located: &Located,
    text: Option<&str>,
    read: fn(&str, &Path) -> Result<Config, crate::config::error::ConfigError>,
) -> Result<Config, LoadError> {
    match located {
        Located::Defaults { base } => Ok(Config::defaults(base)),
        Located::File(source) => {
            let path = source.path();
            let read_now;
            let text = match text {
                Some(text) => text,
                None => {
                    read_now = read_text(source)?;
                    &read_now
                }
            };
            let base = path.parent().unwrap_or(Path::new("/"));
            let mut config = read(text, base).map_err(|error| LoadError::Invalid {
                path: path.to_owned(),
                error,
            })?;
            config.file = Some(path.to_owned());
            Ok(config)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lookup() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # comment\n\
                      broken line\n\
                      alice:x:1001:1001:Alice,,,:/home/alice:/bin/bash\n\
                      bob:x:1002:1002::relative:/bin/sh\n";
        assert_eq!(
            home_in_passwd(passwd, 1001),
            Some(PathBuf::from("/home/alice"))
        );
        assert_eq!(home_in_passwd(passwd, 0), Some(PathBuf::from("/root")));
        assert_eq!(
            home_in_passwd(passwd, 1002),
            None,
            "a relative home is ignored"
        );
        assert_eq!(home_in_passwd(passwd, 7), None);
    }

    #[test]
    fn flag_beats_environment() {
        let got = locate(Some("/etc/a.json".into()), Some("/etc/b.json".into())).unwrap();
        assert_eq!(got, Located::File(Source::Flag("/etc/a.json".into())));
        let got = locate(None, Some("/etc/b.json".into())).unwrap();
        assert_eq!(got, Located::File(Source::Env("/etc/b.json".into())));
    }

    #[test]
    fn this_process_has_a_uid() {
        assert!(effective_uid().is_some());
    }
}
