//! A refusal answered from the memory of refusals is kept, and the same request repeated is
//! given the same answer before the configuration is read (`gateway::replay`), for as long as
//! the full way would give it and no longer. The binary is run as a CGI program (no server);
//! the kept answer is also asked for in this process, through the library, so that a test
//! knows it was the kept answer that came back and not the full way's.

mod support;

use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::time::{Duration, Instant};

use resolve::gateway::replay;
use resolve::http::request::Env;
use serde_json::{Value, json};
use support::config::rule;
use support::urlenc::link_param;
use support::{Cgi, CgiOutput, Setup, binary};

const CLIENT: &str = "192.0.2.7";

/// The program's answer without its time taken, the one line that differs from run to run.
fn untimed(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with("Server-Timing: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `cgi`'s variables as the program reads them from its environment.
fn env_of(cgi: &Cgi) -> Env {
    let mut env = Env::new();
    for (name, value) in cgi.vars() {
        env.set(name.to_str().expect("a UTF-8 name"), value.as_bytes());
    }
    env
}

/// The kept answer for `cgi` (its configuration set), asked for in this process: Some(the
/// answer) when one was kept and still stands, None when the request would go the full way.
fn kept(setup: &Setup, cgi: &Cgi) -> Option<Vec<u8>> {
    let text = std::fs::read(&setup.config_path).expect("the configuration");
    let env = env_of(cgi);
    let request = replay::Request::new(setup.config_path.clone(), &text, &env);
    let mut out = Vec::new();
    replay::answer(&request, Instant::now(), &mut out).then_some(out)
}

fn request(setup: &Setup, accept: &str, method: &str) -> Cgi {
    Cgi::new(method, link_param("https://example.com/file/1"))
        .var("REMOTE_ADDR", CLIENT)
        .header("Accept", accept)
        .config(&setup.config_path)
}

fn run(cgi: &Cgi) -> CgiOutput {
    let out = cgi.run();
    assert!(out.stderr.is_empty(), "{}", out.describe());
    out
}

/// A refusal by the store, then one from the memory (the full way, which keeps its answer),
/// then the kept answer, all within the memory's second and its whole second of waits: tried
/// again from the start of a later second when the machine was too slow for that.
fn refused_then_kept(setup: &Setup, cgi: &Cgi) -> (CgiOutput, Vec<u8>) {
    for _ in 0..5 {
        // From the start of a second, so that the waits (whole seconds) stay as they are.
        let into = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_millis();
        std::thread::sleep(Duration::from_millis(u64::from(1010 - into)));
        let by_store = run(cgi);
        assert_eq!(by_store.answer().status, 429, "{}", by_store.describe());
        let by_memory = run(cgi);
        assert_eq!(by_memory.answer().status, 429, "{}", by_memory.describe());
        if let Some(answer) = kept(setup, cgi) {
            return (by_memory, answer);
        }
        // The memory lasts a second from the store's refusal: wait it out.
        std::thread::sleep(Duration::from_millis(1100));
    }
    panic!("no answer was kept within a second in 5 tries");
}

fn limited_site(label: &str) -> Setup {
    // The journal's spool and the refusals are where deploy.sh puts them: beside the file.
    Setup::builder(label)
        .rules(vec![rule("ip", "ip", 1, 86_400)])
        .write()
}

/// `resolve ARGS --config` the site's configuration, which must succeed: its output.
fn command(setup: &Setup, args: &[&str]) -> Vec<u8> {
    let out = Command::new(binary())
        .args(args)
        .arg("--config")
        .arg(&setup.config_path)
        .output()
        .expect("run resolve");
    assert!(
        out.status.success(),
        "resolve {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn stats(setup: &Setup) -> Value {
    serde_json::from_slice(&command(setup, &["stats", "--json"])).expect("stats --json is JSON")
}

/// Every format and both methods: the kept answer is the full way's, byte for byte but the
/// time taken, and the journal counts it as the full way counts a refusal.
#[test]
fn a_refusal_repeated_is_given_the_full_ways_answer_and_counted() {
    let setup = limited_site("replay-same");
    let first = run(&request(&setup, "text/plain", "GET"));
    assert_eq!(first.answer().status, 200, "{}", first.describe());
    let mut refusals = 0;
    for accept in [
        "text/plain",
        "application/json",
        "text/html,application/xhtml+xml,*/*;q=0.8",
    ] {
        for method in ["GET", "HEAD"] {
            let cgi = request(&setup, accept, method);
            let (by_memory, kept) = refused_then_kept(&setup, &cgi);
            // `refused_then_kept` may have tried more than once: each try made two refusals.
            refusals += 3;
            assert_eq!(
                untimed(&kept),
                untimed(&by_memory.stdout),
                "{accept} {method}"
            );
            assert!(
                String::from_utf8_lossy(&kept).contains("\nServer-Timing: app;dur="),
                "the kept answer says its own time taken"
            );
            // The program itself gives it again (kept or not, the same bytes).
            let again = run(&cgi);
            refusals += 1;
            assert_eq!(untimed(&again.stdout), untimed(&by_memory.stdout));
        }
    }
    assert_eq!(setup.provider.calls(), 1);
    let figures = stats(&setup);
    let refused = figures["refused"]["ip"].as_u64().unwrap_or(0);
    assert!(
        refused >= refusals,
        "the journal counted {refused} refusals, at least {refusals} were given:\n{figures:#}"
    );
    assert!(setup.data.join("answers").exists());
}

/// Whatever the kept answer rested on changes, the full way answers: a block, the
/// configuration, the memory's second over. Another connection of the same request (its port)
/// is still the same request; another address is not.
#[test]
fn a_kept_answer_stands_only_while_what_it_rested_on_does() {
    let setup = limited_site("replay-changes");
    let cgi = request(&setup, "text/plain", "GET");
    assert_eq!(run(&cgi).answer().status, 200);
    refused_then_kept(&setup, &cgi);
    assert!(kept(&setup, &cgi.clone().var("REMOTE_PORT", "50123")).is_some());
    assert!(kept(&setup, &cgi.clone().var("REMOTE_ADDR", "192.0.2.8")).is_none());
    assert!(kept(&setup, &cgi.clone().header("Accept", "application/json")).is_none());

    // Blocked: the list changed, so the full way answers, with its 403.
    command(&setup, &["block", CLIENT]);
    assert!(kept(&setup, &cgi).is_none(), "kept through a block");
    let blocked = cgi.run();
    assert_eq!(blocked.answer().status, 403, "{}", blocked.describe());
    command(&setup, &["unblock", CLIENT]);
    refused_then_kept(&setup, &cgi);

    // The configuration edited: another request as far as kept answers go.
    setup.edit_config(|c| c["rules"][0]["limit"] = json!(2));
    assert!(kept(&setup, &cgi).is_none(), "kept across an edit");
    // Two a day now: one more admitted, then refused again.
    assert_eq!(run(&cgi).answer().status, 200);
    refused_then_kept(&setup, &cgi);

    // The memory's second over: the store is asked again.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(
        kept(&setup, &cgi).is_none(),
        "kept past the memory's second"
    );
    assert_eq!(run(&cgi).answer().status, 429);
    assert_eq!(setup.provider.calls(), 2);
}

/// A change made to a site's configuration.
type Edit = Box<dyn Fn(&mut Value)>;

/// No answer is kept where the way does more than repeat a decision, nor where the data
/// directory cannot be found without the configuration, nor for a request with a body.
#[test]
fn no_answer_is_kept_where_it_could_not_be_given_again() {
    let cases: [(&str, Edit); 3] = [
        (
            "auto-block",
            Box::new(|c: &mut Value| {
                c["auto_block"] = json!({"refusals": 1000, "window_secs": 600, "block_secs": 60})
            }),
        ),
        (
            "elsewhere",
            Box::new(|c: &mut Value| c["store"]["dir"] = json!("data")),
        ),
        (
            "no-journal",
            Box::new(|c: &mut Value| c["journal"] = json!(false)),
        ),
    ];
    for (label, edit) in cases {
        let setup = Setup::builder(&format!("replay-{label}"))
            .rules(vec![rule("ip", "ip", 1, 86_400)])
            .config(edit)
            .write();
        let cgi = request(&setup, "text/plain", "GET");
        assert_eq!(run(&cgi).answer().status, 200, "{label}");
        for _ in 0..3 {
            assert_eq!(run(&cgi).answer().status, 429, "{label}");
        }
        let answers = setup.data.join("answers");
        if label == "no-journal" {
            // Kept, with nothing to journal.
            let (by_memory, kept) = refused_then_kept(&setup, &cgi);
            assert_eq!(untimed(&kept), untimed(&by_memory.stdout));
            assert!(answers.exists(), "{label}");
        } else {
            assert!(!answers.exists(), "{label}: {}", answers.display());
            let elsewhere = setup.dir.path().join("data").join("answers");
            assert!(!elsewhere.exists(), "{label}: {}", elsewhere.display());
            assert!(kept(&setup, &cgi).is_none(), "{label}");
        }
    }

    // A POST with a body: never kept, never given a kept answer.
    let setup = limited_site("replay-post");
    let post = Cgi::new("POST", "")
        .var("REMOTE_ADDR", CLIENT)
        .form(link_param("https://example.com/file/1"))
        .config(&setup.config_path);
    assert_eq!(run(&post).answer().status, 200);
    for _ in 0..3 {
        assert_eq!(run(&post).answer().status, 429);
    }
    assert!(!setup.data.join("answers").exists());
    assert!(kept(&setup, &post).is_none());
}

/// The kept answers' file stays beside the other files of the data directory, readable by
/// the site's account alone.
#[test]
fn the_answers_file_is_the_accounts_alone() {
    use std::os::unix::fs::PermissionsExt;
    let setup = limited_site("replay-mode");
    let cgi = request(&setup, "text/plain", "GET");
    run(&cgi);
    refused_then_kept(&setup, &cgi);
    let file = setup.data.join("answers");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    assert!(file.starts_with(setup.dir.path()));
}
