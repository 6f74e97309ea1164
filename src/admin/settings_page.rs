//! The setup page and the dashboard's settings section as HTML: the fields filled with the
//! values the configuration holds (or those just sent), each problem under its field, and the
//! secrets' fields always empty (a token or password is never written into a page). Pure.

use super::page::{self, Frame, Notice};
use super::settings_form::{Confirm, Problem, Values, providers};
use crate::support::defaults;
use crate::support::html::escape;

/// What the settings section shows after a request.
#[derive(Default)]
pub struct Shown<'a> {
    pub values: Option<&'a Values>,
    pub problems: &'a [Problem],
    pub notice: Option<Notice<'a>>,
    /// What must be confirmed before the form is saved: shown as a second step.
    pub confirm: Option<&'a Confirm>,
}

/// The settings a restore can put back, by the short name `?put=` gives them, in words.
pub const PUT_BACK: [(&str, &str); 14] = [
    ("provider", "the provider"),
    ("token", "the API token"),
    ("spend_day", "the paid calls per day"),
    ("spend_month", "the paid calls per 30 days"),
    ("visitor_minute", "the requests per visitor per minute"),
    ("visitor_day", "the requests per visitor per day"),
    ("visitor_bytes_day", "the bytes per visitor per day"),
    ("max_file_bytes", "the largest file served"),
    ("max_links", "the links per request"),
    ("origins", "the sites whose pages may use it"),
    ("block", "the blocked addresses"),
    ("allow", "the allowed addresses"),
    ("other", "settings written by hand in the file"),
    ("none", ""),
];

/// The notice's text for `?done=...` after a save or a restore (`&put=` lists what the
/// restore put back).
pub fn done_notice(query: &[u8]) -> Option<String> {
    let done = crate::net::form::raw_values(query, "done");
    match done.first().copied() {
        Some(b"saved") => {
            Some("Saved. The previous file is kept: the button below the form puts it back.".into())
        }
        Some(b"restored") => {
            let put = crate::net::form::raw_values(query, "put");
            let names: Vec<&str> = put
                .first()
                .map(|p| p.split(|b| *b == b',').collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|n| PUT_BACK.iter().find(|(k, _)| k.as_bytes() == n))
                .map(|(_, words)| *words)
                .filter(|w| !w.is_empty())
                .collect();
            let what = if names.is_empty() {
                "The previous file is back; it held the same settings as the one it replaced."
                    .to_owned()
            } else {
                format!("The previous settings are back: {}.", names.join(", "))
            };
            Some(format!(
                "{what} Your dashboard password and sign-ins were kept as they are; the \
                 replaced file is kept, so the button puts it back in turn."
            ))
        }
        _ => None,
    }
}

/// The second step of a form that would write something to confirm apart: each concern in
/// words, and the checkbox that confirms exactly these.
fn confirm_step(confirm: Option<&Confirm>) -> String {
    let Some(confirm) = confirm.filter(|c| !c.concerns.is_empty()) else {
        return String::new();
    };
    let items: String = confirm
        .concerns
        .iter()
        .map(|(_, text)| format!("<li>{}</li>", escape(text)))
        .collect();
    format!(
        "<fieldset class=\"confirm\">\n<legend>Confirm what this saves</legend>\n\
         <ul id=\"confirm-what\">{items}</ul>\n<div class=\"check\">\
         <input id=\"confirm\" name=\"confirm\" type=\"checkbox\" value=\"{}\" \
         aria-describedby=\"confirm-what\"> <label for=\"confirm\">I mean this: save it as \
         written above</label></div>\n</fieldset>\n",
        escape(&confirm.key())
    )
}

/// The problem of one field, under it.
fn problem_of(problems: &[Problem], field: &str) -> String {
    problems
        .iter()
        .filter(|p| p.field == field)
        .map(|p| {
            format!(
                "<p class=\"problem\" id=\"{field}-problem\">{}</p>\n",
                escape(&p.text)
            )
        })
        .collect()
}

/// A field: its label, its input (already HTML), a hint and its problem.
fn field(name: &str, label: &str, input: &str, hint: &str, problems: &[Problem]) -> String {
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!(
            "<p class=\"hint\" id=\"{name}-hint\">{}</p>\n",
            escape(hint)
        )
    };
    format!(
        "<div class=\"field\">\n<label for=\"{name}\">{}</label>\n{input}\n{hint}{}</div>\n",
        escape(label),
        problem_of(problems, name)
    )
}

fn described(name: &str, hint: bool, problems: &[Problem]) -> String {
    let mut ids = Vec::new();
    if hint {
        ids.push(format!("{name}-hint"));
    }
    if problems.iter().any(|p| p.field == name) {
        ids.push(format!("{name}-problem"));
    }
    let invalid = if problems.iter().any(|p| p.field == name) {
        " aria-invalid=\"true\""
    } else {
        ""
    };
    if ids.is_empty() {
        invalid.to_owned()
    } else {
        format!(" aria-describedby=\"{}\"{invalid}", ids.join(" "))
    }
}

