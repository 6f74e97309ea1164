//! TLS to a database server (MySQL/MariaDB, Redis): the public web roots plus the CA bundle of
//! `store.ca_file` when one is given, the server's certificate always checked against the host
//! name. There is no setting that skips the check.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// The certificates of a PEM bundle (`store.ca_file`), or why it cannot serve, in a sentence
/// that says how to fix it.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::NotFound => "there is no such file".to_owned(),
            io::ErrorKind::PermissionDenied => {
                "the program may not read it (make it readable by the user the web server runs \
                 the program as)"
                    .to_owned()
            }
            _ => e.to_string(),
        };
        format!(
            "{shown} cannot be read: {why}; set store.ca_file to the CA bundle (PEM) your \
             provider publishes"
        )
    })?;
    let not_pem = |why: &str| {
        format!(
            "{shown} is not a PEM bundle of certificates ({why}); download the provider's CA \
             bundle again, in PEM form (text starting with -----BEGIN CERTIFICATE-----)"
        )
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem(&e.to_string()))?;
    if certs.is_empty() {
        return Err(not_pem("no certificate in it"));
    }
    let mut roots = rustls::RootCertStore::empty();
    let (_, refused) = roots.add_parsable_certificates(certs.iter().cloned());
    if refused > 0 || roots.is_empty() {
        return Err(not_pem(&format!(
            "{refused} of its {} certificates cannot be a CA",
            certs.len()
        )));
    }
    Ok(certs)
}

/// A client session to `host`, trusting the public roots and `ca_file`'s certificates.
pub fn session(host: &str, ca_file: Option<&Path>) -> Result<rustls::ClientConnection, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        roots.add_parsable_certificates(
            read_ca_file(path).map_err(|e| format!("store.ca_file: {e}"))?,
        );
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| format!("TLS: {host} is not a server name"))?;
    rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| format!("TLS: {e}"))
}

/// Completes the handshake on `socket`, so that a certificate refused is an error of the
/// connect, not of the first command.
pub fn handshake(
    session: &mut rustls::ClientConnection,
    socket: &mut (impl Read + Write),
) -> io::Result<()> {
    while session.is_handshaking() {
        session.complete_io(socket)?;
    }
    Ok(())
}

/// The session's protocol version and cipher suite, e.g. `TLSv1.3, TLS13_AES_256_GCM_SHA384`.
pub fn describe(session: &rustls::ClientConnection) -> String {
    let version = match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_owned(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_owned(),
        Some(v) => format!("{v:?}"),
        None => "TLS".to_owned(),
    };
    match session.negotiated_cipher_suite() {
        Some(suite) => format!("{version}, {:?}", suite.suite()),
        None => version,
    }
}

/// A TLS failure in `e`, said with what to change (`host_field` names the setting that holds
/// the host name); None when `e` is not one.
pub fn explain(e: &io::Error, host_field: &str) -> Option<String> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    use rustls::CertificateError as C;
    Some(match tls {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            "TLS: the server's certificate is not signed by a CA resolve trusts (the public \
             roots, and store.ca_file if set): set store.ca_file to the CA bundle (PEM) that \
             signed it, as your provider publishes it"
                .to_owned()
        }
        rustls::Error::InvalidCertificate(C::NotValidForName)
        | rustls::Error::InvalidCertificate(C::NotValidForNameContext { .. }) => format!(
            "TLS: the server's certificate is not for the host name resolve connects to: set \
             {host_field} to the name the certificate is for (the name the provider gives, \
             not an address)"
        ),
        rustls::Error::InvalidCertificate(other) => format!(
            "TLS: the server's certificate was refused ({other:?}); check store.ca_file and \
             the certificate on the server"
        ),
        other => format!("TLS: {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_cannot_serve_says_how_to_fix_it() {
        let dir = crate::support::temp::Dir::new("tls", "ca");
        let missing = dir.join("none.pem");
        let e = read_ca_file(&missing).unwrap_err();
        assert!(e.contains("there is no such file"), "{e}");
        assert!(e.contains("set store.ca_file"), "{e}");
        let text = dir.join("text.pem");
        std::fs::write(&text, "not a certificate\n").unwrap();
        let e = read_ca_file(&text).unwrap_err();
        assert!(e.contains("no certificate in it"), "{e}");
        let broken = dir.join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = read_ca_file(&broken).unwrap_err();
        assert!(e.contains("is not a PEM bundle"), "{e}");
        assert!(session("localhost", Some(&text)).is_err());
    }

    #[test]
    fn refused_certificates_say_what_to_set() {
        let tls = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let unknown = tls(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        let said = explain(&unknown, "store.host").unwrap();
        assert!(
            said.contains("set store.ca_file to the CA bundle"),
            "{said}"
        );
        let other_name = tls(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        ));
        let said = explain(&other_name, "store.host").unwrap();
        assert!(said.contains("set store.host to the name"), "{said}");
        let expired = tls(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Expired,
        ));
        assert!(explain(&expired, "store.host").unwrap().contains("Expired"));
        assert_eq!(explain(&io::Error::other("plain"), "store.host"), None);
        assert_eq!(explain(&io::ErrorKind::TimedOut.into(), "store.host"), None);
    }

    #[test]
    fn a_session_checks_the_name() {
        assert!(session("db.example", None).is_ok());
        assert!(session("", None).is_err());
    }
}
