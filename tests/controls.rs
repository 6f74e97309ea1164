//! The owner's controls, run as Apache runs the binary (CGI variables, one process per request)
//! on every store: Cloudflare's edges by name, block and allow lists, `resolve block` with a
//! real expiry, automatic blocks at their exact threshold, and shadow rules over a burst.
//! Through Apache (mod_cgid or mod_fcgid, as run-all.sh chooses), a client in a Cloudflare
//! range inside a network namespace this test makes: nothing leaves the machine.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::client::par_map;
use support::config::rule;
use support::{Cgi, MariaDb, Redis, Setup, Site, binary};

const LINK: &str = "link=https%3A%2F%2Fhost.example%2Ff";

/// One request from `remote` (REMOTE_ADDR), with these extra headers; its status and stderr.
fn ask(setup: &Setup, remote: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut cgi = Cgi::new("GET", LINK).var("REMOTE_ADDR", remote);
    for (name, value) in headers {
        cgi = cgi.header(name, value);
    }
    let out = setup.run(cgi);
    (out.answer().status, out.stderr)
}

/// What a blocked client reads, whatever the store and the list.
const BLOCKED: &str = "Requests from your address are blocked on this service.";

/// The body of one plain-text answer to `remote`, with its status.
fn ask_text(setup: &Setup, remote: &str) -> (u16, String) {
    let cgi = Cgi::new("GET", LINK)
        .var("REMOTE_ADDR", remote)
        .header("Accept", "text/plain");
    let out = setup.run(cgi);
    let answer = out.answer();
    (
        answer.status,
        String::from_utf8_lossy(&answer.body).into_owned(),
    )
}

fn command(config: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env_remove("RESOLVE_CONFIG");
    String::from_utf8(support::system::succeeded(
        &mut cmd,
        &format!("resolve {args:?}"),
    ))
    .expect("utf-8")
}

fn stats(config: &Path) -> Value {
    serde_json::from_str(&command(config, &["stats", "--json"])).expect("JSON")
}

