//! `resolve report`: yesterday's usage as a plain-text mail for cron (cPanel mails a cron job's
//! output to the account's address), warnings first; silent with `--only-problems` when there
//! is nothing to act on.

use crate::app::account::named;
use crate::core::calendar;
use crate::core::journal::{self, HOUR_MS};
use crate::provider::account::Reading;
use crate::usage::stats::{self, Stats};

/// A spend limit used this much (percent) or more is a warning.
pub const SPEND_WARNING_PERCENT: u32 = 80;

/// The most paid calls of the period's hours within one window of `window_secs`: the sum of
/// the busiest run of that many consecutive hours. None for windows the hourly counts cannot
/// tell (shorter than an hour, not whole hours) or that are longer than a day.
pub fn busiest_window(paid_per_hour: &[u64], window_secs: u32) -> Option<u64> {
    if window_secs == 0 || !window_secs.is_multiple_of(3600) || window_secs > 86_400 {
        return None;
    }
    let hours = (window_secs / 3600) as usize;
    Some(
        paid_per_hour
            .windows(hours.min(paid_per_hour.len()).max(1))
            .map(|run| run.iter().sum())
            .max()
            .unwrap_or(0),
    )
}

fn percent(n: u64, limit: u32) -> u64 {
    n * 100 / u64::from(limit.max(1))
}

