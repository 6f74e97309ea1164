//! Loopback ports for the servers the tests start, and for addresses where nothing listens.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::rng::Rng;

/// A port on 127.0.0.1 that nothing listens on right now (someone may take it before the
/// caller binds it: servers started on it retry with another).
pub fn free_port() -> u16 {
    free_port_on("127.0.0.1:0")
}

/// The same on another address, e.g. `[::1]:0`. Chosen below the kernel's range of
/// ephemeral ports, so that no outgoing connection takes it as its own while a server stopped
/// by a test is down and about to start again on it (a Redis Cluster node's bus port was
/// taken so, and the node could not come back); where the range leaves no room below it, any
/// free port.
pub fn free_port_on(addr: &str) -> u16 {
    let mut at: SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
    let (low, span) = below_ephemeral();
    let mut rng = Rng::new(seed());
    for _ in 0..if span > 0 { 200 } else { 0 } {
        at.set_port(low + rng.below(span) as u16);
        if TcpListener::bind(at).is_ok() {
            return at.port();
        }
    }
    at.set_port(0);
    TcpListener::bind(at)
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"))
        .local_addr()
        .expect("local address")
        .port()
}

/// The first port below the ephemeral range a test server may take, and how many there are
/// (from 20000 up to the range's start, 32768 by default; none when it starts lower).
fn below_ephemeral() -> (u16, u64) {
    const FIRST: u16 = 20_000;
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    (FIRST, u64::from(start.saturating_sub(FIRST)))
}

/// A seed that differs between the processes and the calls of one run.
fn seed() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32) ^ CALLS.fetch_add(1, Ordering::Relaxed)
}
