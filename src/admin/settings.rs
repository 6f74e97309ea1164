//! The dashboard's settings: the section shown under the figures (filled from the file as it
//! is now), its POST (checked as `resolve check` checks, nothing changed when invalid, written
//! in one step with the replaced file kept) and the button that puts the previous file back.

use serde_json::Value;

use super::json_edit::{self, Edit};
use super::page::{self, Notice};
use super::session::{self, Session};
use super::settings_form::{self, Kind, Problem, Secrets, Values};
use super::settings_page::Shown;
use super::setup::check_text;
use super::{Ctx, Dashboard, Fields, config_file, settings_page, token};
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
            shown.problems,
            shown.notice,
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

    /// POST of the settings form: only with the session's own token.
    pub(super) fn save_settings(&self, ctx: &Ctx<'_>, fields: &Fields, body: &[u8]) -> Response {
        let session = match self.check_form(ctx, fields, "Not saved") {
            Ok(s) => s,
            Err(r) => return r,
        };
        let Some(file) = self.config.file.clone() else {
            return self.settings_failed(ctx, "the program has no configuration file to write");
        };
        let values = Values::from_form(body);
        let secrets = Secrets::from_form(body);
        let again = |problems: &[Problem]| {
            self.dashboard_with(
                ctx,
                &session,
                400,
                &Shown {
                    values: Some(&values),
                    problems,
                    notice: None,
                },
            )
        };
        let (old, json) = match config_file::read_json(&file, None) {
            Ok(read) => read,
            Err(why) => return self.settings_failed(ctx, &why),
        };
        let change = match settings_form::changes(Kind::Settings, &values, &secrets, &json) {
            Ok(c) => c,
            Err(problems) => return again(&problems),
        };
        let mut edits = change.edits;
        let mut new_hash = None;
        if let Some(password) = &change.password {
            match crate::support::random::secret_bytes::<16>()
                .map_err(|e| e.to_string())
                .and_then(|salt| crate::support::password::hash(password, &salt))
            {
                Ok(hash) => {
                    edits.push(Edit {
                        path: json_edit::path(&["admin", "password_hash"]),
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
        let text = match json_edit::apply(&old, &edits) {
            Ok(t) => t,
            Err(e) => return self.settings_failed(ctx, &e),
        };
        if let Err(problems) = check_text(self, &file, &text) {
            return again(&problems);
        }
        if let Err(r) = self.save_logged(ctx, &file, (&old, &text), "the settings were saved") {
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

    /// POST to put the previous file back (the current one becomes the previous).
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
        if let Err(problems) = check_text(self, &file, &previous) {
            return self.dashboard_with(
                ctx,
                &session,
                400,
                &Shown {
                    problems: &problems,
                    notice: None,
                    values: None,
                },
            );
        }
        if let Err(r) = self.save_logged(
            ctx,
            &file,
            (&current, &previous),
            "the previous settings were put back",
        ) {
            return r;
        }
        saved(ctx, "restored")
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
