//! The command line: how the program was started decides what it does. With a listening socket
//! as standard input it is a FastCGI program (mod_fcgid starts it so); else, with
//! GATEWAY_INTERFACE set, a CGI program (which ignores its arguments: Apache passes a query
//! without '=' as arguments); otherwise it runs a command.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use crate::config::Config;
use crate::config::locate::{self, Located};
use crate::gateway::serve::{self, ServeOptions};
use crate::store::settings::StoreKind;
use crate::support::defaults;
use crate::support::log::{Context, StderrLog};

const HELP: &str = "\
resolve: a rate-limited gateway to paid link-resolver APIs

A web server runs it as a CGI program (cgi-bin/resolve): each request is checked
against the rate limits and, only when admitted, sent to the provider.

Commands:
  resolve serve [--addr ADDR] [--public DIR] [--config FILE]
        Try the site on this machine: serves DIR (default ./public) and runs
        itself as CGI for /cgi-bin/resolve. ADDR defaults to 127.0.0.1:8080.
        Without a provider in the configuration it uses the echo provider.
  resolve check [--config FILE] [--live LINK]
        Check the configuration and the store; print the effective
        configuration with secrets masked. Exit status 1 when not ready.
        --live LINK also resolves LINK once with the provider (a real,
        possibly paid call; no limit is counted).
  resolve sweep [--config FILE]
        Remove rate-limit data whose windows ended long ago (for cron).
  resolve stats [--since 24h|7d|30d] [--json] [--config FILE]
        Paid calls, cache hits (paid calls saved), refusals by rule, spend
        limits used and left, top clients, provider failures and the last
        ACTION NEEDED events, from the usage journal. Default: --since 24h.
  resolve report [--only-problems] [--config FILE]
        Yesterday's (UTC) summary for a daily cron job, warnings first. With
        --only-problems it prints nothing (so cron sends no mail) unless
        something needs the owner.
  resolve block ADDRESS|RANGE [--for 24h] [--reason TEXT] [--wide] [--config FILE]
        Refuse a client or a range (403) on every server sharing the store,
        for a while (--for 90s, 30m, 24h, 7d) or until unblocked. A range
        wider than an IPv4 /16 or an IPv6 /32 needs --wide.
  resolve unblock ADDRESS|RANGE [--config FILE]
  resolve blocks [--config FILE]
        The blocks in force: range, until when, why (automatic or not).
  resolve hash-key
        Read an API key on standard input and print its SHA-256, the value
        api_keys.keys[].sha256 holds: echo -n 'THE-KEY' | resolve hash-key
  resolve hash-password
        Read the dashboard's password on standard input and print its Argon2id
        hash, the value admin.password_hash holds (at least 12 characters):
        printf '%s' 'THE PASSWORD' | resolve hash-password
  resolve --help | --version

Configuration: --config FILE, else $RESOLVE_CONFIG, else ~/resolve/config.json
of the account running the program (found without any environment variable).
";

/// Parsed command-line options.
#[derive(Debug, Default)]
struct Options {
    config: Option<PathBuf>,
    addr: Option<String>,
    public: Option<PathBuf>,
    live: Option<String>,
    since: Option<String>,
    json: bool,
    only_problems: bool,
    wide: bool,
    duration: Option<String>,
    reason: Option<String>,
}

fn parse_options(args: &[OsString], allowed: &[&str]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let name = arg.to_string_lossy().into_owned();
        if !allowed.contains(&name.as_str()) {
            return Err(format!("unexpected argument {name:?}; see resolve --help"));
        }
        match name.as_str() {
            "--json" => {
                o.json = true;
                continue;
            }
            "--only-problems" => {
                o.only_problems = true;
                continue;
            }
            "--wide" => {
                o.wide = true;
                continue;
            }
            _ => {}
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{name} needs a value; see resolve --help"))?;
        match name.as_str() {
            "--config" => o.config = Some(PathBuf::from(value)),
            "--addr" => o.addr = Some(value.to_string_lossy().into_owned()),
            "--public" => o.public = Some(PathBuf::from(value)),
            "--live" => o.live = Some(value.to_string_lossy().into_owned()),
            "--since" => o.since = Some(value.to_string_lossy().into_owned()),
            "--for" => o.duration = Some(value.to_string_lossy().into_owned()),
            "--reason" => o.reason = Some(value.to_string_lossy().into_owned()),
            _ => unreachable!("checked against allowed"),
        }
    }
    Ok(o)
}

