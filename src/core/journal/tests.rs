//! Tests of the journal's model: entries, batches, the figures of a period and its days and
//! months, expiry.

use super::*;

const H: u64 = HOUR_MS;

fn total(hour: u32, name: &str, count: u64) -> Row {
    Row::Total {
        hour,
        name: name.into(),
        count,
    }
}

fn client(hour: u32, client: &str, count: ClientCount, n: u64) -> Row {
    Row::Client {
        hour,
        client: client.into(),
        count,
        n,
    }
}

#[test]
fn an_entry_names_every_event_and_counts_the_client_once() {
    let e = Entry::new(
        5 * H + 1,
        Some("203.0.113.7"),
        &[
            Event::Request,
            Event::Refused("ip".into()),
            Event::Refused("burst".into()),
        ],
    );
    assert_eq!(e.hour, 5);
    assert_eq!(e.totals, ones(&["requests", "refused:ip", "refused:burst"]));
    assert_eq!(e.clients, [("203.0.113.7".into(), ClientCount::Refused, 1)]);
    // A file served adds its bytes to a total and to the client's own count.
    let served = Entry::new(
        0,
        Some("203.0.113.7"),
        &[Event::Request, Event::Admitted, Event::Bytes(5_000)],
    );
    assert_eq!(
        served.totals,
        [
            ("requests".into(), 1),
            ("admitted".into(), 1),
            ("bytes".into(), 5_000)
        ]
    );
    assert_eq!(
        served.clients,
        [
            ("203.0.113.7".into(), ClientCount::Admitted, 1),
            ("203.0.113.7".into(), ClientCount::Bytes, 5_000)
        ]
    );
    let bad = Entry::new(
        0,
        Some("203.0.113.7"),
        &[Event::Request, Event::Bad("x".into())],
    );
    assert_eq!(
        bad.clients,
        [],
        "a bad request is neither admitted nor refused"
    );
    let admitted = Entry::new(0, None, &[Event::Request, Event::Admitted, Event::Paid]);
    assert_eq!(admitted.clients, [], "no client known, nothing per client");
    assert_eq!(admitted.totals, ones(&["requests", "admitted", "paid"]));
}

fn ones(names: &[&str]) -> Vec<(String, u64)> {
    names.iter().map(|n| ((*n).to_owned(), 1)).collect()
}

#[test]
fn a_batch_sums_entries_per_hour_and_empties_when_taken() {
    let mut batch = Batch::default();
    let refused = [Event::Request, Event::Refused("ip".into())];
    for i in 0..3 {
        batch.add(&Entry::new(5 * H + i, Some("a"), &refused));
    }
    batch.add(&Entry::new(
        5 * H,
        Some("b"),
        &[Event::Request, Event::Admitted],
    ));
    batch.add(&Entry::new(6 * H, Some("a"), &refused));
    batch.add(&Entry::new(6 * H, None, &[]));
    assert_eq!(batch.entries(), 5, "an empty entry adds nothing");
    assert_eq!(batch.len(), 5 + 3);
    let entries = batch.take();
    assert!(batch.is_empty());
    assert_eq!(batch.entries(), 0);
    assert_eq!(
        entries,
        [
            Entry {
                hour: 5,
                totals: vec![
                    ("admitted".into(), 1),
                    ("refused:ip".into(), 3),
                    ("requests".into(), 4)
                ],
                clients: vec![
                    ("a".into(), ClientCount::Refused, 3),
                    ("b".into(), ClientCount::Admitted, 1)
                ],
            },
            Entry {
                hour: 6,
                totals: vec![("refused:ip".into(), 1), ("requests".into(), 1)],
                clients: vec![("a".into(), ClientCount::Refused, 1)],
            },
        ]
    );
}

#[test]
fn every_event_has_its_own_name() {
    let events = [
        Event::Request,
        Event::Admitted,
        Event::Paid,
        Event::Refund,
        Event::CacheHit,
        Event::Refused("ip".into()),
        Event::SpendRefused("ip".into()),
        Event::ProviderFailure("ip"),
        Event::Bad("ip".into()),
        Event::StoreFailed,
        Event::Blocked,
        Event::AutoBlocked,
        Event::WouldRefuse("ip".into()),
        Event::UntrustedNetwork("ip"),
    ];
    let mut names: Vec<String> = events.iter().map(Event::name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), events.len());
}