fn number(name: &str, label: &str, value: &str, hint: &str, problems: &[Problem]) -> String {
    let input = format!(
        "<input id=\"{name}\" name=\"{name}\" inputmode=\"numeric\" pattern=\"[0-9]*\" \
         value=\"{}\"{}>",
        escape(value),
        described(name, !hint.is_empty(), problems)
    );
    field(name, label, &input, hint, problems)
}

fn secret(name: &str, label: &str, complete: &str, hint: &str, problems: &[Problem]) -> String {
    let input = format!(
        "<input id=\"{name}\" name=\"{name}\" type=\"password\" autocomplete=\"{complete}\" \
         autocapitalize=\"off\" spellcheck=\"false\" value=\"\"{}>",
        described(name, !hint.is_empty(), problems)
    );
    field(name, label, &input, hint, problems)
}

fn lines(name: &str, label: &str, value: &str, hint: &str, problems: &[Problem]) -> String {
    let input = format!(
        "<textarea id=\"{name}\" name=\"{name}\" rows=\"4\" autocapitalize=\"off\" \
         spellcheck=\"false\"{}>{}</textarea>",
        described(name, !hint.is_empty(), problems),
        escape(value)
    );
    field(name, label, &input, hint, problems)
}

/// The challenge's keys: the site key shown, the secret never (a blank field keeps it).
fn challenge_fields(values: &Values, problems: &[Problem]) -> String {
    let name = "challenge_site_key";
    let hint =
        "From Turnstile in the Cloudflare dashboard (your widget's Site Key). Empty: no challenge.";
    let input = format!(
        "<input id=\"{name}\" name=\"{name}\" autocomplete=\"off\" autocapitalize=\"off\" \
         spellcheck=\"false\" value=\"{}\"{}>",
        escape(&values.challenge_site_key),
        described(name, true, problems)
    );
    format!(
        "<fieldset>\n<legend>Challenge before paid calls (Cloudflare Turnstile)</legend>\n{}{}</fieldset>\n",
        field(name, "Site key", &input, hint, problems),
        secret(
            "challenge_secret",
            "Secret key",
            "off",
            "Empty: the secret stays as it is (it is never shown).",
            problems
        ),
    )
}

fn provider_select(values: &Values, problems: &[Problem]) -> String {
    let mut options: Vec<(String, String)> = providers()
        .into_iter()
        .map(|(n, l)| (n.to_owned(), l.to_owned()))
        .collect();
    if values.provider == "custom" {
        options.push((
            "custom".into(),
            "Your own provider (kept as written)".into(),
        ));
    }
    let options: String = options
        .iter()
        .map(|(n, l)| {
            format!(
                "<option value=\"{}\"{}>{}</option>",
                escape(n),
                if *n == values.provider {
                    " selected"
                } else {
                    ""
                },
                escape(l)
            )
        })
        .collect();
    let input = format!(
        "<select id=\"provider\" name=\"provider\"{}>{options}</select>",
        described("provider", true, problems)
    );
    field(
        "provider",
        "Provider",
        &input,
        "The paid service that resolves links. Echo spends nothing: choose it to try the site.",
        problems,
    )
}

/// The fields both forms share: provider, token, spend and visitor limits.
fn common(values: &Values, problems: &[Problem], token_hint: &str) -> String {
    format!(
        "<fieldset>\n<legend>Provider</legend>\n{}{}</fieldset>\n\
         <fieldset>\n<legend>Spend limits (paid calls for the whole site)</legend>\n\
         <div class=\"pair\">\n{}{}</div>\n</fieldset>\n\
         <fieldset>\n<legend>Visitor limits (requests per address)</legend>\n\
         <div class=\"pair\">\n{}{}</div>\n{}</fieldset>\n\
         <fieldset>\n<legend>Files (bytes)</legend>\n\
         <div class=\"pair\">\n{}{}</div>\n</fieldset>\n",
        provider_select(values, problems),
        secret("token", "API token", "off", token_hint, problems),
        number(
            "spend_day",
            "Per day",
            &values.spend_day,
            "Empty: no daily limit.",
            problems
        ),
        number(
            "spend_month",
            "Per 30 days",
            &values.spend_month,
            "Keep it under your plan's quota.",
            problems
        ),
        number(
            "visitor_minute",
            "Per minute",
            &values.visitor_minute,
            "",
            problems
        ),
        number("visitor_day", "Per day", &values.visitor_day, "", problems),
        number(
            "max_links",
            "Links per request",
            &values.max_links,
            &format!(
                "How many links a visitor may paste at once, 1 to {}; each counts as a request. \
                 Empty: {}.",
                defaults::MAX_LINKS_LIMIT,
                defaults::MAX_LINKS
            ),
            problems
        ),
        number(
            "visitor_bytes_day",
            "Bytes per visitor a day",
            &values.visitor_bytes_day,
            "The sizes of the files a visitor is served a day, e.g. 20000000000 for 20 GB. Empty: no limit.",
            problems
        ),
        number(
            "max_file_bytes",
            "Largest file, in bytes",
            &values.max_file_bytes,
            "A larger file is refused, e.g. 10000000000 for 10 GB. Empty: any size.",
            problems
        ),
    )
}

