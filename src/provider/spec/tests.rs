//! Tests of a provider described as data: templates, extraction, errors, polls, files.

use super::*;
use serde_json::json;

fn step(extract: &[(&str, &str)]) -> Step {
    Step {
        method: HttpMethod::Post,
        url: Template("{base}/unrestrict".into()),
        headers: vec![("Authorization".into(), Template("Bearer {token}".into()))],
        query: Vec::new(),
        form: vec![("link".into(), Template("{link}".into()))],
        when: None,
        unless: None,
        success: None,
        error_code: Some("/error_code".into()),
        error_message: Some("/error".into()),
        extract: extract
            .iter()
            .map(|(n, p)| ((*n).to_owned(), vec![(*p).to_owned()]))
            .collect(),
        files: None,
        best: None,
        poll: None,
    }
}

fn spec(steps: Vec<Step>) -> HttpSpec {
    HttpSpec {
        preset: None,
        base_url: Some("https://api.example/".into()),
        token: Some(Secret::new("tok")),
        steps,
        errors: vec![
            ("24".into(), Failure::DeadLink),
            ("8".into(), Failure::Auth),
        ],
        error_messages: Vec::new(),
        statuses: Vec::new(),
        generic_codes: Vec::new(),
        advice: Vec::new(),
        rate_steps: Vec::new(),
        hosts: None,
        link_check: None,
        account: None,
        connect_timeout: Duration::from_secs(1),
        timeout: Duration::from_secs(5),
        deadline: Duration::from_secs(20),
    }
}

fn body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn done(o: StepOutcome) -> Vars {
    match o {
        StepOutcome::Done(v, _) => v,
        StepOutcome::Again(_) => panic!("not done"),
    }
}

#[test]
fn templates_fill_in_values() {
    let s = spec(vec![]);
    let vars = s.start_vars("https://host.example/f");
    assert_eq!(
        Template("{base}/x?l={link}&t={token}".into())
            .render(&vars)
            .unwrap(),
        "https://api.example/x?l=https://host.example/f&t=tok"
    );
    assert!(Template("{id}".into()).render(&vars).is_err());
    assert_eq!(Template("a{b".into()).render(&vars).unwrap(), "a{b");
    assert_eq!(Template("{a}-{b}".into()).names(), ["a", "b"]);
}

#[test]
fn success_extracts_values() {
    let st = step(&[("download", "/download"), ("filename", "/filename")]);
    let s = spec(vec![st.clone()]);
    let long = format!("https://dl.example/{}", "x".repeat(500));
    let vars = done(
        s.interpret(
            &st,
            200,
            None,
            &body(json!({"download": long, "filename": "f.zip"})),
        )
        .unwrap(),
    );
    let r = s.finish(&vars, Vec::new()).unwrap();
    assert_eq!(r.download, long, "long URLs are kept whole");
    assert_eq!(r.filename.as_deref(), Some("f.zip"));
}

#[test]
fn errors_inside_http_200_and_classes_by_code() {
    let mut st = step(&[("download", "/data/link")]);
    st.success = Some(SuccessTest {
        pointer: "/status".into(),
        equals: json!("success"),
    });
    st.error_code = Some("/error/code".into());
    st.error_message = Some("/error/message".into());
    let mut s = spec(vec![st.clone()]);
    s.errors = vec![("LINK_DOWN".into(), Failure::DeadLink)];
    let e = s
        .interpret(
            &st,
            200,
            None,
            &body(json!({"status": "error", "error": {"code": "LINK_DOWN", "message": "Link is dead"}})),
        )
        .unwrap_err();
    assert_eq!(e.failure, Failure::DeadLink);
    assert_eq!(e.code.as_deref(), Some("LINK_DOWN"));
    assert_eq!(e.message.as_deref(), Some("Link is dead"));
    let e = s
        .interpret(
            &st,
            200,
            None,
            &body(json!({"status": "error", "error": {"code": "NEW_CODE"}})),
        )
        .unwrap_err();
    assert_eq!(
        e.failure,
        Failure::Rejected,
        "an unknown code is a plain refusal"
    );
}

