//! Failed sign-ins end to end: the budgets of an address, a network, the site and a known
//! browser, and one password hash at a time.

use std::time::Duration;

use super::*;
use crate::admin::session::DEVICE_COOKIE;

#[test]
fn five_failures_lock_an_address_out_even_with_the_right_password() {
    let site = site();
    let mut jar = Jar::default();
    for n in 1..=5 {
        let (r, _) = site.sign_in(&mut jar, "wrong password number", "203.0.113.9");
        assert_eq!(r.status, 403, "failure {n}");
    }
    let (r, page) = site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    assert_eq!(r.status, 429, "{page}");
    let wait: u64 = r.header_value("Retry-After").unwrap().parse().unwrap();
    assert!((1..=900).contains(&wait), "{wait}");
    assert!(page.contains("Too many failed sign-ins"), "{page}");
    assert!(jar.get(SESSION_COOKIE).is_none());
    assert!(
        site.log()
            .contains("dashboard sign-in refused for 203.0.113.9: 5 failed attempts"),
        "{}",
        site.log()
    );
    // Another address is not locked out; fifteen minutes on, neither is this one.
    assert_eq!(
        site.sign_in(&mut Jar::default(), PASSWORD, "203.0.113.10")
            .0
            .status,
        303
    );
    site.advance(900_000);
    assert_eq!(site.owner_signs_in(&mut jar), 303);
}

#[test]
fn right_passwords_do_not_count_towards_the_lock_out() {
    let site = site();
    for _ in 0..4 {
        site.sign_in(&mut Jar::default(), "wrong password number", "203.0.113.9");
    }
    for _ in 0..10 {
        assert_eq!(
            site.sign_in(&mut Jar::default(), PASSWORD, "203.0.113.9")
                .0
                .status,
            303
        );
    }
    assert_eq!(
        site.sign_in(&mut Jar::default(), "wrong password number", "203.0.113.9")
            .0
            .status,
        403,
        "the fifth failure is still let through"
    );
    assert_eq!(
        site.sign_in(&mut Jar::default(), PASSWORD, "203.0.113.9")
            .0
            .status,
        429
    );
}

#[test]
fn a_network_and_the_site_have_budgets_past_which_no_password_is_checked() {
    let site = site();
    // Twelve /64s of one /48: ten wrong passwords are checked, then the /48 must wait, even
    // with the right password and from a /64 not seen before.
    for i in 0..10 {
        let from = format!("2001:db8:7:{i:x}::1");
        let (r, _) = site.sign_in(&mut Jar::default(), "wrong password number", &from);
        assert_eq!(r.status, 403, "{from}");
    }
    let (r, page) = site.sign_in(&mut Jar::default(), PASSWORD, "2001:db8:7:ff::1");
    assert_eq!(r.status, 429, "{page}");
    assert!(r.header_value("Retry-After").is_some());
    assert!(
        page.contains("Too many failed sign-ins from your network"),
        "{page}"
    );
    assert!(
        site.log()
            .contains("from its network 2001:db8:7::/48; the password was not checked"),
        "{}",
        site.log()
    );
    // Twenty more from unrelated addresses reach the site's 30; then nobody's is checked.
    for i in 0..20 {
        let (r, _) = site.sign_in(
            &mut Jar::default(),
            "wrong password number",
            &format!("10.{i}.0.1"),
        );
        assert_eq!(r.status, 403, "{i}");
    }
    let (r, page) = site.sign_in(&mut Jar::default(), PASSWORD, "192.0.2.200");
    assert_eq!(r.status, 429, "{page}");
    assert!(
        page.contains("Too many failed sign-ins from anywhere"),
        "{page}"
    );
}

