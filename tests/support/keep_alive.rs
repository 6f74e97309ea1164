//! A provider stand-in that keeps HTTP/1.1 connections open between calls, as real provider APIs do, and counts connections and calls: for checking that a long-lived process reuses its connection, and for benchmarks (one thread per connection, no locks on the way).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub struct KeepAliveProvider {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl KeepAliveProvider {
    /// Answers every call `200 {"download": "https://cdn.test/file/<n>", "filename": "f.bin"}`.
    pub fn start() -> KeepAliveProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the provider stand-in");
        let addr = listener.local_addr().expect("provider address");
        let connections = Arc::new(AtomicUsize::new(0));
        let calls = Arc::new(AtomicUsize::new(0));
        let (c, n) = (connections.clone(), calls.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let n = n.clone();
                std::thread::spawn(move || serve(conn, &n));
            }
        });
        KeepAliveProvider {
            addr,
            connections,
            calls,
        }
    }

    /// `http://127.0.0.1:PORT/unrestrict`
    pub fn url(&self) -> String {
        format!("http://{}/unrestrict", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Calls answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn serve(conn: TcpStream, calls: &AtomicUsize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = conn.set_nodelay(true);
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let answer = format!(r#"{{"download": "https://cdn.test/file/{n}", "filename": "f.bin"}}"#);
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
