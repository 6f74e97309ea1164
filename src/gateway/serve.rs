//! `resolve serve`: try the site on this machine, like `php -S`. Serves `public/` and runs this
//! same binary as a CGI program for `/cgi-bin/resolve`, a fresh process per request with the
//! environment Apache would give it. For local use only: it binds to loopback by default.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::defaults;

/// The CGI program's path on the local site, as on a cPanel host.
pub const SCRIPT_NAME: &str = "/cgi-bin/resolve";
const MAX_HEAD_BYTES: usize = 16 * 1024;
const MAX_BODY_BYTES: usize = 1024 * 1024;
const MAX_CONNECTIONS: usize = 64;

/// Header lines as name and value.
pub type Headers = Vec<(String, String)>;

/// What `serve` runs with.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub addr: SocketAddr,
    pub public: PathBuf,
    /// The configuration file each CGI process is pointed at.
    pub config: PathBuf,
}

struct Request {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Listens until the process is stopped.
pub fn run(options: ServeOptions) -> io::Result<()> {
    let listener = TcpListener::bind(options.addr)?;
    eprintln!(
        "resolve serve: listening on http://{}/ (pages from {}, configuration {})",
        listener.local_addr()?,
        options.public.display(),
        options.config.display()
    );
    let options = Arc::new(options);
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = write_plain(&stream, 503, "busy: too many connections\n");
            continue;
        }
        let options = Arc::clone(&options);
        let active = Arc::clone(&active);
        std::thread::spawn(move || {
            let _ = handle(stream, &options);
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

fn handle(stream: TcpStream, options: &ServeOptions) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let peer = stream.peer_addr()?;
    let local = stream.local_addr()?;
    let request = match read_request(&stream) {
        Ok(r) => r,
        Err((status, why)) => return write_plain(&stream, status, &format!("{why}\n")),
    };
    let path = request.target.split('?').next().unwrap_or("/");
    // `/cgi-bin/resolve/admin` runs the program too, with `/admin` as its PATH_INFO.
    let path_info = path
        .strip_prefix(SCRIPT_NAME)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'));
    if let Some(path_info) = path_info {
        run_cgi(&stream, &request, path_info, peer, local, options)
    } else {
        serve_file(&stream, &request, path, &options.public)
    }
}

fn read_request(stream: &TcpStream) -> Result<Request, (u16, &'static str)> {
    let mut reader = BufReader::new(stream);
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader
            .by_ref()
            .take((MAX_HEAD_BYTES + 1 - head.len().min(MAX_HEAD_BYTES)) as u64)
            .read_until(b'\n', &mut line)
            .map_err(|_| (400, "could not read the request"))?;
        if n == 0 {
            return Err((400, "incomplete request"));
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD_BYTES {
            return Err((431, "request header too large"));
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, target, version) = match (first.next(), first.next(), first.next()) {
        (Some(m), Some(t), Some(v)) if !m.is_empty() && t.starts_with('/') => (m, t, v),
        _ => return Err((400, "malformed request line")),
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if header("Transfer-Encoding").is_some() {
        return Err((411, "send a Content-Length"));
    }
    let length = match header("Content-Length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| (400, "bad Content-Length"))?,
    };
    if length > MAX_BODY_BYTES {
        return Err((413, "body too large"));
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .map_err(|_| (400, "body shorter than Content-Length"))?;
    Ok(Request {
        method: method.to_owned(),
        target: target.to_owned(),
        version: version.to_owned(),
        headers,
        body,
    })
}

/// Headers a CGI program never gets from Apache (credentials, httpoxy), or that cannot be
/// named as a variable.
fn passed_to_cgi(name: &str) -> bool {
    !name.eq_ignore_ascii_case("Authorization")
        && !name.eq_ignore_ascii_case("Proxy-Authorization")
        && !name.eq_ignore_ascii_case("Proxy")
        && !name.eq_ignore_ascii_case("Content-Type")
        && !name.eq_ignore_ascii_case("Content-Length")
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn run_cgi(
    stream: &TcpStream,
    request: &Request,
    path_info: &str,
    peer: SocketAddr,
    local: SocketAddr,
    options: &ServeOptions,
) -> io::Result<()> {
    let query = request.target.split_once('?').map_or("", |(_, q)| q);
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env(
            "SERVER_SOFTWARE",
            concat!("resolve-serve/", env!("CARGO_PKG_VERSION")),
        )
        .env("SERVER_NAME", local.ip().to_string())
        .env("SERVER_ADDR", local.ip().to_string())
        .env("SERVER_PORT", local.port().to_string())
        .env("SERVER_PROTOCOL", &request.version)
        .env("REQUEST_METHOD", &request.method)
        .env("REQUEST_URI", &request.target)
        .env("REQUEST_SCHEME", "http")
        .env("SCRIPT_NAME", SCRIPT_NAME)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", peer.ip().to_string())
        .env("REMOTE_PORT", peer.port().to_string())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(defaults::CONFIG_ENV, &options.config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if !path_info.is_empty() {
        cmd.env("PATH_INFO", path_info);
    }
    for (name, value) in &request.headers {
        if name.eq_ignore_ascii_case("Content-Type") {
            cmd.env("CONTENT_TYPE", value);
        } else if passed_to_cgi(name) {
            cmd.env(
                format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_")),
                value,
            );
        }
    }
    if request.method == "POST" || !request.body.is_empty() {
        cmd.env("CONTENT_LENGTH", request.body.len().to_string());
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // The program may answer without reading the body (a refusal): ignore a broken pipe.
        let _ = stdin.write_all(&request.body);
    }
    let output = child.wait_with_output()?;
    match parse_cgi_output(&output.stdout) {
        Some((status, headers, body)) => {
            write_response(stream, status, &headers, body, request.method == "HEAD")
        }
        None => write_plain(
            stream,
            500,
            "the CGI program's answer was malformed (see the log above)\n",
        ),
    }
}

/// Splits a CGI answer into status, headers and body.
pub fn parse_cgi_output(out: &[u8]) -> Option<(u16, Headers, &[u8])> {
    let end = out
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let end = end.or_else(|| {
        out.windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| (i, i + 4))
    })?;
    let head = std::str::from_utf8(&out[..end.0]).ok()?;
    let mut status = 200;
    let mut headers = Vec::new();
    for line in head.lines() {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            status = value.split(' ').next()?.parse().ok()?;
        } else {
            headers.push((name.to_owned(), value.to_owned()));
        }
    }
    Some((status, headers, &out[end.1..]))
}

fn write_response(
    mut stream: &TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\n",
        crate::http::response::reason(status)
    )
    .into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    if !head_only {
        out.extend_from_slice(body);
    }
    stream.write_all(&out)?;
    stream.flush()
}

fn write_plain(stream: &TcpStream, status: u16, text: &str) -> io::Result<()> {
    let headers = [(
        "Content-Type".to_owned(),
        "text/plain; charset=utf-8".to_owned(),
    )];
    write_response(stream, status, &headers, text.as_bytes(), false)
}

fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file under `public` that a URL path names, if it stays inside `public`.
pub fn file_for(public: &Path, url_path: &str) -> Option<PathBuf> {
    let decoded = crate::net::form::decode(url_path.replace('+', "%2B").as_bytes()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    if decoded.contains('\0') {
        return None;
    }
    let mut path = public.to_owned();
    for part in Path::new(decoded.trim_start_matches('/')).components() {
        match part {
            Component::Normal(p) if !p.to_string_lossy().starts_with('.') => path.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if path.is_dir() {
        path.push("index.html");
    }
    Some(path)
}

fn serve_file(
    stream: &TcpStream,
    request: &Request,
    url_path: &str,
    public: &Path,
) -> io::Result<()> {
    if request.method != "GET" && request.method != "HEAD" {
        let headers = [
            ("Allow".to_owned(), "GET, HEAD".to_owned()),
            (
                "Content-Type".to_owned(),
                "text/plain; charset=utf-8".to_owned(),
            ),
        ];
        return write_response(stream, 405, &headers, b"method not allowed\n", false);
    }
    let Some(path) = file_for(public, url_path) else {
        return write_plain(stream, 404, "not found\n");
    };
    match std::fs::read(&path) {
        Ok(body) => {
            let headers = [("Content-Type".to_owned(), content_type(&path).to_owned())];
            write_response(stream, 200, &headers, &body, request.method == "HEAD")
        }
        Err(_) => write_plain(stream, 404, "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_public() {
        let public = Path::new("/srv/public");
        assert_eq!(
            file_for(public, "/style.css"),
            Some("/srv/public/style.css".into())
        );
        assert_eq!(
            file_for(public, "/a%20b.css"),
            Some("/srv/public/a b.css".into())
        );
        for bad in [
            "/../etc/passwd",
            "/%2e%2e/x",
            "/a/../../x",
            "/.htaccess",
            "/x%00y",
            "/%zz",
        ] {
            assert_eq!(file_for(public, bad), None, "{bad}");
        }
    }

    #[test]
    fn cgi_output_is_split() {
        let (status, headers, body) =
            parse_cgi_output(b"Status: 429 Too Many Requests\nRetry-After: 5\n\nwait\n").unwrap();
        assert_eq!(status, 429);
        assert_eq!(headers, vec![("Retry-After".to_owned(), "5".to_owned())]);
        assert_eq!(body, b"wait\n");
        assert_eq!(
            parse_cgi_output(b"Content-Type: text/plain\n\n").unwrap().0,
            200
        );
        assert!(parse_cgi_output(b"no blank line").is_none());
        assert!(parse_cgi_output(b"not a header\n\n").is_none());
    }
}
