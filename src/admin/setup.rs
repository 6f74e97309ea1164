//! Setting the site up in the browser, while the configuration has no dashboard password: the
//! setup page (the one-time code written beside the configuration, mode 600, an hour long),
//! and its POST: the form's token, the code (a wrong one counted by the setup budgets, a right
//! one always taken), the form checked as `resolve check` checks the file, then the file
//! written in one step, the code removed and the owner signed in. Nobody without the code can
//! set a site up. A file that holds settings of its own (written by hand, or a site set up
//! before whose `admin` section was removed) is set up again with a new password only: the
//! page shows none of its settings, and they stay as they are.

use std::path::Path;

use serde_json::Value;

use super::config_file::FileError;
use super::page::{self, Notice};
use super::session::{self, FORM_COOKIE};
use super::settings_form::{self, Kind, Problem, Secrets, Values};
use super::setup_budgets::{self, SetupBudgets};
use super::setup_code::Code;
use super::signin::{Budget, Gate, Who};
use super::{Ctx, Dashboard, config_file, hash_turn, settings_page, token};
use crate::config::Config;
use crate::config::json_text::{self, Edit};
use crate::config::schema;
use crate::core::journal::Event;
use crate::http::render;
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

/// The address the request came to, to fill the site's field: `https://example.com` and,
/// for a domain name, the same with `www.` (or without it when it came to `www.`), one a
/// line.
fn site_of(ctx: &Ctx<'_>) -> String {
    let host = ctx.env.text("HTTP_HOST").unwrap_or_default();
    let scheme = if ctx.scope.secure { "https" } else { "http" };
    addresses(scheme, host).join("\n")
}

/// The addresses a site at `host` is offered: the host, then its name with or without `www.`
/// when it is a domain name (not an address, not a single name like `localhost`).
pub(super) fn addresses(scheme: &str, host: &str) -> Vec<String> {
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return Vec::new();
    }
    let host = host.to_ascii_lowercase();
    let name = host.rsplit_once(':').map_or(host.as_str(), |(name, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            name
        } else {
            &host
        }
    });
    let mut list = vec![format!("{scheme}://{host}")];
    let domain = name.contains('.')
        && name.parse::<std::net::IpAddr>().is_err()
        && !name.starts_with('[')
        && name
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.bytes().any(|b| b.is_ascii_alphabetic()));
    if domain {
        let other = match host.strip_prefix("www.") {
            Some(bare) if bare.contains('.') => bare.to_owned(),
            Some(_) => return list,
            None => format!("www.{host}"),
        };
        list.push(format!("{scheme}://{other}"));
    }
    list
}

/// Whether the configuration holds settings of its own, beyond the starter's: then setting
/// the site up asks for a new password only, and shows none of them.
pub(super) fn holds_settings(json: &Value) -> bool {
    if json.is_null() {
        return false;
    }
    let starter: Value = serde_json::from_str(crate::config::starter::TEXT).unwrap_or(Value::Null);
    Values::of(json, "") != Values::of(&starter, "")
}