/// The three stores, each for one test body. Database servers shared with the other tests of
/// a loaded machine get time to answer, and a store failure refuses (503) rather than admits:
/// exactness is about the limiter, and a failure must show, never pass for an admission.
fn on_every_store(label: &str, body: impl Fn(Option<Value>, &str)) {
    body(None, &format!("{label}-file"));
    let db = MariaDb::start();
    body(
        Some(
            json!({"kind": "mysql", "url": db.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
        ),
        &format!("{label}-mysql"),
    );
    let redis = Redis::start();
    body(
        Some(
            json!({"kind": "redis", "url": redis.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
        ),
        &format!("{label}-redis"),
    );
}

fn setup(
    label: &str,
    store: Option<Value>,
    rules: Vec<Value>,
    edit: impl FnOnce(&mut Value) + 'static,
) -> Setup {
    let mut b = Setup::builder(label).rules(rules).config(edit);
    if let Some(store) = store {
        b = b.store(store);
    }
    b.write()
}

#[test]
fn a_hundred_visitors_behind_one_cloudflare_edge_each_get_their_own_limit() {
    on_every_store("cf", |store, label| {
        let s = setup(label, store, vec![rule("ip", "ip", 30, 3600)], |c| {
            c["client"] = json!({"trusted_proxies": ["cloudflare"]});
        });
        // 100 visitors, 31 requests each, all from one edge: 30 admitted each.
        let results = par_map(100 * 31, 8, |i| {
            let visitor = format!("203.0.113.{}", i % 100);
            ask(&s, "172.64.1.1", &[("CF-Connecting-IP", &visitor)])
        });
        let admitted = results.iter().filter(|s| s.0 == 200).count();
        let refused = results.iter().filter(|s| s.0 == 429).count();
        let log: String = results.iter().map(|r| r.1.as_str()).collect();
        assert_eq!((admitted, refused), (3000, 100), "{label}: {log}");
        assert_eq!(s.provider.calls(), 3000, "{label}");
        // The same header from an address that is not Cloudflare's is ignored.
        let forged: Vec<u16> = (0..31)
            .map(|i| {
                let visitor = format!("198.51.100.{i}");
                ask(&s, "192.0.2.99", &[("CF-Connecting-IP", &visitor)]).0
            })
            .collect();
        assert_eq!(
            forged.iter().filter(|s| **s == 429).count(),
            1,
            "{label}: {forged:?}"
        );
        let st = stats(&s.config_path);
        let clients = st["top_clients"].as_array().unwrap();
        assert!(
            clients.iter().any(|c| c["client"] == "192.0.2.99"),
            "{label}"
        );
        assert!(
            !clients.iter().any(|c| c["client"] == "198.51.100.0"),
            "{label}"
        );
        assert_eq!(st["untrusted_networks"], json!({}), "{label}");
    });
}

#[test]
fn untrusted_cloudflare_edges_are_counted_and_check_says_the_fix() {
    let s = setup(
        "cf-untrusted",
        None,
        vec![rule("ip", "ip", 2, 3600)],
        |_| {},
    );
    let statuses: Vec<u16> = (0..3)
        .map(|i| {
            ask(
                &s,
                "2606:4700::1",
                &[("CF-Connecting-IP", &format!("203.0.113.{i}"))],
            )
            .0
        })
        .collect();
    assert_eq!(statuses, [200, 200, 429], "one counter for the edge");
    let check = || {
        let out = Command::new(binary())
            .args(["check", "--config"])
            .arg(&s.config_path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = check();
    assert!(
        text.contains("WARN 3 requests in the last 24 hours came from cloudflare's edges"),
        "{text}"
    );
    assert!(
        text.contains(r#"Fix: "client": {"trusted_proxies": ["cloudflare"]}"#),
        "{text}"
    );
    s.edit_config(|c| c["client"] = json!({"trusted_proxies": ["cloudflare"]}));
    let text = check();
    // The day the shipped ranges were taken from Cloudflare's lists, as the source has it.
    let date = resolve::net::cdn::CLOUDFLARE_RANGES_DATE;
    assert!(
        text.contains(&format!(
            "cloudflare's edges are trusted by name (22 ranges, its published lists as taken on {date};"
        )),
        "{text}"
    );
}

#[test]
fn block_and_allow_lists_by_address_and_range_before_any_count_or_call() {
    on_every_store("lists", |store, label| {
        let s = setup(label, store, vec![rule("ip", "ip", 2, 3600)], |c| {
            c["block"] = json!([
                "192.0.2.7",
                "198.51.100.0/24",
                "2001:db8:bad::/48",
                "2001:db8:dead::7"
            ]);
            c["allow"] = json!([
                "203.0.113.0/24",
                "2001:db8:600d::/48",
                "192.0.2.200",
                "2001:db8:700d::5"
            ]);
        });
        let mut log = String::new();
        for addr in [
            "192.0.2.7",
            "198.51.100.77",
            "2001:db8:bad:1::9",
            "2001:db8:dead::7",
        ] {
            for _ in 0..5 {
                let (status, stderr) = ask(&s, addr, &[]);
                assert_eq!(status, 403, "{label} {addr}");
                log.push_str(&stderr);
            }
        }
        assert_eq!(s.provider.calls(), 0, "{label}: nothing paid");
        // One line per client in the minute, not one per request.
        assert_eq!(
            log.matches("blocked, it is in the configuration's block list")
                .count(),
            4,
            "{label}: {log}"
        );
        assert_eq!(
            ask_text(&s, "2001:db8:dead::7"),
            (403, format!("{BLOCKED}\n")),
            "{label}: one sentence"
        );
        // Allowed past the ip rule; neighbours of single addresses neither blocked nor allowed.
        let allowed = [
            "203.0.113.5",
            "2001:db8:600d:1::1",
            "192.0.2.200",
            "2001:db8:700d::5",
        ];
        let neighbours = [
            "192.0.2.8",
            "192.0.2.201",
            "2001:db8:dead::8",
            "2001:db8:700d::6",
        ];
        let expected = allowed
            .iter()
            .map(|a| (*a, vec![200; 4]))
            .chain(neighbours.iter().map(|a| (*a, vec![200, 200, 429])));
        for (addr, want) in expected {
            let statuses: Vec<u16> = want.iter().map(|_| ask(&s, addr, &[]).0).collect();
            assert_eq!(statuses, want, "{label} {addr}");
        }
        let st = stats(&s.config_path);
        assert_eq!(st["blocked"], 21, "{label}");
        assert_eq!(st["paid_calls"], 24, "{label}");
    });
}

#[test]
fn a_temporary_block_ends_on_time_and_unblock_lifts_one_at_once() {
    on_every_store("block-for", |store, label| {
        let s = setup(label, store, vec![rule("ip", "ip", 100, 3600)], |_| {});
        let said = command(
            &s.config_path,
            &[
                "block",
                "192.0.2.0/24",
                "--for",
                "3s",
                "--reason",
                "scraper",
            ],
        );
        let until = said
            .strip_prefix("blocked 192.0.2.0/24 until ")
            .and_then(|rest| rest.strip_suffix(" (UTC)\n"))
            .unwrap_or_else(|| panic!("{said}"));
        command(&s.config_path, &["block", "2001:db8::/32"]);
        // Range, end and who set it with the reason, in columns.
        let listed = command(&s.config_path, &["blocks"]);
        let lines: Vec<&str> = listed.lines().collect();
        assert_eq!(
            lines[..2],
            [
                format!(
                    "{:<43} until {until} resolve block: scraper",
                    "192.0.2.0/24"
                ),
                format!(
                    "{:<43} {:<26} resolve block: blocked by the owner",
                    "2001:db8::/32", "until unblocked"
                ),
            ],
            "{label}: {listed}"
        );
        assert_eq!(ask(&s, "192.0.2.9", &[]).0, 403, "{label}");
        assert_eq!(ask(&s, "2001:db8:1::1", &[]).0, 403, "{label}");
        assert_eq!(ask(&s, "192.0.3.9", &[]).0, 200, "{label}");
        std::thread::sleep(std::time::Duration::from_millis(3200));
        assert_eq!(ask(&s, "192.0.2.9", &[]).0, 200, "{label}: the block ended");
        assert!(!command(&s.config_path, &["blocks"]).contains("192.0.2.0/24"));
        assert_eq!(
            command(&s.config_path, &["unblock", "2001:db8::/32"]),
            "unblocked 2001:db8::/32\n"
        );
        assert_eq!(ask(&s, "2001:db8:1::1", &[]).0, 200, "{label}: lifted");
    });
}

#[test]
fn auto_block_triggers_at_exactly_the_threshold_under_concurrency() {
    on_every_store("auto-block", |store, label| {
        let s = setup(label, store, vec![rule("ip", "ip", 5, 3600)], |c| {
            c["auto_block"] = json!({"refusals": 40, "window_secs": 600, "block_secs": 3600});
        });
        // 200 at once from one client: 5 admitted, 40 refusals reach the threshold, the rest
        // are refused either way (429 until the block lands, 403 after).
        let results = par_map(200, 16, |_| ask(&s, "192.0.2.44", &[]));
        let count = |code: u16| results.iter().filter(|r| r.0 == code).count();
        let log: String = results.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(count(200), 5, "{label}: {log}");
        assert_eq!(count(200) + count(429) + count(403), 200, "{label}");
        assert!(count(429) >= 40, "{label}: {} refusals", count(429));
        let log: String = results.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(
            log.matches("blocked 192.0.2.44 for 3600 s").count(),
            1,
            "{label}: {log}"
        );
        assert_eq!(ask(&s, "192.0.2.44", &[]).0, 403, "{label}");
        let st = stats(&s.config_path);
        assert_eq!(st["auto_blocks"], 1, "{label}");
        let text = command(&s.config_path, &["stats"]);
        assert!(
            text.contains("(1 client blocked automatically)"),
            "{label}: {text}"
        );
        assert!(command(&s.config_path, &["blocks"]).contains("192.0.2.44/32"));
        assert_eq!(s.provider.calls(), 5, "{label}");
    });
}

#[test]
fn a_shadow_rule_over_a_burst_refuses_nothing_and_reports_exactly() {
    on_every_store("shadow", |store, label| {
        let mut tight = rule("tight", "ip", 30, 3600);
        tight["mode"] = json!("shadow");
        let s = setup(
            label,
            store,
            vec![rule("ip", "ip", 1000, 3600), tight],
            |_| {},
        );
        let results = par_map(300, 16, |_| ask(&s, "192.0.2.1", &[]));
        assert!(
            results.iter().all(|r| r.0 == 200),
            "{label}: nothing refused"
        );
        assert_eq!(s.provider.calls(), 300, "{label}");
        let st = stats(&s.config_path);
        assert_eq!(st["would_refuse"], json!({"tight": 270}), "{label}");
        let text = command(&s.config_path, &["stats"]);
        assert!(
            text.contains("Shadow rules:      270 would have been refused (tight 270)\n"),
            "{label}: {text}"
        );
        assert_eq!(st["refused"], json!({}), "{label}");
        let log: String = results.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(
            log.matches("shadow rule tight would have refused 192.0.2.1")
                .count(),
            1,
            "{label}"
        );
    });
}

/// A network namespace with one end of a veth pair holding `client_addr`, the other end (in
/// this namespace) `host_addr`; removed when dropped.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str, host_addr: &str, client_addr: &str, prefix: u8) -> Netns {
        let name = format!("rs{}{}", tag, std::process::id() % 100_000);
        let (host_if, ns_if) = (format!("{name}h"), format!("{name}n"));
        let ip = |args: &[&str]| {
            support::system::succeeded(Command::new("ip").args(args), &format!("ip {args:?}"));
        };
        let ns = Netns { name: name.clone() };
        ip(&["netns", "add", &name]);
        ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
        ]);
        ip(&["link", "set", &ns_if, "netns", &name]);
        ip(&[
            "addr",
            "add",
            &format!("{host_addr}/{prefix}"),
            "dev",
            &host_if,
        ]);
        ip(&["link", "set", &host_if, "up"]);
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{client_addr}/{prefix}"),
            "dev",
            &ns_if,
        ]);
        ip(&["-n", &name, "link", "set", &ns_if, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        ns
    }

    /// curl run inside the namespace; the status.
    fn get(&self, url: &str, headers: &[(&str, &str)]) -> u16 {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.name,
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "20",
        ]);
        for (name, value) in headers {
            cmd.arg("-H").arg(format!("{name}: {value}"));
        }
        let out = cmd.arg(url).output().expect("curl");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}h", self.name)])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Through Apache: requests from an address in Cloudflare's range (inside a namespace made
/// here) are counted by CF-Connecting-IP when trusted; the same header from loopback is not.
#[test]
fn through_apache_a_cloudflare_edge_names_its_visitors() {
    if !support::is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "network namespaces need root on CI"
        );
        eprintln!("skipped: network namespaces need root");
        return;
    }
    // Both ends on this machine: the edge address lives on a veth inside the namespace.
    let ns = Netns::new("cf", "173.245.48.254", "173.245.48.1", 24);
    let port = support::free_port();
    let site = Site::builder("cf-apache")
        .rules(vec![rule("ip", "ip", 3, 3600)])
        .config(|c| c["client"] = json!({"trusted_proxies": ["cloudflare"]}))
        .apache(move |a| a.conf(&format!("Listen 173.245.48.254:{port}\n")))
        .start();
    let url = format!("http://173.245.48.254:{port}/cgi-bin/resolve?{LINK}");
    for visitor in ["203.0.113.1", "203.0.113.2"] {
        let statuses: Vec<u16> = (0..4)
            .map(|_| {
                ns.get(
                    &url,
                    &[
                        ("CF-Connecting-IP", visitor),
                        ("Accept", "application/json"),
                    ],
                )
            })
            .collect();
        assert_eq!(
            statuses,
            [200, 200, 200, 429],
            "{visitor} has its own count"
        );
    }
    // From loopback the header is a forgery: one count for 127.0.0.1.
    let local: Vec<u16> = (0..4)
        .map(|i| {
            site.client()
                .send(
                    &support::Request::get(&format!("/cgi-bin/resolve?{LINK}"))
                        .header("CF-Connecting-IP", &format!("203.0.113.{}", 10 + i)),
                )
                .unwrap()
                .status
        })
        .collect();
    assert_eq!(local, [200, 200, 200, 429]);
    assert_eq!(site.provider.calls(), 9);
}
