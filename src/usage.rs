//! What the site did and whether it is ready: the usage journal's figures gathered once
//! (`stats`), yesterday's summary for cron mail (`report`), and the readiness report that
//! `resolve check` prints and the dashboard shows (`readiness`).

pub mod readiness;
pub mod report;
pub mod stats;
