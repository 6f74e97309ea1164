//! Tests of the free pre-checks (a provider's host list, its link check) and of what a request
//! the limiter refuses costs: no job read, no host list, no check.

use super::*;
use crate::provider::PrecheckError;
use crate::store::cache::Cache;
use std::rc::Rc;

/// A provider with a host list naming `listed.example`, a link check that finds links with
/// `dead` in them dead, and a count of every call.
#[derive(Default)]
struct Prechecked {
    lists: Cell<usize>,
    checks: Cell<usize>,
    paid: Cell<usize>,
}

impl Provider for Prechecked {
    fn resolve(&self, _: &str, _: &dyn Meter) -> Result<Resolved, ProviderError> {
        self.paid.set(self.paid.get() + 1);
        ok_provider().answer
    }

    fn host_list(&self) -> Option<Result<Vec<String>, PrecheckError>> {
        self.lists.set(self.lists.get() + 1);
        Some(Ok(vec!["listed.example".into()]))
    }

    fn link_dead(&self, link: &str) -> Option<Result<bool, PrecheckError>> {
        self.checks.set(self.checks.get() + 1);
        Some(Ok(link.contains("dead")))
    }
}

/// The store's cache, keeping the key of every operation on it.
struct CountingCache {
    inner: Rc<dyn Cache>,
    keys: std::cell::RefCell<Vec<String>>,
}

impl CountingCache {
    fn count(&self, key: &str) {
        self.keys.borrow_mut().push(key.to_owned());
    }
}

impl Cache for CountingCache {
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, crate::store::StoreError> {
        self.count(key);
        self.inner.cache_get(key)
    }
    fn cache_put(
        &self,
        key: &str,
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), crate::store::StoreError> {
        self.count(key);
        self.inner.cache_put(key, value, ttl)
    }
    fn cache_claim(
        &self,
        key: &str,
        value: &[u8],
        ttl: Duration,
    ) -> Result<bool, crate::store::StoreError> {
        self.count(key);
        self.inner.cache_claim(key, value, ttl)
    }
    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), crate::store::StoreError> {
        self.count(key);
        self.inner.cache_release(key, value)
    }
}

/// A provider section that polls (so jobs are looked up) and has a host list, one request an
/// hour for each visitor.
fn prechecked_config() -> Config {
    config(
        r#"{"provider": {"kind": "http", "token": "tok-8f3a1c9e", "base_url": "https://api.example",
            "steps": [
              {"method": "POST", "url": "{base}/create", "form": {"link": "{link}"},
               "extract": {"id": "/id"}},
              {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
               "poll": {"interval_ms": 1000, "until": {"pointer": "/done", "equals": true}},
               "extract": {"download": "/link"}}],
            "hosts": {"url": "{base}/hosts", "lists": ["/hosts"]}},
          "rules": [{"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}]}"#,
    )
}

fn ask(
    cfg: &Config,
    store: &Store,
    p: &Prechecked,
    addr: &str,
    link: &str,
) -> (u16, serde_json::Value) {
    let env = get(addr, &format!("link={link}")).with("HTTP_ACCEPT", "application/json");
    let (a, _) = answer_on(cfg, store, p, &SystemClock, &env);
    let body = serde_json::from_slice(&a.response.body).unwrap_or_default();
    (a.response.status, body)
}

#[test]
fn a_request_the_limiter_refuses_reads_no_job_and_no_host_list() {
    let cfg = prechecked_config();
    let s = store();
    let cache = Rc::new(CountingCache {
        inner: s.as_store().cache,
        keys: Default::default(),
    });
    let mut st = s.as_store();
    st.cache = cache.clone();
    let p = Prechecked::default();
    let listed = "https%3A%2F%2Flisted.example%2Ff";
    assert_eq!(ask(&cfg, &st, &p, "192.0.2.1", listed).0, 200);
    assert_eq!((p.lists.get(), p.checks.get(), p.paid.get()), (1, 1, 1));
    let admitted: Vec<String> = cache.keys.borrow_mut().drain(..).collect();
    assert!(
        admitted.iter().any(|k| k.starts_with("resolve:cache:job:"))
            && admitted
                .iter()
                .any(|k| k.starts_with("resolve:cache:hosts")),
        "{admitted:?}"
    );
    // Over its limit: refused with no job read and no host list read (the block list is read
    // before the decision, as for every request), no host list fetched, no link checked.
    for _ in 0..3 {
        assert_eq!(ask(&cfg, &st, &p, "192.0.2.1", listed).0, 429);
    }
    let refused = cache.keys.borrow();
    assert!(
        refused.iter().all(|k| !k.starts_with("resolve:cache:")),
        "{refused:?}"
    );
    assert_eq!((p.lists.get(), p.checks.get(), p.paid.get()), (1, 1, 1));
}

#[test]
fn a_refused_host_or_dead_link_gives_the_visitors_count_back() {
    let cfg = prechecked_config();
    let s = store();
    let st = s.as_store();
    let p = Prechecked::default();
    // One request an hour: three links on another host, then three dead ones, each refused
    // without paying and without using it up.
    for i in 0..3 {
        let (status, body) = ask(
            &cfg,
            &st,
            &p,
            "192.0.2.2",
            &format!("https%3A%2F%2Fother.example%2F{i}"),
        );
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("unsupported_host"))
        );
        let (status, body) = ask(
            &cfg,
            &st,
            &p,
            "192.0.2.2",
            &format!("https%3A%2F%2Flisted.example%2Fdead{i}"),
        );
        assert_eq!((status, body["code"].as_str()), (422, Some("dead_link")));
    }
    assert_eq!((p.lists.get(), p.checks.get(), p.paid.get()), (1, 3, 0));
    let listed = "https%3A%2F%2Flisted.example%2Ff";
    assert_eq!(ask(&cfg, &st, &p, "192.0.2.2", listed).0, 200);
    assert_eq!(ask(&cfg, &st, &p, "192.0.2.2", listed).0, 429);
    assert_eq!(p.paid.get(), 1);
    let f = figures(&s);
    assert_eq!((f.requests, f.admitted, f.paid_calls), (8, 1, 1));
}
