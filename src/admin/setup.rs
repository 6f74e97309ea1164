//! Setting the site up in the browser, while the configuration has no dashboard password: the
//! setup page (the one-time code written beside the configuration, mode 600, an hour long),
//! and its POST: the form's token, the code guessed under the sign-in budgets, the form
//! checked as `resolve check` checks the file, then the file written in one step, the code
//! removed and the owner signed in. Nobody without the code can set a site up.

use std::path::Path;

use serde_json::Value;

use super::json_edit::{self, Edit};
use super::page::{self, Notice};
use super::session::{self, FORM_COOKIE};
use super::settings_form::{self, Kind, Problem, Secrets, Values};
use super::setup_code::Code;
use super::{Ctx, Dashboard, config_file, settings_page, token};
use crate::config::Config;
use crate::http::response::Response;
use crate::support::defaults;
use crate::support::log::Level;

/// `resolve/setup-code.txt`: the code file as File Manager shows its place.
fn shown_name(path: &Path) -> String {
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .map(|d| format!("{}/", d.to_string_lossy()))
        .unwrap_or_default();
    format!("{dir}{}", defaults::SETUP_CODE_FILE)
}

/// The address the request came to (`https://example.com`), to fill the site's field.
fn site_of(ctx: &Ctx<'_>) -> String {
    let host = ctx.env.text("HTTP_HOST").unwrap_or_default();
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return String::new();
    }
    let scheme = if ctx.scope.secure { "https" } else { "http" };
    format!("{scheme}://{host}")
}

/// The problems of a configuration text `resolve check` would find: the file's checks, then
/// the report's FAIL lines (the store reached, a provider named).
pub(super) fn check_text(
    dashboard: &Dashboard<'_>,
    file: &Path,
    text: &str,
) -> Result<Config, Vec<Problem>> {
    let base = file.parent().unwrap_or(Path::new("/"));
    let config = Config::from_json(text, base).map_err(|e| {
        vec![Problem {
            field: settings_form::field_of(&e.field),
            // The field and the fix; the line and column are the new text's, not the file's.
            text: format!("{}: {}", e.field, e.message),
        }]
    })?;
    let mut report = Vec::new();
    if !crate::usage::readiness::report(&config, dashboard.store, &mut report) {
        let forms = crate::support::secret::all_forms(&config.secrets());
        let report = String::from_utf8_lossy(&report);
        return Err(report
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .map(|l| Problem {
                field: "file",
                text: crate::support::secret::mask(l, &forms).into_owned(),
            })
            .collect());
    }
    Ok(config)
}

