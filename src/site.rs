//! What a running site holds: the checked configuration with the store and the provider it
//! names. A CGI process builds one per request; a FastCGI process keeps one for many. A site
//! whose secrets lie under the web root is refused ([`web_root`]).

pub mod open;
pub mod page_files;
pub mod web_root;

use crate::app::workers::{Turn, Worker, Workers};
use crate::app::{Answer, App, SiteCheck};
use std::io::Read;
use std::time::Duration;

use crate::admin::broken::Cause;
use crate::config::Config;
use crate::config::locate::Located;
use crate::core::clock::{Clock, SystemClock};
use crate::http::negotiate;
use crate::http::problem::{Kind, Problem};
use crate::http::render;
use crate::http::request::Env;
use crate::provider::described::ProviderSpec;
use crate::provider::http::HttpProvider;
use crate::provider::{EchoProvider, Provider};
use crate::store::roles::Store;
use crate::support::defaults;
use crate::support::log::{Context, Level, Log, StderrLog};

/// A configuration with the store and the provider it names, ready to answer requests. The
/// store opens its connection on first use and keeps it; the provider keeps its HTTP agent (and
/// the agent its idle connections).
pub struct Site {
    pub config: Config,
    log: StderrLog,
    store: Store,
    provider: Option<Box<dyn Provider>>,
    /// The services after the first, when the configuration lists several.
    others: Vec<Box<dyn Provider>>,
    /// How long a request's several links may take: the web server's time limit for a CGI
    /// program, or for a FastCGI one.
    links_budget: Duration,
}

impl Site {
    /// A site for one request (CGI), whose log lines carry `log`.
    pub fn new(config: Config, log: Context) -> Site {
        let store = crate::site::open::for_requests(&config, &log);
        Site::with_store(config, store, log)
    }

    /// A site for the one request of a process that then exits (CGI): its file store works
    /// in the data directory when `whole_paths` says every path the request goes on to use is
    /// whole ([`crate::site::open::for_one_request`]).
    pub fn for_one_request(config: Config, log: Context, whole_paths: bool) -> Site {
        let store = crate::site::open::for_one_request(&config, &log, whole_paths);
        Site::with_store(config, store, log)
    }

    /// The time a request's several links may take (CGI's by default).
    fn for_fastcgi(self) -> Site {
        Site {
            links_budget: Duration::from_millis(defaults::LINKS_TIME_BUDGET_FASTCGI_MS),
            ..self
        }
    }

    /// A site for a process that answers request after request (FastCGI): its store holds
    /// journal entries and remembers refusals for a moment (see [`crate::store::held`]).
    pub fn long_lived(config: Config, log: Context) -> Site {
        let store = crate::site::open::for_requests(&config, &log);
        let store = crate::store::held::held(store, StderrLog::new(log.clone()));
        Site::with_store(config, store, log).for_fastcgi()
    }

    fn with_store(config: Config, store: Store, log: Context) -> Site {
        let made = |spec: &ProviderSpec| -> Box<dyn Provider> {
            match spec {
                ProviderSpec::Echo => Box::new(EchoProvider),
                ProviderSpec::Http(spec) => Box::new(HttpProvider::shared(spec.clone())),
            }
        };
        let provider = config.provider.as_ref().map(made);
        let others = config
            .services
            .iter()
            .skip(1)
            .map(|s| made(&s.spec))
            .collect();
        Site {
            // Every form of every secret: a provider echoes a token percent-encoded or quoted.
            log: StderrLog::new(log).masking(config.secrets()),
            store,
            provider,
            others,
            config,
            links_budget: Duration::from_millis(defaults::LINKS_TIME_BUDGET_MS),
        }
    }

    /// Answers one request: the owner's dashboard (PATH_INFO /admin) with its own answers,
    /// never counted as a visit; anything else (the page's `?about=1` too) by the request
    /// handler. `body` is read as [`App::handle`] reads it. `check` judges the site's set-up
    /// for whatever would be served ([`SiteCheck`]): the dashboard always.
    pub fn answer(&self, env: &Env, body: &mut dyn Read, check: SiteCheck<'_>) -> Answer {
        if crate::admin::is_admin(env) && !crate::http::about::is_about(env) {
            if let Some(response) = check(&self.config) {
                return Answer {
                    response,
                    head_only: env.get("REQUEST_METHOD") == Some(b"HEAD"),
                    admitted: false,
                    keep: None,
                };
            }
            self.store.upkeep.begin_request();
            let dashboard = crate::admin::Dashboard {
                config: &self.config,
                store: &self.store,
                log: &self.log,
                now_ms: SystemClock.now_ms(),
            };
            return Answer {
                response: dashboard.answer(env, body),
                head_only: env.get("REQUEST_METHOD") == Some(b"HEAD"),
                admitted: false,
                keep: None,
            };
        }
        let workers = Reopened {
            config: &self.config,
            log: self.log.context(),
            budget: self.links_budget,
        };
        App {
            workers: Some(&workers),
            site_check: Some(check),
            ..self.app()
        }
        .handle(env, body)
    }