#[test]
fn http_statuses_map_to_failures() {
    let st = step(&[("download", "/download")]);
    let s = spec(vec![st.clone()]);
    let err = |status, b: &[u8]| s.interpret(&st, status, Some(7), b).unwrap_err();
    let e = err(401, &body(json!({"error": "bad_token", "error_code": 8})));
    assert_eq!((e.failure, e.code.as_deref()), (Failure::Auth, Some("8")));
    assert_eq!(err(403, b"").failure, Failure::Auth);
    let e = err(429, b"");
    assert_eq!((e.failure, e.retry_after), (Failure::RateLimited, Some(7)));
    assert_eq!(err(400, b"{}").failure, Failure::Rejected);
    assert_eq!(
        err(503, &body(json!({"error_code": 9999}))).failure,
        Failure::Unavailable
    );
    let e = err(503, &body(json!({"error_code": 24})));
    assert_eq!(
        e.failure,
        Failure::DeadLink,
        "a known code beats the status"
    );
    assert!(e.detail.contains("dead_link"), "{}", e.detail);
    assert_eq!(err(302, b"").failure, Failure::BadAnswer);
    assert_eq!(
        err(404, &body(json!({"error_code": 24}))).failure,
        Failure::DeadLink
    );
}

#[test]
fn words_statuses_and_advice_class_what_codes_do_not() {
    let st = step(&[("download", "/download")]);
    let mut s = spec(vec![st.clone()]);
    s.error_messages = vec![("not logged in".into(), Failure::Auth)];
    s.statuses = vec![(503, Failure::RateLimited)];
    s.advice = vec![("auth".into(), "renew the token".into())];
    let err = |status, b: Value| s.interpret(&st, status, None, &body(b)).unwrap_err();
    let e = err(400, json!({"error": "Not logged in. Please log in first."}));
    assert_eq!(e.failure, Failure::Auth, "words, in any case");
    assert_eq!(e.advice.as_deref(), Some("renew the token"));
    let e = err(503, json!({}));
    assert_eq!(e.failure, Failure::RateLimited, "the provider's own 503");
    assert_eq!(e.advice, None);
    let e = err(503, json!({"error_code": 24}));
    assert_eq!(
        e.failure,
        Failure::DeadLink,
        "a known code beats the status"
    );
    let e = err(500, json!({}));
    assert_eq!(e.failure, Failure::Unavailable);
}

#[test]
fn a_catch_all_code_yields_to_what_an_error_status_means() {
    let st = step(&[("download", "/download")]);
    let mut s = spec(vec![st.clone()]);
    s.errors.push(("GENERIC".into(), Failure::Unavailable));
    s.generic_codes = vec!["GENERIC".into()];
    s.statuses = vec![(503, Failure::RateLimited)];
    let err = |status, b: Value| s.interpret(&st, status, None, &body(b)).unwrap_err();
    let generic = json!({"error_code": "GENERIC"});
    let e = err(503, generic.clone());
    assert_eq!(
        (e.failure, e.code.as_deref()),
        (Failure::RateLimited, Some("GENERIC")),
        "the provider's own 503"
    );
    assert_eq!(err(429, generic.clone()).failure, Failure::RateLimited);
    assert_eq!(err(401, generic.clone()).failure, Failure::Auth);
    assert_eq!(err(500, generic.clone()).failure, Failure::Unavailable);
    let mut ok_generic = generic.clone();
    ok_generic["status"] = json!("error");
    let mut st_success = st.clone();
    st_success.success = Some(SuccessTest {
        pointer: "/status".into(),
        equals: json!("success"),
    });
    let e = s
        .interpret(&st_success, 200, None, &body(ok_generic))
        .unwrap_err();
    assert_eq!(
        e.failure,
        Failure::Unavailable,
        "inside a 200 the code decides"
    );
    let e = err(503, json!({"error_code": 24}));
    assert_eq!(
        e.failure,
        Failure::DeadLink,
        "a code that says more still wins"
    );
}

