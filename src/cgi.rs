//! The CGI adapter: the environment and standard input in, one answer on standard output, log
//! lines on standard error. Whatever happens, a valid CGI answer is written. [`Site`] (a loaded
//! configuration with its store and provider) is shared with FastCGI mode, which keeps one for
//! many requests.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::sync::mpsc;
use std::time::Duration;

use crate::app::{Answer, App};
use crate::config::Config;
use crate::defaults;
use crate::http_provider::HttpProvider;
use crate::locate;
use crate::log::{Level, Log, StderrLog};
use crate::negotiate;
use crate::problem::Problem;
use crate::provider::{EchoProvider, Provider, ProviderSpec};
use crate::render;
use crate::request::Env;
use crate::store::Store;
use crate::stores;

/// The request's meta-variables, as the server set them.
pub fn env_from_process() -> Env {
    let mut env = Env::new();
    for (name, value) in std::env::vars_os() {
        if let Ok(name) = name.into_string() {
            env.set(&name, value.into_vec());
        }
    }
    env
}

/// A configuration with the store and the provider it names, ready to answer requests. The
/// store opens its connection on first use and keeps it; the provider keeps its HTTP agent (and
/// the agent its idle connections).
pub struct Site {
    pub config: Config,
    log: StderrLog,
    store: Box<dyn Store>,
    provider: Option<Box<dyn Provider>>,
}

impl Site {
    pub fn new(config: Config) -> Site {
        let provider: Option<Box<dyn Provider>> = match &config.provider {
            None => None,
            Some(ProviderSpec::Echo) => Some(Box::new(EchoProvider)),
            Some(ProviderSpec::Http(spec)) => Some(Box::new(HttpProvider::new((**spec).clone()))),
        };
        Site {
            // Every form of every secret: a provider echoes a token percent-encoded or quoted.
            log: StderrLog::new(crate::secret::all_forms(&config.secrets())),
            store: stores::open(&config),
            provider,
            config,
        }
    }

    /// The request handler, borrowing this site's parts.
    pub fn app(&self) -> App<'_> {
        App {
            config: &self.config,
            store: self.store.as_ref(),
            provider: self.provider.as_deref(),
            log: &self.log,
        }
    }
}

/// The answer when no configuration could be loaded: 503, and `message` in the log.
pub fn not_configured(env: &Env, message: &str) -> Answer {
    StderrLog::default().line(Level::Error, message);
    let p = Problem::new(
        503,
        "not_configured",
        "This service is not set up correctly yet. Please try again later.",
    )
    .retry_after(defaults::NOT_CONFIGURED_RETRY_AFTER_SECS);
    Answer {
        response: render::problem(negotiate::from_accept(env.header("Accept")), &p),
        head_only: env.get("REQUEST_METHOD") == Some(b"HEAD"),
    }
}

/// Serves one CGI request. Returns normally in every case: errors become answers.
pub fn run() {
    let env = env_from_process();
    let located = locate::locate(None, std::env::var_os(defaults::CONFIG_ENV));
    let config = located.and_then(|l| locate::load(&l));
    let config = match config {
        Ok(c) => c,
        Err(message) => {
            let answer = not_configured(&env, &message);
            let _ = answer
                .response
                .write_cgi(io::stdout().lock(), answer.head_only);
            drain_stdin(&env, 0);
            return;
        }
    };
    serve_one(config, &env);
}

/// Answers one request with a loaded configuration.
pub fn serve_one(config: Config, env: &Env) {
    let site = Site::new(config);
    let app = site.app();
    // Unbuffered, so that no byte past CONTENT_LENGTH is taken from the server (RFC 3875 4.2).
    let mut stdin = Counted {
        inner: stdin_unbuffered().ok(),
        read: 0,
    };
    let answer = app.handle(env, &mut stdin);
    let mut out = io::stdout().lock();
    if let Err(e) = answer.response.write_cgi(&mut out, answer.head_only) {
        app.log.line(
            Level::Notice,
            &format!("the client left before the answer was written: {e}"),
        );
    }
    let _ = out.flush();
    drop(out);
    drain_stdin(env, stdin.read);
    app.maybe_sweep();
}

/// Standard input, counting what was taken from it.
struct Counted {
    inner: Option<File>,
    read: u64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match &mut self.inner {
            Some(f) => f.read(buf)?,
            None => 0,
        };
        self.read += n as u64;
        Ok(n)
    }
}

fn stdin_unbuffered() -> io::Result<File> {
    Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
}

/// Most request body the program throws away after answering.
const DRAIN_MAX_BYTES: u64 = 1024 * 1024;
/// Longest it waits for that body.
const DRAIN_MAX_WAIT: Duration = Duration::from_secs(2);

/// Reads and discards what is left of the request body. Apache (mod_cgid) drops the program's
/// answer when the program exits before taking the whole body, so a refusal sent without
/// reading the body would never arrive. Bounded in bytes and time: a client that sends more, or
/// slower, loses its answer, not the server's time.
fn drain_stdin(env: &Env, already_read: u64) {
    let declared = env
        .text("CONTENT_LENGTH")
        .and_then(|v| v.parse::<u64>().ok());
    let left = match declared {
        Some(len) => len.saturating_sub(already_read).min(DRAIN_MAX_BYTES),
        // No length: a chunked body may follow, except on the methods that carry none.
        None if matches!(env.get("REQUEST_METHOD"), Some(b"GET" | b"HEAD")) => 0,
        None => DRAIN_MAX_BYTES,
    };
    if left == 0 {
        return;
    }
    let Ok(stdin) = stdin_unbuffered() else {
        return;
    };
    let (done, wait) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = io::copy(&mut stdin.take(left), &mut io::sink());
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(DRAIN_MAX_WAIT);
}
