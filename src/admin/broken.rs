//! The dashboard's page when the configuration cannot be loaded (a JSON mistake, a wrong value,
//! a file in the wrong place): the owner at `/admin` reads what the log line says (the line and
//! column, the fix), how to mend the file or put `config.json.previous` back, and where cPanel
//! shows the log (Metrics > Errors), never the visitor's "not set up yet" page. Nothing secret
//! is on it: the log line masks every secret the file holds, and the home folder is written
//! `~`. Pure.

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

/// The page, answered 503 with the dashboard's guarding headers. `action`: the dashboard's
/// path; `message`: the log line (secrets masked); `file`: the configuration's place.
pub fn page(action: Option<&str>, message: &str, file: Option<&Path>) -> Response {
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
    let main = format!(
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
    );
    let frame = Frame { action, page: None };
    page::html(
        503,
        page::document("The settings cannot be read", &main, &frame, true),
    )
    .header(
        "Retry-After",
        defaults::NOT_CONFIGURED_RETRY_AFTER_SECS.to_string(),
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
        let r = page(Some("/cgi-bin/resolve/admin"), message, Some(file));
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
}