/// How the program ends: 0 done, 1 a check or command found something wrong, 2 the command
/// could not run (a usage or configuration error).
pub type ExitCode = u8;
const SUCCESS: ExitCode = 0;
const FAILURE: ExitCode = 1;
const CANNOT_RUN: ExitCode = 2;

/// The program's entry point; `args` gives the arguments after the program's name, read only
/// when a command needs them.
pub fn main(args: impl FnOnce() -> Vec<OsString>) -> ExitCode {
    // Most starts are CGI requests: memory comes from the arena until the process is found to
    // live long (the first blocks, such as standard input's buffer, are taken before it knows).
    crate::gateway::arena::use_for_this_process();
    crate::gateway::signals::at_start();
    // Every log line's time is written as UTC, by the calendar.
    let log = Context::new(crate::core::calendar::iso);
    if let Some(listener) = crate::gateway::fastcgi::process::listener_on_stdin() {
        return fastcgi(listener, log);
    }
    if std::env::var_os("GATEWAY_INTERFACE").is_some() {
        crate::gateway::cgi::run(log);
        // Answered, flushed and every value of the request dropped: nothing is left for the
        // runtime's teardown to do that the kernel does not do with the process.
        crate::gateway::exit::now(0);
    }
    commands(args, log)
}

// The FastCGI process and the commands each run in a function of their own, never inlined
// here: their values would otherwise take room in this function's frame, which every CGI
// request's stack starts below (each 4 KiB page of stack a request touches is a page fault).

#[inline(never)]
fn fastcgi(listener: socket2::Socket, log: Context) -> ExitCode {
    crate::gateway::arena::stop_for_this_process();
    crate::gateway::fastcgi::process::run(listener, log)
}

#[inline(never)]
fn commands(args: impl FnOnce() -> Vec<OsString>, log: Context) -> ExitCode {
    crate::gateway::arena::stop_for_this_process();
    match command(&args(), &log) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("resolve: {message}");
            CANNOT_RUN
        }
    }
}

/// The configuration a command reads (the starter is made where the account has none), and
/// `log` naming it, for the lines written under it.
fn locate_from(options: &Options, log: &Context) -> Result<(Located, Context), String> {
    let located = crate::site::web_root::locate_for_command(
        options.config.clone(),
        std::env::var_os(defaults::CONFIG_ENV),
    )
    .map_err(|e| e.to_string())?;
    let log = log.clone().naming(located.describe());
    Ok((located, log))
}

/// The configuration a command reads, loaded, and `log` naming it.
fn load_from(options: &Options, log: &Context) -> Result<(Config, Context), String> {
    let (located, log) = locate_from(options, log)?;
    let config = locate::load(&located).map_err(|e| e.to_string())?;
    Ok((config, log))
}

