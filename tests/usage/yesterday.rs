//! `resolve report` against known traffic. The report covers yesterday (UTC), which traffic
//! sent now cannot reach, so the journal's rows of the last 24 hours (the traffic `drive` sent)
//! are added again 24 hours earlier through the store's own `journal_add`, and its notes
//! through `journal_note`. Whether the traffic fell before or after midnight, each row is then
//! in yesterday exactly once (as it was, or moved), so every line of the report must say what
//! `resolve stats --json` said of the last 24 hours, read before the move.

use resolve::core::calendar;
use resolve::core::journal::{Entry, HOUR_MS, Note, Row, day_start, hour_of};
use resolve::store::roles::Store;
use serde_json::Value;

use crate::sum;
use crate::support::Site;
use crate::support::system::now_ms;

/// ` (a 1, b 2)` for an object of counts, nothing for an empty one: as the text form writes it.
fn by(map: &Value) -> String {
    let map = map.as_object().expect("an object");
    if map.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(" ({})", parts.join(", "))
}

/// Adds the journal's rows and notes of the last 24 hours again, 24 hours earlier.
fn move_a_day_back(site: &Site) {
    crate::through_the_store(site, move_a_day_back_in);
}

fn move_a_day_back_in(store: &Store) {
    let now = hour_of(now_ms());
    let rows = store
        .journal
        .journal_rows(now - 23, now + 1)
        .expect("the journal's rows");
    for row in rows {
        let (hour, totals, clients) = match row {
            Row::Total { hour, name, count } => (hour, vec![(name, count)], Vec::new()),
            Row::Client {
                hour,
                client,
                count,
                n,
            } => (hour, Vec::new(), vec![(client, count, n)]),
        };
        let entry = Entry {
            hour: hour - 24,
            totals,
            clients,
        };
        store.journal.journal_add(&entry).expect("journal_add");
    }
    let since = u64::from(now - 23) * HOUR_MS;
    for note in store.notes.journal_notes().expect("the notes") {
        if note.at_ms >= since {
            store
                .notes
                .journal_note(&Note {
                    at_ms: note.at_ms - 24 * HOUR_MS,
                    text: note.text,
                })
                .expect("journal_note");
        }
    }
}

/// The report after `drive`'s traffic, line by line.
pub fn expect_the_report_of(site: &Site) {
    let s = crate::stats_json(site);
    move_a_day_back(site);
    let today = day_start(hour_of(now_ms()));
    let report = crate::command(site, &["report", "--only-problems"]);
    assert_eq!(
        today,
        day_start(hour_of(now_ms())),
        "midnight passed while the report ran: run again"
    );
    let notes = crate::through_the_store(site, |store| {
        store.notes.journal_notes().expect("the notes")
    });

    let n = |field: &str| s[field].as_u64().unwrap_or_else(|| panic!("{field}"));
    let day = |hour: u32| calendar::date(u64::from(hour) * HOUR_MS);
    let yesterday = day(today - 24);
    let spend = &s["spend"][0];
    let (used, limit) = (
        spend["used"].as_u64().unwrap(),
        spend["limit"].as_u64().unwrap(),
    );
    let client = |c: &Value| {
        format!(
            "  {:<40} {:>8} admitted {:>8} refused",
            c["client"].as_str().unwrap(),
            c["admitted"].as_u64().unwrap(),
            c["refused"].as_u64().unwrap()
        )
    };
    let note = |n: &Note| format!("  {}  {}", calendar::iso(n.at_ms), n.text);
    let from_ms = u64::from(today - 24) * HOUR_MS;
    let of_yesterday: Vec<&Note> = notes
        .iter()
        .filter(|n| (from_ms..from_ms + 24 * HOUR_MS).contains(&n.at_ms))
        .collect();

    let mut expected = vec![
        format!(
            "WARNING: spend limit \"day\" is at {}% ({used} of {limit} per day used now)",
            used * 100 / limit
        ),
        format!(
            "WARNING: spend limit \"day\" refused {} paid call (visitors got 503)",
            s["spend_refused"]["day"]
        ),
        format!(
            "WARNING: the provider refused the site's credentials {} time: check provider.token \
             and the account",
            s["provider_failures"]["auth"]
        ),
        format!(
            "WARNING: the provider refused this server's address {} time: not the token; see \
             the ACTION NEEDED lines for what the provider allows",
            s["provider_failures"]["server_refused"]
        ),
        format!(
            "WARNING: the provider account's plan did not cover a link {} time (not premium, \
             not for that file host, or a top-up needed)",
            s["provider_failures"]["plan"]
        ),
        format!(
            "WARNING: the provider account had no quota left {} time",
            s["provider_failures"]["quota"]
        ),
        String::new(),
        format!("resolve: the day of {yesterday} (UTC)"),
        String::new(),
        format!(
            "From {yesterday}T00:00:00Z to {}T00:00:00Z (UTC)",
            day(today)
        ),
        String::new(),
        format!("Paid calls:        {}", n("paid_calls")),
        format!("Cache hits:        {} (paid calls saved)", n("cache_hits")),
        format!(
            "Refunds:           {} (calls that never reached the provider)",
            n("refunds")
        ),
        format!("Requests:          {}", n("requests")),
        format!("Admitted:          {}", n("admitted")),
        format!(
            "Refused (429):     {}{}",
            n("refused_total"),
            by(&s["refused"])
        ),
        format!(
            "Spend refusals:    {}{}",
            sum(&s["spend_refused"]),
            by(&s["spend_refused"])
        ),
        format!(
            "Bad requests:      {}{}",
            sum(&s["bad_requests"]),
            by(&s["bad_requests"])
        ),
        format!(
            "Provider failures: {}{}",
            sum(&s["provider_failures"]),
            by(&s["provider_failures"])
        ),
        String::new(),
        "Spend limits (now):".into(),
        format!(
            "  day: {used} of {limit} per day used, {} left",
            spend["left"]
        ),
        String::new(),
        "Top clients by refusals:".into(),
    ];
    expected.extend(s["top_clients"].as_array().unwrap().iter().map(client));
    expected.push(String::new());
    expected.push("Top clients by admitted requests:".into());
    expected.extend(s["top_admitted"].as_array().unwrap().iter().map(client));
    expected.push(String::new());
    expected.push("Last ACTION NEEDED events:".into());
    expected.extend(notes.iter().take(10).map(note));
    expected.push(String::new());
    expected.push(format!(
        "ACTION NEEDED events on {yesterday}: {}",
        of_yesterday.len()
    ));
    expected.extend(of_yesterday.iter().map(|n| note(n)));

    let lines: Vec<&str> = report.lines().collect();
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(
            lines.get(i).copied(),
            Some(want.as_str()),
            "line {} of the report:\n{report}",
            i + 1
        );
    }
    assert_eq!(lines.len(), expected.len(), "{report}");
    assert_eq!(
        of_yesterday.len(),
        s["action_needed"].as_array().unwrap().len(),
        "yesterday's notes are the traffic's"
    );
    assert!(!report.contains(crate::support::config::TOKEN));
    // Without --only-problems: the same, since there are problems.
    assert_eq!(crate::command(site, &["report"]), report);
}