    /// The owner's log, secrets masked.
    pub fn log(&self) -> &dyn Log {
        &self.log
    }

    /// What its log lines carry after their message.
    pub fn log_context(&self) -> &Context {
        self.log.context()
    }

    /// The request handler, borrowing this site's parts.
    pub fn app(&self) -> App<'_> {
        App {
            config: &self.config,
            store: &self.store,
            provider: self.provider.as_deref(),
            others: &self.others,
            log: &self.log,
            clock: &SystemClock,
            workers: None,
            site_check: None,
            turn: None,
        }
    }
}

/// A request's several links answered on threads of their own, each with this site opened
/// again: its own store connection and provider client, as a CGI process would have.
struct Reopened<'a> {
    config: &'a Config,
    log: &'a Context,
    budget: Duration,
}

impl Workers for Reopened<'_> {
    fn worker(&self) -> Box<dyn Worker + '_> {
        Box::new(Site::new(self.config.clone(), self.log.clone()))
    }

    fn budget(&self) -> Duration {
        self.budget
    }
}

impl Worker for Site {
    fn answer(&self, env: &Env, turn: Option<Turn<'_>>) -> crate::http::response::Response {
        App { turn, ..self.app() }
            .handle(env, &mut std::io::empty())
            .response
    }
}

/// A request's [`SiteCheck`]: where its settings lie ([`web_root::refusal`]), refused with
/// [`not_configured`]'s 503 (its log line carrying `log`).
pub fn settings_check<'a>(
    env: &'a Env,
    located: &'a Located,
    log: &'a Context,
) -> impl Fn(&Config) -> Option<crate::http::response::Response> + 'a {
    move |config| {
        web_root::refusal(env, located, Some(config)).map(|message| {
            let cause = Cause::UnderWebRoot { every: false };
            not_configured(env, &message, Some(located), log, cause).response
        })
    }
}

/// The answer when no configuration could be loaded: 503 to the visitor, with no detail, and
/// `message` (the file, the field, its line and column, the fix) in the log, each distinct
/// message at most once a minute when `located` names a file beside which the time of the last line can be kept;
/// the line carries `log`.
/// At the dashboard, the owner's page with the same message and how to mend the file
/// ([`crate::admin::broken`]).
pub fn not_configured(
    env: &Env,
    message: &str,
    located: Option<&Located>,
    log: &Context,
    cause: Cause,
) -> Answer {
    let stamp = match located {
        Some(Located::File(source)) => source
            .path()
            .parent()
            .map(|dir| dir.join(defaults::CONFIG_ERROR_STAMP)),
        _ => None,
    };
    let interval = Duration::from_secs(defaults::CONFIG_ERROR_LOG_INTERVAL_SECS);
    // Each distinct problem once a minute: a new mistake is logged at once, not hidden
    // behind the one just fixed.
    if stamp
        .as_deref()
        .is_none_or(|s| crate::support::recent::once_each(s, message, interval))
    {
        StderrLog::new(log.clone()).line(
            Level::Error,
            &format!(
                "{message} ({} gets 503 until this is fixed; this line is repeated at most once a minute)",
                cause.who()
            ),
        );
    }
    let p = Problem::new(
        503,
        Kind::NotConfigured,
        "This service is not set up correctly yet. Please try again later.",
    )
    .retry_after(defaults::NOT_CONFIGURED_RETRY_AFTER_SECS);
    // The page's script asks `?about=1` for JSON whatever it accepts.
    let format = if crate::http::about::is_about(env) {
        negotiate::Format::Json
    } else {
        negotiate::from_accept(env.header("Accept"))
    };
    let frame = render::Frame::new(env.text("SCRIPT_NAME"), None);
    // The owner at the dashboard is told what is wrong and how to mend it.
    let response = if crate::admin::is_admin(env) && !crate::http::about::is_about(env) {
        let file = match located {
            Some(Located::File(source)) => Some(source.path()),
            _ => None,
        };
        crate::admin::broken::page(crate::admin::own_path(env).as_deref(), message, file, cause)
    } else {
        render::problem(format, &p, &frame)
    };
    Answer {
        response,
        head_only: env.get("REQUEST_METHOD") == Some(b"HEAD"),
        admitted: false,
        keep: None,
    }
}