fn command(args: &[OsString], log: &Context) -> Result<ExitCode, String> {
    let first = args.first().map(|a| a.to_string_lossy().into_owned());
    let rest = args.get(1..).unwrap_or_default();
    match first.as_deref() {
        None | Some("--help" | "-h" | "help") => {
            print!("{HELP}");
            Ok(SUCCESS)
        }
        Some("--version" | "-V") => {
            println!("resolve {}", env!("CARGO_PKG_VERSION"));
            Ok(SUCCESS)
        }
        Some("check") => {
            let options = parse_options(rest, &["--config", "--live"])?;
            let (located, log) = match locate_from(&options, log) {
                Ok(found) => found,
                // A configuration missing where one was is a failed check, said as one.
                Err(e) => {
                    println!("FAIL {e}\nNOT READY: fix the lines marked FAIL");
                    return Ok(FAILURE);
                }
            };
            let ok = crate::command::check::run(
                &located,
                options.live.as_deref(),
                &mut std::io::stdout().lock(),
                &log,
            );
            Ok(if ok { SUCCESS } else { FAILURE })
        }
        Some("sweep") => {
            let options = parse_options(rest, &["--config"])?;
            let (config, log) = load_from(&options, log)?;
            let report = crate::site::open::from_config(&config, &log)
                .upkeep
                .sweep(None)
                .map_err(|e| e.to_string())?;
            // The page files the owner edited, kept, or put back after an upgrade.
            crate::site::page_files::keep_for(&config, &StderrLog::new(log));
            let looked = if report.scanned > 0 {
                format!("{} keys looked at, ", report.scanned)
            } else {
                String::new()
            };
            println!(
                "swept: {looked}{} removed, {} damaged",
                report.removed, report.damaged
            );
            Ok(SUCCESS)
        }
        Some("stats") => {
            let options = parse_options(rest, &["--config", "--since", "--json"])?;
            let hours = crate::usage::stats::parse_since(options.since.as_deref().unwrap_or("24h"))
                .map_err(|e| e.to_string())?;
            let (config, log) = load_from(&options, log)?;
            let store = crate::site::open::for_requests(&config, &log);
            let now = crate::core::clock::Clock::now_ms(&crate::core::clock::SystemClock);
            let stats = crate::usage::stats::Stats::gather(&config, &store, now, hours)
                .map_err(|e| format!("the usage journal could not be read: {e}"))?;
            if options.json {
                println!("{:#}", stats.json());
            } else {
                print!("{}", stats.text());
            }
            Ok(SUCCESS)
        }
        Some("report") => {
            let options = parse_options(rest, &["--config", "--only-problems"])?;
            let (config, log) = load_from(&options, log)?;
            // The owner's account, when a day has passed since it was last read.
            crate::site::Site::new(config.clone(), log.clone())
                .app()
                .read_account_if_due();
            let store = crate::site::open::for_requests(&config, &log);
            let now = crate::core::clock::Clock::now_ms(&crate::core::clock::SystemClock);
            let (from, to) = crate::usage::report::yesterday(now);
            let stats = crate::usage::stats::Stats::gather_hours(&config, &store, now, from, to)
                .map_err(|e| format!("the usage journal could not be read: {e}"))?;
            if let Some(text) = crate::usage::report::render(&stats, options.only_problems) {
                print!("{text}");
            }
            Ok(SUCCESS)
        }
        Some(verb @ ("block" | "unblock")) => {
            let target = rest
                .first()
                .map(|a| a.to_string_lossy().into_owned())
                .filter(|a| !a.starts_with("--"))
                .ok_or_else(|| {
                    format!(
                        "resolve {verb} needs an address or range, e.g. resolve {verb} 203.0.113.7"
                    )
                })?;
            let allowed: &[&str] = if verb == "block" {
                &["--config", "--for", "--reason", "--wide"]
            } else {
                &["--config"]
            };
            let options = parse_options(&rest[1..], allowed)?;
            let (config, log) = load_from(&options, log)?;
            let store = crate::site::open::from_config(&config, &log);
            crate::command::blocks::command(
                &*store.cache,
                crate::app::controls::blocks::copy_path(&config).as_deref(),
                &crate::core::clock::SystemClock,
                verb,
                &target,
                &crate::command::blocks::Asked {
                    duration: options.duration.as_deref(),
                    reason: options.reason.as_deref(),
                    wide: options.wide,
                },
            )
            .map(|line| {
                println!("{line}");
                SUCCESS
            })
        }
        Some("blocks") => {
            let options = parse_options(rest, &["--config"])?;
            let (config, log) = load_from(&options, log)?;
            let store = crate::site::open::from_config(&config, &log);
            print!(
                "{}",
                crate::command::blocks::listing(
                    &*store.cache,
                    &config,
                    &crate::core::clock::SystemClock
                )?
            );
            Ok(SUCCESS)
        }
        Some("hash-key") => {
            parse_options(rest, &[])?;
            let mut key = String::new();
            std::io::stdin()
                .read_line(&mut key)
                .map_err(|e| format!("cannot read the key: {e}"))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(
                    "no key on standard input: echo -n 'THE-KEY' | resolve hash-key".into(),
                );
            }
            println!("{}", crate::http::api_key::hash(key));
            Ok(SUCCESS)
        }
        Some("hash-password") => {
            parse_options(rest, &[])?;
            println!("{}", hash_password(&mut std::io::stdin().lock())?);
            Ok(SUCCESS)
        }
        Some("serve") => {
            let options = parse_options(rest, &["--config", "--addr", "--public"])?;
            serve_command(&options)
        }
        Some(other) => Err(format!("unknown command {other:?}; see resolve --help")),
    }
}