/// The warnings that head the report: what the owner should act on. Empty when all is well.
///
/// A spend limit warns when its counter is at [`SPEND_WARNING_PERCENT`] now, or else when the
/// period's paid calls reached that much of it within one of its windows (for windows of whole
/// hours up to a day): just after midnight a day's window may have started again, and the
/// counter reads low although yesterday came close. One line per limit either way.
pub fn warnings(stats: &Stats) -> Vec<String> {
    let f = &stats.figures;
    let mut out: Vec<String> = stats.folding_line().into_iter().collect();
    for (name, r) in stats.readings() {
        let say = |line: String| name.map_or_else(|| line.clone(), |n| named(&line, n));
        match r {
            Reading::Failed { .. } => out.push(say(format!(
                "WARNING: the provider account {}",
                r.summary(stats.now_ms)
            ))),
            Reading::Read { .. } => out.extend(r.warnings(stats.now_ms).into_iter().map(say)),
        }
    }
    for s in &stats.spend {
        let per = stats::window_words(s.window_secs);
        let threshold = u64::from(s.limit) * u64::from(SPEND_WARNING_PERCENT);
        if u64::from(s.used) * 100 >= threshold {
            out.push(format!(
                "WARNING: spend limit {:?} is at {}% ({} of {} per {per} used now)",
                s.name,
                percent(u64::from(s.used), s.limit),
                s.words(s.used, false),
                s.words(s.limit, true),
            ));
        } else if let Some(paid) = busiest_window(&f.paid_per_hour, s.window_secs)
            // Paid calls measure a limit of requests, not one of bytes.
            && s.unit == crate::core::rule::Unit::Requests
            && paid * 100 >= threshold
        {
            let within = match s.window_secs / 3600 {
                24 => "that day".to_owned(),
                1 => "its busiest hour".to_owned(),
                n => format!("its busiest {n} hours"),
            };
            out.push(format!(
                "WARNING: spend limit {:?} reached {}% ({paid} paid calls in {within}, of {} per \
                 {per})",
                s.name,
                percent(paid, s.limit),
                s.limit,
            ));
        }
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
    if let Some(n) = f.provider_failures.get("server_refused") {
        out.push(format!(
            "WARNING: the provider refused this server's address {n} time{}: not the token; see \
             the ACTION NEEDED lines for what the provider allows",
            plural(*n)
        ));
    }
    if let Some(n) = f.provider_failures.get("plan") {
        out.push(format!(
            "WARNING: the provider account's plan did not cover a link {n} time{} (not premium, \
             not for that file host, or a top-up needed)",
            plural(*n)
        ));
    }
    if let Some(n) = f.provider_failures.get("quota") {
        out.push(format!(
            "WARNING: the provider account had no quota left {n} time{}",
            plural(*n)
        ));
    }
    if let Some(n) = f.provider_failures.get("retired") {
        out.push(format!(
            "WARNING: the provider answered {n} time{} that an endpoint this version of resolve \
             uses is retired: upgrade resolve",
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
    if out.iter().all(|w| w.starts_with("ACTION NEEDED")) && !stats.notes_in_period().is_empty() {
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
    for (name, r) in stats.readings() {
        let whose = name.map_or_else(String::new, |n| format!(" ({n})"));
        out.push_str(&format!(
            "\nProvider account{whose}: {}\n",
            r.summary(stats.now_ms)
        ));
    }
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
    use crate::usage::stats::SpendUse;

    const DAY: u32 = 20_000 * 24;

    fn stats(rows: &[Row], spend: Vec<SpendUse>, notes: Vec<Note>) -> Stats {
        Stats {
            hours: 24,
            now_ms: u64::from(DAY + 24 + 3) * HOUR_MS,
            figures: Figures::from_rows(rows, DAY, DAY + 24),
            totals: rows.to_vec(),
            spend,
            notes,
            folding: None,
            account: None,
            accounts: Vec::new(),
        }
    }

    /// The day of `rows` alone (no spend limits, no notes), whose whole report holds `lines`.
    fn reported(rows: &[Row], lines: &[&str]) -> Stats {
        let s = stats(rows, vec![], vec![]);
        crate::usage::text::assert_lines(&render(&s, false).unwrap(), lines);
        s
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
            unit: crate::core::rule::Unit::Requests,
            limit: 100,
            window_secs: 86_400,
            used,
            left: 100 - used,
        }
    }

    /// A quiet day with the account read as `facts` an hour before the report.
    fn with_account(facts: crate::provider::account::AccountFacts) -> Stats {
        let mut s = stats(&[total("paid", 12)], vec![], vec![]);
        s.account = Some(Reading::Read {
            at_ms: s.now_ms - HOUR_MS,
            facts,
        });
        s
    }

    fn facts(
        premium: bool,
        days_left: u64,
        fair_use: f64,
    ) -> crate::provider::account::AccountFacts {
        let now = u64::from(DAY + 24 + 3) * HOUR_MS;
        crate::provider::account::AccountFacts {
            premium: Some(premium),
            premium_until_ms: Some(now + days_left * 24 * HOUR_MS + HOUR_MS),
            fair_use_used: Some(fair_use),
            host_quotas: Vec::new(),
        }
    }

    #[test]
    fn the_account_is_silent_while_all_is_well_and_shown_in_the_body() {
        let s = with_account(facts(true, 30, 0.5));
        assert_eq!(render(&s, true), None);
        let text = render(&s, false).unwrap();
        assert!(
            text.contains("Provider account: premium until 2024-11-04 (30 days left), fair use 50% spent, read 2024-10-05T02:00:00Z"),
            "{text}"
        );
    }

    #[test]
    fn the_account_warns_of_an_ending_premium_spent_fair_use_and_no_premium() {
        let ending = render(&with_account(facts(true, 4, 0.1)), true).unwrap();
        assert!(
            ending.starts_with("ACTION NEEDED: the provider account's premium ends in 4 days"),
            "{ending}"
        );
        let spent = render(&with_account(facts(true, 30, 0.93)), true).unwrap();
        assert!(
            spent.starts_with("ACTION NEEDED: the provider account's fair use is 93% spent"),
            "{spent}"
        );
        let free = render(&with_account(facts(false, 30, 0.1)), true).unwrap();
        assert!(
            free.starts_with("ACTION NEEDED: the provider account is not premium"),
            "{free}"
        );
        let mut s = stats(&[], vec![], vec![]);
        s.account = Some(Reading::Failed {
            at_ms: s.now_ms,
            reason: "the account call answered HTTP 401".into(),
        });
        let failed = render(&s, true).unwrap();
        assert!(
            failed.starts_with("WARNING: the provider account could not be read (2024-10-05T03:00:00Z): the account call answered HTTP 401"),
            "{failed}"
        );
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
    fn a_refused_server_address_and_an_uncovered_plan_are_warnings() {
        let note = "ACTION NEEDED: the provider refuses calls from this server's address";
        let s = stats(
            &[
                total("provider_failure:server_refused", 3),
                total("provider_failure:plan", 1),
            ],
            vec![spend(1)],
            vec![Note {
                at_ms: u64::from(DAY + 7) * HOUR_MS,
                text: note.into(),
            }],
        );
        let text = render(&s, true).expect("problems to report");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("WARNING: the provider refused this server's address 3 times"),
            "{text}"
        );
        assert!(
            lines[1]
                .starts_with("WARNING: the provider account's plan did not cover a link 1 time"),
            "{text}"
        );
        assert!(text.contains(&format!("T07:00:00Z  {note}")), "{text}");
    }

    #[test]
    fn a_retired_endpoint_is_a_warning_to_upgrade() {
        let s = stats(
            &[total("provider_failure:retired", 2)],
            vec![spend(1)],
            vec![],
        );
        let text = render(&s, true).expect("problems to report");
        assert!(
            text.lines().next().unwrap().starts_with(
                "WARNING: the provider answered 2 times that an endpoint this version of resolve uses is retired: upgrade resolve"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_spend_limit_of_bytes_reads_in_bytes() {
        let mut bytes = spend_rule("day-bytes", 19_531_250, 86_400, 16_000_000);
        bytes.unit = crate::core::rule::Unit::Bytes;
        let s = stats(&[total("paid", 12)], vec![bytes], vec![]);
        let text = render(&s, false).unwrap();
        assert!(
            text.contains(
                "WARNING: spend limit \"day-bytes\" is at 81% (16.3 GB of 20 GB per day used now)"
            ),
            "{text}"
        );
        assert!(
            text.contains("  day-bytes: 16.3 GB of 20 GB per day used, 3.6 GB left"),
            "{text}"
        );
    }

    fn spend_rule(name: &str, limit: u32, window_secs: u32, used: u32) -> SpendUse {
        SpendUse {
            name: name.into(),
            unit: crate::core::rule::Unit::Requests,
            limit,
            window_secs,
            used,
            left: limit - used,
        }
    }

    fn paid_at(hour: u32, count: u64) -> Row {
        Row::Total {
            hour: DAY + hour,
            name: "paid".into(),
            count,
        }
    }

    #[test]
    fn yesterday_near_a_daily_limit_warns_though_the_counter_started_again() {
        // 00:05: the day's window began again a few minutes ago, but yesterday came close.
        let rows = [paid_at(3, 50), paid_at(20, 35)];
        let s = stats(&rows, vec![spend_rule("day", 100, 86_400, 2)], vec![]);
        assert_eq!(
            warnings(&s),
            [
                "WARNING: spend limit \"day\" reached 85% (85 paid calls in that day, of 100 per day)"
            ]
        );
        assert!(render(&s, true).is_some(), "a problem: the mail is sent");
        // Under 80% yesterday and now: nothing.
        let s = stats(
            &[paid_at(3, 79)],
            vec![spend_rule("day", 100, 86_400, 2)],
            vec![],
        );
        assert_eq!(warnings(&s), Vec::<String>::new());
    }

    #[test]
    fn a_limit_near_now_and_yesterday_warns_once() {
        let rows = [paid_at(3, 90)];
        let s = stats(&rows, vec![spend_rule("day", 100, 86_400, 95)], vec![]);
        assert_eq!(
            warnings(&s),
            ["WARNING: spend limit \"day\" is at 95% (95 of 100 per day used now)"]
        );
    }

    #[test]
    fn shorter_windows_look_at_their_busiest_hours_and_longer_ones_at_the_counter() {
        // 9 in one hour, 8 in the next: 17 in the busiest two hours.
        let rows = [paid_at(1, 3), paid_at(7, 9), paid_at(8, 8), paid_at(12, 4)];
        let spend = vec![
            spend_rule("hour", 10, 3_600, 0),
            spend_rule("two-hours", 20, 7_200, 0),
            spend_rule("six-hours", 40, 6 * 3_600, 0),
            spend_rule("month", 30, 30 * 86_400, 0),
            spend_rule("ten-minutes", 5, 600, 0),
        ];
        let s = stats(&rows, spend, vec![]);
        assert_eq!(
            warnings(&s),
            [
                "WARNING: spend limit \"hour\" reached 90% (9 paid calls in its busiest hour, of 10 per hour)",
                "WARNING: spend limit \"two-hours\" reached 85% (17 paid calls in its busiest 2 hours, of 20 per 2 hours)",
            ],
            "six hours: 21 of 40; a month's and ten minutes' use is the counter's to tell"
        );
        assert_eq!(busiest_window(&[1, 2, 3], 86_400), Some(6));
        assert_eq!(busiest_window(&[], 3_600), Some(0));
        assert_eq!(busiest_window(&[5], 2 * 86_400), None);
        assert_eq!(busiest_window(&[5], 5_400), None);
    }

    #[test]
    fn the_report_shows_automatic_blocks_and_what_shadow_rules_would_have_refused() {
        let s = reported(
            &[
                total("requests", 500),
                total("blocked", 30),
                total("auto_blocked", 3),
                total("would_refuse:tight", 120),
            ],
            &[
                "Blocked (403):     30 (3 clients blocked automatically)",
                "Shadow rules:      120 would have been refused (tight 120)",
            ],
        );
        // Neither is a problem to act on: a quiet day for `--only-problems`.
        assert_eq!(render(&s, true), None);
    }

    #[test]
    fn the_report_shows_failed_and_refused_dashboard_sign_ins() {
        reported(
            &[
                total("requests", 5),
                total("signin_failed", 12),
                total("signin_refused", 40),
            ],
            &["Dashboard sign-ins: 12 wrong passwords, 40 refused past a budget"],
        );
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