#[test]
fn figures_sum_the_hours_of_the_period_and_nothing_else() {
    let rows = [
        total(9, "paid", 100),
        total(10, "paid", 2),
        total(10, "requests", 7),
        total(11, "paid", 3),
        total(11, "refused:ip", 4),
        total(11, "refused:burst", 1),
        total(11, "spend_refused:day", 2),
        total(11, "provider_failure:timeout", 1),
        total(11, "bad:invalid_link", 5),
        total(11, "cache_hits", 6),
        total(11, "refunds", 1),
        total(11, "store_failed", 1),
        total(11, "admitted", 6),
        total(11, "future:thing", 9),
        total(11, "blocked", 2),
        total(11, "auto_blocked", 1),
        total(11, "would_refuse:new", 7),
        total(11, "untrusted_network:cloudflare", 3),
        total(12, "paid", 1000),
        client(10, "a", ClientCount::Admitted, 2),
        client(11, "a", ClientCount::Refused, 3),
        client(11, "b", ClientCount::Refused, 3),
        client(11, "b", ClientCount::Admitted, 5),
        client(11, "c", ClientCount::Admitted, 1),
        client(12, "c", ClientCount::Refused, 99),
    ];
    let f = Figures::from_rows(&rows, 10, 12);
    assert_eq!(f.paid_calls, 5);
    assert_eq!(f.paid_per_hour, [2, 3]);
    assert_eq!(f.requests, 7);
    assert_eq!(f.admitted, 6);
    assert_eq!(f.cache_hits, 6);
    assert_eq!(f.refunds, 1);
    assert_eq!(f.store_failures, 1);
    assert_eq!(f.refused_total(), 5);
    assert_eq!(f.refused["ip"], 4);
    assert_eq!(f.spend_refused["day"], 2);
    assert_eq!(f.provider_failures["timeout"], 1);
    assert_eq!(f.bad_requests["invalid_link"], 5);
    assert_eq!(f.other["future:thing"], 9);
    assert_eq!((f.blocked, f.auto_blocks), (2, 1));
    assert_eq!(f.would_refuse["new"], 7);
    assert_eq!(f.untrusted_networks["cloudflare"], 3);
    let names = |list: Vec<ClientFigures>| -> Vec<(String, u64, u64)> {
        list.into_iter()
            .map(|c| (c.client, c.admitted, c.refused))
            .collect()
    };
    assert_eq!(
        names(f.top_refused(10)),
        [("b".into(), 5, 3), ("a".into(), 2, 3), ("c".into(), 1, 0)]
    );
    assert_eq!(
        names(f.top_admitted(2)),
        [("b".into(), 5, 3), ("a".into(), 2, 3)]
    );
    assert_eq!(names(f.top_admitted(10)).len(), 3);
}

#[test]
fn a_period_splits_into_days_and_months_as_far_as_it_reaches() {
    // 2024-01-30 22:00 UTC to 2024-03-01 02:00 UTC: a leap year's February between.
    let jan_30 = 19_752 * 24;
    let (from, to) = (jan_30 + 22, jan_30 + 31 * 24 + 2);
    assert_eq!(month_start(jan_30 + 5), 19_723 * 24, "2024-01-01");
    assert_eq!(month_start(jan_30 + 2 * 24), 19_754 * 24, "2024-02-01");
    assert_eq!(month_start(jan_30 + 31 * 24), 19_783 * 24, "2024-03-01");
    let rows = [
        total(from - 1, "paid", 100),
        total(from, "paid", 1),
        total(from + 1, "refused:ip", 2),
        total(jan_30 + 24, "paid", 3),
        total(jan_30 + 24 + 23, "requests", 4),
        total(jan_30 + 31 * 24, "paid", 5),
        total(to, "paid", 1000),
        client(from, "a", ClientCount::Admitted, 7),
    ];
    let days = Figures::split(&rows, from, to, day_start);
    assert_eq!(days.len(), 32, "Jan 30 and 31, 29 days of February, Mar 1");
    assert_eq!((days[0].from_hour, days[0].to_hour), (from, jan_30 + 24));
    assert_eq!((days[0].paid_calls, days[0].refused_total()), (1, 2));
    assert_eq!((days[1].paid_calls, days[1].requests), (3, 4));
    assert!(days[0].clients.is_empty(), "no client counts");
    assert_eq!((days[31].from_hour, days[31].to_hour), (to - 2, to));
    assert_eq!(days[31].paid_calls, 5);
    let months = Figures::split(&rows, from, to, month_start);
    let spans: Vec<(u32, u32)> = months.iter().map(|m| (m.from_hour, m.to_hour)).collect();
    assert_eq!(
        spans,
        [
            (from, 19_754 * 24),
            (19_754 * 24, 19_783 * 24),
            (19_783 * 24, to)
        ]
    );
    let paid: Vec<u64> = months.iter().map(|m| m.paid_calls).collect();
    assert_eq!(paid, [4, 0, 5]);
    let hours = Figures::split(&rows, from, from + 3, |h| h);
    let paid: Vec<u64> = hours.iter().map(|h| h.paid_calls).collect();
    assert_eq!(paid, [1, 0, 3]);
    assert_eq!(hours[1].refused["ip"], 2);
    assert!(Figures::split(&rows, from, from, day_start).is_empty());
}