#[test]
fn a_list_answer_gives_every_file_and_a_single_one_stays_as_before() {
    let mut st = step(&[
        ("download", "/value/downloadUrl"),
        ("filename", "/value/name"),
    ]);
    st.files = Some(FileList {
        list: "/value".into(),
        download: "/downloadUrl".into(),
        filename: Some("/name".into()),
    });
    let s = spec(vec![st.clone()]);
    let run = |b: Value| {
        let StepOutcome::Done(vars, files) = s.interpret(&st, 200, None, &body(b)).unwrap() else {
            panic!("not done")
        };
        s.finish(&vars, files).unwrap()
    };
    let r = run(json!({"value": [
        {"name": "a.bin", "downloadUrl": "https://dl.example/a"},
        {"name": "skipped", "downloadUrl": "javascript:alert(1)"},
        {"downloadUrl": "https://dl.example/b"}
    ]}));
    assert_eq!(r.download, "https://dl.example/a");
    assert_eq!(r.filename.as_deref(), Some("a.bin"));
    let got: Vec<(&str, Option<&str>)> = r
        .files
        .iter()
        .map(|f| (f.download.as_str(), f.filename.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("https://dl.example/a", Some("a.bin")),
            ("https://dl.example/b", None)
        ]
    );
    let r = run(json!({"value": {"name": "one.bin", "downloadUrl": "https://dl.example/1"}}));
    assert_eq!(
        (r.download.as_str(), r.files.len()),
        ("https://dl.example/1", 0)
    );
    let r = run(json!({"value": [{"name": "c", "downloadUrl": "https://dl.example/c"}]}));
    assert_eq!(
        (r.download.as_str(), r.files.len()),
        ("https://dl.example/c", 0)
    );
}

#[test]
fn the_best_choice_is_the_greatest_number() {
    let best = Best {
        list: "/streams".into(),
        by: "/quality".into(),
        take: "/id".into(),
        name: "stream".into(),
    };
    let pick = |v: Value| best_of(&v, &best);
    assert_eq!(
        pick(json!({"streams": [
            {"id": "140", "quality": "mp3"},
            {"id": "137+140", "quality": 1080},
            {"id": "398+140", "quality": 720}
        ]})),
        Some("137+140".into())
    );
    assert_eq!(
        pick(json!({"streams": [{"id": "a", "quality": "480p"}, {"id": "b", "quality": "720p"}]})),
        Some("b".into())
    );
    assert_eq!(
        pick(json!({"streams": [{"id": "x", "quality": "mp3"}, {"id": "y"}]})),
        Some("x".into()),
        "no number: the first"
    );
    assert_eq!(pick(json!({"streams": []})), None);
    assert_eq!(pick(json!({"streams": "no"})), None);
}

#[test]
fn a_host_list_is_read_and_matched_by_domain() {
    let list = HostList {
        url: Template("{base}/hosts/domains".into()),
        lists: vec!["/data/hosts".into(), "/data/streams".into()],
    };
    let domains = list.domains_in(&json!({"data": {
        "hosts": ["Mega.nz", "www.rapidgator.net", "1fichier.com", "bad domain", 7],
        "streams": ["youtube.com", "mega.nz"], "redirectors": ["adf.ly"]
    }}));
    assert_eq!(
        domains,
        ["1fichier.com", "mega.nz", "rapidgator.net", "youtube.com"]
    );
    for host in [
        "mega.nz",
        "MEGA.NZ",
        "www.mega.nz",
        "dl.sub.rapidgator.net",
        "youtube.com.",
    ] {
        assert!(host_listed(host, &domains), "{host}");
    }
    for host in [
        "adf.ly",
        "nz",
        "notmega.nz",
        "mega.nz.evil.example",
        "example.com",
        "",
    ] {
        assert!(!host_listed(host, &domains), "{host}");
    }
    assert!(list.domains_in(&json!({"other": 1})).is_empty());
}

