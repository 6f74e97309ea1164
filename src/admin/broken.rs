//! The dashboard's page when the configuration cannot be loaded (a JSON mistake, a wrong value)
//! or lies where it can be fetched (under the web root): the owner at `/admin` reads what the
//! log line says (the line and column, the fix), how to mend the file, put
//! `config.json.previous` back or move what lies under the web root, and where cPanel shows the
//! log (Metrics > Errors), never the visitor's "not set up yet" page. Nothing secret is on it:
//! the log line masks every secret the file holds, and the home folder is written `~`. Pure.

use std::path::Path;

use super::page::{self, Frame};
use crate::http::response::Response;
use crate::support::defaults;
use crate::support::html::escape;

/// `line 3 column 7` or `(line 3, column 7)` in a log line: the first place it names.
fn place(message: &str) -> Option<(u64, u64)> {
    let at = message.find("line ")?;
    let rest = &message[at + "line ".len()..];
    let digits = |s: &str| -> Option<(u64, usize)> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok().map(|n| (n, end))
    };
    let (line, end) = digits(rest)?;
    let rest = rest[end..].trim_start_matches([',', ' ']);
    let rest = rest.strip_prefix("column ")?;
    let (column, _) = digits(rest)?;
    Some((line, column))
}

/// `message` with the home folder (the configuration's folder's parent) written `~`.
fn shortened(message: &str, file: Option<&Path>) -> String {
    let home = file
        .and_then(Path::parent)
        .and_then(Path::parent)
        .and_then(Path::to_str)
        .filter(|h| h.len() > 1);
    match home {
        Some(home) => message.replace(&format!("{home}/"), "~/"),
        None => message.to_owned(),
    }
}

/// Why the site cannot serve with its settings, which says what the owner is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The configuration could not be loaded: every request gets 503.
    Unreadable,
    /// Something secret lies under the web root. `every`: judged before anything (the
    /// configuration unreadable too, or the data directory missing), so every request gets
    /// 503; otherwise every request the site would serve does, and a client over its limit
    /// keeps its 429.
    UnderWebRoot { every: bool },
}

impl Cause {
    /// Who gets the 503, in the words of the log's line and the page.
    pub fn who(self) -> &'static str {
        match self {
            Cause::Unreadable | Cause::UnderWebRoot { every: true } => "every request",
            Cause::UnderWebRoot { every: false } => "every request it would serve",
        }
    }
}

/// The page, answered 503 with the dashboard's guarding headers. `action`: the dashboard's
/// path; `message`: the log line (secrets masked); `file`: the configuration's place;
/// `cause`: why the settings cannot serve.
pub fn page(action: Option<&str>, message: &str, file: Option<&Path>, cause: Cause) -> Response {
    let main = match cause {
        Cause::Unreadable => unreadable(message, file),
        Cause::UnderWebRoot { every } => under_web_root(message, file, every),
    };
    let title = match cause {
        Cause::Unreadable => "The settings cannot be read",
        Cause::UnderWebRoot { .. } => "Settings lie under the web root",
    };
    let frame = Frame { action, page: None };
    page::html(503, page::document(title, &main, &frame, true)).header(
        "Retry-After",
        defaults::NOT_CONFIGURED_RETRY_AFTER_SECS.to_string(),
    )
}

/// What the page says of something secret under the web root: what the log line says, who
/// gets the 503, and how to move it out in cPanel's File Manager.
fn under_web_root(message: &str, file: Option<&Path>, every: bool) -> String {
    let who = if every {
        "every visitor gets \"This site is not set up yet\" (503)"
    } else {
        "every link the site would resolve gets \"This site is not set up yet\" (503) (a \
         visitor over its limit still gets its 429)"
    };
    format!(
        "<h1>Settings lie under the web root</h1>\n\
         <div class=\"result\" role=\"alert\"><div class=\"card error\">\n\
         <p class=\"title\">What is wrong</p>\n<p><code>{}</code></p>\n</div></div>\n\
         <p>What lies under the web root can be downloaded by anyone who guesses its address. \
         Until it is moved, {who} and the dashboard cannot open. Nothing was changed or \
         lost.</p>\n\
         <h2>To fix it</h2>\n<ol>\n\
         <li>In cPanel's File Manager, select what the message names, click \
         <strong>Move</strong> and type the folder the message names (where a copy is there \
         already, delete this one instead). Then reload this page.</li>\n\
         <li>As the file may have been downloaded already, change the provider's token at the \
         service and, once this page opens again, the dashboard's password.</li>\n\
         <li>cPanel's <strong>Errors</strong> page (Metrics &gt; Errors) shows the same line \
         with the time it was written.</li>\n</ol>\n",
        escape(&shortened(message, file)),
    )
}

