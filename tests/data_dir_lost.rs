//! The data directory (`~/resolve/ratelimit`) deleted or moved away, in an account served
//! through Apache with suEXEC: where a shared store (MySQL, Redis) holds the counts, the spend
//! limit holds across the loss, counted where it was; with the file store, whose counts go
//! with the folder, the first process to make it again logs one `ACTION NEEDED` line, and the
//! dashboard says the day's spend count started again.

mod support;

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};
use support::account::{SuexecLog, apache_for, check_suexec_fits, diagnostics};
use support::config::http_provider;
use support::dashboard::{Browser, password_hash};
use support::urlenc::link_param;
use support::{Apache, HostUser, MariaDb, Provider, Redis, Request, binary, is_root};

const PASSWORD: &str = "correct horse battery staple";
/// The day's spend limit.
const DAY: usize = 3;

/// An account with the program in `public_html/cgi-bin` and `~/resolve/config.json`: the
/// stand-in as provider, `store`, and a day's spend limit of [`DAY`].
fn account(provider: &Provider, store: Value) -> HostUser {
    assert!(
        is_root(),
        "tests/data_dir_lost.rs must run as root: it creates a system account and runs Apache \
         with suEXEC"
    );
    let user = HostUser::create(true);
    check_suexec_fits(&user);
    user.write(
        &user.web().join("cgi-bin/resolve"),
        fs::read(binary()).unwrap(),
        0o755,
    );
    user.mkdir(&user.path("resolve"), 0o700);
    let config = json!({
        "provider": http_provider(&provider.url("/unrestrict")),
        "store": store,
        "rules": [{"name": "ip", "key": "ip", "limit": 1000, "window_secs": 60}],
        "spend": [{"name": "day", "limit": DAY, "window_secs": 86400}],
        "admin": {"password_hash": password_hash(PASSWORD)},
    });
    user.write(
        &user.path("resolve/config.json"),
        serde_json::to_string_pretty(&config).unwrap(),
        0o600,
    );
    user
}

/// The status of one link sent as the page sends it.
fn ask(apache: &Apache, user: &HostUser, n: usize) -> u16 {
    let link = format!("https://hoster.example/lost/{n}");
    let r = apache
        .client()
        .send(
            &Request::post_form(&user.url("cgi-bin/resolve"), link_param(&link))
                .header("Accept", "application/json"),
        )
        .unwrap();
    r.status
}

/// Two paid calls, then the data directory deleted, as File Manager's Delete does.
fn spend_then_lose_the_folder(apache: &Apache, user: &HostUser, suexec: &SuexecLog) {
    for n in 0..2 {
        assert_eq!(ask(apache, user, n), 200, "{}", diagnostics(apache, suexec));
    }
    let data = user.path("resolve/ratelimit");
    assert!(data.is_dir(), "{}", diagnostics(apache, suexec));
    fs::remove_dir_all(&data).unwrap();
}

/// The statuses of the requests after the loss, until the spend limit refuses (at most 6).
fn until_refused(apache: &Apache, user: &HostUser) -> Vec<u16> {
    let mut statuses = Vec::new();
    for n in 10..16 {
        let status = ask(apache, user, n);
        statuses.push(status);
        if status != 200 {
            break;
        }
    }
    statuses
}

/// MySQL and Redis keep the spend counts in the server, not in the data directory: after its
/// loss the day's limit refuses at the third paid call, as it would have.
#[test]
fn a_shared_store_keeps_the_spend_count_through_the_loss_of_the_data_directory() {
    let db = MariaDb::start();
    let redis = Redis::start();
    for store in [
        json!({"kind": "mysql", "url": db.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
        json!({"kind": "redis", "url": redis.url(), "read_timeout_ms": 20000, "on_error": "deny"}),
    ] {
        let suexec = SuexecLog::mark();
        let provider = Provider::start();
        let user = account(&provider, store.clone());
        let apache = apache_for(&user);
        spend_then_lose_the_folder(&apache, &user, &suexec);
        assert_eq!(
            until_refused(&apache, &user),
            [200, 503],
            "{store}: {}",
            diagnostics(&apache, &suexec)
        );
        assert_eq!(provider.calls(), DAY, "{store}");
        assert!(
            !apache
                .error_log()
                .contains("was missing and was made again"),
            "{}",
            apache.error_log()
        );
    }
}

/// The file store's counts go with the folder: said once in the log, and on the dashboard.
#[test]
fn the_file_store_says_its_spend_count_restarted_when_the_data_directory_is_made_again() {
    let suexec = SuexecLog::mark();
    let provider = Provider::start();
    let user = account(&provider, json!({"kind": "file", "dir": "ratelimit"}));
    let apache = apache_for(&user);
    spend_then_lose_the_folder(&apache, &user, &suexec);
    // Counted from zero again: the whole day's limit once more.
    assert_eq!(
        until_refused(&apache, &user),
        [200, 200, 200, 503],
        "{}",
        diagnostics(&apache, &suexec)
    );
    assert_eq!(provider.calls(), 2 + DAY);
    let said = format!(
        "ACTION NEEDED: the data directory {} was missing and was made again at ",
        user.path("resolve/ratelimit").display()
    );
    assert!(
        apache.wait_for_log(&said, Duration::from_secs(5)),
        "{}",
        apache.error_log()
    );
    let log = apache.error_log();
    assert_eq!(log.matches(&said).count(), 1, "said once:\n{log}");
    assert!(
        log.contains("the spend limits' counts (today's and this month's) started again from zero"),
        "{log}"
    );
    // The owner was signed out with the folder; signed in again, the dashboard says it.
    let mut browser = Browser::with_client(apache.client());
    let r = browser.sign_in(PASSWORD);
    assert_eq!(r.status, 303, "{}", r.everything());
    let page = browser.get();
    assert_eq!(page.status, 200, "{}", page.everything());
    let html = page.text();
    assert!(
        html.contains("was missing and was made again") && html.contains("started again from zero"),
        "{html}"
    );
}
