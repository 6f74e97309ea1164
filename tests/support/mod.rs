//! Shared harness for the integration tests: temp dirs, a real Apache (mod_cgid or mod_fcgid), MariaDB and Redis on loopback, a delaying proxy, a provider stand-in, a scripted multi-route API stand-in, a keep-alive provider stand-in, an HTTP client, a direct CGI runner and a direct FastCGI runner.
#![allow(dead_code, unused_imports)]

pub mod apache;
pub mod api_standin;
pub mod cgi;
pub mod client;
pub mod config;
pub mod delay_proxy;
pub mod fcgi;
pub mod keep_alive;
pub mod mariadb;
pub mod provider;
pub mod redis;
pub mod system;
pub mod temp;
pub mod urlenc;

pub use apache::{Apache, ApacheBuilder, Mode};
pub use cgi::{Cgi, CgiAnswer, CgiOutput, StdinMode};
pub use client::{HttpClient, Request, Response, fire};
pub use delay_proxy::DelayProxy;
pub use mariadb::MariaDb;
pub use provider::{Provider, RecordedRequest, Reply};
pub use redis::Redis;
pub use system::{ServerUser, binary, is_root, server_user};
pub use temp::TempDir;
