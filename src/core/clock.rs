//! Where time comes from: the system clock in production, a settable one in tests.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock {
    fn now_ms(&self) -> u64;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to, for tests.
#[derive(Debug, Default)]
pub struct FakeClock {
    now: Cell<u64>,
}

impl FakeClock {
    pub fn at(ms: u64) -> Self {
        FakeClock { now: Cell::new(ms) }
    }

    pub fn advance_ms(&self, ms: u64) {
        self.now.set(self.now.get() + ms);
    }

    pub fn set_ms(&self, ms: u64) {
        self.now.set(ms);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }
}

/// One clock shared by several owners (a store and what sits in front of it, in tests).
impl<C: Clock + ?Sized> Clock for std::rc::Rc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}
