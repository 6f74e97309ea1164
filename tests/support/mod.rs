//! The support kit shared by the integration tests: a cPanel-style account under suEXEC; temp dirs and free ports; one provider stand-in on one HTTP reader; one site harness (configuration, store, stand-in, and a real Apache under mod_cgid or mod_fcgid); a browser for the owner's dashboard; MariaDB and Redis on loopback; a test CA for TLS; a delaying proxy; an HTTP client; direct CGI and FastCGI runners.
#![allow(dead_code, unused_imports)]

pub mod account;
pub mod apache;
pub mod cgi;
pub mod client;
pub mod config;
pub mod dashboard;
pub mod delay_proxy;
pub mod fcgi;
pub mod http;
pub mod mariadb;
pub mod net;
pub mod process;
pub mod provider;
pub mod redis;
pub mod redis_cluster;
pub mod rng;
pub mod site;
pub mod siteverify;
pub mod system;
pub mod temp;
pub mod timing;
pub mod tls;
pub mod urlenc;

pub use account::HostUser;
pub use apache::{Apache, ApacheBuilder, Mode};
pub use cgi::{Cgi, CgiOutput, StdinMode};
pub use client::{HttpClient, Request, Response, fire};
pub use delay_proxy::DelayProxy;
pub use mariadb::MariaDb;
pub use net::free_port;
pub use provider::{Call, Provider, Reply};
pub use redis::Redis;
pub use site::{Setup, Site};
pub use system::{ServerUser, binary, is_root, server_user};
pub use temp::TempDir;
