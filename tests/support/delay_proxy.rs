//! A TCP proxy on 127.0.0.1 in front of a server (a database), which can delay every chunk it forwards and close, refuse or hang new connections.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What happens to new connections. Connections already forwarded keep going whatever the mode
/// (see `cut_connections`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward to the target (after the configured delays).
    Forward,
    /// Accept, then close at once: the client sees end-of-file (a server that went away).
    Close,
    /// Stop listening: connecting fails with "connection refused" (a server that is down).
    Refuse,
    /// Accept and never send or forward anything (a server that hangs).
    Hang,
}

/// Upper bound for connecting to the target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the accept loop looks for connections and the stop flag.
const POLL: Duration = Duration::from_millis(5);

struct Shared {
    addr: SocketAddr,
    target: SocketAddr,
    /// Microseconds to wait before forwarding a chunk towards the target / the client.
    delay_up_us: AtomicU64,
    delay_down_us: AtomicU64,
    mode: Mutex<Mode>,
    listener: Mutex<Option<TcpListener>>,
    stop: AtomicBool,
    accepted: AtomicUsize,
    next_id: AtomicU64,
    /// Every open stream (both ends of forwarded connections, hung ones), by connection, so
    /// that they can be cut.
    streams: Mutex<HashMap<u64, Vec<TcpStream>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

pub struct DelayProxy {
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl DelayProxy {
    /// A proxy forwarding to `target`, without delay.
    pub fn start(target: SocketAddr) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind delay proxy");
        listener
            .set_nonblocking(true)
            .expect("non-blocking proxy listener");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            addr,
            target,
            delay_up_us: AtomicU64::new(0),
            delay_down_us: AtomicU64::new(0),
            mode: Mutex::new(Mode::Forward),
            listener: Mutex::new(Some(listener)),
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            streams: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept_thread = std::thread::spawn(move || accept_loop(&s));
        DelayProxy {
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }

    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Wait `d` before forwarding each chunk, both ways: a request/answer round trip through
    /// the proxy then takes at least `2 × d`. Applies at once, to open connections too.
    pub fn set_delay(&self, d: Duration) {
        self.set_delays(d, d);
    }

    /// Separate delays for chunks going to the target (`up`) and to the client (`down`).
    pub fn set_delays(&self, up: Duration, down: Duration) {
        self.shared
            .delay_up_us
            .store(up.as_micros() as u64, Ordering::SeqCst);
        self.shared
            .delay_down_us
            .store(down.as_micros() as u64, Ordering::SeqCst);
    }

    pub fn mode(&self) -> Mode {
        *self.shared.mode.lock().unwrap()
    }

    /// Change what happens to new connections. `Refuse` closes the listening socket before
    /// returning (connections waiting to be accepted are reset); leaving `Refuse` listens
    /// again on the same port.
    pub fn set_mode(&self, mode: Mode) {
        let mut current = self.shared.mode.lock().unwrap();
        let mut listener = self.shared.listener.lock().unwrap();
        if mode == Mode::Refuse {
            *listener = None;
        } else if listener.is_none() {
            let l = TcpListener::bind(self.shared.addr).unwrap_or_else(|e| {
                panic!(
                    "delay proxy: listen again on {} after Refuse: {e}",
                    self.shared.addr
                )
            });
            l.set_nonblocking(true)
                .expect("non-blocking proxy listener");
            *listener = Some(l);
        }
        *current = mode;
    }

    /// Close every open connection (forwarded or hung), both ends: clients and the target see
    /// the connection end.
    pub fn cut_connections(&self) {
        let streams: Vec<TcpStream> = self
            .shared
            .streams
            .lock()
            .unwrap()
            .drain()
            .flat_map(|(_, v)| v)
            .collect();
        for s in streams {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Connections accepted so far, whatever became of them.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections currently open through the proxy (forwarded or hung).
    pub fn open_connections(&self) -> usize {
        self.shared.streams.lock().unwrap().len()
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        *self.shared.listener.lock().unwrap() = None;
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
        self.cut_connections();
        let threads: Vec<JoinHandle<()>> = self.shared.threads.lock().unwrap().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let accepted = match shared.listener.lock().unwrap().as_ref() {
            Some(l) => l.accept(),
            None => Err(io::ErrorKind::WouldBlock.into()),
        };
        match accepted {
            Ok((client, _)) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                let mode = *shared.mode.lock().unwrap();
                handle(shared, client, mode);
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn handle(shared: &Arc<Shared>, client: TcpStream, mode: Mode) {
    let _ = client.set_nonblocking(false);
    match mode {
        // Refuse: accepted just before the listener closed.
        Mode::Close | Mode::Refuse => {
            let _ = client.shutdown(Shutdown::Both);
        }
        Mode::Hang => {
            let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
            shared.streams.lock().unwrap().insert(id, vec![client]);
        }
        Mode::Forward => {
            let s = shared.clone();
            let t = std::thread::spawn(move || forward(&s, client));
            let mut threads = shared.threads.lock().unwrap();
            threads.retain(|t| !t.is_finished());
            threads.push(t);
        }
    }
}

fn forward(shared: &Arc<Shared>, client: TcpStream) {
    let Ok(server) = TcpStream::connect_timeout(&shared.target, CONNECT_TIMEOUT) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let clones = (|| -> io::Result<_> {
        Ok((
            client.try_clone()?,
            server.try_clone()?,
            client.try_clone()?,
            server.try_clone()?,
        ))
    })();
    let Ok((client_r, server_r, client_k, server_k)) = clones else {
        return;
    };
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    shared
        .streams
        .lock()
        .unwrap()
        .insert(id, vec![client_k, server_k]);
    // Dropped meanwhile: its cut may have missed these streams.
    if shared.stop.load(Ordering::SeqCst) {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
    }
    let left = Arc::new(AtomicUsize::new(2));
    let (s, l) = (shared.clone(), left.clone());
    let up = std::thread::spawn(move || {
        pump(&s, client_r, server, &s.delay_up_us);
        done(&s, id, &l);
    });
    pump(shared, server_r, client, &shared.delay_down_us);
    done(shared, id, &left);
    let _ = up.join();
}

/// The last pump of a connection forgets its streams.
fn done(shared: &Shared, id: u64, left: &AtomicUsize) {
    if left.fetch_sub(1, Ordering::SeqCst) == 1 {
        shared.streams.lock().unwrap().remove(&id);
    }
}

/// Copy `from` to `to` chunk by chunk, each after the current delay; pass end-of-file on.
fn pump(shared: &Shared, mut from: TcpStream, mut to: TcpStream, delay_us: &AtomicU64) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        };
        let delay = Duration::from_micros(delay_us.load(Ordering::SeqCst));
        if !delay.is_zero() {
            sleep_unless_stopped(shared, delay);
        }
        if shared.stop.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let until = Instant::now() + d;
    while !shared.stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}
