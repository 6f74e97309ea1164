//! The CGI adapter: the environment and standard input in, one answer on standard output, log
//! lines on standard error. Whatever happens, a valid CGI answer is written.

use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;

use crate::app::App;
use crate::clock::SystemClock;
use crate::config::{Config, StoreKind};
use crate::defaults;
use crate::file_store::FileStore;
use crate::http_provider::HttpProvider;
use crate::locate;
use crate::log::{Level, Log, StderrLog};
use crate::negotiate;
use crate::problem::Problem;
use crate::provider::{EchoProvider, Provider, ProviderSpec};
use crate::render;
use crate::request::Env;

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

/// Serves one CGI request. Returns normally in every case: errors become answers.
pub fn run() {
    let env = env_from_process();
    let head_only = env.get("REQUEST_METHOD") == Some(b"HEAD");
    let located = locate::locate(None, std::env::var_os(defaults::CONFIG_ENV));
    let config = located.and_then(|l| locate::load(&l));
    let config = match config {
        Ok(c) => c,
        Err(message) => {
            StderrLog::default().line(Level::Error, &message);
            let p = Problem::new(
                503,
                "not_configured",
                "This service is not set up correctly yet. Please try again later.",
            )
            .retry_after(defaults::NOT_CONFIGURED_RETRY_AFTER_SECS);
            let format = negotiate::from_accept(env.header("Accept"));
            let _ = render::problem(format, &p).write_cgi(io::stdout().lock(), head_only);
            return;
        }
    };
    serve_one(&config, &env);
}

/// Answers one request with a loaded configuration.
pub fn serve_one(config: &Config, env: &Env) {
    let log = StderrLog::new(config.secrets());
    let StoreKind::File { dir } = &config.store.kind;
    let store = FileStore::new(dir, SystemClock, config.store.sweep_grace);
    let http;
    let provider: Option<&dyn Provider> = match &config.provider {
        None => None,
        Some(ProviderSpec::Echo) => Some(&EchoProvider),
        Some(ProviderSpec::Http(spec)) => {
            http = HttpProvider::new((**spec).clone());
            Some(&http)
        }
    };
    let app = App {
        config,
        store: &store,
        provider,
        log: &log,
    };
    let answer = app.handle(env, &mut io::stdin().lock());
    let mut out = io::stdout().lock();
    if let Err(e) = answer.response.write_cgi(&mut out, answer.head_only) {
        log.line(
            Level::Notice,
            &format!("the client left before the answer was written: {e}"),
        );
    }
    let _ = out.flush();
    drop(out);
    app.maybe_sweep();
}
