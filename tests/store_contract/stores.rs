//! The four stores under test. Each starts its backing store for one test (nothing, a data
//! directory, a real MariaDB, a real Redis), opens handles on it as a server process would,
//! tells the time its decisions are made by, looks into what it holds, and can be killed and
//! restarted. The networked ones can also be slowed down (through a delaying proxy) and given
//! wrong credentials; the file store can be slowed down by a lock another process holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use resolve::config::Config;
use resolve::core::clock::Clock;
use resolve::core::rule::{Algorithm, Rule};
use resolve::store::memory::MemoryStore;
use resolve::store::roles::Backend;
use resolve::store::settings::StoreKind;
use serde_json::{Value, json};

use crate::support::DelayProxy;
use crate::support::delay_proxy::Mode;

#[path = "stores/files.rs"]
mod files;
#[path = "stores/memory.rs"]
mod memory;
#[path = "stores/mysql.rs"]
mod mysql;
#[path = "stores/redis.rs"]
mod redis;
#[path = "stores/redis_cluster.rs"]
mod redis_cluster;

pub use files::InFiles;
pub use memory::InMemory;
pub use mysql::InMysql;
pub use redis::InRedis;
pub use redis_cluster::InRedisCluster;

/// `Retry-After` of the 503 a failing store gets with `on_error: deny`.
pub const DENY_RETRY_AFTER: u64 = 7;
/// What a failing request may take beyond the store's own bound: starting the program, Apache,
/// a machine busy with other builds.
pub const SLACK: Duration = Duration::from_millis(3000);

/// Milliseconds since 1970 on this machine's clock, which the database servers share.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn sleep_until(ms: u64) {
    loop {
        let now = wall_ms();
        if now >= ms {
            return;
        }
        std::thread::sleep(Duration::from_millis(ms - now));
    }
}

/// A clock held still and moved by the test, shared by every handle made from it.
#[derive(Clone, Debug)]
pub struct TestClock(Arc<AtomicU64>);

impl TestClock {
    pub fn held_at(ms: u64) -> TestClock {
        TestClock(Arc::new(AtomicU64::new(ms)))
    }

    /// Moves the clock forward to `ms` (never backward).
    pub fn advance_to(&self, ms: u64) {
        self.0.fetch_max(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `ms`, backward too.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The timeouts of a site's store section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeouts {
    /// Long enough that a healthy store never hits them, even with hundreds of requests
    /// queued on one key on a busy machine.
    Patient,
    /// Short, for the tests that wait for them to run out.
    Short,
}

impl Timeouts {
    pub fn connect_ms(self) -> u64 {
        match self {
            Timeouts::Patient => 10_000,
            Timeouts::Short => 1_500,
        }
    }

    /// The read timeout of the database stores and the lock timeout of the file store.
    pub fn read_ms(self) -> u64 {
        match self {
            Timeouts::Patient => 20_000,
            Timeouts::Short => 1_500,
        }
    }
}

/// A store under test, with its backing store started for one test.
pub trait StoreUnderTest {
    /// Starts the backing store; `label` names its directories.
    fn start(label: &str) -> Self
    where
        Self: Sized;

    fn name(&self) -> &'static str;

    /// Whether the store keeps sliding windows. A store that does not must refuse them, and
    /// this asserts that it does: the configuration check and the store itself say so.
    fn keeps_sliding(&self) -> bool {
        true
    }

    /// The window algorithms the store keeps: fixed, and sliding where it does.
    fn algorithms(&self) -> Vec<Algorithm> {
        let mut algorithms = vec![Algorithm::Fixed];
        if self.keeps_sliding() {
            algorithms.push(Algorithm::Sliding);
        }
        algorithms
    }

    /// A new handle on the backing store, as one server process opens it for `rules`.
    /// Sweeps remove what ended, without grace.
    fn open(&self, rules: &[Rule]) -> Box<dyn Backend>;

    /// The clock its handles decide by, when the test holds it (None: the server's clock,
    /// which is this machine's).
    fn held_clock(&self) -> Option<&TestClock> {
        None
    }

    /// The time handles decide by now.
    fn now_ms(&self) -> u64 {
        self.held_clock().map_or_else(wall_ms, Clock::now_ms)
    }

    /// Makes it `ms` for the handles: moves a held clock there, or waits for the server's.
    fn wait_until(&self, ms: u64) {
        match self.held_clock() {
            Some(clock) => clock.advance_to(ms),
            None => sleep_until(ms),
        }
    }

    /// A moment just before `edge` that a decision can still be made at: 1 ms before with a
    /// held clock, a little more with a server's (the request must travel).
    fn just_before(&self, edge: u64) -> u64 {
        if self.held_clock().is_some() {
            edge - 1
        } else {
            edge - 250
        }
    }

    /// A moment at which what ends at `edge` has surely ended for the store: `edge` itself
    /// with a held clock; a little after with a server's.
    fn past(&self, edge: u64) -> u64 {
        if self.held_clock().is_some() {
            edge
        } else {
            edge + 100
        }
    }

    /// How many requests the backing store holds for `key` as `algorithm` keeps them (a fixed
    /// window's count, a sliding window's records); 0 when it holds none so.
    fn counted(&self, key: &str, algorithm: Algorithm) -> u64;

    /// Whether the backing store holds anything for `key`.
    fn holds(&self, key: &str) -> bool;

    /// Takes the backing store away (a killed server, a lost directory).
    fn kill(&mut self);

    /// Brings it back; handles recover by themselves.
    fn restart(&mut self);

    /// Whether counts survive `kill` and `restart`.
    fn keeps_counts_across_restart(&self) -> bool;

    /// The store section of a site's configuration.
    fn store_json(&self, policy: &str, timeouts: Timeouts) -> Value;

    /// Words that name this store in the log line of each of its failures.
    fn place(&self) -> String;

    /// Values of its configuration that must never be shown.
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// The longest a request may take while the store fails: its own bound and the slack.
    fn failure_bound(&self, timeouts: Timeouts) -> Duration;

    /// Bytes the usage journal takes in the backing store: all of it, or (`totals_only`) its
    /// totals alone. None where there is no size to measure (the memory store).
    fn journal_bytes(&self, _totals_only: bool) -> Option<u64> {
        None
    }

    /// For the memory store: the store itself, which sites then use in this process.
    fn in_process(&self) -> Option<MemoryStore<TestClock>> {
        None
    }
}

/// A way the store can be slow: what to expect of a request meanwhile.
#[derive(Clone, Debug)]
pub struct Slowdown {
    pub name: &'static str,
    /// The log line says one of these (which setting ran out, or why).
    pub hints: &'static [&'static str],
    /// A request waits at least this long before the policy answers (None: at once).
    pub at_least: Option<Duration>,
    /// And at most this long.
    pub bound: Duration,
}

/// Stores that can be made slow.
pub trait Slowable: StoreUnderTest {
    /// The store section of the sites the slow-downs act on.
    fn slow_store_json(&self, policy: &str) -> Value;