/// What the page says of a configuration that cannot be loaded: the place of the mistake and
/// how to mend it or put the previous file back.
fn unreadable(message: &str, file: Option<&Path>) -> String {
    let shown = file.map_or_else(
        || format!("resolve/{}", defaults::CONFIG_FILE_NAME),
        |f| shortened(&f.display().to_string(), Some(f)),
    );
    let name = file
        .and_then(Path::file_name)
        .map_or(defaults::CONFIG_FILE_NAME.into(), |n| n.to_string_lossy());
    let go_to = match place(message) {
        Some((line, column)) => format!("go to line {line}, column {column} (the editor shows it)"),
        None => "find the setting the message names".to_owned(),
    };
    format!(
        "<h1>The settings cannot be read</h1>\n\
         <div class=\"result\" role=\"alert\"><div class=\"card error\">\n\
         <p class=\"title\">What is wrong</p>\n<p><code>{}</code></p>\n</div></div>\n\
         <p>Until it is fixed, every visitor gets \"This site is not set up yet\" (503) and the \
         dashboard cannot open. Nothing was changed or lost.</p>\n\
         <h2>To fix it</h2>\n<ol>\n\
         <li>In cPanel's File Manager, open <code>{}</code> with Edit and {}. Mend what the \
         message says: curly quotes (“ ”) where straight ones (\") belong, a comma after the \
         last item of a list, a missing comma, bracket or quote. Save, then reload this \
         page.</li>\n\
         <li>Or put back the file as it was before the last save from the dashboard, \
         <code>{name}{}</code> beside it (when it is there): rename <code>{name}</code> to \
         <code>{name}.broken</code>, then <code>{name}{}</code> to <code>{name}</code>.</li>\n\
         <li>cPanel's <strong>Errors</strong> page (Metrics &gt; Errors) shows the same line \
         with the time it was written; after a fix, a line that is still there names the next \
         mistake.</li>\n</ol>\n",
        escape(&shortened(message, file)),
        escape(&shown),
        escape(&go_to),
        defaults::CONFIG_BACKUP_SUFFIX,
        defaults::CONFIG_BACKUP_SUFFIX,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_place_the_fix_and_the_way_back_without_the_home_folder() {
        let file = Path::new("/home/ann/resolve/config.json");
        let message = "configuration /home/ann/resolve/config.json: line 4 column 12: expected \
                       `,` or `}`; the file must be one JSON object (see README: Configuration)";
        let r = page(
            Some("/cgi-bin/resolve/admin"),
            message,
            Some(file),
            Cause::Unreadable,
        );
        assert_eq!(r.status, 503);
        let body = String::from_utf8(r.body.clone()).unwrap();
        for says in [
            "configuration ~/resolve/config.json: line 4 column 12: expected `,` or `}`",
            "open <code>~/resolve/config.json</code> with Edit and go to line 4, column 12",
            "<code>config.json.previous</code>",
            "<strong>Errors</strong> page (Metrics &gt; Errors)",
        ] {
            assert!(body.contains(says), "{says}:\n{body}");
        }
        assert!(!body.contains("/home/ann"), "{body}");
        assert!(!body.contains("not set up yet</h1>"), "{body}");
        assert_eq!(place("x (line 9, column 2): y"), Some((9, 2)));
        assert_eq!(place("no place"), None);
    }

    #[test]
    fn settings_under_the_web_root_are_moved_not_mended() {
        let file = Path::new("/home/ann/resolve/config.json");
        let message = "the configuration file /home/ann/public_html/config.json lies under the \
                       web root /home/ann/public_html, where it can be fetched over HTTP";
        let served = Cause::UnderWebRoot { every: false };
        let r = page(Some("/cgi-bin/resolve/admin"), message, Some(file), served);
        assert_eq!(r.status, 503);
        let body = String::from_utf8(r.body.clone()).unwrap();
        for says in [
            "<h1>Settings lie under the web root</h1>",
            "~/public_html/config.json lies under the web root ~/public_html",
            "click <strong>Move</strong>",
            "change the provider's token",
            "every link the site would resolve gets",
            "still gets its 429",
        ] {
            assert!(body.contains(says), "{says}:\n{body}");
        }
        // None of the advice for a file that cannot be read.
        for not in ["curly quotes", "config.json.previous", "cannot be read"] {
            assert!(!body.contains(not), "{not}:\n{body}");
        }
        let every = page(
            None,
            message,
            Some(file),
            Cause::UnderWebRoot { every: true },
        );
        let body = String::from_utf8(every.body).unwrap();
        assert!(body.contains("every visitor gets"), "{body}");
        assert!(!body.contains("still gets its 429"), "{body}");
        assert_eq!(served.who(), "every request it would serve");
        assert_eq!(Cause::Unreadable.who(), "every request");
    }
}
