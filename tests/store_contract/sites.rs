//! Sites for the scenarios that run the real program: a real Apache running the binary (under
//! mod_cgid, or mod_fcgid when RESOLVE_TEST_APACHE_MODE=fcgid) with a configuration for the
//! store under test, and a provider stand-in that counts the paid calls. Memory cannot be
//! shared between processes, so the memory store's sites run the same request handler (`App`)
//! in this process, on threads, with the store itself.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use resolve::app::App;
use resolve::config::Config;
use resolve::http::request::Env;
use resolve::provider::described::ProviderSpec;
use resolve::provider::http::HttpProvider;
use resolve::store::memory::MemoryStore;
use resolve::support::log::{Level, Log, format_line};
use serde_json::{Value, json};

use crate::stores::{StoreUnderTest, TestClock};
use crate::support::config;
use crate::support::urlenc::{encode, link_param};
use crate::support::{Apache, Provider, Request, TempDir, binary};

/// A rule of the sites' configurations: per client address.
pub fn rule(name: &str, algorithm: &str, limit: u64, window_secs: u64) -> Value {
    json!({"name": name, "key": "ip", "algorithm": algorithm, "limit": limit, "window_secs": window_secs})
}

/// One answer, as the client saw it.
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub rate_limit: Option<String>,
    pub policy: Option<String>,
    pub body: String,
    /// Status line, headers and body, for messages and secret searches.
    pub everything: String,
    /// The link asked for (each request asks for a link of its own).
    pub link: String,
    pub sent: Instant,
    /// What the program spent on the request: its Server-Timing under Apache, the call's
    /// time in process. Time bounds are checked on this (see `support::timing`).
    pub took: Duration,
    /// What the client waited.
    pub wall: Duration,
}

impl Reply {
    /// It went through the limiter: a store that failed adds no RateLimit headers.
    pub fn limited(&self) -> bool {
        self.rate_limit.is_some() && self.policy.is_some()
    }

    /// `r=` of the RateLimit header: what the key has left.
    pub fn remaining(&self) -> Option<u64> {
        self.rate_limit
            .as_deref()?
            .split(';')
            .find_map(|p| p.trim().strip_prefix("r="))?
            .parse()
            .ok()
    }

    /// `code` of a JSON problem answer.
    pub fn code(&self) -> Option<String> {
        let v: Value = serde_json::from_str(&self.body).ok()?;
        v["code"].as_str().map(str::to_owned)
    }
}

/// The links the provider stand-in was asked to resolve, in order.
pub fn asked_links(provider: &Provider) -> Vec<String> {
    provider
        .requests()
        .iter()
        .map(|r| r.param("link").expect("a link sent to the provider"))
        .collect()
}

/// Every request asks for a link of its own, so that no answer can come from anything but a
/// provider call (or the store's refusal).
static NEXT_LINK: AtomicUsize = AtomicUsize::new(1);

/// Log lines of the in-process sites, formatted as the program writes them.
struct Lines {
    secrets: Vec<String>,
    lines: Mutex<Vec<String>>,
}

impl Log for Lines {
    fn line(&self, level: Level, message: &str) {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format_line(level, message, &self.secrets));
    }
}

struct InProcess {
    store: MemoryStore<TestClock>,
    config: RwLock<Config>,
    log: Lines,
}

enum Runner {
    Apache(Apache),
    InProcess(Box<InProcess>),
}

/// A web site answering with the store under test. Fields drop in order: Apache stops first.
pub struct Site {
    runner: Runner,
    pub provider: Provider,
    config_path: PathBuf,
    dir: TempDir,
}