#[test]
fn a_host_list_reads_a_whole_array_answer_and_each_hosts_domains() {
    let whole = HostList {
        url: Template("{base}/hosts/domains".into()),
        lists: vec![String::new()],
    };
    assert_eq!(
        whole.domains_in(&json!(["mega.nz", "1fichier.com"])),
        ["1fichier.com", "mega.nz"]
    );
    let each = HostList {
        url: Template("{base}/webdl/hosters".into()),
        lists: vec!["/data/*/domains".into()],
    };
    let answer = json!({"success": true, "data": [
        {"name": "mega", "domains": ["mega.nz", "mega.co.nz"]},
        {"name": "broken", "domains": "rapidgator.net"},
        {"name": "none"},
        {"name": "1fichier", "domains": ["1fichier.com"]}
    ]});
    assert_eq!(
        each.domains_in(&answer),
        ["1fichier.com", "mega.co.nz", "mega.nz"]
    );
    assert!(
        each.domains_in(&json!({"data": {"domains": ["x.example"]}}))
            .is_empty()
    );
    // A `*` that is only part of a key is a key.
    let key = HostList {
        url: Template("{base}/x".into()),
        lists: vec!["/data/*x".into()],
    };
    assert_eq!(
        key.domains_in(&json!({"data": {"*x": ["a.example"]}})),
        ["a.example"]
    );
}

#[test]
fn polling_steps() {
    let mut st = step(&[("download", "/data/link")]);
    st.poll = Some(Poll {
        interval: Duration::from_secs(5),
        until: SuccessTest {
            pointer: "/data/status".into(),
            equals: json!(2),
        },
        fail: Some(SuccessTest {
            pointer: "/data/status".into(),
            equals: json!(3),
        }),
        progress: Some(Progress {
            pointer: "/data/time_left".into(),
            unit: ProgressUnit::SecondsLeft,
        }),
    });
    let s = spec(vec![st.clone()]);
    let answer =
        |status: u64| body(json!({"data": {"status": status, "link": "https://dl.example/g"}}));
    assert_eq!(
        s.interpret(&st, 200, None, &answer(1)).unwrap(),
        StepOutcome::Again(None)
    );
    let failed = s.interpret(&st, 200, None, &answer(3)).unwrap_err();
    assert_eq!(failed.failure, Failure::Rejected);
    assert!(failed.job_failed, "a failed job says so, for its refund");
    let vars = done(s.interpret(&st, 200, None, &answer(2)).unwrap());
    assert_eq!(vars["download"], "https://dl.example/g");
    // A failed job whose answer names a known class is that failure, not a failed job.
    st.error_code = Some("/error".into());
    let mut s = spec(vec![st.clone()]);
    s.errors = vec![("LINK_DOWN".into(), Failure::DeadLink)];
    let e = s
        .interpret(
            &st,
            200,
            None,
            &body(json!({"data": {"status": 3}, "error": "LINK_DOWN"})),
        )
        .unwrap_err();
    assert_eq!((e.failure, e.job_failed), (Failure::DeadLink, false));
}

#[test]
fn odd_answers_are_bad_answers() {
    let st = step(&[("download", "/download")]);
    let s = spec(vec![st.clone()]);
    for b in [&b"not json"[..], b"", b"\xff\xfe"] {
        assert_eq!(
            s.interpret(&st, 200, None, b).unwrap_err().failure,
            Failure::BadAnswer
        );
    }
    for url in ["javascript:alert(1)", "/relative", "https://a b"] {
        let vars = done(
            s.interpret(&st, 200, None, &body(json!({"download": url})))
                .unwrap(),
        );
        assert_eq!(
            s.finish(&vars, Vec::new()).unwrap_err().failure,
            Failure::BadAnswer,
            "{url}"
        );
    }
    let vars = done(
        s.interpret(&st, 200, None, &body(json!({"other": 1})))
            .unwrap(),
    );
    assert_eq!(
        s.finish(&vars, Vec::new()).unwrap_err().failure,
        Failure::Rejected
    );
}

#[test]
fn provider_text_is_cleaned() {
    let st = step(&[]);
    let e = spec(vec![st.clone()])
        .interpret(
            &st,
            400,
            None,
            &body(json!({"error": format!("bad\r\nlink{}", "x".repeat(500))})),
        )
        .unwrap_err();
    let m = e.message.unwrap();
    assert!(!m.contains('\n') && !m.contains('\r'));
    assert_eq!(m.chars().count(), 200);
}
