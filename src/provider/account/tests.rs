//! Tests of the account's reading: stand-in answers as the services document them, read at a
//! fixed time, into facts, kept readings and `ACTION NEEDED` lines.

use serde_json::json;

use super::*;

/// 2026-12-05T08:00:00Z, a Saturday.
const NOW: u64 = 1_796_457_600_000;
const DAY: u64 = 86_400_000;

fn realdebrid() -> AccountCall {
    AccountCall {
        url: "{base}/user".into(),
        headers: vec![("Authorization".into(), "Bearer {token}".into())],
        success: None,
        premium: Some(ValueTest {
            pointer: "/type".into(),
            equals: json!("premium"),
        }),
        premium_until: Some("/expiration".into()),
        premium_seconds_left: Some("/premium".into()),
        fair_use: None,
        host_quotas: None,
    }
}

fn premiumize() -> AccountCall {
    AccountCall {
        url: "{base}/account/info".into(),
        headers: Vec::new(),
        success: Some(ValueTest {
            pointer: "/status".into(),
            equals: json!("success"),
        }),
        premium: None,
        premium_until: Some("/premium_until".into()),
        premium_seconds_left: None,
        fair_use: Some(FairUse {
            pointer: "/limit_used".into(),
            unit: Share::UsedFraction,
        }),
        host_quotas: Some("/quotas".into()),
    }
}

#[test]
fn dates_are_read_with_their_offset() {
    assert_eq!(
        calendar::iso(parse_date("2026-12-11T10:00:00.000Z").unwrap()),
        "2026-12-11T10:00:00Z"
    );
    assert_eq!(
        calendar::iso(parse_date("2026-12-11T10:00:00+01:00").unwrap()),
        "2026-12-11T09:00:00Z"
    );
    assert_eq!(
        calendar::iso(parse_date("2026-12-11").unwrap()),
        "2026-12-11T00:00:00Z"
    );
    for bad in [
        "",
        "soon",
        "2026-13-01",
        "2026/12/11",
        "2026-12-11T25:00:00Z",
    ] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
}

#[test]
fn a_premium_that_ends_on_friday_is_said() {
    // Real-Debrid's user schema: "type" premium or free, "premium" seconds left,
    // "expiration" a date.
    let answer = json!({"id": 1, "username": "owner", "type": "premium", "premium": 561_600,
                        "expiration": "2026-12-11T20:00:00.000Z"});
    let facts = realdebrid().facts(&answer, NOW).unwrap();
    assert_eq!(facts.premium, Some(true));
    assert_eq!(
        facts.premium_until_ms.map(calendar::iso).as_deref(),
        Some("2026-12-11T20:00:00Z")
    );
    assert_eq!(facts.days_left(NOW), Some(6));
    assert_eq!(
        facts.warnings(NOW),
        [
            "ACTION NEEDED: the provider account's premium ends in 6 days (2026-12-11); renew it on the provider's site before then"
        ]
    );
    // A week and more left: nothing to say.
    assert!(facts.warnings(NOW - 2 * DAY).is_empty());
    assert!(
        facts
            .warnings(NOW + 5 * DAY + 1)
            .first()
            .unwrap()
            .contains("ends tomorrow")
    );
}

#[test]
fn seconds_left_stand_in_for_a_missing_date() {
    let answer = json!({"type": "premium", "premium": 3 * 86_400 + 60});
    let facts = realdebrid().facts(&answer, NOW).unwrap();
    assert_eq!(facts.premium_until_ms, Some(NOW + 3 * DAY + 60_000));
    assert_eq!(facts.days_left(NOW), Some(3));
}

#[test]
fn an_account_not_premium_is_said_once() {
    let answer = json!({"type": "free", "premium": 0, "expiration": "2026-11-30T00:00:00.000Z"});
    let facts = realdebrid().facts(&answer, NOW).unwrap();
    assert_eq!(facts.premium, Some(false));
    let lines = facts.warnings(NOW);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("ACTION NEEDED: the provider account is not premium"));
    // A premium whose date has passed reads the same.
    let ended = AccountFacts {
        premium: None,
        premium_until_ms: Some(NOW - 1),
        fair_use_used: None,
        host_quotas: Vec::new(),
    };
    assert_eq!(ended.warnings(NOW), lines);
}

