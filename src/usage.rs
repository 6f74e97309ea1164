//! What the site did and whether it is ready: the usage journal's figures gathered once
//! (`stats`) and shown as text (`text`), as the documented JSON (`json`) and as the
//! dashboard's HTML (`html`); yesterday's summary for cron mail (`report`); and the readiness
//! report that `resolve check` prints and the dashboard shows (`readiness`); a full data
//! directory's `ACTION NEEDED` line for all of them (`folding`).

pub mod account;
pub mod folding;
pub mod html;
pub mod json;
pub mod readiness;
pub mod report;
pub mod stats;
pub mod text;