/// The hash of the password on the first line of `input` (its line ending left out), refused
/// when too short.
fn hash_password(input: &mut dyn std::io::BufRead) -> Result<String, String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the password: {e}"))?;
    let password = line
        .strip_suffix('\n')
        .map_or(line.as_str(), |l| l.strip_suffix('\r').unwrap_or(l));
    crate::support::password::check_strength(password).map_err(|e| {
        format!("{e}; nothing was made: printf '%s' 'THE PASSWORD' | resolve hash-password")
    })?;
    let salt = crate::support::random::secret_bytes::<16>()
        .map_err(|e| format!("cannot read random bytes for the salt: {e}"))?;
    crate::support::password::hash(password, &salt).map_err(|e| e.to_string())
}

fn serve_command(options: &Options) -> Result<ExitCode, String> {
    let addr_text = options.addr.as_deref().unwrap_or(defaults::SERVE_ADDR);
    let addr = addr_text
        .parse()
        .map_err(|_| format!("--addr {addr_text:?} is not an address like 127.0.0.1:8080"))?;
    let public = options
        .public
        .clone()
        .unwrap_or_else(|| PathBuf::from(defaults::SERVE_PUBLIC_DIR));
    if !public.join("index.html").is_file() {
        return Err(format!(
            "{} has no index.html: run from the project's directory or pass --public DIR",
            public.display()
        ));
    }
    let public = std::path::absolute(&public).map_err(|e| e.to_string())?;
    // Trying the program on a computer makes nothing in the home directory.
    let located = locate::locate(
        options.config.clone(),
        std::env::var_os(defaults::CONFIG_ENV),
    )
    .map_err(|e| e.to_string())?;
    let config = locate::load(&located).map_err(|e| e.to_string())?;
    let config_path = match &located {
        Located::File(source) if config.provider.is_some() => source.path().to_owned(),
        _ => {
            // No provider named: the CGI processes read the owner's configuration (or the
            // defaults, with the data directory here) plus the echo provider, from a private
            // directory: the file may hold a database password.
            let mut text: serde_json::Value = match &located {
                Located::File(source) => std::fs::read_to_string(source.path())
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .ok_or("cannot read the configuration again")?,
                Located::Defaults { .. } => {
                    // The defaults need no writing out: the data directory here is all.
                    let here =
                        std::path::absolute(defaults::DATA_DIR_NAME).map_err(|e| e.to_string())?;
                    serde_json::json!({"store": {"kind": "file", "dir": here}})
                }
            };
            text["provider"] = serde_json::json!({"kind": "echo"});
            if let Located::File(source) = &located
                && let Some(parent) = source.path().parent()
                && let Some(dir) = text["store"]["dir"].as_str()
            {
                // Relative paths stay relative to the owner's file, not to the copy.
                text["store"]["dir"] = parent.join(dir).display().to_string().into();
            }
            if let StoreKind::File { dir } = &config.store.kind
                && matches!(located, Located::File(_))
            {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            let tmp = std::env::temp_dir().join(format!("resolve-serve-{}", std::process::id()));
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&tmp)
                .map_err(|e| e.to_string())?;
            let path = tmp.join("config.json");
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut f| f.write_all(text.to_string().as_bytes()))
                .map_err(|e| e.to_string())?;
            eprintln!(
                "resolve serve: no provider configured: using the echo provider (each link is \
                 answered with itself; nothing is spent)"
            );
            path
        }
    };
    let _ = std::io::stdout().flush();
    serve::run(ServeOptions {
        addr,
        public,
        config: config_path,
    })
    .map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    Ok(SUCCESS)
}