#[test]
fn expiry_keeps_two_days_of_clients_and_400_days_of_totals() {
    let now = 10_000 * H + 5;
    let e = Expiry::at(now);
    assert_eq!(e.clients_before, 10_000 - 48);
    assert_eq!(e.totals_before, 10_000 - 9_600);
    assert_eq!(Expiry::at(0).clients_before, 0);
    assert_eq!(day_start(49), 48);
}

#[test]
fn each_kind_of_note_keeps_its_share() {
    let failed = |cause: &str, n: usize| {
        format!("ACTION NEEDED: {cause}: provider call for \"https://h.example/{n}\" failed")
    };
    assert_eq!(
        note_kind(&failed("no quota", 1)),
        note_kind(&failed("no quota", 2))
    );
    assert_ne!(
        note_kind(&failed("no quota", 1)),
        note_kind(&failed("bad token", 1))
    );
    assert_eq!(note_kind("ACTION NEEDED: x"), "ACTION NEEDED: x");
    // Newest first: 30 of one kind, then 3 of another.
    let mut texts: Vec<String> = (0..30).map(|n| failed("no quota", n)).collect();
    texts.extend((0..3).map(|n| failed("bad token", n)));
    let kept = notes_kept(texts.iter().map(String::as_str));
    assert_eq!(kept.iter().filter(|k| **k).count(), KEEP_NOTES_PER_KIND + 3);
    assert!(kept[..KEEP_NOTES_PER_KIND].iter().all(|k| *k));
    assert!(!kept[KEEP_NOTES_PER_KIND..30].iter().any(|k| *k));
    assert!(kept[30..].iter().all(|k| *k));
    // Many kinds: the newest KEEP_NOTES in all.
    let many: Vec<String> = (0..60).map(|n| format!("kind {n}")).collect();
    let kept = notes_kept(many.iter().map(String::as_str));
    assert_eq!(kept.iter().take_while(|k| **k).count(), KEEP_NOTES);
    assert!(!kept[KEEP_NOTES..].iter().any(|k| *k));
}

#[test]
fn each_services_calls_and_failures_are_summed_by_its_name() {
    let events = [
        Event::ServiceCall("realdebrid".into()),
        Event::ServiceFailure("realdebrid".into(), "server_refused"),
        Event::ServiceCall("alldebrid".into()),
    ];
    let names: Vec<String> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "service_calls:realdebrid",
            "service_failure:realdebrid:server_refused",
            "service_calls:alldebrid"
        ]
    );
    let rows: Vec<Row> = names
        .iter()
        .chain(std::iter::once(&"service_calls:alldebrid".to_owned()))
        .map(|n| total(10, n, 1))
        .collect();
    let f = Figures::from_rows(&rows, 10, 11);
    assert_eq!(f.services["realdebrid"].calls, 1);
    assert_eq!(f.services["realdebrid"].failures["server_refused"], 1);
    assert_eq!(f.services["alldebrid"].calls, 2);
    assert!(f.services["alldebrid"].failures.is_empty());
    assert!(f.other.is_empty(), "{:?}", f.other);
}
