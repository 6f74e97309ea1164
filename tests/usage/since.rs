//! `resolve stats --since` from the command line: paid calls added through the store's own
//! `journal_add` at known hours, one hour either side of each period's first hour, are counted
//! by the periods that reach them and by no other; the JSON's figures per hour, day and month
//! add up to the period; a period the program does not take is refused with the words that
//! say what it takes.

use resolve::core::journal::{Entry, HOUR_MS, hour_of};
use serde_json::Value;

use crate::support::Setup;
use crate::support::system::{now_ms, sleep_until_ms};

/// Waits for the next hour when less than a minute of this one is left: the hours the test
/// adds to and the hours `stats` reads must be counted from the same hour.
fn clear_of_the_hour_end() {
    let now = now_ms();
    let left = HOUR_MS - now % HOUR_MS;
    if left < 60_000 {
        sleep_until_ms(now + left + 1_000);
    }
}

fn stats(setup: &Setup, args: &[&str]) -> Value {
    let mut all = vec!["stats", "--json"];
    all.extend_from_slice(args);
    let out = crate::run(setup, &all);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stats --json is JSON")
}

fn sum_of(list: &Value, field: &str) -> u64 {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|e| e[field].as_u64().expect("a count"))
        .sum()
}

#[test]
fn since_counts_the_hours_of_its_period_and_no_older_ones() {
    let setup = Setup::builder("usage-since").write();
    clear_of_the_hour_end();
    let now = hour_of(now_ms());
    // Paid calls, by how many hours before the current one: each count a power of two, so
    // that every sum says which hours it took.
    crate::through_the_store(&setup, |store| {
        for (ago, paid) in [(0, 1), (23, 2), (24, 4), (719, 8), (720, 16), (9_599, 32)] {
            let entry = Entry {
                hour: now - ago,
                totals: vec![("paid".into(), paid), ("requests".into(), paid)],
                clients: Vec::new(),
            };
            store.journal.journal_add(&entry).expect("journal_add");
        }
    });
    for (args, paid) in [
        (&[][..], 1 + 2),
        (&["--since", "24h"][..], 1 + 2),
        (&["--since", "25h"][..], 1 + 2 + 4),
        (&["--since", "7d"][..], 1 + 2 + 4),
        (&["--since", "30d"][..], 1 + 2 + 4 + 8),
        (&["--since", "721h"][..], 1 + 2 + 4 + 8 + 16),
        (&["--since", "400d"][..], 63),
    ] {
        let s = stats(&setup, args);
        assert_eq!(s["paid_calls"], paid, "{args:?}");
        assert_eq!(s["requests"], paid, "{args:?}");
        for list in ["paid_per_hour", "per_hour", "per_day", "per_month"] {
            assert_eq!(sum_of(&s[list], "paid_calls"), paid, "{args:?} {list}");
        }
    }
    let month = stats(&setup, &["--since", "30d"]);
    assert_eq!(month["per_hour"].as_array().unwrap().len(), 720);
    let days = month["per_day"].as_array().unwrap();
    assert!((30..=31).contains(&days.len()), "{}", days.len());
    let hours: u64 = days.iter().map(|d| d["hours"].as_u64().unwrap()).sum();
    assert_eq!(hours, 720);
    assert_eq!(
        month["from"],
        resolve::core::calendar::iso(u64::from(now - 719) * HOUR_MS)
    );
    let year = stats(&setup, &["--since", "400d"]);
    let months = year["per_month"].as_array().unwrap();
    let names: Vec<&Value> = months.iter().map(|m| &m["month"]).collect();
    assert!((14..=15).contains(&months.len()), "{names:?}");
    assert_eq!(months[0]["paid_calls"], 32, "the oldest hour kept");

    let text = crate::command(&setup, &["stats", "--since", "30d"]);
    assert!(text.contains("Paid calls:        15\n"), "{text}");
    assert!(text.contains("Per day (UTC):"), "{text}");
}

#[test]
fn a_period_it_does_not_take_is_refused_with_what_it_takes() {
    let setup = Setup::builder("usage-since-bad").write();
    for bad in ["1w", "0h", "401d", "9601h", "d", "7 d", "-1d", "30"] {
        let out = crate::run(&setup, &["stats", "--since", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(out.stdout.is_empty(), "{bad}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "resolve: --since {bad:?} is not a period: write 24h, 7d or 30d (or a number of \
                 hours or days, up to 400 days)\n"
            ),
            "{bad}"
        );
    }
}