/// The fields the page to set a site up again holds.
const AGAIN_FIELDS: [&str; 3] = ["code", "password", "password_again"];

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
    fn current_code(&self, file: &Path) -> Result<Code, FileError> {
        let path = config_file::code_path(file);
        let now = self.now_secs();
        let read =
            config_file::read(&path).map_err(|error| FileError::Read { path: None, error })?;
        if let Some(code) = read.as_deref().and_then(Code::parse)
            && code.is_current(now)
        {
            return Ok(code);
        }
        let bytes = crate::support::random::secret_bytes::<{ defaults::SETUP_CODE_BYTES }>()
            .map_err(FileError::Random)?;
        let code = Code {
            code: super::setup_code::generate(&bytes),
            expires_secs: now.saturating_add(defaults::SETUP_CODE_SECS),
        };
        config_file::write_atomic(&path, &code.file_text()).map_err(|error| FileError::Write {
            path: path.clone(),
            error,
        })?;
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

    /// The setup page, bound to a form cookie, with the code made if needed. `values`: what
    /// was sent (none: the starter's, never the file's); `code`: the code typed, kept.
    pub(super) fn setup_form(
        &self,
        ctx: &Ctx<'_>,
        status: u16,
        values: Option<&Values>,
        code: &str,
        problems: &[Problem],
        notice: Option<Notice<'_>>,
    ) -> Response {
        let Some(file) = &self.config.file else {
            return self.unavailable(ctx, "the program has no configuration file to write");
        };
        if let Err(e) = self.current_code(file) {
            return self.unavailable(ctx, &e.to_string());
        }
        let (form_cookie, set) = match self.form_cookie(ctx) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let again = holds_settings(&config_file::json_or_null(file));
        let values = match values {
            Some(v) => v.clone(),
            None => {
                let starter: Value =
                    serde_json::from_str(crate::config::starter::TEXT).unwrap_or(Value::Null);
                Values::of(&starter, &site_of(ctx))
            }
        };
        // Setting up again: every problem where the page shows it.
        let problems: Vec<Problem> = problems
            .iter()
            .map(|p| Problem {
                field: if again && !AGAIN_FIELDS.contains(&p.field) {
                    "file"
                } else {
                    p.field
                },
                text: p.text.clone(),
            })
            .collect();
        let token = session::sign_in_token(&ctx.keys, &form_cookie);
        let code_file = shown_name(&config_file::code_path(file));
        let form = settings_page::SetupForm {
            token: &token,
            code_file: &code_file,
            code,
            again,
        };
        let body = settings_page::setup(&ctx.frame, &form, &values, &problems, notice);
        let r = page::html(status, body);
        match set {
            Some(header) => r.header("Set-Cookie", header),
            None => r,
        }
    }

    /// A wrong code (or one past its hour): counted by the address's and the network's
    /// budgets, answered 403 with the tries left, or 429 once one is spent.
    fn wrong_code(
        &self,
        ctx: &Ctx<'_>,
        refuse: &dyn Fn(u16, Option<Notice<'_>>) -> Response,
    ) -> Response {
        let Some(address) = self.address(ctx.env) else {
            return page::text(400, "The server could not tell who is asking.");
        };
        let who = Who::new(address, self.config.client.identity(address), None);
        let shown = &who.address;
        let budgets = SetupBudgets::default();
        let window_min = defaults::ADMIN_SIGNIN_WINDOW_SECS / 60;
        match setup_budgets::count_wrong(&*self.store.counters, &budgets, &who) {
            Ok(Gate::Open { attempt, limit, .. }) => {
                self.journal(Event::SignInFailed);
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard sign-in failed for {shown}: wrong setup code (failure \
                         {attempt} of {limit} allowed within {window_min} minutes, this \
                         address's budget)"
                    ),
                );
                let left = limit.saturating_sub(attempt);
                let sentence = if left == 0 {
                    format!(
                        "Wrong setup code. That was the last try for now: your address must \
                         wait up to {window_min} minutes before the next."
                    )
                } else {
                    format!(
                        "Wrong setup code. {left} more {} allowed before your address must \
                         wait.",
                        if left == 1 { "try is" } else { "tries are" }
                    )
                };
                refuse(
                    403,
                    Some(Notice {
                        kind: "error",
                        text: &sentence,
                    }),
                )
            }
            Ok(Gate::Shut {
                retry_after_secs,
                budget,
            }) => {
                self.journal(Event::SignInRefused);
                let from = match budget {
                    Budget::Network => format!("its network {}", who.network),
                    _ => "this address".to_owned(),
                };
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard setup refused for {shown}: {} wrong setup codes within \
                         {window_min} minutes from {from}; again in {retry_after_secs} s",
                        budgets.limit(budget)
                    ),
                );
                let sentence = format!(
                    "Too many wrong setup codes from {}. Copy the code from the file exactly \
                     (a wrong one is refused for {}).",
                    budget.whose(),
                    render::wait_words(retry_after_secs)
                );
                Self::sign_in_wait(refuse, &sentence, retry_after_secs.to_string())
            }
            Err(e) => {
                self.log.line(
                    Level::Error,
                    &format!(
                        "dashboard setup refused for {shown}: the store cannot count wrong \
                         setup codes: {e}"
                    ),
                );
                self.sign_in_unavailable(refuse)
            }
        }
    }

    /// POST of the setup form.
    pub(super) fn setup(&self, ctx: &Ctx<'_>, csrf: &str, body: &[u8]) -> Response {
        let values = Values::from_form(body);
        let secrets = Secrets::from_form(body);
        // The code typed stays in the form, whatever else is wrong; the secrets never do.
        let typed = secrets.code.trim().to_owned();
        let refuse = |status: u16, notice: Option<Notice<'_>>| {
            self.setup_form(ctx, status, Some(&values), &typed, &[], notice)
        };
        let problems_form = |status: u16, problems: &[Problem]| {
            self.setup_form(ctx, status, Some(&values), &typed, problems, None)
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
        let (old, json) = match config_file::read_json(&file, Some(crate::config::starter::TEXT)) {
            Ok(read) => read,
            Err(why) => return self.unavailable(ctx, &why.to_string()),
        };
        let again = holds_settings(&json);
        // What the form asks for: a new password alone when setting up again.
        let change = if again {
            settings_form::new_password(&secrets)
                .map(|password| settings_form::Change {
                    edits: Vec::new(),
                    password: Some(password),
                })
                .map_err(|p| vec![p])
        } else {
            settings_form::changes(Kind::Setup, &values, &secrets, &json)
        };
        // No code at all is no wrong code: the form says what is missing, nothing is counted.
        if typed.is_empty() {
            let mut problems = vec![Problem {
                field: "code",
                text: "the setup code is needed: copy it from the file named here".into(),
            }];
            problems.extend(change.err().unwrap_or_default());
            return problems_form(400, &problems);
        }
        let code = config_file::read(&config_file::code_path(&file))
            .ok()
            .flatten()
            .and_then(|t| Code::parse(&t));
        let now = self.now_secs();
        if !code.is_some_and(|c| c.is_current(now) && c.matches(&typed)) {
            return self.wrong_code(ctx, &refuse);
        }
        let shown = self.identity(ctx.env);
        // One setup written at a time (the password is hashed under the same turn as a
        // sign-in's).
        let _turn = match hash_turn::take(
            &self.config.data_dir,
            std::time::Duration::from_millis(defaults::ADMIN_HASH_WAIT_MS),
        ) {
            Ok(Some(turn)) => turn,
            Ok(None) => {
                return Self::sign_in_wait(
                    &refuse,
                    "Another setup is being saved. Please try again in a moment.",
                    "1",
                );
            }
            Err(e) => {
                self.log.line(
                    Level::Error,
                    &format!(
                        "dashboard setup refused for {shown}: cannot take the lock of {} in the \
                         data directory: {e}",
                        defaults::ADMIN_HASH_LOCK_FILE
                    ),
                );
                return self.sign_in_unavailable(&refuse);
            }
        };
        // Read again under the turn: another setup may have been saved meanwhile.
        let (now_text, json) =
            match config_file::read_json(&file, Some(crate::config::starter::TEXT)) {
                Ok(read) => read,
                Err(why) => return self.unavailable(ctx, &why.to_string()),
            };
        if schema::ADMIN_PASSWORD_HASH.of(&json).is_string() {
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
        if now_text != old {
            return refuse(
                409,
                Some(Notice {
                    kind: "error",
                    text: "The settings changed a moment ago: check the form and save again.",
                }),
            );
        }
        let change = match change {
            Ok(c) => c,
            Err(problems) => return problems_form(400, &problems),
        };
        let Some(password) = change.password else {
            return problems_form(400, &[]);
        };
        let hash = match crate::support::random::secret_bytes::<16>()
            .map_err(|e| e.to_string())
            .and_then(|salt| {
                crate::support::password::hash(&password, &salt).map_err(|e| e.to_string())
            }) {
            Ok(h) => h,
            Err(e) => return self.unavailable(ctx, &format!("cannot hash the password: {e}")),
        };
        let mut edits = change.edits;
        edits.push(Edit {
            path: schema::ADMIN_PASSWORD_HASH.steps(),
            value: Some(Value::String(hash.clone())),
        });
        let text = match json_text::apply(&old, &edits) {
            Ok(t) => t,
            Err(e) => return self.unavailable(ctx, &e.to_string()),
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
        let how = if again {
            "set up again (a new password, the settings kept)"
        } else {
            "set up"
        };
        self.log.line(
            Level::Notice,
            &format!("dashboard: the site was {how} from {shown}"),
        );
        let keys = token::Keys::derive(&ctx.secret, &hash);
        let mut r = self.open_session(ctx, &keys, &shown, &refuse);
        // The dashboard then says the site is set up, and what to do next.
        if let Some((_, to)) = r.headers.iter_mut().find(|(n, _)| *n == "Location") {
            to.push_str("?done=setup");
        }
        r
    }

    /// What the dashboard says first after a setup (`?done=setup`): the site is set up, and what
    /// to do next. Empty for any other request.
    pub(super) fn set_up_notice(&self, query: &[u8]) -> String {
        let config = self.config;
        let done = crate::net::form::raw_values(query, "done");
        if done.first().copied() != Some(b"setup".as_slice()) {
            return String::new();
        }
        let esc = crate::support::html::escape;
        let page = match config.allowed_origins.first() {
            Some(origin) => format!(
                "Try the page: open <strong>{}/resolve/</strong> (or wherever you put the page's \
                 index.html) and send a link.",
                esc(origin)
            ),
            None => "Try the page: open it at its address and send a link.".to_owned(),
        };
        let provider = if config.pays() {
            "Each link sent there is a paid call, counted by the spend limits you chose."
        } else {
            "The echo provider answers each link with itself and spends nothing: choose your \
             provider in the settings below when you are ready."
        };
        format!(
            "<section class=\"set-up\" aria-labelledby=\"set-up\">\n\
             <div class=\"result\" role=\"status\"><div class=\"card ok\">\n\
             <p class=\"title\" id=\"set-up\">The site is set up</p>\n\
             <p>The settings are saved in config.json, and you are signed in. What next:</p>\n\
             <ul>\n<li>{page} {provider}</li>\n\
             <li>The daily report comes from cPanel's <strong>Cron Jobs</strong>: a job running \
             <code>$HOME/public_html/cgi-bin/resolve report --only-problems</code> at 00:05 \
             mails what needs you to the Cron Email address at the top of that page \
             (INSTALL.txt, \"Daily report and sweep\"). These figures are here whenever you sign \
             in.</li>\n</ul>\n</div></div>\n</section>\n"
        )
    }
}
