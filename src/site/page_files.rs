//! The page's files the owner edited, kept through an upgrade. Extracting a new archive (or
//! `deploy.sh --force`) writes the new version's page over the old one, edits and all; so the
//! program keeps a private copy of each page file that differs from what was installed, and
//! when an upgrade has put the new version's file in its place, puts the owner's back and the
//! new one beside it as `NAME.new`, and says so in the log.
//!
//! What was installed is `~/resolve/installed.txt` (`SHA256  PATH` lines, paths from the home
//! directory), which `deploy.sh` writes and the release archives carry. The copies are in
//! `~/resolve/kept/` (mode 700, outside the web root), each with the installed file's hash it
//! was edited from (`NAME.base`): a file equal to what is installed now, whose copy was edited
//! from another installed version, was replaced by an upgrade. Runs where a sweep runs (one
//! request in `store.sweep_one_in`, `resolve sweep` from cron) and in `resolve check`: a few
//! small files read and hashed, never on a request that does not sweep.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::support::log::{Level, Log};
use crate::support::{defaults, hex, private_file};

/// What happened to one page file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// The owner's edit was copied aside (first seen, or changed since).
    Copied(PathBuf),
    /// An upgrade had replaced the owner's edit: put back, the new file beside it.
    PutBack { file: PathBuf, new: PathBuf },
}

impl Kept {
    /// The owner's log line, for what was put back.
    pub fn line(&self) -> Option<String> {
        match self {
            Kept::Copied(_) => None,
            Kept::PutBack { file, new } => Some(format!(
                "the upgrade replaced {}, which you had edited: your edited file is back in its \
                 place and the new version's file is beside it as {}. Compare them (cPanel's \
                 File Manager, Edit), copy what you want from the new one, then delete {}",
                file.display(),
                new.display(),
                new.display()
            )),
        }
    }
}

/// [`keep`] for the site of `config` (its file's folder, the account's home), each file put
/// back said in `log`.
pub fn keep_for(config: &Config, log: &dyn Log) {
    let (Some(base), Some(home)) = (
        config.file.as_deref().and_then(Path::parent),
        crate::config::locate::home_dir(),
    ) else {
        return;
    };
    for line in keep(&home, base).iter().filter_map(Kept::line) {
        log.line(Level::Warn, &line);
    }
}

/// Keeps the edited page files of the account whose settings are in `base` (`~/resolve`),
/// under `home`: what was done, file by file. Nothing without an installed-files list.
pub fn keep(home: &Path, base: &Path) -> Vec<Kept> {
    let Ok(list) = fs::read_to_string(base.join(defaults::INSTALLED_LIST)) else {
        return Vec::new();
    };
    let kept_dir = base.join(defaults::KEPT_PAGE_DIR);
    let mut done = Vec::new();
    for (installed, rel) in list.lines().filter_map(entry) {
        // The program is never edited: only the page's files are kept.
        if rel.ends_with("cgi-bin/resolve") || rel.contains("..") {
            continue;
        }
        let file = home.join(rel);
        let Ok(bytes) = fs::read(&file) else {
            continue;
        };
        let copy = kept_dir.join(rel.replace('/', "--"));
        let mut copy_base = copy.clone().into_os_string();
        copy_base.push(".base");
        let copy_base = PathBuf::from(copy_base);
        let now = sha256(&bytes);
        let edited_from = fs::read_to_string(&copy_base).ok();
        if now != installed {
            // The owner's edit: copied aside when new or changed.
            if fs::read(&copy).ok().as_deref() != Some(&bytes[..])
                && write_copy(&kept_dir, &copy, &bytes, &copy_base, installed)
            {
                done.push(Kept::Copied(file));
            }
            continue;
        }
        let Some(from) = edited_from else {
            continue;
        };
        if from.trim() == installed {
            // Put back as installed by the owner: nothing kept any more.
            let _ = fs::remove_file(&copy);
            let _ = fs::remove_file(&copy_base);
            continue;
        }
        // Installed anew over an edit: the edit back, the new file beside it.
        let Ok(edit) = fs::read(&copy) else {
            continue;
        };
        let mut new = file.clone().into_os_string();
        new.push(".new");
        let new = PathBuf::from(new);
        if put_back(&file, &new, &bytes, &edit).is_ok() {
            let _ = fs::write(&copy_base, installed);
            done.push(Kept::PutBack { file, new });
        }
    }
    done
}

