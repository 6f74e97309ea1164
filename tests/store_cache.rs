//! The cache primitives of every store against the real thing: get, put, claim, release and
//! refund, the same behaviour from the file store, MariaDB and Redis.

mod support;

use std::path::Path;
use std::time::Duration;

use resolve::config::Config;
use resolve::core::decision::Decision;
use resolve::store::Check;
use serde_json::{Value, json};
use support::{MariaDb, Redis, TempDir};

fn config(store: Value) -> Config {
    let text = json!({
        "provider": {"kind": "echo"},
        "store": store,
        "rules": [{"name": "fixed", "key": "ip", "limit": 5, "window_secs": 60}],
    });
    Config::from_json(&text.to_string(), Path::new("/")).expect("valid configuration")
}

fn exercise(name: &str, config: &Config) {
    let store = resolve::store::open::from_config(config);
    store.probe().unwrap_or_else(|e| panic!("{name}: {e}"));
    let key = format!("resolve:cache:test-{name}");
    let pending = b"resolve:pending";

    assert_eq!(store.cache_get(&key).unwrap(), None, "{name}");
    assert!(
        store
            .cache_claim(&key, pending, Duration::from_secs(30))
            .unwrap(),
        "{name}: first claim"
    );
    assert!(
        !store
            .cache_claim(&key, pending, Duration::from_secs(30))
            .unwrap(),
        "{name}: second claim"
    );
    assert_eq!(
        store.cache_get(&key).unwrap().as_deref(),
        Some(&pending[..]),
        "{name}"
    );
    store.cache_release(&key, pending).unwrap();
    assert_eq!(store.cache_get(&key).unwrap(), None, "{name}: released");

    assert!(
        store
            .cache_claim(&key, pending, Duration::from_secs(30))
            .unwrap(),
        "{name}"
    );
    store
        .cache_put(&key, b"answer", Duration::from_millis(1500))
        .unwrap();
    store.cache_release(&key, pending).unwrap();
    assert_eq!(
        store.cache_get(&key).unwrap().as_deref(),
        Some(&b"answer"[..]),
        "{name}: the answer stays"
    );
    assert!(
        !store
            .cache_claim(&key, pending, Duration::from_secs(30))
            .unwrap(),
        "{name}: answered"
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(store.cache_get(&key).unwrap(), None, "{name}: expired");
    assert!(
        store
            .cache_claim(&key, pending, Duration::from_secs(30))
            .unwrap(),
        "{name}: claim after expiry"
    );

    // Refund: a request admitted at `at` is taken back from the same window only.
    let rule = &config.rules[0];
    let checks = [Check {
        rule,
        key: format!("resolve:fixed:{name}"),
    }];
    let mut at = 0;
    for _ in 0..5 {
        match store.decide(&checks).unwrap() {
            Decision::Admit { at_ms, .. } => at = at_ms,
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(
        !store.decide(&checks).unwrap().is_admit(),
        "{name}: at the limit"
    );
    store.refund(&checks, at).unwrap();
    assert!(
        store.decide(&checks).unwrap().is_admit(),
        "{name}: one taken back"
    );
    assert!(!store.decide(&checks).unwrap().is_admit(), "{name}");
    store.refund(&checks, at.saturating_sub(120_000)).unwrap();
    assert!(
        !store.decide(&checks).unwrap().is_admit(),
        "{name}: another window's refund is ignored"
    );
}

#[test]
fn every_store_caches_claims_and_refunds_alike() {
    let dir = TempDir::new("store-cache");
    let db = MariaDb::start();
    let redis = Redis::start();
    exercise(
        "file",
        &config(json!({"kind": "file", "dir": dir.path().join("data")})),
    );
    exercise("mysql", &config(json!({"kind": "mysql", "url": db.url()})));
    exercise(
        "redis",
        &config(json!({"kind": "redis", "url": redis.url()})),
    );
}
