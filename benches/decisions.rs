//! Decision time per store, in process (criterion): a store kept open from one decision to the next, as one FastCGI process keeps it, and a store opened for a single decision (connect and decide), as each CGI request pays it; the file store with 10, 10,000 and 100,000 keys in its data directory; a sweep within the 5 ms budget a request may spend on it; and a request's usage-journal entry in the file store, beside a decision; a sliding window on a PHP limiter's own `DATETIME` table. Starts its own MariaDB and Redis on loopback. Run: `cargo bench --bench decisions`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::cell::Cell;
use std::hint::black_box;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use resolve::config::Config;
use resolve::core::clock::Clock;
use resolve::core::decision::Decision;
use resolve::store::Check;
use resolve::store::counters::Counters;
use resolve::store::file::FileStore;
use resolve::store::file::budget::Budget;
use resolve::store::upkeep::Upkeep;
use serde_json::{Value, json};

fn config(store: Value, algorithm: &str, window_secs: u64) -> Config {
    let text = json!({
        "provider": {"kind": "echo"},
        "store": store,
        "rules": [{"name": algorithm, "key": "ip", "algorithm": algorithm,
                   "limit": 1_000_000_000u64, "window_secs": window_secs}],
    });
    Config::from_json(&text.to_string(), Path::new("/")).expect("valid configuration")
}

/// One decision for client number `n`.
fn decide(store: &dyn Counters, config: &Config, n: u64) -> Decision {
    let rule = &config.rules[0];
    let key = rule.key_for(&format!(
        "10.{}.{}.{}",
        n >> 16 & 255,
        n >> 8 & 255,
        n & 255
    ));
    store
        .decide(&[Check { rule, key }])
        .expect("the store decides")
}

fn per_store(c: &mut Criterion) {
    let dir = support::TempDir::new("bench-decisions");
    let db = support::MariaDb::start();
    let redis = support::Redis::start();
    let data = dir.path().join("data");
    // The PHP limiter's table as its code creates it (rkey VARCHAR(120) in utf8mb4, one index
    // on (rkey, ts)), not the shape resolve would create under that name.
    db.root_sql(&format!(
        "CREATE TABLE `{}`.php_events (\
         id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         rkey VARCHAR(120) NOT NULL, ts DATETIME NOT NULL, KEY ix_rate (rkey, ts)\
         ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        db.database()
    ));
    // Each store section, and the algorithms measured on it. A sliding window keeps a row or
    // entry per request, so it gets a short window.
    let stores = [
        ("file", json!({"kind": "file", "dir": data}), &["fixed"][..]),
        (
            "mysql tcp",
            json!({"kind": "mysql", "url": db.url()}),
            &["fixed", "sliding"],
        ),
        (
            // The PHP limiter's table: ts a DATETIME from NOW(), converted in SQL.
            "mysql tcp, events_ts datetime",
            json!({"kind": "mysql", "url": db.url(), "table": "php_events",
                   "counter_table": "php_counters", "events_ts": "datetime"}),
            &["sliding"],
        ),
        (
            "mysql socket",
            json!({"kind": "mysql", "socket": db.socket(), "user": db.user(),
                   "password": db.password(), "database": db.database()}),
            &["fixed"],
        ),
        (
            "redis tcp",
            json!({"kind": "redis", "url": redis.url()}),
            &["fixed", "sliding"],
        ),
        (
            "redis socket",
            json!({"kind": "redis", "url": redis.unix_url()}),
            &["fixed"],
        ),
    ];
    let cases: Vec<(String, Config)> = stores
        .iter()
        .flat_map(|(name, store, algorithms)| {
            algorithms.iter().map(move |alg| {
                let window_secs = if *alg == "sliding" { 60 } else { 3600 };
                (
                    format!("{name}, {alg}"),
                    config(store.clone(), alg, window_secs),
                )
            })
        })
        .collect();
    let mut group = c.benchmark_group("decide");
    group.measurement_time(Duration::from_secs(3));
    for (name, cfg) in &cases {
        let kept =
            resolve::site::open::from_config(cfg, &resolve::support::log::Context::default());
        kept.upkeep.probe().expect("store reachable");
        let mut n = 0u64;
        group.bench_function(BenchmarkId::new("kept (FastCGI)", name), |b| {
            b.iter(|| {
                n += 1;
                black_box(decide(&*kept.counters, cfg, n % 50))
            })
        });
        group.bench_function(BenchmarkId::new("opened for one (CGI)", name), |b| {
            b.iter(|| {
                n += 1;
                let store = resolve::site::open::from_config(
                    cfg,
                    &resolve::support::log::Context::default(),
                );
                black_box(decide(&*store.counters, cfg, n % 50))
            })
        });
    }
    group.finish();
}