impl Site {
    pub fn start(sut: &dyn StoreUnderTest, label: &str, store: Value, rules: Vec<Value>) -> Site {
        let provider = Provider::start();
        let dir = TempDir::new(&format!("contract-site-{label}"));
        let config_path = dir.join("config.json");
        let value = config::site_config(&provider, store, rules);
        let runner = match sut.in_process() {
            Some(store) => {
                let config = Config::from_json(&value.to_string(), dir.path())
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                Runner::InProcess(Box::new(InProcess {
                    log: Lines {
                        secrets: resolve::support::secret::all_forms(&config.secrets()),
                        lines: Mutex::new(Vec::new()),
                    },
                    store,
                    config: RwLock::new(config),
                }))
            }
            None => {
                config::write(&dir, &value);
                Runner::Apache(
                    Apache::builder(label)
                        .resolve_cgi()
                        .set_env("RESOLVE_CONFIG", config_path.to_str().expect("utf-8 path"))
                        .start(),
                )
            }
        };
        Site {
            runner,
            provider,
            config_path,
            dir,
        }
    }

    /// Replaces the configuration at once (every request reads it afresh).
    pub fn configure(&self, store: Value, rules: Vec<Value>) {
        let value = config::site_config(&self.provider, store, rules);
        match &self.runner {
            Runner::InProcess(p) => {
                let config = Config::from_json(&value.to_string(), self.dir.path())
                    .unwrap_or_else(|e| panic!("{e}"));
                *p.config.write().unwrap_or_else(PoisonError::into_inner) = config;
            }
            Runner::Apache(_) => {
                let fresh = self.dir.write(
                    "config.json.new",
                    serde_json::to_vec_pretty(&value).expect("serialize config"),
                );
                std::fs::rename(&fresh, &self.config_path).expect("replace config.json");
            }
        }
    }

    /// One GET for a fresh link from `source` (an address on 127/8), asking for JSON.
    pub fn ask(&self, source: &str) -> Reply {
        let link = format!(
            "https://example.com/file/{}",
            NEXT_LINK.fetch_add(1, Ordering::SeqCst)
        );
        let sent = Instant::now();
        match &self.runner {
            Runner::Apache(apache) => {
                let target = format!("/cgi-bin/resolve?{}", link_param(&link));
                let client = apache
                    .client()
                    .bind_source(source)
                    .timeout(Duration::from_secs(60));
                let r = client
                    .send(&Request::get(&target).header("Accept", "application/json"))
                    .unwrap_or_else(|e| panic!("GET {target} from {source}: no answer: {e}"));
                let header = |name: &str| r.header(name).map(str::to_owned);
                Reply {
                    status: r.status,
                    retry_after: r.header("Retry-After").and_then(|v| v.parse().ok()),
                    rate_limit: header("RateLimit"),
                    policy: header("RateLimit-Policy"),
                    body: r.text(),
                    everything: r.everything(),
                    link,
                    sent,
                    took: r.program_took(),
                    wall: sent.elapsed(),
                }
            }
            Runner::InProcess(p) => {
                let config = p
                    .config
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let Some(ProviderSpec::Http(spec)) = &config.provider else {
                    panic!("the sites call the provider stand-in over HTTP");
                };
                let provider = HttpProvider::shared(spec.clone());
                let app = App {
                    config: &config,
                    store: &p.store.as_store(),
                    provider: Some(&provider),
                    others: &[],
                    log: &p.log,
                    clock: &resolve::core::clock::SystemClock,
                    workers: None,
                    site_check: None,
                    turn: None,
                };
                let env = Env::new()
                    .with("REQUEST_METHOD", "GET")
                    .with("QUERY_STRING", link_param(&link))
                    .with("REMOTE_ADDR", source)
                    .with("HTTP_ACCEPT", "application/json");
                let r = app.handle(&env, &mut std::io::empty()).response;
                let header = |name: &str| r.header_value(name).map(str::to_owned);
                let body = String::from_utf8_lossy(&r.body).into_owned();
                let mut everything = format!("{}\n", r.status);
                for (name, value) in &r.headers {
                    everything.push_str(&format!("{name}: {value}\n"));
                }
                everything.push_str(&body);
                Reply {
                    status: r.status,
                    retry_after: r.header_value("Retry-After").and_then(|v| v.parse().ok()),
                    rate_limit: header("RateLimit"),
                    policy: header("RateLimit-Policy"),
                    body,
                    everything,
                    link,
                    sent,
                    took: sent.elapsed(),
                    wall: sent.elapsed(),
                }
            }
        }
    }

