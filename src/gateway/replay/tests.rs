//! Tests of what names a request for its kept answer: every variable but the connection's, the
//! configuration's place and bytes; and which requests may have one at all.

use super::*;

fn env(vars: &[(&str, &str)]) -> Env {
    let mut env = Env::new();
    for (name, value) in vars {
        env.set(name, value.as_bytes());
    }
    env
}

const GET: [(&str, &str); 4] = [
    ("REQUEST_METHOD", "GET"),
    ("REMOTE_ADDR", "192.0.2.7"),
    ("QUERY_STRING", "link=https%3A%2F%2Fexample.com%2Ff"),
    ("HTTP_ACCEPT", "text/plain"),
];

/// The request's tag under a key of the test's.
fn key_of(path: &str, text: &str, env: &Env) -> u64 {
    Request::new(PathBuf::from(path), text.as_bytes(), env).tag(siphash::Key(1, 2))
}

#[test]
fn a_request_is_named_by_all_it_says_but_its_connection() {
    let base = key_of("/home/u/resolve/config.json", "{}", &env(&GET));
    // The connection's own variables change nothing.
    let mut with_port = GET.to_vec();
    with_port.push(("REMOTE_PORT", "50123"));
    with_port.push(("UNIQUE_ID", "aGVsbG8"));
    with_port.push(("H2_STREAM_ID", "7"));
    assert_eq!(
        key_of("/home/u/resolve/config.json", "{}", &env(&with_port)),
        base
    );
    // Anything else does: each variable, a new one, the configuration's place or bytes.
    for (i, _) in GET.iter().enumerate() {
        let mut changed = GET.to_vec();
        changed[i].1 = "other";
        assert_ne!(
            key_of("/home/u/resolve/config.json", "{}", &env(&changed)),
            base,
            "{i}"
        );
    }
    let mut more = GET.to_vec();
    more.push(("HTTP_USER_AGENT", "curl/8"));
    assert_ne!(
        key_of("/home/u/resolve/config.json", "{}", &env(&more)),
        base
    );
    assert_ne!(
        key_of("/home/v/resolve/config.json", "{}", &env(&GET)),
        base
    );
    assert_ne!(
        key_of("/home/u/resolve/config.json", "{ }", &env(&GET)),
        base
    );
    // A name and a value are told apart from their neighbours.
    let joined = env(&[("AB", "C")]);
    let split = env(&[("A", "BC")]);
    assert_ne!(
        key_of("/c.json", "", &joined),
        key_of("/c.json", "", &split)
    );
}

#[test]
fn a_request_is_tagged_under_the_files_key() {
    let env = env(&GET);
    let request = Request::new(PathBuf::from("/home/u/resolve/config.json"), b"{}", &env);
    assert_eq!(
        request.tag(siphash::Key(1, 2)),
        request.tag(siphash::Key(1, 2))
    );
    assert_ne!(
        request.tag(siphash::Key(1, 2)),
        request.tag(siphash::Key(1, 3))
    );
}

#[test]
fn only_a_request_without_a_body_may_have_a_kept_answer() {
    let request = |vars: &[(&str, &str)]| {
        let env = env(vars);
        Request::new(PathBuf::from("/home/u/resolve/config.json"), b"{}", &env).may_keep()
    };
    assert!(request(&[("REQUEST_METHOD", "GET")]));
    assert!(request(&[
        ("REQUEST_METHOD", "HEAD"),
        ("CONTENT_LENGTH", "")
    ]));
    assert!(request(&[
        ("REQUEST_METHOD", "GET"),
        ("CONTENT_LENGTH", "0")
    ]));
    assert!(!request(&[
        ("REQUEST_METHOD", "GET"),
        ("CONTENT_LENGTH", "12")
    ]));
    assert!(!request(&[("REQUEST_METHOD", "POST")]));
    assert!(!request(&[("REQUEST_METHOD", "OPTIONS")]));
    assert!(!request(&[]));
}

#[test]
fn the_data_directory_is_the_default_one_beside_the_configuration() {
    let env = env(&GET);
    let request = Request::new(PathBuf::from("/home/u/resolve/config.json"), b"{}", &env);
    assert_eq!(
        request.data_dir(),
        Some(PathBuf::from("/home/u/resolve/ratelimit"))
    );
}

#[test]
fn without_a_kept_answer_the_request_goes_the_full_way() {
    let dir = crate::support::temp::Dir::new("replay", "none");
    let config = dir.join("config.json");
    std::fs::create_dir(dir.join("ratelimit")).unwrap();
    let env = env(&GET);
    let request = Request::new(config, b"{}", &env);
    let mut out = Vec::new();
    assert!(!answer(&request, Instant::now(), &mut out));
    assert!(out.is_empty());
}
