//! Loopback ports for the servers the tests start, and for addresses where nothing listens.

use std::net::TcpListener;

/// A port on 127.0.0.1 that nothing listens on right now (someone may take it before the
/// caller binds it: servers started on it retry with another).
pub fn free_port() -> u16 {
    free_port_on("127.0.0.1:0")
}

/// The same on another address, e.g. `[::1]:0`.
pub fn free_port_on(addr: &str) -> u16 {
    TcpListener::bind(addr)
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"))
        .local_addr()
        .expect("local address")
        .port()
}