    /// One POST of `links` (one a line, the `links` field) from `source`, asking for JSON: the
    /// status and the answer's JSON.
    pub fn ask_links(&self, source: &str, links: &[String]) -> (u16, Value) {
        let body = format!("links={}", encode(&links.join("\n")));
        let (status, text) = match &self.runner {
            Runner::Apache(apache) => {
                let client = apache
                    .client()
                    .bind_source(source)
                    .timeout(Duration::from_secs(90));
                let r = client
                    .send(
                        &Request::post_form("/cgi-bin/resolve", body)
                            .header("Accept", "application/json"),
                    )
                    .unwrap_or_else(|e| panic!("POST links from {source}: no answer: {e}"));
                (r.status, r.text())
            }
            Runner::InProcess(p) => {
                let config = p
                    .config
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let Some(ProviderSpec::Http(spec)) = &config.provider else {
                    panic!("the sites call the provider stand-in over HTTP");
                };
                let provider = HttpProvider::shared(spec.clone());
                let app = App {
                    config: &config,
                    store: &p.store.as_store(),
                    provider: Some(&provider),
                    others: &[],
                    log: &p.log,
                    clock: &resolve::core::clock::SystemClock,
                    workers: None,
                    site_check: None,
                    turn: None,
                };
                let env = Env::new()
                    .with("REQUEST_METHOD", "POST")
                    .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
                    .with("CONTENT_LENGTH", body.len().to_string())
                    .with("REMOTE_ADDR", source)
                    .with("HTTP_ACCEPT", "application/json");
                let r = app.handle(&env, &mut body.as_bytes()).response;
                (r.status, String::from_utf8_lossy(&r.body).into_owned())
            }
        };
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("the list's answer is not JSON ({e}): {text}"));
        (status, value)
    }

    /// Where the log ends now.
    pub fn log_mark(&self) -> usize {
        match &self.runner {
            Runner::Apache(apache) => {
                apache.settle_log();
                apache.error_log().len()
            }
            Runner::InProcess(p) => p
                .log
                .lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
        }
    }

    /// The program's log lines since `mark`.
    pub fn lines_since(&self, mark: usize) -> Vec<String> {
        match &self.runner {
            Runner::Apache(apache) => {
                apache.settle_log();
                let log = apache.error_log();
                log.get(mark..)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains("resolve: "))
                    .map(str::to_owned)
                    .collect()
            }
            Runner::InProcess(p) => p
                .log
                .lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(mark..)
                .unwrap_or_default()
                .to_vec(),
        }
    }

    /// `resolve check` on the site's configuration: exit code and everything it printed.
    pub fn check(&self) -> (i32, String) {
        assert!(
            matches!(self.runner, Runner::Apache(_)),
            "`resolve check` reads a configuration file"
        );
        let out = Command::new(binary())
            .arg("check")
            .arg("--config")
            .arg(&self.config_path)
            .env_remove("GATEWAY_INTERFACE")
            .env_remove("RESOLVE_CONFIG")
            .output()
            .expect("run resolve check");
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

/// `n` requests from `source` sent all at once (each on its own thread, released together),
/// request `i` to `sites[i % sites.len()]`; answers in request order, and how long it took.
pub fn all_at_once(sites: &[&Site], n: usize, source: &str) -> (Vec<Reply>, Duration) {
    let start = Barrier::new(n);
    let began = Instant::now();
    let replies = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (site, start) = (sites[i % sites.len()], &start);
                s.spawn(move || {
                    start.wait();
                    site.ask(source)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("request thread"))
            .collect()
    });
    (replies, began.elapsed())
}
