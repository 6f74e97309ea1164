//! The dashboard's button that clears the shared counters a full data directory counts new
//! visitors by (the file store's folded keys): only with the session's own form token, from
//! the dashboard's own site, like its other buttons.

use super::{Ctx, Dashboard, Fields};
use crate::http::response::Response;
use crate::support::log::Level;

impl Dashboard<'_> {
    /// POST to remove every shared counter: the new visitors they counted start afresh.
    pub(super) fn clear_shared(&self, ctx: &Ctx<'_>, fields: &Fields) -> Response {
        const TITLE: &str = "Nothing was cleared";
        if let Err(r) = self.check_form(ctx, fields, TITLE) {
            return r;
        }
        match self.store.upkeep.clear_folded() {
            Ok(removed) => {
                self.log.line(
                    Level::Notice,
                    &format!(
                        "dashboard: {removed} shared counter{} of new visitors cleared by the \
                         owner from {}",
                        if removed == 1 { "" } else { "s" },
                        self.identity(ctx.env)
                    ),
                );
                super::page::see_other(&ctx.frame)
            }
            Err(e) => self.store_failed(ctx, TITLE, "clearing the shared counters", &e),
        }
    }
}
