//! A test CA made at test time with the openssl command: its certificate, and a server
//! certificate it signs for `localhost` and 127.0.0.1 (or other names), readable by the
//! servers' account.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::system::require;
use super::temp::TempDir;

pub const OPENSSL: &str = "/usr/bin/openssl";

/// A CA and the server certificate it signed, in a directory of their own.
pub struct TestCa {
    dir: TempDir,
}

impl TestCa {
    /// A fresh CA named `name`, and a server certificate (for `localhost` and 127.0.0.1).
    pub fn new(name: &str) -> TestCa {
        TestCa::for_names(name, "DNS:localhost,IP:127.0.0.1")
    }

    /// The same with a server certificate for `names` (a subjectAltName, e.g.
    /// `DNS:elsewhere.test`).
    pub fn for_names(name: &str, names: &str) -> TestCa {
        require(Path::new(OPENSSL), "openssl (package openssl)");
        let dir = TempDir::new(&format!("ca-{name}"));
        let at = |f: &str| dir.join(f).display().to_string();
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=resolve test CA {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &at("ca.key"),
            "-out",
            &at("ca.pem"),
        ]);
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &at("server.key"),
            "-out",
            &at("server.csr"),
        ]);
        // clientAuth too: the nodes of a Redis Cluster over TLS present it to each other on the
        // cluster bus, where the accepting node checks it whatever `tls-auth-clients` says.
        dir.write(
            "server.ext",
            format!(
                "subjectAltName={names}\n\
                 basicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature,keyEncipherment\n\
                 extendedKeyUsage=serverAuth,clientAuth\n"
            ),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            &at("server.csr"),
            "-CA",
            &at("ca.pem"),
            "-CAkey",
            &at("ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &at("server.ext"),
            "-out",
            &at("server.pem"),
        ]);
        // The servers run as an unprivileged account: they must read the key (a test key).
        for f in ["ca.pem", "server.pem", "server.key"] {
            super::temp::set_mode(&dir.join(f), 0o644);
        }
        TestCa { dir }
    }

    /// The CA's certificate (PEM): what `store.ca_file` names.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The server's certificate (PEM), for `localhost` and 127.0.0.1.
    pub fn cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// The server's private key (PEM).
    pub fn key(&self) -> PathBuf {
        self.dir.join("server.key")
    }
}

fn openssl(args: &[&str]) {
    let out = Command::new(OPENSSL)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run openssl: {e}"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
