//! The CGI adapter: the environment and standard input in, one answer on standard output, log
//! lines on standard error. Whatever happens, a valid CGI answer is written.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::time::{Duration, Instant};

use crate::admin::broken::Cause;
use crate::config::Config;
use crate::config::locate;
use crate::gateway::replay;
use crate::http::request::Env;
use crate::site::{Site, not_configured, settings_check, web_root};
use crate::support::defaults;
use crate::support::log::{Context, Level};
use crate::support::waited;

/// The request's meta-variables, as the server set them.
pub fn env_from_process() -> Env {
    let vars = std::env::vars_os();
    let mut env = Env::with_capacity(vars.size_hint().0);
    for (name, value) in vars {
        if let Ok(name) = name.into_string() {
            env.set_owned(name, value.into_vec());
        }
    }
    env
}

/// Serves one CGI request, its log lines carrying `log` and the configuration located.
/// Returns normally in every case: errors become answers.
pub fn run(log: Context) {
    let started = Instant::now();
    let env = env_from_process();
    let located = web_root::locate(&env, std::env::var_os(defaults::CONFIG_ENV));
    let log = match &located {
        Ok(l) => log.naming(l.describe()),
        Err(_) => log,
    };
    // The configuration's text, read once: a refusal kept for this very request is answered
    // from it before it is parsed.
    let text = match &located {
        Ok(locate::Located::File(source)) => Some(locate::read_text(source)),
        _ => None,
    };
    let request = match (&located, &text) {
        (Ok(locate::Located::File(source)), Some(Ok(text))) => Some(replay::Request::new(
            source.path().to_owned(),
            text.as_bytes(),
            &env,
        )),
        _ => None,
    };
    if let Some(request) = &request
        && replay::answer(request, started, &mut io::stdout().lock())
    {
        return;
    }
    let loaded = located.map_err(|e| (e.to_string(), None)).and_then(|l| {
        let text = match &text {
            Some(Ok(text)) => Some(text.as_str()),
            Some(Err(e)) => return Err((e.to_string(), Some(l))),
            None => None,
        };
        match locate::load_for_one_request(&l, text) {
            Ok(config) => Ok((config, l)),
            Err(e) => Err((e.to_string(), Some(l))),
        }
    });
    match loaded {
        // Where the settings lie is judged on the way, only for what would be served; at once
        // where the data directory is missing, before the store makes it again.
        Ok((config, located)) => match web_root::refusal_first(&env, &located, &config) {
            Some(message) => {
                let cause = Cause::UnderWebRoot { every: true };
                answer_not_configured(&env, &message, Some(&located), cause, started, &log);
            }
            None => serve_one(config, &located, request.as_ref(), &env, started, log),
        },
        Err((message, located)) => {
            // Nothing secret under the web root: that comes before any mistake in the file.
            let (message, cause) = match located
                .as_ref()
                .and_then(|l| web_root::refusal(&env, l, None))
            {
                Some(misplaced) => (misplaced, Cause::UnderWebRoot { every: true }),
                None => (message, Cause::Unreadable),
            };
            answer_not_configured(&env, &message, located.as_ref(), cause, started, &log);
        }
    }
}

/// Answers a request that cannot be served with the configuration found (`message` says why).
/// Never inlined, nor is `serve_one`: each keeps its values in a frame of its own instead of
/// `run`'s, below which the configuration is read (every 4 KiB of stack a request reaches is
/// a page fault).
#[inline(never)]
fn answer_not_configured(
    env: &Env,
    message: &str,
    located: Option<&locate::Located>,
    cause: Cause,
    started: Instant,
    log: &Context,
) {
    let mut answer = not_configured(env, message, located, log, cause);
    answer.response.timed(started.elapsed());
    let _ = answer
        .response
        .write_cgi(io::stdout().lock(), answer.head_only);
    drain_stdin(env, 0);
}

/// Whether every path this request goes on to use is whole, so that the process may change
/// its working directory (to the data directory: [`Site::for_one_request`]): its settings'
/// place (and so every path they name) and the ones the server gives, as Apache always does.
fn whole_paths(located: &locate::Located, env: &Env) -> bool {
    let settings = match located {
        locate::Located::File(source) => source.path().is_absolute(),
        locate::Located::Defaults { base } => base.is_absolute(),
    };
    settings
        && ["DOCUMENT_ROOT", "CONTEXT_DOCUMENT_ROOT", "SCRIPT_FILENAME"]
            .iter()
            .all(|name| env.get(name).is_none_or(|path| path.starts_with(b"/")))
}

/// Answers one request with a loaded configuration; `request`: the request as its kept answer
/// is named (when the configuration was read from a file); `started`: when the request began;
/// `log`: what its lines carry.
#[inline(never)]
pub fn serve_one(
    config: Config,
    located: &locate::Located,
    request: Option<&replay::Request<'_>>,
    env: &Env,
    started: Instant,
    log: Context,
) {
    // What a refusal answered from memory rested on beside the request: the block list, read
    // before the way reads it.
    let blocks = request.and_then(|r| replay::blocks_before(r, &config, replay::now_ms()));
    let site = Site::for_one_request(config, log, whole_paths(located, env));
    // Unbuffered, so that no byte past CONTENT_LENGTH is taken from the server (RFC 3875 4.2).
    let mut stdin = Counted {
        inner: None,
        read: 0,
    };
    // Nothing secret under the web root, judged only for what would be served.
    let check = settings_check(env, located, site.log_context());
    let mut answer = site.answer(env, &mut stdin, &check);
    if let (Some(request), Some(keepable)) = (request, answer.keep.take()) {
        replay::keep(
            request,
            &site.config,
            blocks,
            keepable,
            &answer.response,
            answer.head_only,
        );
    }
    answer.response.timed(started.elapsed());
    let mut out = io::stdout().lock();
    if let Err(e) = answer.response.write_cgi(&mut out, answer.head_only) {
        site.log().line(
            Level::Notice,
            &format!("the client left before the answer was written: {e}"),
        );
    }
    let _ = out.flush();
    drop(out);
    drain_stdin(env, stdin.read);
    if answer.admitted {
        site.app().read_account_if_due();
    }
    if site.app().maybe_sweep() {
        crate::site::page_files::keep_for(&site.config, site.log());
    }
}

/// Standard input, counting what was taken from it; opened (unbuffered) at the first read, so
/// that a request without a body never copies its descriptor.
struct Counted {
    /// None until the first read; then the descriptor's copy, if it could be made.
    inner: Option<Option<File>>,
    read: u64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.inner.get_or_insert_with(|| stdin_unbuffered().ok()) {
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
    let _ = waited::run_for(DRAIN_MAX_WAIT, None, move || {
        let _ = io::copy(&mut stdin.take(left), &mut io::sink());
    });
}
