//! The FastCGI process: finding the listening socket on standard input, accepting connections
//! from the web server, keeping a site loaded while its configuration file stays the same, and
//! draining and exiting after `fastcgi.max_requests`.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use socket2::Socket;

use crate::admin::broken::Cause;
use crate::config::locate::{self, Located};
use crate::gateway::fastcgi::connection::{
    Ended, IO_TIMEOUT, Request, Responder, env_from_params, serve_connection,
};
use crate::gateway::signals;
use crate::http::request::Env;
use crate::site::{self, Site};
use crate::support::defaults;
use crate::support::log::{Context, Level, Log, StderrLog};

/// The listening socket the web server passed as standard input, if it did: `getpeername` on
/// it fails with ENOTCONN (spec section 2.2). A pipe, file or terminal (ENOTSOCK) and a
/// connected socket give None: CGI, or a command.
pub fn listener_on_stdin() -> Option<Socket> {
    let stdin = io::stdin();
    // Asked of standard input itself: a CGI request (every request, under mod_cgid) pays one
    // system call here, not a copy of the descriptor and its closing too.
    match socket2::SockRef::from(&stdin.as_fd()).peer_addr() {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => {
            let fd = stdin.as_fd().try_clone_to_owned().ok()?;
            Some(Socket::from(fd))
        }
        _ => None,
    }
}

/// The identity of a file as far as change goes: an edit, a replacement or a removal changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let m = fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// A site and what it was loaded from.
struct Loaded {
    /// The RESOLVE_CONFIG it was located with.
    name: Option<OsString>,
    /// The file that holds it (or would: the home directory's, while defaults apply), and that
    /// file's stamp when it was read.
    watched: PathBuf,
    stamp: Option<Stamp>,
    site: Site,
    /// Where the configuration was found, to judge each request's web root against.
    located: Located,
}

impl Loaded {
    /// The site `name` locates, its log lines carrying `log` and the configuration's name.
    fn load(name: Option<OsString>, env: &Env, log: &Context) -> Result<Loaded, String> {
        let located = site::web_root::locate(env, name.clone()).map_err(|e| e.to_string())?;
        let log = log.clone().naming(located.describe());
        let watched = match &located {
            Located::File(source) => source.path().to_owned(),
            Located::Defaults { base } => base.join(defaults::CONFIG_FILE_NAME),
        };
        // Stamped before reading: a change made during the read is seen at the next request.
        let stamp = stamp(&watched);
        let config = locate::load(&located).map_err(|e| e.to_string())?;
        Ok(Loaded {
            name,
            watched,
            stamp,
            site: Site::long_lived(config, log),
            located,
        })
    }

    fn is_current(&self, name: &Option<OsString>) -> bool {
        self.name == *name && stamp(&self.watched) == self.stamp
    }
}

/// Answers requests with a site loaded once and kept while its configuration stays the same.
pub struct Sites {
    loaded: Option<Loaded>,
    served: u64,
    answered_by_site: bool,
    /// The last request was admitted: the owner's account may be read after its answer.
    admitted: bool,
    /// What the process's own lines carry: the time, and the configuration last located.
    log: Context,
}

impl Sites {
    /// No site loaded yet; lines carry `log`.
    pub fn new(log: Context) -> Sites {
        Sites {
            loaded: None,
            served: 0,
            answered_by_site: false,
            admitted: false,
            log,
        }
    }

    /// The process's log, its lines naming the configuration last located.
    fn log(&self) -> StderrLog {
        StderrLog::new(self.log.clone())
    }

