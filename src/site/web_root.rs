//! Nothing secret under the web root: a site whose configuration file or data directory lies
//! under the request's document root (symbolic links resolved), or that finds settings moved
//! or extracted there by mistake (a `config.json`, a `config.json.previous`, a data
//! directory), refuses every request it would serve (503; a client over its limit keeps its
//! cheap 429) and logs the file found, where it must be and how to move it; `resolve check`
//! fails on the same. What is under the web root can be fetched over HTTP on many hosts,
//! token and all.
//!
//! The mistakes are looked for where they happen, never by walking the web root: in the web
//! root itself, the page's folder and the program's folder, a few `stat` calls a request.
//! [`judge`] is pure, on paths already resolved; [`refusal`] resolves them.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::config::error::LoadError;
use crate::config::locate::{self, Located, home_dir};
use crate::config::starter::previous_of;
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
    /// Settings found under the web root where a move or an extraction put them ([`stray`]).
    pub stray: Option<Stray>,
    /// Where the settings belong: the account's `~/resolve`.
    pub home_dir: Option<PathBuf>,
}

/// Settings found where they do not belong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    pub path: PathBuf,
    pub kind: Kind,
}

/// What a [`Stray`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `config.json` of this program.
    Config,
    /// `config.json.previous`, the copy a dashboard save keeps.
    Previous,
    /// `config.json.tokens`, the tokens of the providers not in use, kept by the dashboard.
    Tokens,
    /// The data directory, `ratelimit`.
    DataDir,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Config, Kind::Previous, Kind::Tokens, Kind::DataDir];

    /// Its name, as it is found and as it must be in `~/resolve`.
    fn name(self) -> String {
        let config = Path::new(defaults::CONFIG_FILE_NAME);
        match self {
            Kind::Config => defaults::CONFIG_FILE_NAME.into(),
            Kind::Previous => previous_of(config).display().to_string(),
            Kind::Tokens => format!(
                "{}{}",
                defaults::CONFIG_FILE_NAME,
                defaults::KEPT_TOKENS_SUFFIX
            ),
            Kind::DataDir => defaults::DATA_DIR_NAME.into(),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Config => "a configuration file (moved or extracted into the web root?)",
            Kind::Previous => "a copy of an earlier configuration (moved into the web root?)",
            Kind::Tokens => "the kept provider tokens (moved into the web root?)",
            Kind::DataDir => "a data directory (moved into the web root?)",
        }
    }
}

