//! Tests of what a request pays: a job the provider reports failed, the echo provider that
//! never pays, a client over its own limit when the site's is reached too, and a refusal that
//! keeps the visitor's link.

use super::*;

#[test]
fn a_job_the_provider_reports_failed_gives_back_the_paid_link_not_the_providers_calls() {
    let mut cfg = config(
        r#"{"spend": [{"name": "provider-minute", "limit": 9, "window_secs": 60},
                      {"name": "day", "limit": 9, "window_secs": 86400}]}"#,
    );
    cfg.provider_rate_limits = 1;
    let s = store();
    let mut failed = ProviderError::new(Failure::Rejected, crate::provider::spec::WORK_FAILED);
    failed.reached = true;
    failed.job_failed = true;
    let p = Counting {
        calls: Cell::new(0),
        answer: Err(failed),
    };
    let (a, _) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 422);
    let count = |i: usize| match s.state(&cfg.spend[i].key_for("")) {
        Some(crate::core::limiter::State::Fixed(Some(c))) => c.count,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        count(0),
        1,
        "the provider was sent the call: its rate keeps it"
    );
    assert_eq!(
        count(1),
        0,
        "the owner's spend limit gets the paid link back"
    );
    assert_eq!(figures(&s).refunds, 1);
}

#[test]
fn a_failure_that_only_reads_like_a_failed_job_gives_nothing_back() {
    let mut cfg = config(r#"{"spend": [{"name": "day", "limit": 9, "window_secs": 86400}]}"#);
    cfg.provider_rate_limits = 0;
    let s = store();
    // The provider's refusal of the link, in the words of a failed job: it was paid for.
    let mut refused = ProviderError::new(Failure::Rejected, crate::provider::spec::WORK_FAILED);
    refused.reached = true;
    let p = Counting {
        calls: Cell::new(0),
        answer: Err(refused),
    };
    let (a, _) = run(&cfg, &s, &p, &get("192.0.2.1", LINK));
    assert_eq!(a.response.status, 422);
    assert_eq!(figures(&s).refunds, 0, "only a failed job is given back");
    match s.state(&cfg.spend[0].key_for("")) {
        Some(crate::core::limiter::State::Fixed(Some(c))) => assert_eq!(c.count, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_echo_provider_is_never_paid_nor_counted_against_spend() {
    let cfg = config(
        r#"{"cache": {"ttl_secs": 600}, "spend": [{"name": "day", "limit": 2, "window_secs": 86400}]}"#,
    );
    let s = store();
    for _ in 0..5 {
        assert_eq!(
            status(&cfg, &s, &EchoProvider, &get("192.0.2.1", LINK)),
            200
        );
    }
    let f = figures(&s);
    assert_eq!((f.requests, f.admitted), (5, 5));
    assert_eq!((f.paid_calls, f.cache_hits, f.refunds), (0, 0, 0), "{f:?}");
    assert!(f.spend_refused.is_empty(), "{f:?}");
    // The spend limit's counter was never started.
    assert!(
        s.state(&cfg.spend[0].key_for("")).is_none(),
        "{:?}",
        s.state(&cfg.spend[0].key_for(""))
    );
    // A paid provider on the same site is counted, and refused past the limit.
    let p = ok_provider();
    let statuses: Vec<u16> = (0..3)
        .map(|i| status(&cfg, &s, &p, &get("192.0.2.1", &format!("{LINK}{i}"))))
        .collect();
    assert_eq!(statuses, [200, 200, 503]);
}

#[test]
fn an_html_refusal_keeps_the_link_in_the_field() {
    let cfg = config(r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}]}"#);
    let (s, p) = (store(), ok_provider());
    let html = |env: Env| {
        let a = run(&cfg, &s, &p, &env.with("HTTP_ACCEPT", "text/html")).0;
        (
            a.response.status,
            String::from_utf8(a.response.body).unwrap(),
        )
    };
    let (status, body) = html(get("192.0.2.1", LINK));
    assert_eq!(status, 200);
    assert!(!body.contains("value="), "another link starts empty");
    let (status, body) = html(get("192.0.2.1", LINK));
    assert_eq!(status, 429);
    assert!(
        body.contains(" value=\"https://host.example/f\">"),
        "{body}"
    );
    // A link that could not be read is not offered again.
    let (status, body) = html(get("192.0.2.2", "link=nope"));
    assert_eq!(status, 400);
    assert!(!body.contains("value="), "{body}");
}

#[test]
fn a_client_over_its_own_limit_is_told_its_own_wait_when_the_spend_limit_is_reached_too() {
    let mut cfg = config(
        r#"{"rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}],
            "spend": [{"name": "day", "limit": 2, "window_secs": 86400}]}"#,
    );
    cfg.provider_rate_limits = 0;
    let (s, p) = (store(), ok_provider());
    for addr in ["192.0.2.1", "192.0.2.2"] {
        assert_eq!(status(&cfg, &s, &p, &get(addr, LINK)), 200);
    }
    // The day is spent, and 192.0.2.1 is over its own minute: its own rule answers.
    let over = run(&cfg, &s, &p, &get("192.0.2.1", LINK)).0.response;
    assert_eq!(over.status, 429);
    assert_eq!(over.header_value("Retry-After"), Some("60"));
    assert_eq!(over.header_value("RateLimit"), Some("\"ip\";r=0;t=60"));
    // A client within its own limit meets the site's: 503, as before.
    let within = run(&cfg, &s, &p, &get("192.0.2.3", LINK)).0.response;
    assert_eq!(within.status, 503);
    assert!(String::from_utf8_lossy(&within.body).contains("limit for now"));
    assert_eq!(p.calls.get(), 2);
    let f = figures(&s);
    assert_eq!(f.refused.get("ip"), Some(&1), "{f:?}");
    assert_eq!(f.spend_refused.get("day"), Some(&1), "{f:?}");
}

#[test]
fn a_refused_request_builds_none_of_several_providers() {
    let text = r#"{"providers": [{"preset": "realdebrid", "token": "a"},
        {"preset": "alldebrid", "token": "b"}, {"preset": "torbox", "token": "c"}],
        "rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 60}],
        "cache": {"ttl_secs": 0}}"#;
    let cfg = Config::for_one_request(text, Path::new("/nonexistent")).unwrap();
    let others: Vec<Box<dyn Provider>> = cfg.services[1..]
        .iter()
        .map(|s| match &s.spec {
            crate::provider::described::ProviderSpec::Http(h) => {
                Box::new(crate::provider::http::HttpProvider::shared(h.clone()))
                    as Box<dyn Provider>
            }
            crate::provider::described::ProviderSpec::Echo => Box::new(EchoProvider),
        })
        .collect();
    let s = store();
    let first = ok_provider();
    let log = MemoryLog::default();
    let app = App {
        config: &cfg,
        store: &s.as_store(),
        provider: Some(&first),
        others: &others,
        log: &log,
        clock: &SystemClock,
        workers: None,
        site_check: None,
        turn: None,
    };
    let head = Env::method("HEAD")
        .with("QUERY_STRING", LINK)
        .with("REMOTE_ADDR", "192.0.2.1");
    assert_eq!(
        app.handle(&head, &mut std::io::empty()).response.status,
        200
    );
    let refused = app.handle(&get("192.0.2.1", LINK), &mut std::io::empty());
    assert_eq!(refused.response.status, 429);
    for service in &cfg.services {
        let crate::provider::described::ProviderSpec::Http(h) = &service.spec else {
            panic!("not an HTTP provider");
        };
        assert!(!h.is_built(), "{} built by a refused request", service.name);
    }
    assert_eq!(first.calls.get(), 0);
}