fn password_fields(problems: &[Problem], hint: &str) -> String {
    format!(
        "{}{}",
        secret(
            "password",
            "Dashboard password",
            "new-password",
            hint,
            problems
        ),
        secret(
            "password_again",
            "The password again",
            "new-password",
            "",
            problems
        ),
    )
}

fn general(problems: &[Problem]) -> String {
    problems
        .iter()
        .filter(|p| p.field == "file")
        .map(|p| format!("<p class=\"problem\">{}</p>\n", escape(&p.text)))
        .collect()
}

fn summary(problems: &[Problem], notice: Option<Notice<'_>>) -> String {
    let text = if problems.is_empty() {
        notice
    } else {
        Some(Notice {
            kind: "error",
            text: "Nothing was changed: fix the fields marked below, then save again.",
        })
    };
    text.map_or(String::new(), |n| {
        format!(
            "<div class=\"result\" role=\"alert\"><div class=\"card {}\"><p>{}</p></div></div>\n",
            escape(n.kind),
            escape(n.text)
        )
    })
}

/// What the setup page holds besides the fields' values.
pub struct SetupForm<'a> {
    /// The form's token.
    pub token: &'a str,
    /// The code's file, as File Manager shows its place.
    pub code_file: &'a str,
    /// The code as typed, kept in its field (never the token or the passwords).
    pub code: &'a str,
    /// Setting up a site that has settings already: only the code and a new password, none
    /// of its settings shown.
    pub again: bool,
}

/// The setup page: the one-time code (from the file named), then what the site needs.
pub fn setup(
    frame: &Frame<'_>,
    form: &SetupForm<'_>,
    values: &Values,
    problems: &[Problem],
    notice: Option<Notice<'_>>,
) -> String {
    let code_hint = format!(
        "Open {} in cPanel's File Manager (beside config.json, outside public_html): \
         its first line is the code. It works for an hour; opening this page after that makes \
         a new one.",
        form.code_file
    );
    let (intro, site) = if form.again {
        (
            "No dashboard password is set: this site's settings are in config.json already, \
             and they stay as they are. Prove the site is yours with the one-time code the \
             program wrote to a file in your account, then choose a new password; the settings \
             are in the dashboard once you are signed in.",
            String::new(),
        )
    } else {
        (
            "No dashboard password is set yet. Prove the site is yours with the one-time code \
             the program wrote to a file in your account, then choose the provider and the \
             limits.",
            format!(
                "{}<fieldset>\n<legend>Your site</legend>\n{}</fieldset>\n",
                common(
                    values,
                    problems,
                    "Needed for a paid provider: from your account there."
                ),
                lines(
                    "site",
                    "The site's addresses",
                    &values.site,
                    "One a line: only pages at these addresses may use the program \
                     (allowed_origins). With and without www. are both filled in: keep the \
                     ones your site answers at.",
                    problems
                ),
            ),
        )
    };
    let main = format!(
        "<h1>Set up this site</h1>\n<p class=\"intro\">{}</p>\n{}\
         <form class=\"settings again\" {}>\n\
         <input type=\"hidden\" name=\"action\" value=\"setup\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n\
         <fieldset>\n<legend>Your one-time code</legend>\n{}</fieldset>\n{site}\
         <fieldset>\n<legend>The dashboard</legend>\n{}</fieldset>\n{}\
         <button id=\"save\" type=\"submit\">Save and sign in</button>\n</form>\n",
        escape(intro),
        summary(problems, notice),
        page::form_attributes(frame),
        escape(form.token),
        field(
            "code",
            "Setup code",
            &format!(
                "<input id=\"code\" name=\"code\" class=\"code\" autocomplete=\"off\" \
                 autocapitalize=\"characters\" spellcheck=\"false\" value=\"{}\"{}>",
                escape(form.code),
                described("code", true, problems)
            ),
            &code_hint,
            problems
        ),
        password_fields(
            problems,
            &format!(
                "At least {} characters: a few unrelated words make a good one.",
                defaults::ADMIN_PASSWORD_MIN_CHARS
            )
        ),
        general(problems),
    );
    page::document("Set up", &main, frame, true)
}

