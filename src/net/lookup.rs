//! Looking up the address of a host an outgoing HTTPS call goes to (the provider, siteverify),
//! within the call's deadline: ureq's resolver, with the lookup waited for on a thread of its
//! own through [`crate::support::waited`] instead of ureq's channel (a CGI process sets up the
//! per-thread state of every channel it links, on every request, refused or not).

use std::net::{SocketAddr, ToSocketAddrs};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::support::waited;

/// An agent for `config` whose name lookups are [`Lookup`]'s.
pub fn agent(config: Config) -> ureq::Agent {
    ureq::Agent::with_parts(config, DefaultConnector::default(), Lookup)
}

/// The system's resolver (`getaddrinfo`), given up on when the call's time runs out.
#[derive(Debug, Default)]
pub struct Lookup;

/// `host:port` of a URI, the port the scheme's when none is written.
fn host_and_port(uri: &Uri) -> Result<String, ureq::Error> {
    let bad = |why: &str| ureq::Error::BadUri(format!("{uri}: {why}"));
    let scheme = uri.scheme_str().ok_or_else(|| bad("no scheme"))?;
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    let port = match (authority.port_u16(), scheme) {
        (Some(port), _) => port,
        (None, "https") => 443,
        (None, "http") => 80,
        (None, _) => return Err(bad("a scheme other than http or https")),
    };
    Ok(format!("{}:{port}", authority.host()))
}

impl Resolver for Lookup {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addr = host_and_port(uri)?;
        let found: Vec<SocketAddr> = if timeout.after.is_not_happening() {
            addr.to_socket_addrs()?.collect()
        } else {
            let lookup = move || addr.to_socket_addrs().map(Iterator::collect);
            match waited::run_for(*timeout.after, None, lookup)? {
                Some(found) => found?,
                None => return Err(ureq::Error::Timeout(timeout.reason)),
            }
        };
        let mut kept = self.empty();
        for addr in config.ip_family().keep_wanted(found.into_iter()) {
            if kept.try_push(addr).is_err() {
                break;
            }
        }
        if kept.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;
    use ureq::unversioned::transport::time::Duration as UreqDuration;

    fn uri(text: &str) -> Uri {
        text.parse().unwrap()
    }

    fn within(secs: u64) -> NextTimeout {
        NextTimeout {
            after: UreqDuration::from_secs(secs),
            reason: ureq::Timeout::Resolve,
            per_read: None,
            per_write: None,
        }
    }

    #[test]
    fn the_port_is_the_schemes_unless_written() {
        assert_eq!(
            host_and_port(&uri("https://127.0.0.1/x")).unwrap(),
            "127.0.0.1:443"
        );
        assert_eq!(
            host_and_port(&uri("http://127.0.0.1/x")).unwrap(),
            "127.0.0.1:80"
        );
        assert_eq!(
            host_and_port(&uri("http://127.0.0.1:8080/x")).unwrap(),
            "127.0.0.1:8080"
        );
        assert!(matches!(
            host_and_port(&uri("ftp://127.0.0.1/x")),
            Err(ureq::Error::BadUri(_))
        ));
        assert!(matches!(
            host_and_port(&uri("/only/a/path")),
            Err(ureq::Error::BadUri(_))
        ));
    }

    #[test]
    fn an_address_is_found_with_and_without_a_deadline() {
        let config = Config::default();
        for timeout in [
            within(30),
            NextTimeout {
                after: UreqDuration::NotHappening,
                ..within(0)
            },
        ] {
            let got = Lookup
                .resolve(&uri("http://127.0.0.1:9/x"), &config, timeout)
                .unwrap();
            assert_eq!(&got[..], &["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
        }
    }

    #[test]
    fn an_agent_calls_through_the_lookup() {
        // A server on loopback that answers one request with 204.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                seen.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                .unwrap();
        });
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build();
        let status = agent(config)
            .get(format!("http://127.0.0.1:{port}/x"))
            .call()
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 204);
        server.join().unwrap();
    }
}
