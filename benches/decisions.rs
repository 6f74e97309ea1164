//! Decision time per store, as one CGI request pays it: open the store (connect, for a
//! database) and decide once. Starts its own MariaDB and Redis on loopback. Prints medians and ratios;
//! asserts nothing about speed. Run: `cargo bench --bench decisions`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use resolve::config::Config;
use resolve::store::Check;

const ROUNDS: usize = 400;

fn config(store: serde_json::Value, algorithm: &str) -> Config {
    let text = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": store,
        "rules": [{"name": algorithm, "key": "ip", "algorithm": algorithm, "limit": 1_000_000, "window_secs": 3600}],
    });
    Config::from_json(&text.to_string(), Path::new("/")).expect("valid configuration")
}

/// Median and 90th percentile of `ROUNDS` fresh-store decisions, each for one of 50 keys.
fn measure(config: &Config) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let key = config.rules[0].key_for(&format!("192.0.2.{}", i % 50));
        let started = Instant::now();
        let store = resolve::stores::open(config);
        let checks = [Check {
            rule: &config.rules[0],
            key,
        }];
        let decision = store.decide(&checks).expect("the store answers");
        times.push(started.elapsed());
        assert!(decision.is_admit());
    }
    times.sort();
    (times[ROUNDS / 2], times[ROUNDS * 9 / 10])
}

fn main() {
    let dir = support::TempDir::new("bench-decisions");
    let db = support::MariaDb::start();
    let redis = support::Redis::start();
    let cases = [
        (
            "file store, fixed",
            config(
                serde_json::json!({"kind": "file", "dir": dir.path().join("data")}),
                "fixed",
            ),
        ),
        (
            "mysql over TCP, fixed",
            config(
                serde_json::json!({"kind": "mysql", "url": db.url()}),
                "fixed",
            ),
        ),
        (
            "mysql over TCP, sliding",
            config(
                serde_json::json!({"kind": "mysql", "url": db.url()}),
                "sliding",
            ),
        ),
        (
            "mysql over socket, fixed",
            config(
                serde_json::json!({"kind": "mysql", "socket": db.socket(), "user": db.user(),
                                   "password": db.password(), "database": db.database()}),
                "fixed",
            ),
        ),
        (
            "redis over TCP, fixed",
            config(
                serde_json::json!({"kind": "redis", "url": redis.url()}),
                "fixed",
            ),
        ),
        (
            "redis over TCP, sliding",
            config(
                serde_json::json!({"kind": "redis", "url": redis.url()}),
                "sliding",
            ),
        ),
        (
            "redis over socket, fixed",
            config(
                serde_json::json!({"kind": "redis", "url": redis.unix_url()}),
                "fixed",
            ),
        ),
    ];
    // Warm up: create tables and files.
    for (_, c) in &cases {
        resolve::stores::open(c).probe().expect("store reachable");
    }
    println!("{ROUNDS} decisions per store, each with a freshly opened store (connect + decide)");
    println!(
        "{:<28} {:>12} {:>12} {:>10}",
        "store", "median", "p90", "vs file"
    );
    let mut file_median = None;
    for (name, c) in &cases {
        let (median, p90) = measure(c);
        let base = *file_median.get_or_insert(median);
        println!(
            "{name:<28} {:>12.3?} {:>12.3?} {:>9.1}x",
            median,
            p90,
            median.as_secs_f64() / base.as_secs_f64()
        );
    }
    let rows = db.root_sql("SELECT COUNT(*), COUNT(DISTINCT rkey) FROM resolve_test.rate_events");
    println!(
        "rate_events rows, distinct keys after the sliding run: {}",
        rows.trim()
    );
}