#[test]
fn fair_use_past_the_share_is_said() {
    // Premiumize's account/info: "premium_until" seconds since 1970, "limit_used" 0 to 1.
    let answer = json!({"status": "success", "customer_id": "1", "premium_until": 1_799_000_000,
                        "limit_used": 0.86, "space_used": 0});
    let facts = premiumize().facts(&answer, NOW).unwrap();
    assert_eq!(facts.fair_use_used, Some(0.86));
    assert_eq!(
        facts.warnings(NOW),
        [
            "ACTION NEEDED: the provider account's fair use is 86% spent: links will be refused when it is all spent; it refills over time (see the account on the provider's site)"
        ]
    );
    let answer = json!({"status": "success", "premium_until": 1_799_000_000, "limit_used": 0.8});
    assert!(
        premiumize()
            .facts(&answer, NOW)
            .unwrap()
            .warnings(NOW)
            .is_empty()
    );
}

#[test]
fn units_of_fair_use_and_host_quotas() {
    let mut call = premiumize();
    call.fair_use = Some(FairUse {
        pointer: "/f".into(),
        unit: Share::UsedPercent,
    });
    let facts = call
        .facts(
            &json!({"f": "45", "quotas": {"rapidgator.net": 5, "uptobox.com": "2 GB", "x": null}}),
            NOW,
        )
        .unwrap();
    assert_eq!(facts.fair_use_used, Some(0.45));
    assert_eq!(
        facts.host_quotas,
        [
            ("rapidgator.net".to_owned(), "5".to_owned()),
            ("uptobox.com".into(), "2 GB".into())
        ]
    );
    call.fair_use = Some(FairUse {
        pointer: "/f".into(),
        unit: Share::LeftFraction,
    });
    assert_eq!(
        call.facts(&json!({"f": 0.25}), NOW).unwrap().fair_use_used,
        Some(0.75)
    );
    // An answer with none of the facts is no reading.
    assert_eq!(call.facts(&json!({"status": "success"}), NOW), None);
}

#[test]
fn a_reading_is_due_a_day_later_a_failure_an_hour_later() {
    let read = Reading::Read {
        at_ms: NOW,
        facts: AccountFacts {
            premium: Some(true),
            premium_until_ms: None,
            fair_use_used: None,
            host_quotas: Vec::new(),
        },
    };
    assert!(!read.due(NOW + 3_600_000));
    assert!(!read.due(NOW + DAY - 1));
    assert!(read.due(NOW + DAY));
    assert!(read.due(NOW - 1), "a clock set back reads again");
    let failed = Reading::Failed {
        at_ms: NOW,
        reason: "HTTP 401".into(),
    };
    assert!(!failed.due(NOW + 3_599_999));
    assert!(failed.due(NOW + 3_600_000));
    assert!(failed.warnings(NOW).is_empty());
}

#[test]
fn a_kept_reading_reads_back_the_same() {
    let facts = premiumize()
        .facts(
            &json!({"status": "success", "premium_until": 1_799_000_000, "limit_used": 0.5,
                       "quotas": {"a.com": 3}}),
            NOW,
        )
        .unwrap();
    for reading in [
        Reading::Read { at_ms: NOW, facts },
        Reading::Failed {
            at_ms: NOW,
            reason: "the answer was not JSON".into(),
        },
    ] {
        let kept = reading.to_json();
        assert_eq!(kept["read_at"], "2026-12-05T08:00:00Z");
        assert_eq!(Reading::from_json(&kept), Some(reading));
    }
    assert_eq!(Reading::from_json(&json!({"premium": true})), None);
}

#[test]
fn spend_limits_tighten_past_the_share_in_proportion() {
    assert_eq!(tightened(100, 0.5, 0.8), 100);
    assert_eq!(tightened(100, 0.8, 0.8), 100);
    assert_eq!(tightened(100, 0.9, 0.8), 50);
    assert_eq!(tightened(100, 0.95, 0.8), 25);
    assert_eq!(tightened(100, 1.0, 0.8), 1);
    assert_eq!(tightened(4, 0.9, 0.8), 2);
    assert_eq!(tightened(1, 0.99, 0.5), 1, "never below one call");
    assert_eq!(tightened(100, f64::NAN, 0.8), 100);
}