    /// The site for a request whose RESOLVE_CONFIG (a FastCGI param, as `SetEnv` sends it, else
    /// the process's own, as `FcgidInitialEnv` sets it) is `name`.
    fn site(&mut self, name: Option<OsString>, env: &Env) -> Result<&Loaded, String> {
        if !self.loaded.as_ref().is_some_and(|l| l.is_current(&name)) {
            // What the old site holds is written by it; then it is dropped first: a store
            // connection is never open twice.
            self.finish();
            self.loaded = None;
            let loaded = Loaded::load(name, env, &self.log)?;
            self.log = loaded.site.log_context().clone();
            self.loaded = Some(loaded);
        }
        match &self.loaded {
            Some(l) => Ok(l),
            None => Err("no configuration".into()),
        }
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Writes what the loaded site's store holds back: before the site is replaced, when the
    /// process is idle, and before it exits.
    pub fn finish(&self) {
        if let Some(l) = &self.loaded {
            l.site.app().flush_journal();
        }
    }
}

impl Responder for Sites {
    fn respond(&mut self, request: &Request) -> Vec<u8> {
        let started = std::time::Instant::now();
        let env = env_from_params(&request.params);
        self.served += 1;
        let name = env
            .get(defaults::CONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(|v| OsString::from_vec(v.to_vec()))
            .or_else(|| std::env::var_os(defaults::CONFIG_ENV));
        // Where the settings lie is judged on the way, only for what would be served; at once
        // where the data directory is missing, before the store makes it again.
        let loaded =
            self.site(name.clone(), &env).and_then(|l| {
                match site::web_root::refusal_first(&env, &l.located, &l.site.config) {
                    Some(refused) => Err(refused),
                    None => Ok(l),
                }
            });
        let mut answer = match loaded {
            Ok(l) => {
                // Nothing secret under this request's web root, judged only for what would be
                // served, as under CGI.
                let answer = {
                    let check = site::settings_check(&env, &l.located, l.site.log_context());
                    l.site.answer(&env, &mut &request.stdin[..], &check)
                };
                self.answered_by_site = true;
                answer
            }
            Err(message) => {
                self.answered_by_site = false;
                let located = locate::locate(None, name).ok();
                if let Some(l) = &located {
                    self.log = self.log.clone().naming(l.describe());
                }
                // A file that could not be read is judged by its place first.
                let (message, cause) = match located
                    .as_ref()
                    .and_then(|l| site::web_root::refusal(&env, l, None))
                {
                    Some(misplaced) => (misplaced, Cause::UnderWebRoot { every: true }),
                    None => (message, Cause::Unreadable),
                };
                site::not_configured(&env, &message, located.as_ref(), &self.log, cause)
            }
        };
        self.admitted = answer.admitted;
        answer.response.timed(started.elapsed());
        let mut out = Vec::with_capacity(256 + answer.response.body.len());
        // Writing to a Vec cannot fail.
        let _ = answer.response.write_cgi(&mut out, answer.head_only);
        out
    }

    fn after(&mut self) {
        if self.answered_by_site
            && self.admitted
            && let Some(l) = &self.loaded
        {
            l.site.app().read_account_if_due();
        }
        if self.answered_by_site
            && let Some(l) = &self.loaded
            && l.site.app().maybe_sweep()
        {
            site::page_files::keep_for(&l.site.config, l.site.log());
        }
    }

    fn idle(&mut self) {
        self.finish();
    }

    fn done(&self) -> bool {
        let max = self
            .loaded
            .as_ref()
            .map_or(defaults::FASTCGI_MAX_REQUESTS, |l| {
                l.site.config.fastcgi_max_requests
            });
        self.served >= u64::from(max)
    }
}

/// FCGI_WEB_SERVER_ADDRS: the addresses a TCP listener takes connections from (spec 3.2).
fn allowed_servers() -> Option<Vec<IpAddr>> {
    let list = std::env::var("FCGI_WEB_SERVER_ADDRS").ok()?;
    Some(
        list.split(',')
            .filter_map(|a| a.trim().parse().ok())
            .collect(),
    )
}

/// Serves the connections to `listener` until `sites` is done; a connection's failure
/// is logged and ends that connection only.
///
/// Waiting for a connection wakes now and then to let `sites` write what it holds, and
/// to end the loop when the process was asked to stop (SIGTERM, which mod_fcgid sends to a
/// process it retires): a request being answered is finished first.
pub fn serve(listener: &Socket, sites: &mut Sites) -> io::Result<()> {
    let allowed = allowed_servers();
    let mut draining = false;
    // An accept on a socket with a receive timeout returns at the timeout, and on a signal
    // even when the handler asks for calls to be restarted (signal(7)).
    listener.set_read_timeout(Some(std::time::Duration::from_millis(
        defaults::FASTCGI_IDLE_TICK_MS,
    )))?;
    loop {
        if signals::stop_asked() {
            return Ok(());
        }
        let conn = match listener.accept() {
            Ok((conn, peer)) => {
                let peer_ip = peer.as_socket().map(|a| a.ip());
                if let (Some(ip), Some(list)) = (peer_ip, &allowed)
                    && !list.contains(&ip)
                {
                    sites.log().line(
                        Level::Warn,
                        &format!(
                            "FastCGI connection from {ip} refused: not in FCGI_WEB_SERVER_ADDRS"
                        ),
                    );
                    continue;
                }
                conn
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Done, and no connection is waiting any more.
            Err(e) if draining && e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            // No connection for a while.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                sites.idle();
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
        let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
        let mut conn = conn;
        if let Ended::Broken(reason) = serve_connection(&mut conn, sites) {
            sites
                .log()
                .line(Level::Warn, &format!("FastCGI connection closed: {reason}"));
        }
        if sites.done() && !draining {
            // No new connection, then answer those already waiting, then exit. A Unix socket
            // shut down for reading refuses new connections (mod_fcgid then turns to another
            // process) and still hands out the waiting ones; a TCP one would drop them, so it
            // is left as it is.
            draining = true;
            if listener
                .local_addr()
                .is_ok_and(|a| a.domain() == socket2::Domain::UNIX)
            {
                listener.shutdown(std::net::Shutdown::Read)?;
            }
            listener.set_nonblocking(true)?;
        }
    }
}

/// Runs the process in FastCGI mode on the listening socket from standard input, its lines
/// carrying `log`.
pub fn run(listener: Socket, log: Context) -> u8 {
    signals::on_stop_finish_first();
    let mut sites = Sites::new(log);
    let served = serve(&listener, &mut sites);
    sites.finish();
    match served {
        Ok(()) => 0,
        Err(e) => {
            sites.log().line(
                Level::Error,
                &format!(
                    "FastCGI: accepting connections failed after {} requests: {e}",
                    sites.served()
                ),
            );
            1
        }
    }
}
