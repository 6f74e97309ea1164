//! One sign-in attempt, in the order that keeps guessing cheap for the site: the form's token,
//! then the budgets (past one, 429 and no hash), then the hash's turn (one at a time), then the
//! password; a right one gives the attempt back and sets the session and device cookies.

use super::page::Notice;
use super::session::{self, DEVICE_COOKIE, FORM_COOKIE, SESSION_COOKIE};
use super::signin::{self, Budget, Budgets, Gate, Who};
use super::{Ctx, Dashboard, Fields, cookies, hash_turn, page, sessions, token};
use crate::core::journal::{Entry, Event};
use crate::http::render;
use crate::http::response::Response;
use crate::support::defaults;
use crate::support::log::Level;
use crate::support::password;

impl Dashboard<'_> {
    /// Adds a sign-in's event to the usage journal (figures of the dashboard, `resolve stats`
    /// and `resolve report`); a journal that cannot be written costs only the figure.
    pub(super) fn journal(&self, event: Event) {
        let entry = Entry::new(self.now_ms, None, &[event]);
        if let Err(e) = self.store.journal.journal_add(&entry) {
            self.log.line(
                Level::Warn,
                &format!("the usage journal cannot count a dashboard sign-in: {e}"),
            );
        }
    }

    /// `refuse`'s form again with a 429: a budget is spent, or another sign-in holds the
    /// hash's turn; `retry_after` says when to try again.
    pub(super) fn sign_in_wait(
        refuse: &dyn Fn(u16, Option<Notice<'_>>) -> Response,
        sentence: &str,
        retry_after: impl Into<String>,
    ) -> Response {
        refuse(
            429,
            Some(Notice {
                kind: "wait",
                text: sentence,
            }),
        )
        .header("Retry-After", retry_after)
    }

    /// `refuse`'s form again with a 503: what a sign-in needs (the store's counts, the hash's
    /// lock) is not there; the store's `deny_retry_after_secs` says when to try again.
    pub(super) fn sign_in_unavailable(
        &self,
        refuse: &dyn Fn(u16, Option<Notice<'_>>) -> Response,
    ) -> Response {
        refuse(
            503,
            Some(Notice {
                kind: "error",
                text: "Signing in is not possible right now. Please try again shortly.",
            }),
        )
        .header(
            "Retry-After",
            self.config.store.deny_retry_after_secs.to_string(),
        )
    }

    /// POST with the password: the form's token, then the lock-out, then the password.
    pub(super) fn sign_in(&self, ctx: &Ctx<'_>, fields: &Fields) -> Response {
        let bound = ctx
            .scope
            .get(ctx.env, FORM_COOKIE)
            .is_some_and(|form_cookie| {
                session::check_sign_in(
                    &ctx.keys,
                    form_cookie,
                    &fields.csrf,
                    self.now_secs(),
                    defaults::ADMIN_FORM_SECS,
                )
            });
        if !bound {
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused the sign-in form from {}: its form token has expired or \
                     is not this browser's; the password was not checked",
                    self.identity(ctx.env)
                ),
            );
            return self.sign_in_form(
                ctx,
                403,
                Some(Notice {
                    kind: "error",
                    text: "This sign-in form has expired or did not come from this site, so it \
                           was not used. Here it is again: enter the password once more.",
                }),
            );
        }
        let refuse =
            |status: u16, notice: Option<Notice<'_>>| self.sign_in_form(ctx, status, notice);
        let right = || self.is_password(&fields.password);
        match self.guarded(ctx, "password", &refuse, &right) {
            Ok((_turn, shown)) => self.open_session(ctx, &ctx.keys, &shown, &refuse),
            Err(r) => r,
        }
    }

    /// A secret checked (`what`: the password, the setup code) where guessing is budgeted: the
    /// budgets (past one, 429 and nothing checked), then the hash's turn (one at a time), then
    /// `right`. A wrong one counts against the budgets and is answered with `refuse`'s form; a
    /// right one gives the attempt back and returns the turn, still held, with the client as
    /// the log names it.
    pub(super) fn guarded(
        &self,
        ctx: &Ctx<'_>,
        what: &str,
        refuse: &dyn Fn(u16, Option<Notice<'_>>) -> Response,
        right: &dyn Fn() -> bool,
    ) -> Result<(hash_turn::Turn, String), Response> {
        let Some(address) = self.address(ctx.env) else {
            return Err(page::text(400, "The server could not tell who is asking."));
        };
        let device = ctx.scope.get(ctx.env, DEVICE_COOKIE).and_then(|c| {
            session::open_device(&ctx.keys, c, self.now_secs(), defaults::ADMIN_DEVICE_SECS)
        });
        let known = device.is_some();
        let who = Who::new(address, self.config.client.identity(address), device);
        let shown = &who.address;
        let budgets = Budgets::default();
        let window_min = defaults::ADMIN_SIGNIN_WINDOW_SECS / 60;
        let (at_ms, attempt, limit) = match signin::gate(&*self.store.counters, &budgets, &who) {
            Ok(Gate::Open {
                at_ms,
                attempt,
                limit,
            }) => (at_ms, attempt, limit),
            Ok(Gate::Shut {
                retry_after_secs,
                budget,
            }) => {
                self.journal(Event::SignInRefused);
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard sign-in refused for {shown}: {} failed attempts within \
                         {window_min} minutes from {}; the password was not checked; again in \
                         {retry_after_secs} s",
                        budgets.limit(budget),
                        match budget {
                            Budget::Address => "this address".to_owned(),
                            Budget::Network => format!("its network {}", who.network),
                            Budget::Site => "anywhere (the whole site's budget)".to_owned(),
                            Budget::Device => "this browser".to_owned(),
                        }
                    ),
                );
                let sentence = format!(
                    "Too many failed sign-ins from {}. Please try again in {}.",
                    budget.whose(),
                    render::wait_words(retry_after_secs)
                );
                return Err(Self::sign_in_wait(
                    refuse,
                    &sentence,
                    retry_after_secs.to_string(),
                ));
            }
            Err(e) => {
                self.log.line(
                    Level::Error,
                    &format!(
                        "dashboard sign-in refused for {shown}: the store cannot count sign-in \
                         attempts: {e}"
                    ),
                );
                return Err(self.sign_in_unavailable(refuse));
            }
        };
        let give_back = |why: &str| {
            if let Err(e) = signin::passed(&*self.store.counters, &budgets, &who, at_ms) {
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard sign-in: giving back the attempt of {shown} ({why}) failed: {e}"
                    ),
                );
            }
        };
        let turn = hash_turn::take(
            &self.config.data_dir,
            std::time::Duration::from_millis(defaults::ADMIN_HASH_WAIT_MS),
        );
        let turn = match turn {
            Ok(Some(turn)) => turn,
            Ok(None) => {
                give_back("another sign-in was being checked");
                self.log.line(
                    Level::Warn,
                    &format!(
                        "dashboard sign-in refused for {shown}: another sign-in's password was \
                         being checked (one at a time); the password was not checked"
                    ),
                );
                return Err(Self::sign_in_wait(
                    refuse,
                    "Another sign-in is being checked. Please try again in a moment.",
                    "1",
                ));
            }
            Err(e) => {
                give_back("the data directory's lock could not be taken");
                self.log.line(
                    Level::Error,
                    &format!(
                        "dashboard sign-in refused for {shown}: cannot take the lock of {} in \
                         the data directory: {e}",
                        defaults::ADMIN_HASH_LOCK_FILE
                    ),
                );
                return Err(self.sign_in_unavailable(refuse));
            }
        };
        if !right() {
            self.journal(Event::SignInFailed);
            let counted_by = if known {
                "this browser's"
            } else {
                "this address's"
            };
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard sign-in failed for {shown}: wrong {what} (failure {attempt} of \
                     {limit} allowed within {window_min} minutes, {counted_by} budget)"
                ),
            );
            let left = limit.saturating_sub(attempt);
            let whose = if known {
                "this browser"
            } else {
                "your address"
            };
            let wrong = format!("Wrong {what}.");
            let wrong = wrong[..1].to_uppercase() + &wrong[1..];
            let sentence = if left == 0 {
                format!(
                    "{wrong} That was the last try for now: {whose} must wait up to \
                     {window_min} minutes before the next."
                )
            } else {
                format!(
                    "{wrong} {left} more {} allowed before {whose} must wait.",
                    if left == 1 { "try is" } else { "tries are" }
                )
            };
            return Err(refuse(
                403,
                Some(Notice {
                    kind: "error",
                    text: &sentence,
                }),
            ));
        }
        give_back("it was right");
        Ok((turn, shown.clone()))
    }

    /// Signs the owner in (the secret was right): a new session, listed on the server, and
    /// the device cookie, signed with `keys`; then to the dashboard.
    pub(super) fn open_session(
        &self,
        ctx: &Ctx<'_>,
        keys: &token::Keys,
        shown: &str,
        refuse: &dyn Fn(u16, Option<Notice<'_>>) -> Response,
    ) -> Response {
        let (nonce, device_nonce) = match (
            crate::support::random::secret_bytes::<16>(),
            crate::support::random::secret_bytes::<16>(),
        ) {
            (Ok(n), Ok(d)) => (token::hex(&n), token::hex(&d)),
            (Err(e), _) | (_, Err(e)) => return self.no_randomness(ctx, &e),
        };
        let cookie =
            session::new_session(keys, self.now_secs(), defaults::ADMIN_SESSION_SECS, &nonce);
        let device_cookie = session::new_device(
            keys,
            self.now_secs(),
            defaults::ADMIN_DEVICE_SECS,
            &device_nonce,
        );
        let now = self.now_secs();
        let opened = sessions::change(&self.config.data_dir, |t| {
            t.add(
                &nonce,
                now,
                now.saturating_add(defaults::ADMIN_SESSION_SECS),
                defaults::ADMIN_IDLE_SECS,
            )
        });
        if let Err(e) = opened {
            self.log.line(
                Level::Error,
                &format!(
                    "dashboard sign-in of {shown}: the password was right but the list of \
                     sessions ({} in the data directory) cannot be written: {e}",
                    defaults::ADMIN_SESSIONS_FILE
                ),
            );
            return refuse(
                503,
                Some(Notice {
                    kind: "error",
                    text: "Signing in is not possible right now: the error log says why.",
                }),
            );
        }
        self.log
            .line(Level::Notice, &format!("dashboard: signed in from {shown}"));
        page::see_other(&ctx.frame)
            .header(
                "Set-Cookie",
                cookies::set(
                    ctx.scope,
                    SESSION_COOKIE,
                    &cookie,
                    defaults::ADMIN_SESSION_SECS,
                ),
            )
            .header(
                "Set-Cookie",
                cookies::set(
                    ctx.scope,
                    DEVICE_COOKIE,
                    &device_cookie,
                    defaults::ADMIN_DEVICE_SECS,
                ),
            )
            .header("Set-Cookie", cookies::clear(ctx.scope, FORM_COOKIE))
    }
}

impl Dashboard<'_> {
    /// Whether `typed` is the dashboard's password (false while none is set).
    pub(super) fn is_password(&self, typed: &str) -> bool {
        let hash = self
            .config
            .admin
            .as_ref()
            .map(|a| a.password_hash.expose())
            .unwrap_or_default();
        password::verify(hash, typed)
    }
}