/// A data directory budget of a million files.
const BIG_BUDGET: Budget = Budget {
    max_files: 1_000_000,
    max_bytes: 1 << 40,
    fold_rules: 1,
};

fn file_store_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("file store, keys in the data directory");
    group.measurement_time(Duration::from_secs(3));
    for keys in [10u64, 10_000, 100_000] {
        let dir = support::TempDir::new(&format!("bench-keys-{keys}"));
        // A budget that holds every key (past the default one new clients would be folded).
        let cfg = config(
            json!({"kind": "file", "dir": dir.path(), "max_files": BIG_BUDGET.max_files,
                   "max_bytes": BIG_BUDGET.max_bytes}),
            "fixed",
            3600,
        );
        let store =
            resolve::site::open::from_config(&cfg, &resolve::support::log::Context::default());
        for n in 0..keys {
            decide(&*store.counters, &cfg, n);
        }
        let mut n = 0u64;
        group.bench_with_input(BenchmarkId::from_parameter(keys), &keys, |b, &keys| {
            b.iter(|| {
                // Existing keys, in an order that jumps around the shards.
                n = (n + 7919) % keys;
                black_box(decide(&*store.counters, &cfg, n))
            })
        });
        if keys > 10 {
            // The same directory, only 10 of its keys asked for: what the size costs, apart
            // from how many keys a run touches (and so keeps in the processor's caches).
            group.bench_with_input(
                BenchmarkId::new("10 of them asked for", keys),
                &keys,
                |b, &keys| {
                    b.iter(|| {
                        n = (n + 7919) % keys % 10;
                        black_box(decide(&*store.counters, &cfg, n))
                    })
                },
            );
        }
    }
    group.finish();
}

fn sweeping(c: &mut Criterion) {
    // 100,000 keys: those of even clients stale (their window ended long ago), the others live.
    let dir = support::TempDir::new("bench-sweep");
    let cfg = config(json!({"kind": "file", "dir": dir.path()}), "fixed", 60);
    let grace = Duration::from_secs(600);
    let start = 1_900_000_000_000u64;
    let now = Rc::new(Cell::new(start));
    let store = FileStore::new(dir.path(), SharedClock(now.clone()), grace).with_budget(BIG_BUDGET);
    for n in (0..100_000u64).step_by(2) {
        decide(&store, &cfg, n);
    }
    now.set(start + 3_600_000);
    for n in (1..100_000u64).step_by(2) {
        decide(&store, &cfg, n);
    }
    let mut group = c.benchmark_group("sweep within the budget");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(200));
    group.bench_function("100000 keys, half stale, 5 ms budget", |b| {
        b.iter(|| black_box(store.sweep(Some(Duration::from_millis(5)))));
    });
    group.finish();
}

fn journal(c: &mut Criterion) {
    use resolve::core::journal::{ClientCount, Entry, hour_of};
    let mut group = c.benchmark_group("file store, a request's journal entry");
    group.measurement_time(Duration::from_secs(3));
    let dir = support::TempDir::new("bench-journal");
    let cfg = config(json!({"kind": "file", "dir": dir.path()}), "fixed", 3600);
    let store = resolve::site::open::from_config(&cfg, &resolve::support::log::Context::default());
    let hour = hour_of(resolve::core::clock::SystemClock.now_ms());
    let entry = |n: u64| Entry {
        hour,
        totals: vec![("requests".into(), 1), ("refused:ip".into(), 1)],
        clients: vec![(
            format!("10.9.{}.{}", n >> 8 & 255, n & 255),
            ClientCount::Refused,
            1,
        )],
    };
    // Clients already in the hour: about 60 per shard file is a day of 10,000 clients seen in
    // two hours each; 1,000 per file is 16,000 clients in one hour.
    let mut added = 0;
    for per_file in [60u64, 1_000] {
        while added < per_file * 16 {
            store.journal.journal_add(&entry(added)).expect("add");
            added += 1;
        }
        let mut n = 0;
        group.bench_with_input(
            BenchmarkId::new("clients per hour file", per_file),
            &per_file,
            |b, _| {
                b.iter(|| {
                    n = (n + 7919) % added;
                    store.journal.journal_add(&entry(n)).expect("add");
                })
            },
        );
    }
    // Keys that exist already, as a client over its limit has one.
    for n in 0..100 {
        decide(&*store.counters, &cfg, n);
    }
    let mut n = 0u64;
    group.bench_function("the decision beside it", |b| {
        b.iter(|| {
            n = (n + 7919) % 100;
            black_box(decide(&*store.counters, &cfg, n))
        })
    });
    group.finish();
}

/// A clock the benchmark sets while the store holds it.
struct SharedClock(Rc<Cell<u64>>);

impl Clock for SharedClock {
    fn now_ms(&self) -> u64 {
        self.0.get()
    }
}

criterion_group!(benches, per_store, file_store_size, sweeping, journal);
criterion_main!(benches);
