//! The owner's dashboard at `/cgi-bin/resolve/admin` (PATH_INFO `/admin`), the same under CGI,
//! FastCGI and `resolve serve`. Off (404) unless `admin.password_hash` is set. Behind a password
//! form (POST only), a signed session cookie, CSRF tokens on every form and budgets of failed
//! sign-ins (per address, per network, for the site, per known browser) past which no password
//! is checked, one hash at a time; without a valid cookie it shows the sign-in form and nothing
//! else.
//!
//! The parts: [`server_key`] (the secret in the data directory), [`token`] (the signing key
//! and tags), [`session`] (what the cookies and tokens hold), [`cookies`] (the headers),
//! [`signin`] (the budgets), [`hash_turn`] (one hash at a time), [`page`] (the HTML and its headers),
//! [`setup_budgets`] (wrong setup codes). The password hashes are
//! `support::password`'s; the figures' HTML is `usage::html`'s.

mod attempt;
mod blocking;
pub mod broken;
pub mod challenge_form;
pub mod config_file;
pub mod cookies;
pub mod hash_turn;
mod kept_tokens;
pub mod page;
pub mod put_back;
pub mod same_origin;
pub mod server_key;
pub mod session;
pub mod sessions;
mod settings;
pub mod settings_form;
pub mod settings_page;
mod setup;
pub mod setup_budgets;
pub mod setup_code;
mod shared_keys;
pub mod signin;
pub mod token;

use std::io::Read;

use crate::config::Config;
use crate::http::render;
use crate::http::request::{self, Env, Method};
use crate::http::response::Response;
use crate::net::form;
use crate::store::roles::Store;
use crate::support::defaults;
use crate::support::log::{Level, Log};
use page::{Frame, Notice};
use session::{FORM_COOKIE, SESSION_COOKIE, Session};
use token::Keys;

/// The PATH_INFO the dashboard answers at.
pub const PATH_INFO: &str = "/admin";

/// Whether a request is for the dashboard.
pub fn is_admin(env: &Env) -> bool {
    env.get("PATH_INFO") == Some(PATH_INFO.as_bytes())
}

/// The dashboard's path as the browser sees it, where its forms post and its cookies are kept:
/// the requested path when it is plain and ends in `/admin` (a host that rewrites
/// `/cgi-bin/...` to the account's own directory gives the program another SCRIPT_NAME than
/// the one in the address bar), else the program's path followed by `/admin`.
pub fn own_path(env: &Env) -> Option<String> {
    let requested = env
        .text("REQUEST_URI")
        .and_then(|uri| uri.split(['?', '#']).next())
        .filter(|path| path.ends_with(PATH_INFO));
    match render::Frame::new(requested, None).action {
        Some(path) => Some(path.to_owned()),
        None => render::Frame::new(env.text("SCRIPT_NAME"), None)
            .action
            .map(|script| format!("{script}{PATH_INFO}")),
    }
}

/// What one dashboard request needs, borrowed from the site that answers it.
pub struct Dashboard<'a> {
    pub config: &'a Config,
    pub store: &'a Store,
    pub log: &'a dyn Log,
    /// The time, in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

/// One request, as the dashboard reads it.
struct Ctx<'e> {
    env: &'e Env,
    frame: Frame<'e>,
    scope: cookies::Scope<'e>,
    keys: Keys,
    /// The server's secret, for keys signed with a new password.
    secret: [u8; server_key::LEN],
}

/// The fields of a form the dashboard sent.
#[derive(Default)]
struct Fields {
    action: String,
    csrf: String,
    password: String,
    client: String,
}

impl Fields {
    /// The form's name for the log, from its `action` field (the sign-in form has none).
    fn form_name(&self) -> &'static str {
        match self.action.as_str() {
            "settings" => "settings",
            "restore" => "restore",
            "signout" => "sign-out",
            "signout-all" => "sign-out-everywhere",
            "block" => "block",
            "unblock" => "unblock",
            "clear-shared" => "clear-shared",
            "setup" => "setup",
            _ => "sign-in",
        }
    }

    fn read(body: &[u8]) -> Fields {
        let field = |name: &str| {
            form::raw_values(body, name)
                .first()
                .and_then(|raw| form::decode(raw).ok())
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .unwrap_or_default()
        };
        Fields {
            action: field("action"),
            csrf: field("csrf"),
            password: field("password"),
            client: field("client"),
        }
    }
}