impl Dashboard<'_> {
    /// The current code in the file beside the configuration, a new one written when there is
    /// none or it expired.
    fn current_code(&self, file: &Path) -> Result<Code, String> {
        let path = config_file::code_path(file);
        let now = self.now_secs();
        let read = config_file::read(&path).map_err(|e| e.to_string())?;
        if let Some(code) = read.as_deref().and_then(Code::parse)
            && code.is_current(now)
        {
            return Ok(code);
        }
        let bytes = crate::support::random::secret_bytes::<{ defaults::SETUP_CODE_BYTES }>()
            .map_err(|e| format!("cannot read random bytes: {e}"))?;
        let code = Code {
            code: super::setup_code::generate(&bytes),
            expires_secs: now.saturating_add(defaults::SETUP_CODE_SECS),
        };
        config_file::write_atomic(&path, &code.file_text())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.log.line(
            Level::Notice,
            &format!(
                "dashboard: a new setup code is in {} (for an hour)",
                path.display()
            ),
        );
        Ok(code)
    }

    fn unavailable(&self, ctx: &Ctx<'_>, why: &str) -> Response {
        self.log.line(
            Level::Error,
            &format!("the dashboard cannot be set up in the browser: {why}"),
        );
        page::html(
            503,
            page::refusal(
                &ctx.frame,
                "Setup is not available",
                Notice {
                    kind: "error",
                    text: "The site cannot be set up from the browser right now: the error log \
                           says why. Set admin.password_hash in config.json instead.",
                },
            ),
        )
    }

    /// The setup page, bound to a form cookie, with the code made if needed.
    pub(super) fn setup_form(
        &self,
        ctx: &Ctx<'_>,
        status: u16,
        values: Option<&Values>,
        problems: &[Problem],
        notice: Option<Notice<'_>>,
    ) -> Response {
        let Some(file) = &self.config.file else {
            return self.unavailable(ctx, "the program has no configuration file to write");
        };
        if let Err(e) = self.current_code(file) {
            return self.unavailable(ctx, &e);
        }
        let (form_cookie, set) = match self.form_cookie(ctx) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let values = match values {
            Some(v) => v.clone(),
            None => Values::of(&config_file::json_or_null(file), &site_of(ctx)),
        };
        let token = session::sign_in_token(&ctx.keys, &form_cookie);
        let code_file = shown_name(&config_file::code_path(file));
        let body = settings_page::setup(&ctx.frame, &token, &code_file, &values, problems, notice);
        let r = page::html(status, body);
        match set {
            Some(header) => r.header("Set-Cookie", header),
            None => r,
        }
    }

    /// POST of the setup form.
    pub(super) fn setup(&self, ctx: &Ctx<'_>, csrf: &str, body: &[u8]) -> Response {
        let values = Values::from_form(body);
        let refuse = |status: u16, notice: Option<Notice<'_>>| {
            self.setup_form(ctx, status, Some(&values), &[], notice)
        };
        let bound = ctx.scope.get(ctx.env, FORM_COOKIE).is_some_and(|c| {
            session::check_sign_in(
                &ctx.keys,
                c,
                csrf,
                self.now_secs(),
                defaults::ADMIN_FORM_SECS,
            )
        });
        if !bound {
            return refuse(
                403,
                Some(Notice {
                    kind: "error",
                    text: "This setup form has expired or did not come from this site, so it \
                           was not used. Here it is again.",
                }),
            );
        }
        let Some(file) = self.config.file.clone() else {
            return self.unavailable(ctx, "the program has no configuration file to write");
        };
        let secrets = Secrets::from_form(body);
        let code = config_file::read(&config_file::code_path(&file))
            .ok()
            .flatten()
            .and_then(|t| Code::parse(&t));
        let now = self.now_secs();
        let right = || {
            code.as_ref()
                .is_some_and(|c| c.is_current(now) && c.matches(&secrets.code))
        };
        let (_turn, shown) = match self.guarded(ctx, "setup code", &refuse, &right) {
            Ok(pair) => pair,
            Err(r) => return r,
        };
        let (old, json) = match config_file::read_json(&file, Some(crate::config::starter::TEXT)) {
            Ok(read) => read,
            Err(why) => return self.unavailable(ctx, &why),
        };
        if json["admin"]["password_hash"].is_string() {
            return page::html(
                403,
                page::refusal(
                    &ctx.frame,
                    "Already set up",
                    Notice {
                        kind: "error",
                        text: "This site has a dashboard password already: sign in with it.",
                    },
                ),
            );
        }
        let problems_form = |status: u16, problems: &[Problem]| {
            self.setup_form(ctx, status, Some(&values), problems, None)
        };
        let change = match settings_form::changes(Kind::Setup, &values, &secrets, &json) {
            Ok(c) => c,
            Err(problems) => return problems_form(400, &problems),
        };
        let Some(password) = change.password else {
            return problems_form(400, &[]);
        };
        let hash = match crate::support::random::secret_bytes::<16>()
            .map_err(|e| e.to_string())
            .and_then(|salt| crate::support::password::hash(&password, &salt))
        {
            Ok(h) => h,
            Err(e) => return self.unavailable(ctx, &format!("cannot hash the password: {e}")),
        };
        let mut edits = change.edits;
        edits.push(Edit {
            path: json_edit::path(&["admin", "password_hash"]),
            value: Some(Value::String(hash.clone())),
        });
        let text = match json_edit::apply(&old, &edits) {
            Ok(t) => t,
            Err(e) => return self.unavailable(ctx, &e),
        };
        if let Err(problems) = check_text(self, &file, &text) {
            return problems_form(400, &problems);
        }
        // The code is used once: taken away before the file is written, so that of two forms
        // sent with it at once only one writes.
        match std::fs::remove_file(config_file::code_path(&file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return refuse(
                    409,
                    Some(Notice {
                        kind: "error",
                        text: "This code was used a moment ago: open the page again.",
                    }),
                );
            }
            Err(e) => {
                return self.unavailable(ctx, &format!("cannot remove the used code: {e}"));
            }
        }
        if let Err(e) = config_file::save(&file, &old, &text) {
            return self.unavailable(ctx, &format!("cannot write {}: {e}", file.display()));
        }
        self.log.line(
            Level::Notice,
            &format!("dashboard: the site was set up from {shown}"),
        );
        let keys = token::Keys::derive(&ctx.secret, &hash);
        self.open_session(ctx, &keys, &shown, &refuse)
    }
}
