//! The dashboard's blocks: a client blocked for a day from the top clients' table, the store's
//! blocks listed with a button to lift each. A block from here covers at most an IPv4 /16 or an
//! IPv6 /32 (a leaked session cannot block everyone) and never the owner's own address (the
//! lists' one judgement, `app::controls::reach`), and never shortens a longer block of the
//! same range. The configuration's `block` list is the file's, not the dashboard's: not shown.

use super::page::{self, Notice};
use super::session::{self, Session};
use super::{Ctx, Dashboard, Fields};
use crate::app::controls::blocks::{self, Block};
use crate::app::controls::reach::{self, List};
use crate::http::response::Response;
use crate::net::cidr::Cidr;
use crate::support::defaults;
use crate::support::html::escape;
use crate::support::log::Level;

/// What blocking `block` from the dashboard does to `list`: the list to keep, and the live
/// block of the same range that already ends later (or never), which is then kept as it is.
pub fn with_day_block(list: Vec<Block>, block: Block, now_ms: u64) -> (Vec<Block>, Option<Block>) {
    let longer = list
        .iter()
        .find(|b| {
            b.range == block.range
                && b.live_at(now_ms)
                && match (b.until_ms, block.until_ms) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(old), Some(new)) => old >= new,
                }
        })
        .cloned();
    match longer {
        Some(kept) => (list, Some(kept)),
        None => (blocks::with(list, block, now_ms), None),
    }
}

