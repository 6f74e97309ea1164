//! Several providers in turn, through the binary run directly as CGI: two stand-ins of the
//! services' APIs on loopback, each counting the calls it is sent. A refusal of the server,
//! the account or the call for now sends the link to the next service; a link at fault does
//! not; each service's own spend counts its calls only.

mod support;

use serde_json::{Value, json};
use support::config::{self, TOKEN};
use support::system::{command, output_text};
use support::urlenc::link_param;
use support::{Cgi, CgiOutput, Provider, Reply, Setup, Site};

const RD_BASE: &str = "/rest/1.0";
const RD_CALL: &str = "/rest/1.0/unrestrict/link";
const AD_BASE: &str = "";
const AD_UNLOCK: &str = "/v4.1/link/unlock";
const POST: &str = "POST";

/// An entry of `providers` for preset `name` on stand-in `api`, without its free pre-checks
/// (each test's calls are its own), with the fields of `extra`.
fn entry(name: &str, api: &Provider, base: &str, extra: Value) -> Value {
    // The account is not read here: each stand-in counts the failover's calls only.
    let mut e = json!({"preset": name, "token": TOKEN, "base_url": api.url(base),
        "hosts": null, "link_check": null, "account": null});
    config::merge(&mut e, extra);
    e
}

/// A site whose `providers` are Real-Debrid on the setup's stand-in, then AllDebrid on
/// `second`, each with the fields given.
fn two_services(label: &str, second: &Provider, first_extra: Value, second_extra: Value) -> Setup {
    let second_entry = entry("alldebrid", second, AD_BASE, second_extra);
    Site::builder(label)
        .provider(Provider::builder().routes_only().start())
        .provider_section(move |api| {
            json!([entry("realdebrid", api, RD_BASE, first_extra), second_entry])
        })
        .config(|cfg| {
            let list = cfg["provider"].take();
            let map = cfg.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), list);
        })
        .write()
}

fn stand_in() -> Provider {
    Provider::builder().routes_only().start()
}

fn get(site: &Setup, link: &str) -> CgiOutput {
    site.run(
        Cgi::new("GET", link_param(link))
            .var("REMOTE_ADDR", "127.0.0.1")
            .header("Accept", "application/json"),
    )
}

fn status_body(out: &CgiOutput) -> (u16, Value) {
    let a = out.answer();
    let body = serde_json::from_slice(&a.body)
        .unwrap_or_else(|e| panic!("body is not JSON ({e})\n{}", out.describe()));
    (a.status, body)
}

fn rd_ok(name: &str) -> Reply {
    Reply::ok(json!({"download": format!("https://rd.example/d/{name}"), "filename": name}))
}

fn ad_ok(name: &str) -> Reply {
    Reply::ok(json!({"status": "success", "data": {
        "link": format!("https://ad.example/d/{name}"), "filename": name, "host": "hoster",
        "streams": [], "filesize": 1000, "id": "x1"}}))
}

