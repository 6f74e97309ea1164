//! The memory store under test: the store itself, on a clock the test holds.

use std::time::Duration;

use resolve::core::limiter::State;
use resolve::core::rule::{Algorithm, Rule};
use resolve::store::memory::MemoryStore;
use resolve::store::roles::Backend;
use serde_json::{Value, json};

use super::{SLACK, StoreUnderTest, TestClock, Timeouts, policy_fields, wall_ms};

pub struct InMemory {
    store: MemoryStore<TestClock>,
    clock: TestClock,
}

impl StoreUnderTest for InMemory {
    fn start(_label: &str) -> InMemory {
        let clock = TestClock::held_at(wall_ms());
        InMemory {
            store: MemoryStore::new(clock.clone(), Duration::ZERO),
            clock,
        }
    }

    fn name(&self) -> &'static str {
        "memory"
    }

    fn open(&self, _rules: &[Rule]) -> Box<dyn Backend> {
        Box::new(self.store.clone())
    }

    fn held_clock(&self) -> Option<&TestClock> {
        Some(&self.clock)
    }

    fn counted(&self, key: &str, algorithm: Algorithm) -> u64 {
        match (self.store.state(key), algorithm) {
            (Some(State::Fixed(Some(c))), Algorithm::Fixed) => c.count.into(),
            (Some(State::Sliding(times)), Algorithm::Sliding) => times.len() as u64,
            _ => 0,
        }
    }

    fn holds(&self, key: &str) -> bool {
        self.store.state(key).is_some()
    }

    /// What the memory store has instead of a server to kill: it fails as a store that cannot
    /// be reached does.
    fn kill(&mut self) {
        self.store.set_failing(true);
    }

    /// Back, and empty, as a process started anew.
    fn restart(&mut self) {
        self.store.clear();
        self.store.set_failing(false);
    }

    fn keeps_counts_across_restart(&self) -> bool {
        false
    }

    /// The memory store has no configuration of its own: sites in this process are handed the
    /// store itself, and their store section only carries the failure policy. Its kind is one
    /// that accepts sliding windows; nothing ever connects to it.
    fn store_json(&self, policy: &str, _timeouts: Timeouts) -> Value {
        let mut store = json!({"kind": "redis", "host": "127.0.0.1", "port": 9});
        policy_fields(&mut store, policy);
        store
    }

    fn place(&self) -> String {
        "memory store".to_owned()
    }

    fn failure_bound(&self, _timeouts: Timeouts) -> Duration {
        SLACK
    }

    fn in_process(&self) -> Option<MemoryStore<TestClock>> {
        Some(self.store.clone())
    }
}