/// The first of the settings found in the folders of `web_root` where a mistake puts them:
/// the web root itself (`~/resolve`'s files moved one level too far), the page's folder
/// (`resolve/`: an archive extracted into the web root, `~/resolve` moved into it) and the
/// program's folder (`cgi-bin`), when `program_dir` is under the web root. One `stat` per
/// name and folder; a `config.json` outside the page's folder, where other programs keep
/// theirs, is read to tell whether it is this program's.
pub fn stray(web_root: &Path, program_dir: Option<&Path>) -> Option<Stray> {
    let page = web_root.join(defaults::HOME_SUBDIR);
    let program = program_dir.filter(|d| d.starts_with(web_root) && *d != web_root && *d != page);
    for dir in [Some(web_root), Some(page.as_path()), program]
        .into_iter()
        .flatten()
    {
        for kind in Kind::ALL {
            let path = dir.join(kind.name());
            let found = match kind {
                Kind::Config => {
                    path.is_file()
                        && (dir == page
                            || std::fs::read_to_string(&path)
                                .is_ok_and(|t| crate::config::raw::looks_like_ours(&t)))
                }
                Kind::Previous | Kind::Tokens => path.is_file(),
                Kind::DataDir => path.is_dir(),
            };
            if found {
                return Some(Stray { path, kind });
            }
        }
    }
    None
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
            "{what} {} lies under the web root {root}, where it can be fetched over HTTP. It must \
             be {target}: in cPanel's File \
             Manager select it, click Move and type that folder (then remove RESOLVE_CONFIG or \
             store.dir if they point there; where {target} is there already, delete this \
             copy instead); as the file may have been downloaded already, change the provider \
             token and the dashboard's password",
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
    if let Some(stray) = p.stray.as_ref().filter(|s| under(&s.path)) {
        return Some(found(
            stray.kind.describe(),
            &stray.path,
            belongs(&stray.kind.name()),
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

/// The request's web roots, resolved, each with the program's folder under it (from
/// SCRIPT_FILENAME, as written under the root as given): DOCUMENT_ROOT, and
/// CONTEXT_DOCUMENT_ROOT where it differs (a `/~user/` address: the account's `public_html`,
/// while DOCUMENT_ROOT stays the server's). None without a document root (a command,
/// `resolve serve`) or where one cannot be resolved.
fn request_roots(env: &Env) -> impl Iterator<Item = (PathBuf, Option<PathBuf>)> + '_ {
    let root = |name: &str| {
        env.get(name)
            .map(|r| r.strip_suffix(b"/").unwrap_or(r))
            .filter(|r| !r.is_empty())
    };
    let document = root("DOCUMENT_ROOT");
    let context = root("CONTEXT_DOCUMENT_ROOT").filter(|c| Some(*c) != document);
    [document, context]
        .into_iter()
        .flatten()
        .filter_map(|root| {
            let given = Path::new(OsStr::from_bytes(root));
            let web_root = std::fs::canonicalize(given).ok()?;
            let program_dir = env
                .get("SCRIPT_FILENAME")
                .and_then(|f| Path::new(OsStr::from_bytes(f)).parent())
                .and_then(|d| d.strip_prefix(given).ok())
                .map(|rest| web_root.join(rest));
            Some((web_root, program_dir))
        })
}

/// Where a request's configuration is ([`locate::locate`]), with the starter made where the
/// account has none ([`locate::start`]), except while settings lie under the request's web
/// root: then nothing is written, and [`refusal`] refuses the request with where they must go.
pub fn locate(env: &Env, name: Option<OsString>) -> Result<Located, LoadError> {
    let located = locate::locate(None, name)?;
    if matches!(located, Located::Defaults { .. })
        && request_roots(env).any(|(root, program)| stray(&root, program.as_deref()).is_some())
    {
        return Ok(located);
    }
    locate::start(located)
}

/// [`judge`] for a request whose environment names its DOCUMENT_ROOT: None without one (a
/// command, `resolve serve`) or when it cannot be resolved.
pub fn refusal(env: &Env, located: &Located, config: Option<&Config>) -> Option<String> {
    request_roots(env).find_map(|(web_root, program_dir)| {
        let stray = stray(&web_root, program_dir.as_deref());
        judge_with_home(places(web_root, located, config, stray))
    })
}

/// [`refusal`] asked before the request goes on, rather than only for what would be served
/// ([`crate::app::SiteCheck`]), where the data directory is missing (moved away, perhaps under
/// the web root): the store would make it again where the configuration says before the
/// request is judged. While it is there (one `stat`), None: nothing is made anywhere first.
pub fn refusal_first(env: &Env, located: &Located, config: &Config) -> Option<String> {
    if config.data_dir.is_dir() {
        return None;
    }
    refusal(env, located, Some(config))
}

/// [`locate`] for a command (`--config`, RESOLVE_CONFIG), judged against the account's own web
/// roots ([`home_roots`]).
pub fn locate_for_command(
    flag: Option<PathBuf>,
    name: Option<OsString>,
) -> Result<Located, LoadError> {
    let located = locate::locate(flag, name)?;
    if matches!(located, Located::Defaults { .. })
        && home_roots()
            .iter()
            .any(|(root, program)| stray(root, program.as_deref()).is_some())
    {
        return Ok(located);
    }
    locate::start(located)
}

/// What `resolve check` finds under the account's web roots ([`home_roots`]): the
/// configuration or data directory read, or settings moved there.
pub fn for_check(located: &Located, config: Option<&Config>) -> Option<String> {
    home_roots().into_iter().find_map(|(web_root, program)| {
        let stray = stray(&web_root, program.as_deref());
        judge_with_home(places(web_root, located, config, stray))
    })
}

/// The account's web roots (by the names hosts give them, beside `~/resolve`), resolved, each
/// with this program's folder when it lies under it.
fn home_roots() -> Vec<(PathBuf, Option<PathBuf>)> {
    let Some(home) = home_dir() else {
        return Vec::new();
    };
    let program_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_owned));
    crate::usage::readiness::WEB_ROOTS
        .iter()
        .filter_map(|name| {
            let web_root = std::fs::canonicalize(home.join(name)).ok()?;
            let program = program_dir.clone().filter(|d| d.starts_with(&web_root));
            Some((web_root, program))
        })
        .collect()
}

fn places(
    web_root: PathBuf,
    located: &Located,
    config: Option<&Config>,
    stray: Option<Stray>,
) -> Places {
    let config_file = match located {
        Located::File(source) => Some(resolved(source.path())),
        Located::Defaults { .. } => None,
    };
    let data_dir = match (config, located) {
        (Some(c), _) => Some(resolved(&c.data_dir)),
        (None, Located::Defaults { base }) => Some(resolved(base)),
        (None, Located::File(_)) => None,
    };
    Places {
        web_root,
        config: config_file,
        data_dir,
        stray,
        home_dir: None,
    }
}

/// [`judge`], with the home directory looked up only to say where to move what was found.
fn judge_with_home(places: Places) -> Option<String> {
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
            stray: Some(Stray {
                path: "/home/u/public_html/resolve/config.json".into(),
                kind: Kind::Config,
            }),
            home_dir: None,
            ..places()
        };
        let m = judge(&p).unwrap();
        assert!(m.contains("extracted into the web root"), "{m}");
        assert!(m.contains("It must be ~/resolve/config.json"), "{m}");
        let p = Places {
            stray: Some(Stray {
                path: "/home/u/public_html/config.json.previous".into(),
                kind: Kind::Previous,
            }),
            ..places()
        };
        let m = judge(&p).unwrap();
        assert!(
            m.contains("It must be /home/u/resolve/config.json.previous"),
            "{m}"
        );
        assert!(m.contains("delete this copy instead"), "{m}");
    }

    #[test]
    fn settings_moved_into_the_web_root_are_found_where_moves_put_them() {
        let dir = crate::support::temp::dir("webroot", "strays");
        let web = dir.join("public_html");
        let page = web.join("resolve");
        let cgi = web.join("cgi-bin");
        std::fs::create_dir_all(&page).unwrap();
        std::fs::create_dir_all(&cgi).unwrap();
        assert_eq!(stray(&web, Some(&cgi)), None);
        // Another program's config.json in the web root is not this program's.
        std::fs::write(web.join("config.json"), "{\"name\": \"shop\"}").unwrap();
        assert_eq!(stray(&web, Some(&cgi)), None);
        let found = |path: &Path, kind| {
            Some(Stray {
                path: path.to_owned(),
                kind,
            })
        };
        for (path, kind) in [
            (web.join("config.json"), Kind::Config),
            (page.join("config.json"), Kind::Config),
            (cgi.join("config.json"), Kind::Config),
            (web.join("config.json.previous"), Kind::Previous),
            (page.join("config.json.previous"), Kind::Previous),
            (cgi.join("config.json.previous"), Kind::Previous),
            (web.join("config.json.tokens"), Kind::Tokens),
            (page.join("config.json.tokens"), Kind::Tokens),
            (cgi.join("config.json.tokens"), Kind::Tokens),
        ] {
            std::fs::write(&path, crate::config::starter::TEXT).unwrap();
            assert_eq!(stray(&web, Some(&cgi)), found(&path, kind));
            std::fs::remove_file(&path).unwrap();
        }
        for data in [
            web.join("ratelimit"),
            page.join("ratelimit"),
            cgi.join("ratelimit"),
        ] {
            std::fs::create_dir(&data).unwrap();
            assert_eq!(stray(&web, Some(&cgi)), found(&data, Kind::DataDir));
            std::fs::remove_dir(&data).unwrap();
        }
        // The program's folder counts only under the web root.
        std::fs::write(dir.join("config.json"), crate::config::starter::TEXT).unwrap();
        assert_eq!(stray(&web, Some(&dir)), None);
        let _ = std::fs::remove_dir_all(&dir);
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