fn command_text(site: &Setup, args: &[&str]) -> String {
    let mut cmd = command(args);
    cmd.arg("--config").arg(&site.config_path);
    let out = cmd.output().expect("run the binary");
    assert!(out.status.success(), "{args:?}: {}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stats(site: &Setup) -> Value {
    serde_json::from_str(&command_text(site, &["stats", "--json"])).expect("JSON")
}

#[test]
fn a_refused_server_address_sends_the_link_to_the_second_service() {
    let second = stand_in();
    let site = two_services("fo-22", &second, json!({}), json!({}));
    let first = &site.provider;
    first.route(
        POST,
        RD_CALL,
        Reply::json(403, json!({"error": "ip_not_allowed", "error_code": 22})),
    );
    second.route(POST, AD_UNLOCK, ad_ok("f.bin"));
    let out = get(&site, "https://hoster.example/f.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://ad.example/d/f.bin");
    assert_eq!(first.calls(), 1, "the first service asked once");
    assert_eq!(
        second.calls(),
        1,
        "exactly one call to the second, which served"
    );
    assert!(
        out.stderr
            .contains("realdebrid refused this server's address (22); asked alldebrid instead"),
        "{}",
        out.stderr
    );
    let s = stats(&site);
    assert_eq!(s["provider_failures"]["server_refused"], 1, "{s:#}");
    assert_eq!(s["paid_calls"], 2, "both calls reached a service: {s:#}");
    assert_eq!(
        s["services"],
        json!({"realdebrid": {"calls": 1, "bytes": 0, "failures": {"server_refused": 1}},
               "alldebrid": {"calls": 1, "bytes": 1000, "failures": {}}}),
        "{s:#}"
    );
    let kept = s["action_needed"].to_string();
    assert!(
        kept.contains("ACTION NEEDED") && kept.contains("server's address"),
        "the refusal is kept for the owner: {s:#}"
    );
    let text = command_text(&site, &["stats"]);
    assert!(
        text.contains("  realdebrid: 1 call, 1 failed (server_refused 1)")
            && text.contains("  alldebrid: 1 call, 1000 bytes (1 kB)\n"),
        "{text}"
    );
}

#[test]
fn alldebrid_first_refusing_the_server_fails_over_to_realdebrid() {
    let first = stand_in();
    let second_entry = {
        let api = stand_in();
        let e = entry("realdebrid", &api, RD_BASE, json!({}));
        (api, e)
    };
    let (second, second_json) = second_entry;
    let site = Site::builder("fo-noserver")
        .provider(first)
        .provider_section(move |api| {
            json!([entry("alldebrid", api, AD_BASE, json!({})), second_json])
        })
        .config(|cfg| {
            let list = cfg["provider"].take();
            let map = cfg.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), list);
        })
        .write();
    site.provider.route(
        POST,
        AD_UNLOCK,
        Reply::ok(json!({"status": "error", "error": {"code": "NO_SERVER",
            "message": "Servers are not allowed to use this feature"}})),
    );
    second.route(POST, RD_CALL, rd_ok("g.bin"));
    let out = get(&site, "https://hoster.example/g.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://rd.example/d/g.bin");
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
    assert!(
        out.stderr.contains(
            "alldebrid refused this server's address (NO_SERVER); asked realdebrid instead"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn a_dead_link_is_not_asked_of_the_second_service() {
    let second = stand_in();
    let site = two_services("fo-dead", &second, json!({}), json!({}));
    site.provider.route(
        POST,
        RD_CALL,
        Reply::json(503, json!({"error": "unavailable_file", "error_code": 24})),
    );
    second.route(POST, AD_UNLOCK, ad_ok("h.bin"));
    let out = get(&site, "https://hoster.example/h.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 422, "{}", out.describe());
    assert_eq!(body["code"], "dead_link", "{body}");
    assert_eq!((site.provider.calls(), second.calls()), (1, 0));
    assert!(!out.stderr.contains("instead"), "{}", out.stderr);
}

#[test]
fn when_every_service_refuses_the_visitor_reads_the_last_answer() {
    let second = stand_in();
    let site = two_services("fo-all", &second, json!({}), json!({}));
    site.provider.route(
        POST,
        RD_CALL,
        Reply::json(403, json!({"error": "ip_not_allowed", "error_code": 22})),
    );
    second.route(
        POST,
        AD_UNLOCK,
        Reply::ok(
            json!({"status": "error", "error": {"code": "LINK_HOST_UNAVAILABLE",
            "message": "Host is under maintenance"}}),
        ),
    );
    let out = get(&site, "https://hoster.example/i.bin");
    let (status, body) = status_body(&out);
    assert_eq!(
        status,
        503,
        "the second's answer, the host unavailable: {}",
        out.describe()
    );
    assert_eq!(body["code"], "host_unavailable", "{body}");
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
}

#[test]
fn the_first_services_own_spend_used_up_sends_links_to_the_second() {
    let second = stand_in();
    let site = two_services(
        "fo-spend",
        &second,
        json!({"spend": [{"name": "rd-day", "limit": 1, "window_secs": 86400}]}),
        json!({"spend": [{"name": "ad-day", "limit": 1, "window_secs": 86400}]}),
    );
    site.provider.route(POST, RD_CALL, rd_ok("j.bin"));
    second.route(POST, AD_UNLOCK, ad_ok("k.bin"));
    let (status, body) = status_body(&get(&site, "https://hoster.example/j.bin"));
    assert_eq!(
        (status, &body["download"]),
        (200, &json!("https://rd.example/d/j.bin"))
    );
    let out = get(&site, "https://hoster.example/k.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://ad.example/d/k.bin");
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
    assert!(
        out.stderr.contains(
            "realdebrid: limit rd-day reached (1 paid calls per 86400 s); asked alldebrid instead"
        ),
        "{}",
        out.stderr
    );
    // The second service served: the first's spend used up refused nothing.
    let s = stats(&site);
    assert_eq!(s["spend_refused"], json!({}), "{s:#}");
    // Both used up: no service serves, and each refusal is counted.
    let out = get(&site, "https://hoster.example/n.bin");
    assert_eq!(out.answer().status, 503, "{}", out.describe());
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
    let s = stats(&site);
    assert_eq!(
        s["spend_refused"],
        json!({"rd-day": 1, "ad-day": 1}),
        "{s:#}"
    );
}

/// The first service at its own rate (`rate_limits`, counted before its call): the link goes
/// to the second instead of a 503, as when its spend is used up; with both at their rate, the
/// 503 and each refusal counted.
#[test]
fn the_first_services_rate_reached_sends_links_to_the_second() {
    let second = stand_in();
    let site = two_services(
        "fo-rate",
        &second,
        json!({"rate_limits": [{"name": "rd-minute", "limit": 1, "window_secs": 600}]}),
        json!({"rate_limits": [{"name": "ad-minute", "limit": 1, "window_secs": 600}]}),
    );
    site.provider.route(POST, RD_CALL, rd_ok("r.bin"));
    second.route(POST, AD_UNLOCK, ad_ok("s.bin"));
    let (status, body) = status_body(&get(&site, "https://hoster.example/r.bin"));
    assert_eq!(
        (status, &body["download"]),
        (200, &json!("https://rd.example/d/r.bin"))
    );
    let out = get(&site, "https://hoster.example/s.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://ad.example/d/s.bin");
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
    assert!(
        out.stderr.contains(
            "realdebrid: limit rd-minute reached (1 paid calls per 600 s); asked alldebrid instead"
        ),
        "{}",
        out.stderr
    );
    let s = stats(&site);
    assert_eq!(s["spend_refused"], json!({}), "{s:#}");
    // Both at their rate: no service is asked, and each refusal is counted.
    let out = get(&site, "https://hoster.example/t.bin");
    assert_eq!(out.answer().status, 503, "{}", out.describe());
    assert!(
        out.answer().header("Retry-After").is_some(),
        "{}",
        out.describe()
    );
    assert_eq!((site.provider.calls(), second.calls()), (1, 1));
    let s = stats(&site);
    assert_eq!(
        s["spend_refused"],
        json!({"rd-minute": 1, "alldebrid-ad-minute": 1}),
        "{s:#}"
    );
}

/// A job under way at the second service after the first refused the server: kept with its
/// service and polled there, never at the first nor paid again.
#[test]
fn a_long_job_started_at_the_second_service_is_polled_there() {
    let second = stand_in();
    let custom = json!({
        "name": "jobs", "kind": "http", "token": TOKEN, "base_url": second.url("/api"),
        "connect_timeout_ms": 1500, "timeout_ms": 2500, "deadline_ms": 2500,
        "steps": [
            {"method": "POST", "url": "{base}/create",
             "headers": {"Authorization": "Bearer {token}"}, "form": {"link": "{link}"},
             "extract": {"id": "/id"}},
            {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
             "headers": {"Authorization": "Bearer {token}"},
             "poll": {"interval_ms": 1000, "until": {"pointer": "/done", "equals": true},
                      "progress": {"pointer": "/progress", "unit": "fraction"}},
             "extract": {"download": "/link", "filename": "/name"}}
        ]
    });
    let site = Site::builder("fo-job")
        .provider(Provider::builder().routes_only().start())
        .provider_section(move |api| json!([entry("realdebrid", api, RD_BASE, json!({})), custom]))
        .config(|cfg| {
            let list = cfg["provider"].take();
            let map = cfg.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), list);
        })
        .write();
    let first = &site.provider;
    first.route(
        POST,
        RD_CALL,
        Reply::json(403, json!({"error": "ip_not_allowed", "error_code": 22})),
    );
    second.route(POST, "/api/create", Reply::ok(json!({"id": 7})));
    second.route(
        "GET",
        "/api/status",
        Reply::ok(json!({"done": false, "progress": 0.4})),
    );
    let link = "https://hoster.example/big.iso";
    let out = get(&site, link);
    let (status, body) = status_body(&out);
    assert_eq!(status, 202, "kept, not a timeout: {}", out.describe());
    assert_eq!(body["progress"], "40% done", "{body}");
    assert_eq!(first.calls_to(POST, RD_CALL), 1);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    second.route(
        "GET",
        "/api/status",
        Reply::ok(
            json!({"done": true, "link": "https://jobs.example/d/big.iso", "name": "big.iso"}),
        ),
    );
    let out = get(&site, link);
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://jobs.example/d/big.iso");
    assert_eq!(
        first.calls_to(POST, RD_CALL),
        1,
        "the first service is not asked again"
    );
    assert_eq!(second.calls_to(POST, "/api/create"), 1, "paid for once");
}

#[test]
fn the_host_list_of_the_second_service_routes_a_link_straight_to_it() {
    let second = stand_in();
    let site = two_services(
        "fo-hosts",
        &second,
        json!({"hosts": {"url": "{base}/hosts/domains", "lists": [""]}}),
        json!({"hosts": {"url": "{base}/hosts", "lists": [""]}}),
    );
    let first = &site.provider;
    first.route(
        "GET",
        "/rest/1.0/hosts/domains",
        Reply::ok(json!(["other.example"])),
    );
    first.route(POST, RD_CALL, rd_ok("l.bin"));
    second.route("GET", "/hosts", Reply::ok(json!(["hoster.example"])));
    second.route(POST, AD_UNLOCK, ad_ok("l.bin"));
    let out = get(&site, "https://hoster.example/l.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://ad.example/d/l.bin");
    assert_eq!(
        first.calls_to(POST, RD_CALL),
        0,
        "not asked: its list does not name the host"
    );
    assert_eq!(second.calls_to(POST, AD_UNLOCK), 1);
    // A host no list names goes to the first, as with no list at all.
    let out = get(&site, "https://elsewhere.example/m.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(body["download"], "https://rd.example/d/l.bin");
    assert_eq!(first.calls_to(POST, RD_CALL), 1);
    assert_eq!(second.calls_to(POST, AD_UNLOCK), 1);
    // Each list fetched once, and kept.
    assert_eq!(first.calls_to("GET", "/rest/1.0/hosts/domains"), 1);
    assert_eq!(second.calls_to("GET", "/hosts"), 1);
}

/// AllDebrid first (no free link check), then Real-Debrid with its free `unrestrict/check`
/// (its documentation: 503 "File unavailable"): the second service's check is used before any
/// paid call, and `resolve check --live` calls each service once, reporting each by name.
#[test]
fn the_free_link_check_and_the_live_check_use_each_service() {
    let rd = stand_in();
    let rd_json = entry(
        "realdebrid",
        &rd,
        RD_BASE,
        json!({"link_check": {"url": "{base}/unrestrict/check", "field": "link",
                              "dead_statuses": [503], "size": "/filesize"}}),
    );
    let site = Site::builder("fo-check")
        .provider(stand_in())
        .provider_section(move |api| json!([entry("alldebrid", api, AD_BASE, json!({})), rd_json]))
        .config(|cfg| {
            let list = cfg["provider"].take();
            let map = cfg.as_object_mut().expect("an object");
            map.remove("provider");
            map.insert("providers".into(), list);
        })
        .write();
    let ad = &site.provider;
    ad.route(POST, AD_UNLOCK, ad_ok("dead.bin"));
    rd.route(POST, RD_CALL, rd_ok("dead.bin"));
    rd.route(
        POST,
        "/rest/1.0/unrestrict/check",
        Reply::json(503, json!({"error": "file_unavailable", "error_code": 19})),
    );
    let out = get(&site, "https://hoster.example/dead.bin");
    let (status, body) = status_body(&out);
    assert_eq!(status, 422, "{}", out.describe());
    assert_eq!(body["code"], "dead_link", "{body}");
    assert_eq!(ad.calls_to(POST, AD_UNLOCK), 0, "no paid call");
    assert_eq!(rd.calls_to(POST, RD_CALL), 0, "no paid call");
    assert_eq!(rd.calls_to(POST, "/rest/1.0/unrestrict/check"), 1);
    assert!(
        out.stderr.contains("realdebrid's free link check finds"),
        "{}",
        out.stderr
    );

    // `check --live`: one call to each service, each reported by its name.
    let mut cmd = command(&["check", "--live", "https://hoster.example/live.bin"]);
    cmd.arg("--config").arg(&site.config_path);
    let run = cmd.output().expect("run the binary");
    let text = output_text(&run);
    assert!(run.status.success(), "{text}");
    for line in [
        "LIVE: calling alldebrid once for https://hoster.example/live.bin",
        "ok   live (alldebrid): resolved in ",
        "LIVE: calling realdebrid once for https://hoster.example/live.bin",
        "ok   live (realdebrid): resolved in ",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    assert_eq!(ad.calls_to(POST, AD_UNLOCK), 1);
    assert_eq!(rd.calls_to(POST, RD_CALL), 1);
}
