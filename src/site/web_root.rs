//! Nothing secret under the web root: a site whose configuration file or data directory lies
//! under the request's document root (symbolic links resolved), or that finds the settings
//! extracted there by mistake, refuses every request (503) and logs the file found, where it
//! must be and how to move it. What is under the web root can be fetched over HTTP on many
//! hosts, token and all.
//!
//! [`judge`] is pure, on paths already resolved; [`refusal`] resolves them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::config::locate::{Located, home_dir};
use crate::http::request::Env;
use crate::support::defaults;

/// What lies where, with every path resolved (symbolic links followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// The document root of the request.
    pub web_root: PathBuf,
    /// The configuration file read, if one is.
    pub config: Option<PathBuf>,
    /// The data directory (counters, journal, the dashboard's secret), when known.
    pub data_dir: Option<PathBuf>,
    /// A configuration file found under the web root where an archive extracted in the web
    /// root put it (the page's folder, `resolve/`).
    pub stray: Option<PathBuf>,
    /// Where the settings belong: the account's `~/resolve`.
    pub home_dir: Option<PathBuf>,
}

/// The log's line when something secret lies under the web root; None when all is well.
pub fn judge(p: &Places) -> Option<String> {
    let under = |path: &Path| path.starts_with(&p.web_root);
    let home = p.home_dir.as_deref();
    let belongs = |name: &str| match home {
        Some(h) => h.join(name).display().to_string(),
        None => format!("~/{}/{name}", defaults::HOME_SUBDIR),
    };
    let root = p.web_root.display();
    let found = |what: &str, path: &Path, target: String| {
        format!(
            "{what} {} lies under the web root {root}, where it can be fetched over HTTP: every \
             request gets 503 until it is moved out. It must be {target}: in cPanel's File \
             Manager select it, click Move and type that folder (then remove RESOLVE_CONFIG or \
             store.dir if they point there); as the file may have been downloaded already, \
             change the provider token and the dashboard's password",
            path.display()
        )
    };
    if let Some(config) = p.config.as_deref().filter(|c| under(c)) {
        return Some(found(
            "the configuration file",
            config,
            belongs(defaults::CONFIG_FILE_NAME),
        ));
    }
    if let Some(stray) = p.stray.as_deref().filter(|c| under(c)) {
        return Some(found(
            "a configuration file (the settings extracted into the web root?)",
            stray,
            belongs(defaults::CONFIG_FILE_NAME),
        ));
    }
    if let Some(data) = p.data_dir.as_deref().filter(|d| under(d)) {
        return Some(found(
            "the data directory",
            data,
            belongs(defaults::DATA_DIR_NAME),
        ));
    }
    None
}

/// [`judge`] for a request whose environment names its DOCUMENT_ROOT: None without one (a
/// command, `resolve serve`) or when it cannot be resolved.
pub fn refusal(env: &Env, located: &Located, config: Option<&Config>) -> Option<String> {
    let root = env.get("DOCUMENT_ROOT").filter(|r| !r.is_empty())?;
    let web_root = std::fs::canonicalize(OsStr::from_bytes(root)).ok()?;
    let config_file = match located {
        Located::File(source) => Some(resolved(source.path())),
        Located::Defaults { .. } => None,
    };
    // Where an archive extracted into the web root would have put the settings: the page's
    // folder never holds a config.json.
    let stray = web_root
        .join(defaults::HOME_SUBDIR)
        .join(defaults::CONFIG_FILE_NAME);
    let stray = stray.exists().then_some(stray);
    let data_dir = match (config, located) {
        (Some(c), _) => Some(resolved(&c.data_dir)),
        (None, Located::Defaults { base }) => Some(resolved(base)),
        (None, Located::File(_)) => None,
    };
    let places = Places {
        web_root,
        config: config_file,
        data_dir,
        stray,
        home_dir: None,
    };
    // The home directory is looked up only to say where to move what was found.
    judge(&places)?;
    judge(&Places {
        home_dir: home_dir().map(|h| h.join(defaults::HOME_SUBDIR)),
        ..places
    })
}

