//! resolve: a rate-limited gateway to paid link-resolver APIs, run as a CGI program.
//!
//! The layers, lowest first. A module imports from its own layer and those below it, never
//! from one above: a request goes down the layers and back out without climbing back up
//! (`tests/layout.rs` keeps this order, and checks it against this list).
//! - support: [`support`]: every default in one place, secrets and the owner's log that
//!   masks them, how the effective configuration is written, HTML escaping, password hashes,
//!   sampling, hex text.
//! - net: [`net`]: URLs, address ranges and sets of them, the CDN's ranges, form encoding.
//! - core: [`core`]: rules, the limiter's decision, the journal's entries and the clock;
//!   pure, tested with a fake clock.
//! - edges: [`http`] (reading a request and writing the answer; pure), [`provider`] (the
//!   paid API described as data, and the HTTPS call), [`store`] (where counters, the cache
//!   and the journal live: files, MySQL/MariaDB, Redis, memory, one small trait per role),
//!   [`challenge`] (the challenge a visitor may solve: siteverify, the remembering cookie).
//! - config: [`config`]: the configuration file, checked into plain data
//!   ([`config::Config`]); it does no HTTP work and opens nothing.
//! - service: [`app`]: one request from start to answer, the owner's controls beside it
//!   (block, allow, `auto_block`, shadow rules) and the journal's entries it makes.
//! - usage: [`usage`]: the journal's figures gathered once, yesterday's report, the
//!   readiness report.
//! - admin: [`admin`]: the owner's dashboard behind a password.
//! - commands and gateways: [`command`] (the command line, `resolve check`, blocks),
//!   [`gateway`] (CGI, FastCGI and `resolve serve`, each turning its transport into a
//!   request) and [`site`] (what a running site holds, wired from its configuration: the
//!   store it opens, the provider, the dashboard's route).
//! - main: `main.rs`, which calls [`command::cli::main`].
//!
//! The library is the binary's, not a published API (`publish = false`): every layer is public
//! so that the integration tests, the benchmarks and the fuzz targets can drive it directly;
//! `tests/layout.rs` also keeps a core without I/O and no import cycles between files.
// No unsafe code but the start's signal settings in `gateway::signals`, the allocator in
// `gateway::arena` and the CGI process's exit in `gateway::exit`, which allow it for
// themselves.
#![deny(unsafe_code)]

pub mod admin;
pub mod app;
pub mod challenge;
pub mod command;
pub mod config;
pub mod core;
pub mod gateway;
pub mod http;
pub mod net;
pub mod provider;
pub mod site;
pub mod store;
pub mod support;
pub mod usage;