#[test]
fn a_browser_that_signed_in_before_keeps_its_own_budget() {
    let site = site();
    let mut owner = Jar::default();
    assert_eq!(site.owner_signs_in(&mut owner), 303);
    assert!(owner.get(DEVICE_COOKIE).is_some(), "a device cookie");
    owner.0.retain(|(n, _)| n != SESSION_COOKIE);
    // Strangers use up the site's budget.
    for i in 0..30 {
        site.sign_in(
            &mut Jar::default(),
            "wrong password number",
            &format!("10.{i}.0.1"),
        );
    }
    assert_eq!(
        site.sign_in(&mut Jar::default(), PASSWORD, "203.0.113.9")
            .0
            .status,
        429,
        "a browser never signed in is refused"
    );
    // The owner's browser, even from the strangers' own address, is let in.
    let (r, _) = site.sign_in(&mut owner, PASSWORD, "10.0.0.1");
    assert_eq!(r.status, 303);
    // Its own budget: five failures, then it must wait too.
    owner.0.retain(|(n, _)| n != SESSION_COOKIE);
    for _ in 0..5 {
        let (r, page) = site.sign_in(&mut owner, "wrong password number", "203.0.113.9");
        assert_eq!(r.status, 403);
        assert!(page.contains("this browser must wait"), "{page}");
    }
    let (r, page) = site.sign_in(&mut owner, PASSWORD, "203.0.113.9");
    assert_eq!(r.status, 429);
    assert!(page.contains("from this browser"), "{page}");
    // A forged device cookie is no device cookie.
    let mut forged = Jar::default();
    forged.set(
        DEVICE_COOKIE,
        "d1.99999999999.00112233445566778899aabbccddeeff.00",
    );
    assert_eq!(site.owner_signs_in(&mut forged), 429);
}

#[test]
fn one_password_hash_at_a_time() {
    let site = site();
    let held = hash_turn_held(&site);
    // While another sign-in's hash is computed, this one waits a moment, then gets 429 without
    // its password being checked and without being counted as a failure.
    let started = std::time::Instant::now();
    let (r, page) = site.sign_in(&mut Jar::default(), PASSWORD, "203.0.113.9");
    assert_eq!(r.status, 429, "{page}");
    assert_eq!(r.header_value("Retry-After"), Some("1"));
    assert!(page.contains("Another sign-in is being checked"), "{page}");
    assert!(started.elapsed() >= Duration::from_millis(defaults::ADMIN_HASH_WAIT_MS));
    drop(held);
    for _ in 0..5 {
        let (r, _) = site.sign_in(&mut Jar::default(), "wrong password", "198.51.100.1");
        assert_eq!(r.status, 403);
    }
    // An address past its budget is refused at once: it never waits for the turn.
    let started = std::time::Instant::now();
    let _held = hash_turn_held(&site);
    let (r, page) = site.sign_in(&mut Jar::default(), PASSWORD, "198.51.100.1");
    assert_eq!(r.status, 429);
    assert!(page.contains("Too many failed sign-ins"), "{page}");
    assert!(
        started.elapsed() < Duration::from_millis(defaults::ADMIN_HASH_WAIT_MS),
        "no hash, no wait"
    );
}

#[test]
fn nothing_is_counted_while_waiting_for_the_turn() {
    let site = site();
    let held = hash_turn_held(&site);
    let (r, _) = site.sign_in(&mut Jar::default(), "wrong password", "198.51.100.1");
    assert_eq!(r.status, 429);
    drop(held);
    for n in 1..=5 {
        let (r, _) = site.sign_in(&mut Jar::default(), "wrong password", "198.51.100.1");
        assert_eq!(r.status, 403, "failure {n}");
    }
}

#[test]
fn failed_and_refused_sign_ins_are_in_the_journal_and_on_the_dashboard() {
    let site = site();
    for _ in 0..6 {
        site.sign_in(&mut Jar::default(), "wrong password number", "198.51.100.1");
    }
    let stats =
        crate::usage::stats::Stats::gather(&site.config, &site.whole, START_MS, 24).unwrap();
    let text = stats.text();
    assert!(
        text.contains("Dashboard sign-ins: 5 wrong passwords, 1 refused past a budget"),
        "{text}"
    );
    let mut jar = Jar::default();
    site.sign_in(&mut jar, PASSWORD, "203.0.113.9");
    let (_, page) = site.get(&mut jar);
    assert!(
        page.contains("<dt>Failed sign-ins</dt><dd>5</dd>")
            && page.contains("<dt>Sign-ins refused (429)</dt><dd>1</dd>"),
        "{page}"
    );
}

/// Another sign-in's turn to hash its password, held until dropped.
fn hash_turn_held(site: &Site) -> hash_turn::Turn {
    std::fs::create_dir_all(&site.config.data_dir).unwrap();
    hash_turn::take(&site.config.data_dir, Duration::ZERO)
        .unwrap()
        .expect("free")
}