impl Dashboard<'_> {
    fn now_secs(&self) -> u64 {
        self.now_ms / 1000
    }

    /// Answers one request for `/admin`. `body` is read only for a POST, up to its length.
    pub fn answer(&self, env: &Env, body: &mut dyn Read) -> Response {
        let action = own_path(env);
        let frame = Frame {
            action: action.as_deref(),
            page: Some(&self.config.page),
        };
        if let Some(why) = self.blocked(env) {
            return self.refused_warning(
                &frame,
                &format!(
                    "403 {} at the dashboard: blocked, {why}",
                    self.identity(env)
                ),
                "Blocked",
                crate::app::controls::BLOCKED,
            );
        }
        // With no password yet, the setup page's form is signed with keys of its own.
        let hash = match &self.config.admin {
            Some(admin) => admin.password_hash.expose(),
            None => token::SETUP_KEYS,
        };
        let (keys, secret) = match server_key::load_or_create(&self.config.data_dir) {
            Ok(secret) => (Keys::derive(&secret, hash), secret),
            Err(e) => {
                self.log.line(
                    Level::Error,
                    &format!("the dashboard cannot sign anyone in: {e}"),
                );
                return page::refused(
                    &frame,
                    503,
                    "The dashboard is not available",
                    "The dashboard cannot be used right now: the error log says why.",
                );
            }
        };
        let ctx = Ctx {
            env,
            frame,
            scope: cookies::Scope {
                path: action.as_deref(),
                secure: cookies::is_https(env, &self.config.client),
            },
            keys,
            secret,
        };
        let head = match request::parse_head(env, defaults::ADMIN_MAX_BODY_BYTES) {
            Ok(head) => head,
            Err(p) => {
                let r = page::text(p.status, &p.detail);
                return if p.status == 405 {
                    r.header("Allow", request::ALLOWED_METHODS)
                } else {
                    r
                };
            }
        };
        if head.method != Method::Post {
            return self.show(&ctx);
        }
        let mut bytes = Vec::new();
        let read = body.take(head.body_len).read_to_end(&mut bytes);
        if read.is_err() || bytes.len() as u64 != head.body_len {
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused a form from {}: it arrived incomplete ({} of {} bytes)",
                    self.identity(env),
                    bytes.len(),
                    head.body_len
                ),
            );
            return page::text(400, "The form arrived incomplete.");
        }
        if let Err(header) = same_origin::check(env) {
            return self.refused_warning(
                &ctx.frame,
                &format!(
                    "dashboard: refused a form from another site ({header}) for {}",
                    self.identity(env)
                ),
                "Not used",
                "This form was sent from another site's page, so it was not used.",
            );
        }
        let fields = Fields::read(&bytes);
        if self.config.admin.is_none() {
            return match fields.action.as_str() {
                "setup" => self.setup(&ctx, &fields.csrf, &bytes),
                _ => {
                    self.log.line(
                        Level::Warn,
                        &format!(
                            "dashboard: refused the {} form from {}: the site is not set up \
                             yet (no admin section), so only the setup form is used",
                            fields.form_name(),
                            self.identity(env)
                        ),
                    );
                    self.setup_form(&ctx, 403, None, "", &[], None)
                }
            };
        }
        match fields.action.as_str() {
            "settings" => self.save_settings(&ctx, &fields, &bytes),
            "restore" => self.restore(&ctx, &fields),
            "signout" => self.sign_out(&ctx, &fields, false),
            "signout-all" => self.sign_out(&ctx, &fields, true),
            "block" => self.block(&ctx, &fields),
            "unblock" => self.unblock(&ctx, &fields),
            "clear-shared" => self.clear_shared(&ctx, &fields),
            _ => self.sign_in(&ctx, &fields),
        }
    }

    /// The session the request's cookie holds, if it is signed and current, and still open on
    /// the server (not signed out, not idle for too long); it is seen now.
    fn session(&self, ctx: &Ctx<'_>) -> Option<Session> {
        let cookie = ctx.scope.get(ctx.env, SESSION_COOKIE)?;
        let session = session::open_session(
            &ctx.keys,
            cookie,
            self.now_secs(),
            defaults::ADMIN_SESSION_SECS,
        )?;
        let open = sessions::change(&self.config.data_dir, |t| {
            t.touch(&session.nonce, self.now_secs(), defaults::ADMIN_IDLE_SECS)
        });
        match open {
            Ok(true) => Some(session),
            Ok(false) => None,
            Err(e) => {
                self.log.line(
                    Level::Error,
                    &format!(
                        "the dashboard cannot read its list of sessions ({} in the data \
                         directory): {e}",
                        defaults::ADMIN_SESSIONS_FILE
                    ),
                );
                None
            }
        }
    }

    /// GET: the dashboard for a signed-in owner; the sign-in form for anyone else.
    fn show(&self, ctx: &Ctx<'_>) -> Response {
        if self.config.admin.is_none() {
            return self.setup_form(ctx, 200, None, "", &[], None);
        }
        match self.session(ctx) {
            Some(session) => self.dashboard(ctx, &session),
            None => self.sign_in_form(ctx, 200, None),
        }
    }

    /// The sign-in form, bound to the request's form cookie while it is current, else to a new
    /// one. A session cookie that did not open is taken back.
    fn sign_in_form(&self, ctx: &Ctx<'_>, status: u16, notice: Option<Notice<'_>>) -> Response {
        let (form_cookie, set) = match self.form_cookie(ctx) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let token = session::sign_in_token(&ctx.keys, &form_cookie);
        let mut r = page::html(status, page::sign_in(&ctx.frame, &token, notice));
        if let Some(header) = set {
            r = r.header("Set-Cookie", header);
        }
        if ctx.scope.get(ctx.env, SESSION_COOKIE).is_some() {
            r = r.header("Set-Cookie", cookies::clear(ctx.scope, SESSION_COOKIE));
        }
        r
    }

    /// The request's form cookie while it is current, else a new one with the header that
    /// sets it.
    fn form_cookie(&self, ctx: &Ctx<'_>) -> Result<(String, Option<String>), Response> {
        let now = self.now_secs();
        let life = defaults::ADMIN_FORM_SECS;
        let kept = ctx
            .scope
            .get(ctx.env, FORM_COOKIE)
            .filter(|c| session::form_is_current(c, now, life))
            .map(str::to_owned);
        match kept {
            Some(c) => Ok((c, None)),
            None => match crate::support::random::secret_bytes::<16>() {
                Ok(nonce) => {
                    let c = session::new_form(now, life, &token::hex(&nonce));
                    let header = cookies::set(ctx.scope, FORM_COOKIE, &c, life);
                    Ok((c, Some(header)))
                }
                Err(e) => Err(self.no_randomness(ctx, &e)),
            },
        }
    }

    fn no_randomness(&self, ctx: &Ctx<'_>, e: &std::io::Error) -> Response {
        self.log.line(
            Level::Error,
            &format!("the dashboard cannot read random bytes (/dev/urandom): {e}"),
        );
        page::refused(
            &ctx.frame,
            503,
            "The dashboard is not available",
            "The dashboard cannot be used right now: the error log says why.",
        )
    }

    /// Why the client is blocked, when the configuration's block list or the store's blocks
    /// hold its address: the dashboard refuses it as every other answer does. Blocks that
    /// cannot be read are logged and let pass (the sign-in's budgets still count).
    fn blocked(&self, env: &Env) -> Option<String> {
        let address = self.address(env)?;
        if self.config.block.contains(address) {
            return Some("it is in the configuration's block list".into());
        }
        let blocks = crate::app::controls::blocks::read_for_request(
            &*self.store.cache,
            crate::app::controls::blocks::copy_path(self.config).as_deref(),
            self.now_ms,
        );
        match blocks {
            Ok(list) => crate::app::controls::blocks::find(&list, address, self.now_ms)
                .map(|b| format!("{} is blocked ({})", b.range, b.reason)),
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("the dashboard cannot read the blocks: {e}"),
                );
                None
            }
        }
    }

    /// The client's address.
    fn address(&self, env: &Env) -> Option<std::net::IpAddr> {
        crate::http::identity::client_address_in(
            &self.config.client,
            &self.config.forwarded_header,
            env,
        )
        .ok()
    }

    /// This site's origin as the browser asked for it (`https://example.com`), when its host
    /// reads as one.
    fn origin(&self, env: &Env) -> Option<String> {
        let host = env
            .header("Host")
            .and_then(|h| std::str::from_utf8(h).ok())?;
        let plain = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
        let scheme = if cookies::is_https(env, &self.config.client) {
            "https"
        } else {
            "http"
        };
        plain.then(|| format!("{scheme}://{}", host.to_ascii_lowercase()))
    }

    /// The client's address as the rules count it (an IPv6 client by its prefix), for the log:
    /// `-` when there is none.
    fn identity(&self, env: &Env) -> String {
        self.address(env)
            .map_or_else(|| "-".into(), |a| self.config.client.identity(a))
    }

    /// A 403 refusal page, and `line` in the log as a warning.
    fn refused_warning(&self, frame: &Frame<'_>, line: &str, title: &str, text: &str) -> Response {
        self.log.line(Level::Warn, line);
        page::refused(frame, 403, title, text)
    }

    /// POST to sign out, this session or every one (`everywhere`): only with the session's
    /// own token. The session ends on the server, so a copy of its cookie opens nothing.
    fn sign_out(&self, ctx: &Ctx<'_>, fields: &Fields, everywhere: bool) -> Response {
        match self.session(ctx) {
            Some(s) if session::check_sign_out(&ctx.keys, &s, &fields.csrf) => {
                let who = self.identity(ctx.env);
                let ended = sessions::change(&self.config.data_dir, |t| {
                    if everywhere {
                        t.clear();
                    } else {
                        t.remove(&s.nonce);
                    }
                });
                if let Err(e) = ended {
                    self.log.line(
                        Level::Error,
                        &format!(
                            "dashboard: signing out from {who} failed: the list of sessions \
                             cannot be changed: {e}"
                        ),
                    );
                    return page::refused(
                        &ctx.frame,
                        503,
                        "Not signed out",
                        "The sign-out could not be recorded: the error log says \
                         why. You are still signed in.",
                    );
                }
                let what = if everywhere {
                    "signed out everywhere"
                } else {
                    "signed out"
                };
                self.log
                    .line(Level::Notice, &format!("dashboard: {what} from {who}"));
                page::see_other(&ctx.frame)
                    .header("Set-Cookie", cookies::clear(ctx.scope, SESSION_COOKIE))
            }
            Some(_) => {
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard: refused the {} form from {}: its form token is not this \
                         session's; still signed in",
                        fields.form_name(),
                        self.identity(ctx.env)
                    ),
                );
                page::refused(
                    &ctx.frame,
                    403,
                    "Not signed out",
                    "This sign-out form did not come from your dashboard, so it was \
                 not used: you are still signed in.",
                )
            }
            None => {
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard: refused the {} form from {}: not signed in (or the sign-in \
                         had expired)",
                        fields.form_name(),
                        self.identity(ctx.env)
                    ),
                );
                self.sign_in_form(
                    ctx,
                    403,
                    Some(Notice {
                        kind: "error",
                        text: "You were not signed in (or your sign-in had expired).",
                    }),
                )
            }
        }
    }

    /// The period asked for (`?since=24h`, `7d`, `30d`, as `resolve stats --since`), in
    /// hours; the last 24 by default.
    fn period(env: &Env) -> u32 {
        let query = env.get("QUERY_STRING").unwrap_or_default();
        form::raw_values(query, "since")
            .first()
            .and_then(|raw| std::str::from_utf8(raw).ok())
            .and_then(|text| crate::usage::stats::parse_since(text).ok())
            .unwrap_or(24)
    }

    /// The dashboard itself: the figures of the period, then the configuration check.
    fn dashboard(&self, ctx: &Ctx<'_>, session: &Session) -> Response {
        let query = ctx.env.get("QUERY_STRING").unwrap_or_default();
        let done = settings_page::done_notice(query);
        let shown = settings_page::Shown {
            notice: done.as_deref().map(|text| Notice { kind: "ok", text }),
            ..settings_page::Shown::default()
        };
        self.dashboard_with(ctx, session, 200, &shown)
    }

    /// The dashboard with the settings section as `shown` says (what was sent, its problems,
    /// what was done), answered with `status`.
    fn dashboard_with(
        &self,
        ctx: &Ctx<'_>,
        session: &Session,
        status: u16,
        shown: &settings_page::Shown<'_>,
    ) -> Response {
        let forms = crate::support::secret::all_forms(&self.config.secrets());
        let hours = Self::period(ctx.env);
        let own = self
            .address(ctx.env)
            .map(|a| self.config.client.identity(a));
        let mut sections =
            match crate::usage::stats::Stats::gather(self.config, self.store, self.now_ms, hours) {
                Ok(stats) => crate::usage::html::sections(
                    &stats,
                    ctx.frame.action,
                    Some(&crate::usage::html::BlockForm {
                        action: ctx.frame.action,
                        csrf: &session::sign_out_token(&ctx.keys, session),
                        own: own.as_deref(),
                    }),
                ),
                Err(e) => {
                    self.log.line(
                        Level::Warn,
                        &format!("the dashboard cannot read the usage journal: {e}"),
                    );
                    let text = format!(
                        "The figures cannot be read right now: {}",
                        crate::support::secret::mask(&e.to_string(), &forms)
                    );
                    format!(
                        "{}<div class=\"result\"><div class=\"card error\"><p>{}</p></div></div>\n",
                        crate::usage::html::periods(ctx.frame.action, hours),
                        crate::support::html::escape(&text)
                    )
                }
            };
        sections.insert_str(
            0,
            &page::warnings(self.config, self.origin(ctx.env).as_deref()),
        );
        let query = ctx.env.get("QUERY_STRING").unwrap_or_default();
        sections.insert_str(0, &self.set_up_notice(query));
        let mut report = Vec::new();
        let ready = crate::usage::readiness::report(self.config, self.store, &mut report);
        let report = String::from_utf8_lossy(&report);
        let report = crate::support::secret::mask(&report, &forms);
        sections.push_str(&self.blocks_section(ctx, session));
        sections.push_str(&page::report_section(&report, ready));
        sections.push_str(&self.settings_section(ctx, session, shown));
        page::html(
            status,
            page::dashboard(
                &ctx.frame,
                &session::sign_out_token(&ctx.keys, session),
                &sections,
            ),
        )
    }
}

#[cfg(test)]
mod tests;
