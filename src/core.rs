//! The pure core: rules, windows, the limiter's decision and the clock it reads. Nothing here
//! does I/O or imports from the adapters; every decision is a function of rules, stored states
//! and the time, tested with a fake clock.

pub mod calendar;
pub mod clock;
pub mod decision;
pub mod journal;
pub mod key;
pub mod limiter;
pub mod rule;
pub mod slot;