/// `HASH  PATH` of an installed-files line; None for a comment or a line of another form.
fn entry(line: &str) -> Option<(&str, &str)> {
    let (hash, path) = line.split_once("  ")?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) && !path.starts_with('/'))
        .then_some((hash, path))
}

fn sha256(bytes: &[u8]) -> String {
    hex::lower(&Sha256::digest(bytes))
}

/// Writes the owner's copy and the hash it was edited from; true when both were written.
fn write_copy(dir: &Path, copy: &Path, bytes: &[u8], base: &Path, installed: &str) -> bool {
    let _ = fs::DirBuilder::new().mode(0o700).create(dir);
    private_file::replace(copy, bytes).is_ok()
        && private_file::replace(base, installed.as_bytes()).is_ok()
}

/// The new version's file to `new`, the owner's `edit` in its place (the page's mode, 644).
fn put_back(file: &Path, new: &Path, installed: &[u8], edit: &[u8]) -> std::io::Result<()> {
    fs::write(new, installed)?;
    fs::set_permissions(new, fs::Permissions::from_mode(0o644))?;
    let mut fresh = file.as_os_str().to_owned();
    fresh.push(".kept");
    let fresh = PathBuf::from(fresh);
    fs::write(&fresh, edit)?;
    fs::set_permissions(&fresh, fs::Permissions::from_mode(0o644))?;
    fs::rename(&fresh, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_is_kept_through_an_upgrade_and_the_new_file_put_beside_it() {
        let home = crate::support::temp::dir("page", "kept");
        let base = home.join("resolve");
        let page = home.join("public_html/resolve");
        fs::create_dir_all(&page).unwrap();
        fs::create_dir_all(&base).unwrap();
        let install = |html: &str| {
            fs::write(page.join("index.html"), html).unwrap();
            fs::write(
                base.join("installed.txt"),
                format!(
                    "# Files deploy.sh installed\n{}  public_html/resolve/index.html\n{}  public_html/cgi-bin/resolve\n",
                    sha256(html.as_bytes()),
                    sha256(b"program")
                ),
            )
            .unwrap();
        };
        install("<p>version 1</p>");
        assert_eq!(keep(&home, &base), []);
        // The owner edits the page: a copy is kept, once.
        let index = page.join("index.html");
        fs::write(&index, "<p>my site</p>").unwrap();
        assert_eq!(keep(&home, &base), [Kept::Copied(index.clone())]);
        assert_eq!(keep(&home, &base), []);
        // The next version extracted over it: the edit back, the new file beside it.
        install("<p>version 2</p>");
        let new = page.join("index.html.new");
        let put = keep(&home, &base);
        assert_eq!(
            put,
            [Kept::PutBack {
                file: index.clone(),
                new: new.clone()
            }]
        );
        assert!(put[0].line().unwrap().contains("index.html.new"));
        assert_eq!(fs::read_to_string(&index).unwrap(), "<p>my site</p>");
        assert_eq!(fs::read_to_string(&new).unwrap(), "<p>version 2</p>");
        assert_eq!(keep(&home, &base), []);
        // The owner takes the new page as it is: nothing is put back again.
        fs::copy(&new, &index).unwrap();
        assert_eq!(keep(&home, &base), []);
        assert_eq!(fs::read_to_string(&index).unwrap(), "<p>version 2</p>");
        install("<p>version 3</p>");
        assert_eq!(keep(&home, &base), []);
        assert_eq!(fs::read_to_string(&index).unwrap(), "<p>version 3</p>");
        let _ = fs::remove_dir_all(&home);
    }
}