/// `path` with every symbolic link resolved; a path not there yet resolves as far as its
/// nearest ancestor that is.
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    for ancestor in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match ancestor.file_name() {
            Some(name) => rest.push(name.to_owned()),
            None => break,
        }
    }
    path.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Places {
        Places {
            web_root: "/home/u/public_html".into(),
            config: Some("/home/u/resolve/config.json".into()),
            data_dir: Some("/home/u/resolve/ratelimit".into()),
            stray: None,
            home_dir: Some("/home/u/resolve".into()),
        }
    }

    #[test]
    fn settings_outside_the_web_root_are_fine() {
        assert_eq!(judge(&places()), None);
        // A name that only starts like the web root is outside it.
        let p = Places {
            config: Some("/home/u/public_html2/config.json".into()),
            ..places()
        };
        assert_eq!(judge(&p), None);
    }

    #[test]
    fn each_secret_under_the_web_root_is_named_with_its_place() {
        let p = Places {
            config: Some("/home/u/public_html/resolve/config.json".into()),
            ..places()
        };
        let m = judge(&p).unwrap();
        assert!(
            m.starts_with(
                "the configuration file /home/u/public_html/resolve/config.json lies under the \
                 web root /home/u/public_html"
            ),
            "{m}"
        );
        assert!(m.contains("It must be /home/u/resolve/config.json"), "{m}");
        assert!(m.contains("File Manager") && m.contains("Move"), "{m}");
        let p = Places {
            data_dir: Some("/home/u/public_html/data".into()),
            ..places()
        };
        let m = judge(&p).unwrap();
        assert!(
            m.starts_with("the data directory /home/u/public_html/data"),
            "{m}"
        );
        assert!(m.contains("It must be /home/u/resolve/ratelimit"), "{m}");
        let p = Places {
            config: None,
            stray: Some("/home/u/public_html/resolve/config.json".into()),
            home_dir: None,
            ..places()
        };
        let m = judge(&p).unwrap();
        assert!(m.contains("extracted into the web root"), "{m}");
        assert!(m.contains("It must be ~/resolve/config.json"), "{m}");
    }

    #[test]
    fn links_are_followed() {
        let dir = crate::support::temp::dir("webroot", "links");
        let web = dir.join("public_html");
        std::fs::create_dir_all(web.join("hidden")).unwrap();
        std::fs::write(web.join("hidden/config.json"), "{}").unwrap();
        // ~/resolve is a link into the web root.
        std::os::unix::fs::symlink(web.join("hidden"), dir.join("resolve")).unwrap();
        let env = Env::new().with("DOCUMENT_ROOT", web.to_str().unwrap());
        let located = Located::File(crate::config::locate::Source::Flag(
            dir.join("resolve/config.json"),
        ));
        let m = refusal(&env, &located, None).unwrap();
        assert!(
            m.contains("hidden/config.json lies under the web root"),
            "{m}"
        );
        // Not there yet: the nearest ancestor decides.
        assert_eq!(
            resolved(&dir.join("resolve/ratelimit/new")),
            std::fs::canonicalize(&web)
                .unwrap()
                .join("hidden/ratelimit/new")
        );
        // The settings left in the web root by an archive extracted there.
        std::fs::create_dir_all(web.join("resolve")).unwrap();
        std::fs::write(web.join("resolve/config.json"), "{}").unwrap();
        let located = Located::File(crate::config::locate::Source::Flag(
            dir.join("elsewhere/config.json"),
        ));
        let m = refusal(&env, &located, None).unwrap();
        assert!(m.contains("public_html/resolve/config.json"), "{m}");
        // Without a document root (a command), nothing is judged.
        assert_eq!(refusal(&Env::new(), &located, None), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