/// The dashboard's settings section: the form (with its confirmation step when `shown` has
/// one), and the button that puts the previous file back when there is one.
pub fn settings_section(
    frame: &Frame<'_>,
    csrf: &str,
    values: &Values,
    shown: &Shown<'_>,
    has_backup: bool,
) -> String {
    let (problems, notice) = (shown.problems, shown.notice);
    let confirming = shown.confirm.is_some_and(|c| !c.concerns.is_empty());
    let summary = if confirming {
        summary(
            &[],
            Some(Notice {
                kind: "error",
                text: "Nothing was changed yet: what is marked below shuts visitors (or you) \
                       out, or lets them past the limits. Tick the box at the end of the form \
                       to save it as written, or change it, then save again.",
            }),
        )
    } else {
        summary(problems, notice)
    };
    let restore = if has_backup {
        format!(
            "<form class=\"restore\" {}>\n\
             <input type=\"hidden\" name=\"action\" value=\"restore\">\n\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n\
             <p class=\"hint\">Each save keeps the file it replaced. Putting it back keeps \
             your dashboard password and sign-ins.</p>\n\
             <button id=\"restore\" type=\"submit\">Put the previous settings back</button>\n\
             </form>\n",
            page::form_attributes(frame),
            escape(csrf)
        )
    } else {
        String::new()
    };
    format!(
        "<section aria-labelledby=\"settings\">\n<h2 id=\"settings\">Settings</h2>\n{}\
         <form class=\"settings\" {}>\n\
         <input type=\"hidden\" name=\"action\" value=\"settings\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n{}\
         <fieldset>\n<legend>Who may use it</legend>\n{}{}{}</fieldset>\n{}\
         <fieldset>\n<legend>The dashboard</legend>\n{}{}</fieldset>\n{}{}\
         <button id=\"save-settings\" type=\"submit\">Save settings</button>\n</form>\n{restore}\
         </section>\n",
        summary,
        page::form_attributes(frame),
        escape(csrf),
        common(
            values,
            problems,
            "Empty: the token stays as it is (it is never shown), and each provider's token is \
             kept when you choose another."
        ),
        lines(
            "origins",
            "Sites whose pages may use it",
            &values.origins,
            "One address a line, like https://example.com (allowed_origins).",
            problems
        ),
        lines(
            "block",
            "Blocked addresses",
            &values.block,
            "One address or range a line, like 203.0.113.0/24: refused before anything counts. \
             Wider than a /16, or your own address: you are asked to confirm.",
            problems
        ),
        lines(
            "allow",
            "Allowed addresses",
            &values.allow,
            "One a line: not held by the visitor limits (spend limits still apply).",
            problems
        ),
        challenge_fields(values, problems),
        password_fields(problems, "Empty: the password stays as it is."),
        secret(
            "current_password",
            "Your current password",
            "current-password",
            "Needed to change the password, the API token, the provider or the challenge keys.",
            problems
        ),
        general(problems),
        confirm_step(shown.confirm),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::settings_form::Values;

    #[test]
    fn secrets_are_never_written_into_the_forms() {
        let values = Values {
            provider: "realdebrid".into(),
            site: "https://example.com".into(),
            spend_day: "100".into(),
            origins: "https://a.example".into(),
            block: "<b>".into(),
            ..Values::default()
        };
        let problems = vec![Problem {
            field: "token",
            text: "needed".into(),
        }];
        let form = SetupForm {
            token: "tok",
            code_file: "~/resolve/setup-code.txt",
            code: "",
            again: false,
        };
        let page = setup(&Frame::default(), &form, &values, &problems, None);
        for input in ["code", "token", "password", "password_again"] {
            let at = page
                .find(&format!("id=\"{input}\" name=\"{input}\""))
                .unwrap_or_else(|| panic!("{input}"));
            let tag = &page[at..at + page[at..].find('>').unwrap()];
            assert!(tag.contains("value=\"\""), "{tag}");
        }
        assert!(
            page.contains("<option value=\"realdebrid\" selected>"),
            "{page}"
        );
        assert!(page.contains("<p class=\"problem\" id=\"token-problem\">needed</p>"));
        assert!(
            page.contains("aria-describedby=\"token-hint token-problem\" aria-invalid=\"true\"")
        );
        assert!(page.contains("~/resolve/setup-code.txt"));
        let section = settings_section(&Frame::default(), "c", &values, &Shown::default(), true);
        assert!(section.contains("&lt;b&gt;</textarea>"), "{section}");
        assert!(section.contains("value=\"restore\""));
        assert!(
            !settings_section(&Frame::default(), "c", &values, &Shown::default(), false)
                .contains("restore")
        );
    }
}
