//! The dashboard's settings: the section shown under the figures (filled from the file as it
//! is now), its POST (checked as `resolve check` checks, nothing changed when invalid, written
//! in one step with the replaced file kept; a new password, token or provider only with the
//! current password; what the block and allow lists' judgement flags only once confirmed) and
//! the button that puts the previous file back, the dashboard's password kept.

use serde_json::Value;

use super::page::{self, Notice};
use super::session::{self, Session};
use super::settings_form::{self, Confirm, Kind, Problem, Secrets, Values};
use super::settings_page::Shown;
use super::setup::check_text;
use super::{Ctx, Dashboard, Fields, config_file, kept_tokens, settings_page, token};
use crate::config::json_text::{self, Edit};
use crate::config::schema;
use crate::http::response::Response;
use crate::support::log::Level;

impl Dashboard<'_> {
    /// Writes `new` over the configuration `file`, keeping `old` as the backup, and logs what
    /// was `done` and from where; a write that fails is answered as a failed save.
    fn save_logged(
        &self,
        ctx: &Ctx<'_>,
        file: &std::path::Path,
        (old, new): (&str, &str),
        done: &str,
    ) -> Result<(), Response> {
        if let Err(e) = config_file::save(file, old, new) {
            return Err(self.settings_failed(ctx, &format!("cannot write {}: {e}", file.display())));
        }
        let who = self.identity(ctx.env);
        self.log
            .line(Level::Notice, &format!("dashboard: {done} from {who}"));
        Ok(())
    }

    /// The settings section, filled from the file (or with what was just sent).
    pub(super) fn settings_section(
        &self,
        ctx: &Ctx<'_>,
        session: &Session,
        shown: &Shown<'_>,
    ) -> String {
        let Some(file) = &self.config.file else {
            return String::new();
        };
        let values = match shown.values {
            Some(v) => v.clone(),
            None => Values::of(&config_file::json_or_null(file), ""),
        };
        settings_page::settings_section(
            &ctx.frame,
            &session::sign_out_token(&ctx.keys, session),
            &values,
            shown,
            config_file::backup_path(file).exists(),
        )
    }

    fn settings_failed(&self, ctx: &Ctx<'_>, why: &str) -> Response {
        self.log.line(
            Level::Error,
            &format!("dashboard: the settings could not be saved: {why}"),
        );
        page::html(
            503,
            page::refusal(
                &ctx.frame,
                "Not saved",
                Notice {
                    kind: "error",
                    text: "The settings could not be saved: the error log says why. Nothing \
                           was changed.",
                },
            ),
        )
    }

    /// A form of the settings section refused, with its line in the log: `what` was not done
    /// for the owner at the request's address, `why`.
    fn not_done(&self, ctx: &Ctx<'_>, what: &str, why: &str) {
        let who = self.identity(ctx.env);
        self.log
            .line(Level::Warn, &format!("dashboard: {what} from {who}: {why}"));
    }

    /// POST of the settings form: only with the session's own token; a new password, token or
    /// provider only with the current password, and what the lists' judgement flags only with
    /// the confirmation that names it.
    pub(super) fn save_settings(&self, ctx: &Ctx<'_>, fields: &Fields, body: &[u8]) -> Response {
        let session = match self.check_form(ctx, fields, "Not saved") {
            Ok(s) => s,
            Err(r) => return r,
        };
        let Some(file) = self.config.file.clone() else {
            return self.settings_failed(ctx, "the program has no configuration file to write");
        };
        let values = Values::from_form(body);
        let mut secrets = Secrets::from_form(body);
        let again = |problems: &[Problem], confirm: Option<&Confirm>| {
            let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
            self.not_done(
                ctx,
                "the settings were not saved",
                &format!("to fix or confirm: {}", fields.join(", ")),
            );
            self.dashboard_with(
                ctx,
                &session,
                400,
                &Shown {
                    values: Some(&values),
                    problems,
                    notice: None,
                    confirm,
                },
            )
        };
        let (old, json) = match config_file::read_json(&file, None) {
            Ok(read) => read,
            Err(why) => return self.settings_failed(ctx, &why.to_string()),
        };
        let kept_path = config_file::kept_tokens_path(&file);
        let kept = config_file::json_or_null(&kept_path);
        kept_tokens::fill(&values, &mut secrets, &json, &kept);
        let change = match settings_form::changes(Kind::Settings, &values, &secrets, &json) {
            Ok(c) => c,
            Err(problems) => return again(&problems, None),
        };
        let confirm = settings_form::to_confirm(&values, &json, self.address(ctx.env));
        if !confirm.confirmed_by(&values) {
            let problems: Vec<Problem> = confirm
                .concerns
                .iter()
                .map(|(field, text)| Problem {
                    field,
                    text: format!(
                        "{text}: tick the box at the end of the form to save it all the same"
                    ),
                })
                .collect();
            return again(&problems, Some(&confirm));
        }
        let _turn = if change.needs_password() {
            match self.current_password(ctx, &session, &values, &secrets) {
                Ok(turn) => Some(turn),
                Err(r) => return r,
            }
        } else {
            None
        };
        let mut edits = change.edits.clone();
        let mut new_hash = None;
        if let Some(password) = &change.password {
            match crate::support::random::secret_bytes::<16>()
                .map_err(|e| e.to_string())
                .and_then(|salt| {
                    crate::support::password::hash(password, &salt).map_err(|e| e.to_string())
                }) {
                Ok(hash) => {
                    edits.push(Edit {
                        path: schema::ADMIN_PASSWORD_HASH.steps(),
                        value: Some(Value::String(hash.clone())),
                    });
                    new_hash = Some(hash);
                }
                Err(e) => {
                    return self.settings_failed(ctx, &format!("cannot hash the password: {e}"));
                }
            }
        }
        if edits.is_empty() {
            return self.dashboard_with(
                ctx,
                &session,
                200,
                &Shown {
                    notice: Some(Notice {
                        kind: "ok",
                        text: "Nothing was different, so nothing was saved.",
                    }),
                    ..Shown::default()
                },
            );
        }
        let text = match json_text::apply(&old, &edits) {
            Ok(t) => t,
            Err(e) => return self.settings_failed(ctx, &e.to_string()),
        };
        if let Err(problems) = check_text(self, &file, &text) {
            return again(&problems, None);
        }
        // The token of the provider left is kept before the file that no longer holds it is
        // written: a failure leaves everything as it was.
        if let Some(kept) = kept_tokens::after_save(&values, &json, &kept) {
            let kept = serde_json::to_string_pretty(&kept).unwrap_or_default() + "\n";
            if let Err(e) = config_file::write_atomic(&kept_path, &kept) {
                return self
                    .settings_failed(ctx, &format!("cannot write {}: {e}", kept_path.display()));
            }
        }
        let done = if change.needs_password() {
            "the settings were saved (the password, the provider or its token changed; the \
             current password was given)"
        } else {
            "the settings were saved"
        };
        if let Err(r) = self.save_logged(ctx, &file, (&old, &text), done) {
            return r;
        }
        match new_hash {
            // The password signs the cookies: the owner is signed in again with the new one.
            Some(hash) => {
                let refuse = |status: u16, notice: Option<Notice<'_>>| {
                    self.sign_in_form(ctx, status, notice)
                };
                let keys = token::Keys::derive(&ctx.secret, &hash);
                self.open_session(ctx, &keys, &self.identity(ctx.env), &refuse)
            }
            None => saved(ctx, "saved"),
        }
    }

    /// The current password a change of the password, the token or the provider needs,
    /// checked as a sign-in is (a wrong one counts against the sign-in budgets): the hash's
    /// turn, held until the save is done; else the form again, saying why.
    fn current_password(
        &self,
        ctx: &Ctx<'_>,
        session: &Session,
        values: &Values,
        secrets: &Secrets,
    ) -> Result<crate::admin::hash_turn::Turn, Response> {
        let refuse = |status: u16, notice: Option<Notice<'_>>| {
            let text = notice.map_or_else(String::new, |n| n.text.to_owned());
            let problems = [Problem {
                field: "current_password",
                text: format!(
                    "{text} A new password, API token or provider needs your current password: \
                     nothing was changed."
                ),
            }];
            self.dashboard_with(
                ctx,
                session,
                status,
                &Shown {
                    values: Some(values),
                    problems: &problems,
                    notice: None,
                    confirm: None,
                },
            )
        };
        if secrets.current.is_empty() {
            self.not_done(
                ctx,
                "the settings were not saved",
                "a new password, token or provider without the current password",
            );
            return Err(refuse(
                403,
                Some(Notice {
                    kind: "error",
                    text: "Type your current password.",
                }),
            ));
        }
        let right = || self.is_password(&secrets.current);
        self.guarded(ctx, "current password", &refuse, &right)
            .map(|(turn, _)| turn)
    }

    /// POST to put the previous file back (the current one becomes the previous), with the
    /// current `admin` section kept (the password and the sessions it signs): the dashboard
    /// then lists the settings put back.
    pub(super) fn restore(&self, ctx: &Ctx<'_>, fields: &Fields) -> Response {
        const TITLE: &str = "Not restored";
        let session = match self.check_form(ctx, fields, TITLE) {
            Ok(s) => s,
            Err(r) => return r,
        };
        let Some(file) = self.config.file.clone() else {
            return self.settings_failed(ctx, "the program has no configuration file to write");
        };
        let backup = config_file::backup_path(&file);
        let (current, previous) = match (config_file::read(&file), config_file::read(&backup)) {
            (Ok(Some(c)), Ok(Some(p))) => (c, p),
            (Ok(_), Ok(None)) => {
                self.not_done(
                    ctx,
                    "nothing was put back",
                    "there is no previous file to put back",
                );
                return self.dashboard_with(
                    ctx,
                    &session,
                    409,
                    &Shown {
                        notice: Some(Notice {
                            kind: "error",
                            text: "There is no previous file to put back.",
                        }),
                        ..Shown::default()
                    },
                );
            }
            (Err(e), _) | (_, Err(e)) => return self.settings_failed(ctx, &e.to_string()),
            (Ok(None), _) => {
                return self.settings_failed(ctx, &format!("{} is gone", file.display()));
            }
        };
        let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
        let (now, before) = (parse(&current), parse(&previous));
        let text = match (schema::ADMIN.of(&now), schema::ADMIN.of(&before)) {
            (admin, was) if !admin.is_null() && admin != was && before.is_object() => {
                match json_text::apply(
                    &previous,
                    &[Edit {
                        path: schema::ADMIN.steps(),
                        value: Some(admin.clone()),
                    }],
                ) {
                    Ok(t) => t,
                    Err(e) => return self.settings_failed(ctx, &e.to_string()),
                }
            }
            _ => previous.clone(),
        };
        if let Err(problems) = check_text(self, &file, &text) {
            let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
            self.not_done(
                ctx,
                "nothing was put back",
                &format!(
                    "the previous file does not pass the check: {}",
                    fields.join(", ")
                ),
            );
            return self.dashboard_with(
                ctx,
                &session,
                400,
                &Shown {
                    problems: &problems,
                    ..Shown::default()
                },
            );
        }
        let put = super::put_back::put_back(&now, &before);
        let listed = if put.is_empty() {
            "none".to_owned()
        } else {
            put.join(",")
        };
        if let Err(r) = self.save_logged(
            ctx,
            &file,
            (&current, &text),
            &format!(
                "the previous settings were put back ({}), the dashboard password kept",
                listed.replace(',', ", ")
            ),
        ) {
            return r;
        }
        saved(ctx, &format!("restored&put={listed}"))
    }
}

/// To the dashboard, which then says what was done (`?done=saved`).
fn saved(ctx: &Ctx<'_>, what: &str) -> Response {
    let mut r = page::text(303, "See the dashboard.");
    r.headers.push((
        "Location",
        format!(
            "{}?done={what}#settings",
            ctx.frame.action.unwrap_or("admin")
        ),
    ));
    r
}