    /// Words that name the store of those sites in the log line of each failure.
    fn slow_place(&self) -> String;

    /// Slows the store down within its bounds for requests on `keys`, for about as long as
    /// returned: they wait and are decided as usual.
    fn slow_within_bounds(&mut self, keys: &[String]) -> Duration;

    /// Ways to be slow beyond the store's bounds.
    fn slowdowns(&self) -> Vec<Slowdown>;

    /// Makes the store slow in the `n`th way for requests on `keys`.
    fn slow_down(&mut self, n: usize, keys: &[String]);

    /// Back to normal.
    fn recover(&mut self);
}

/// Stores reached with a password.
pub trait Credentialed: StoreUnderTest {
    /// Store sections that give `password` instead of the right one, each with what it tries.
    fn with_password(&self, password: &str, policy: &str) -> Vec<(&'static str, Value)>;

    /// What a log line says when the server refuses the credentials.
    fn complaint(&self) -> [&'static str; 2];
}

fn policy_fields(store: &mut Value, policy: &str) {
    store["on_error"] = json!(policy);
    store["deny_retry_after_secs"] = json!(DENY_RETRY_AFTER);
    // Only explicit sweeps: a request's sweep would remove keys at random.
    store["sweep_one_in"] = json!(0);
    store["sweep_grace_secs"] = json!(0);
}

/// The store a configuration with this store section opens.
fn parse_store(store: Value) -> StoreKind {
    let text = json!({"store": store}).to_string();
    Config::from_json(&text, std::path::Path::new("/"))
        .unwrap_or_else(|e| panic!("store section {text}: {e}"))
        .store
        .kind
}

// ---------------------------------------------------------------------------------------------
// A delaying proxy in front of a database server

/// The slow-downs of the proxy in front of a database server.
fn proxy_slowdowns(read_hints: &'static [&'static str], bound: Duration) -> Vec<Slowdown> {
    let read = Duration::from_millis(Timeouts::Short.read_ms());
    vec![
        Slowdown {
            name: "every packet twice the read timeout late",
            hints: read_hints,
            at_least: Some(read * 8 / 10),
            bound,
        },
        Slowdown {
            name: "refusing connections",
            hints: &["is the server running"],
            at_least: None,
            bound,
        },
        Slowdown {
            name: "hanging (accepts, never answers)",
            hints: read_hints,
            at_least: Some(read * 8 / 10),
            bound,
        },
    ]
}

fn proxy_slow_down(proxy: &DelayProxy, n: usize) {
    let read = Duration::from_millis(Timeouts::Short.read_ms());
    match n {
        0 => proxy.set_delay(2 * read),
        1 => proxy.set_mode(Mode::Refuse),
        2 => proxy.set_mode(Mode::Hang),
        // Each packet within the read timeout, but a decision takes many.
        3 => proxy.set_delay(read * 45 / 100),
        _ => unreachable!("slow-down {n}"),
    }
}

fn proxy_recover(proxy: &DelayProxy) {
    proxy.set_delay(Duration::ZERO);
    proxy.set_mode(Mode::Forward);
}

/// A short delay on every packet: a request takes longer, within every timeout.
fn proxy_slow_within_bounds(proxy: &DelayProxy) -> Duration {
    let delay = Duration::from_millis(30);
    proxy.set_delay(delay);
    2 * delay
}
