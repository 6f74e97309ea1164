//! `resolve report`: yesterday's usage as a plain-text mail for cron (cPanel mails a cron job's
//! output to the account's address), warnings first; silent with `--only-problems` when there
//! is nothing to act on.

use crate::core::calendar;
use crate::core::journal::{self, HOUR_MS};
use crate::stats::{self, Stats};

/// A spend limit used this much (percent) or more is a warning.
pub const SPEND_WARNING_PERCENT: u32 = 80;

/// The warnings that head the report: what the owner should act on. Empty when all is well.
pub fn warnings(stats: &Stats) -> Vec<String> {
    let f = &stats.figures;
    let mut out = Vec::new();
    for s in stats.spend_over(SPEND_WARNING_PERCENT) {
        out.push(format!(
            "WARNING: spend limit {:?} is at {}% ({} of {} per {} used now)",
            s.name,
            u64::from(s.used) * 100 / u64::from(s.limit.max(1)),
            s.used,
            s.limit,
            stats::window_words(s.window_secs)
        ));
    }
    for (rule, n) in &f.spend_refused {
        out.push(format!(
            "WARNING: spend limit {rule:?} refused {n} paid call{} (visitors got 503)",
            plural(*n)
        ));
    }
    if let Some(n) = f.provider_failures.get("auth") {
        out.push(format!(
            "WARNING: the provider refused the site's credentials {n} time{}: check provider.token \
             and the account",
            plural(*n)
        ));
    }
    if let Some(n) = f.provider_failures.get("quota") {
        out.push(format!(
            "WARNING: the provider account had no quota left {n} time{}",
            plural(*n)
        ));
    }
    if f.store_failures > 0 {
        out.push(format!(
            "WARNING: the store failed {} time{} (answered by store.on_error)",
            f.store_failures,
            plural(f.store_failures)
        ));
    }
    if out.is_empty() && !stats.notes_in_period().is_empty() {
        out.push("WARNING: ACTION NEEDED events were logged (below)".into());
    }
    out
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The hours of the UTC day before the one `now_ms` falls in.
pub fn yesterday(now_ms: u64) -> (u32, u32) {
    let today = journal::day_start(journal::hour_of(now_ms));
    (today.saturating_sub(24), today)
}

/// The report's text; None with `only_problems` when there is nothing to act on.
pub fn render(stats: &Stats, only_problems: bool) -> Option<String> {
    let warnings = warnings(stats);
    if only_problems && warnings.is_empty() {
        return None;
    }
    let f = &stats.figures;
    let day = calendar::date(u64::from(f.from_hour) * HOUR_MS);
    let mut out = String::new();
    for w in &warnings {
        out.push_str(w);
        out.push('\n');
    }
    if !warnings.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!("resolve: the day of {day} (UTC)\n\n"));
    out.push_str(&stats.text());
    let notes = stats.notes_in_period();
    out.push_str(&format!(
        "\nACTION NEEDED events on {day}: {}\n",
        notes.len()
    ));
    for n in notes {
        out.push_str(&format!("  {}  {}\n", calendar::iso(n.at_ms), n.text));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::journal::{Figures, Note, Row};
    use crate::stats::SpendUse;

    const DAY: u32 = 20_000 * 24;

    fn stats(rows: &[Row], spend: Vec<SpendUse>, notes: Vec<Note>) -> Stats {
        Stats {
            hours: 24,
            now_ms: u64::from(DAY + 24 + 3) * HOUR_MS,
            figures: Figures::from_rows(rows, DAY, DAY + 24),
            spend,
            notes,
        }
    }

    fn total(name: &str, count: u64) -> Row {
        Row::Total {
            hour: DAY + 5,
            name: name.into(),
            count,
        }
    }

    fn spend(used: u32) -> SpendUse {
        SpendUse {
            name: "day".into(),
            limit: 100,
            window_secs: 86_400,
            used,
            left: 100 - used,
        }
    }

    #[test]
    fn yesterday_is_the_utc_day_before() {
        let now = u64::from(DAY + 24 + 3) * HOUR_MS + 5;
        assert_eq!(yesterday(now), (DAY, DAY + 24));
        assert_eq!(yesterday(u64::from(DAY + 24) * HOUR_MS), (DAY, DAY + 24));
    }

    #[test]
    fn a_quiet_day_is_silent_with_only_problems() {
        let s = stats(&[total("paid", 12)], vec![spend(79)], vec![]);
        assert_eq!(render(&s, true), None);
        let text = render(&s, false).unwrap();
        assert!(text.starts_with("resolve: the day of"), "{text}");
        assert!(text.contains("Paid calls:        12"), "{text}");
        assert!(!text.contains("WARNING"));
    }

    #[test]
    fn warnings_head_the_report() {
        let s = stats(
            &[total("paid", 80), total("provider_failure:auth", 2)],
            vec![spend(80)],
            vec![Note {
                at_ms: u64::from(DAY + 5) * HOUR_MS,
                text: "ACTION NEEDED: the provider refused the site's credentials".into(),
            }],
        );
        let text = render(&s, true).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "WARNING: spend limit \"day\" is at 80% (80 of 100 per day used now)"
        );
        assert!(lines[1].contains("refused the site's credentials 2 times"));
        assert!(text.contains("ACTION NEEDED events on "), "{text}");
        assert!(text.contains("T05:00:00Z  ACTION NEEDED: the provider refused"));
    }

    #[test]
    fn the_report_shows_automatic_blocks_and_what_shadow_rules_would_have_refused() {
        let s = stats(
            &[
                total("requests", 500),
                total("blocked", 30),
                total("auto_blocked", 3),
                total("would_refuse:tight", 120),
            ],
            vec![],
            vec![],
        );
        let text = render(&s, false).unwrap();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(
            has("Blocked (403):     30 (3 clients blocked automatically)"),
            "{text}"
        );
        assert!(
            has("Shadow rules:      120 would have been refused (tight 120)"),
            "{text}"
        );
        // Neither is a problem to act on: a quiet day for `--only-problems`.
        assert_eq!(render(&s, true), None);
    }

    #[test]
    fn an_action_note_alone_is_a_problem_but_not_one_from_another_day() {
        let note = |hour: u32| Note {
            at_ms: u64::from(hour) * HOUR_MS,
            text: "ACTION NEEDED: quota".into(),
        };
        assert!(render(&stats(&[], vec![], vec![note(DAY + 1)]), true).is_some());
        assert!(render(&stats(&[], vec![], vec![note(DAY + 25)]), true).is_none());
    }
}