impl Dashboard<'_> {
    /// The signed-in owner's session, once the form is known to be theirs (the session's own
    /// token); else the refusal to answer, under `title`.
    pub(super) fn check_form(
        &self,
        ctx: &Ctx<'_>,
        fields: &Fields,
        title: &'static str,
    ) -> Result<Session, Response> {
        let what = fields.form_name();
        let Some(session) = self.session(ctx) else {
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused the {what} form from {}: not signed in (or the \
                     sign-in had expired); nothing was changed",
                    self.identity(ctx.env)
                ),
            );
            return Err(self.sign_in_form(
                ctx,
                403,
                Some(Notice {
                    kind: "error",
                    text: "You were not signed in (or your sign-in had expired): nothing was \
                           changed.",
                }),
            ));
        };
        if !session::check_sign_out(&ctx.keys, &session, &fields.csrf) {
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused the {what} form from {}: its form token is not this \
                     session's; nothing was changed",
                    self.identity(ctx.env)
                ),
            );
            return Err(page::refused(
                &ctx.frame,
                403,
                title,
                "This form did not come from your dashboard, so it was not used.",
            ));
        }
        Ok(session)
    }

    /// The address or range a block form names, once the form is known to be the signed-in
    /// owner's; else the refusal to answer, under `title`.
    fn form_range(
        &self,
        ctx: &Ctx<'_>,
        fields: &Fields,
        title: &'static str,
    ) -> Result<Cidr, Response> {
        self.check_form(ctx, fields, title)?;
        Cidr::parse(&fields.client).ok_or_else(|| {
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused the {} form from {}: {:?} is not an address or a range",
                    fields.form_name(),
                    self.identity(ctx.env),
                    crate::support::text::one_line(&fields.client, 60)
                ),
            );
            page::refused(&ctx.frame, 403, title, "That is not an address or a range.")
        })
    }

    /// POST to block a client for a day: only with the session's own token, and only an
    /// address or a range no wider than a /16 (IPv4) or /32 (IPv6).
    pub(super) fn block(&self, ctx: &Ctx<'_>, fields: &Fields) -> Response {
        const TITLE: &str = "Nobody was blocked";
        let range = match self.form_range(ctx, fields, TITLE) {
            Ok(range) => range,
            Err(r) => return r,
        };
        if let Some(concern) = reach::judge(List::Block, &range, self.address(ctx.env)) {
            let why = format!(
                "{}. The Block button blocks at most an IPv4 /16 or an IPv6 /32, never your own \
                 address: the settings' block list takes it once you confirm, and `resolve \
                 block` with --wide.",
                concern.describe()
            );
            self.log.line(
                Level::Warn,
                &format!(
                    "dashboard: refused the block form from {}: {why}",
                    self.identity(ctx.env)
                ),
            );
            return page::refused(&ctx.frame, 403, TITLE, &why);
        }
        let now = self.now_ms;
        let until = now.saturating_add(defaults::ADMIN_BLOCK_SECS * 1000);
        let block = Block {
            range,
            until_ms: Some(until),
            reason: "blocked from the dashboard".into(),
            auto: false,
        };
        let copy = blocks::copy_path(self.config);
        let who = self.identity(ctx.env);
        match blocks::update(&*self.store.cache, copy.as_deref(), now, |list| {
            with_day_block(list, block, now)
        }) {
            Ok(None) => {
                self.log.line(
                    Level::Notice,
                    &format!(
                        "dashboard: {range} blocked until {} by the owner from {who} \
                         (`resolve unblock {range}` lifts it)",
                        crate::core::calendar::iso(until)
                    ),
                );
                page::see_other(&ctx.frame)
            }
            Ok(Some(kept)) => {
                self.log.line(
                    Level::Notice,
                    &format!(
                        "dashboard: {range} already blocked {}; kept as it was",
                        kept.until_ms.map_or("until unblocked".into(), |u| format!(
                            "until {}",
                            crate::core::calendar::iso(u)
                        ))
                    ),
                );
                page::see_other(&ctx.frame)
            }
            Err(e) => self.store_failed(ctx, TITLE, &format!("blocking {range}"), &e),
        }
    }

    /// POST to lift a block of the store's list: only with the session's own token.
    pub(super) fn unblock(&self, ctx: &Ctx<'_>, fields: &Fields) -> Response {
        const TITLE: &str = "Nothing was lifted";
        let range = match self.form_range(ctx, fields, TITLE) {
            Ok(range) => range,
            Err(r) => return r,
        };
        let now = self.now_ms;
        let copy = blocks::copy_path(self.config);
        match blocks::update(&*self.store.cache, copy.as_deref(), now, |list| {
            blocks::without(list, range, now)
        }) {
            Ok(lifted) => {
                let who = self.identity(ctx.env);
                if lifted {
                    self.log.line(
                        Level::Notice,
                        &format!("dashboard: the block of {range} lifted by the owner from {who}"),
                    );
                }
                page::see_other(&ctx.frame)
            }
            Err(e) => self.store_failed(ctx, TITLE, &format!("lifting the block of {range}"), &e),
        }
    }

    pub(super) fn store_failed(
        &self,
        ctx: &Ctx<'_>,
        title: &'static str,
        what: &str,
        e: &crate::store::StoreError,
    ) -> Response {
        self.log
            .line(Level::Warn, &format!("dashboard: {what} failed: {e}"));
        page::refused(
            &ctx.frame,
            503,
            title,
            "The store could not be changed: the error log says why.",
        )
    }

    /// The store's live blocks, each with a button that lifts it.
    pub(super) fn blocks_section(&self, ctx: &Ctx<'_>, session: &Session) -> String {
        let mut out =
            String::from("<section aria-labelledby=\"blocks\">\n<h2 id=\"blocks\">Blocks</h2>\n");
        let list = match blocks::read(&*self.store.cache) {
            Ok(list) => list,
            Err(e) => {
                self.log.line(
                    Level::Warn,
                    &format!("the dashboard cannot read the blocks: {e}"),
                );
                out.push_str("<p>The blocks cannot be read right now: the error log says why.</p>\n</section>\n");
                return out;
            }
        };
        let live: Vec<&Block> = list.iter().filter(|b| b.live_at(self.now_ms)).collect();
        if live.is_empty() {
            out.push_str("<p>Nobody is blocked in the store.</p>\n</section>\n");
            return out;
        }
        let csrf = session::sign_out_token(&ctx.keys, session);
        let action = ctx
            .frame
            .action
            .map_or(String::new(), |a| format!(" action=\"{}\"", escape(a)));
        // Two columns, so that the table fits a phone: the range with its button; until
        // when, then who blocked it and why.
        out.push_str(
            "<table>\n<thead><tr><th scope=\"col\">Range</th>\
             <th scope=\"col\">Until, and why</th></tr></thead>\n<tbody>\n",
        );
        for b in live {
            let range = b.range.to_string();
            let until = b.until_ms.map_or("until lifted".into(), |ms| {
                let at = crate::core::calendar::iso(ms);
                format!(
                    "<time datetime=\"{at}\"><span class=\"nowrap\">{}</span> {} UTC</time>",
                    &at[..10],
                    &at[11..16]
                )
            });
            out.push_str(&format!(
                "<tr><td><span class=\"addr\">{}</span> <form method=\"post\"{action}>\
                 <input type=\"hidden\" name=\"action\" value=\"unblock\">\
                 <input type=\"hidden\" name=\"client\" value=\"{}\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\" aria-label=\"Lift the block of {}\">Lift</button>\
                 </form></td><td>{until}<br>{}: {}</td></tr>\n",
                escape(&range),
                escape(&range),
                escape(&csrf),
                escape(&range),
                if b.auto { "auto_block" } else { "the owner" },
                escape(&b.reason),
            ));
        }
        out.push_str("</tbody>\n</table>\n</section>\n");
        out
    }
}
