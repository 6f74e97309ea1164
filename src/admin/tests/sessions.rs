//! Sessions end on the server: signing out, signing out everywhere and a new password end
//! them for every copy of their cookie; thirty minutes unused end them too. Over https the
//! cookies are `__Host-` and Secure, also when a trusted proxy says so.

use super::*;

/// Signs in from a fresh browser and returns it.
fn signed_in(site: &Site) -> Jar {
    let mut jar = Jar::default();
    assert_eq!(site.owner_signs_in(&mut jar), 303);
    assert!(site.get(&mut jar.clone()).1.contains(DATA));
    jar
}

#[test]
fn a_cookie_replayed_after_sign_out_shows_the_sign_in_form() {
    let site = site();
    let mut jar = signed_in(&site);
    let copy = jar.clone();
    let token = site.token(&mut jar);
    let (r, _) = site.post(
        &mut jar,
        &format!("action=signout&csrf={token}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 303);
    let (r, page) = site.get(&mut copy.clone());
    assert_eq!(r.status, 200);
    assert!(
        !page.contains(DATA) && page.contains("type=\"password\""),
        "{page}"
    );
    // Nor can the copy block anyone with the token it had.
    let (r, _) = site.block(&mut copy.clone(), "192.0.2.66", &token);
    assert_eq!(r.status, 403);
    assert!(
        crate::app::controls::blocks::read(&site.store)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn signing_out_everywhere_ends_every_session() {
    let site = site();
    let mut one = signed_in(&site);
    let two = signed_in(&site);
    let token = site.token(&mut one);
    assert!(site.get(&mut one.clone()).1.contains("Sign out everywhere"));
    // Only with the session's token.
    let (r, _) = site.post(
        &mut one.clone(),
        "action=signout-all&csrf=00",
        "203.0.113.9",
    );
    assert_eq!(r.status, 403);
    assert!(site.get(&mut two.clone()).1.contains(DATA));
    let (r, _) = site.post(
        &mut one,
        &format!("action=signout-all&csrf={token}"),
        "203.0.113.9",
    );
    assert_eq!(r.status, 303);
    assert!(
        !site.get(&mut two.clone()).1.contains(DATA),
        "the other browser too"
    );
    assert!(
        site.log()
            .contains("dashboard: signed out everywhere from 203.0.113.9")
    );
    // Signing in again works.
    signed_in(&site);
}

#[test]
fn thirty_minutes_unused_end_a_session() {
    let site = site();
    let jar = signed_in(&site);
    site.advance(29 * 60 * 1000);
    assert!(
        site.get(&mut jar.clone()).1.contains(DATA),
        "used again in time"
    );
    site.advance(29 * 60 * 1000);
    assert!(site.get(&mut jar.clone()).1.contains(DATA));
    site.advance(30 * 60 * 1000);
    let (_, page) = site.get(&mut jar.clone());
    assert!(!page.contains(DATA) && page.contains("type=\"password\""));
}

#[test]
fn cookies_are_host_prefixed_and_secure_over_https_even_through_a_trusted_proxy() {
    let mut site = site();
    let https = env("GET", &Jar::default(), "203.0.113.9").with("HTTPS", "on");
    let r = site.dashboard().answer(&https, &mut std::io::empty());
    let cookie = r.header_value("Set-Cookie").unwrap();
    assert!(
        cookie.starts_with("__Host-resolve_admin_form=")
            && cookie.contains("; Path=/;")
            && cookie.ends_with("; Secure"),
        "{cookie}"
    );
    // Behind a trusted proxy that says https.
    site.config.client = crate::http::identity::ClientPolicy::new(
        64,
        vec![crate::net::cidr::Cidr::parse("10.0.0.0/8").unwrap()],
        vec![],
    );
    let proxied = env("GET", &Jar::default(), "10.0.0.5")
        .with("HTTP_X_FORWARDED_FOR", "203.0.113.9")
        .with("HTTP_X_FORWARDED_PROTO", "https");
    let r = site.dashboard().answer(&proxied, &mut std::io::empty());
    let cookie = r.header_value("Set-Cookie").unwrap();
    assert!(
        cookie.starts_with("__Host-") && cookie.ends_with("; Secure"),
        "{cookie}"
    );
    // The same header from anyone else is not believed.
    let direct = env("GET", &Jar::default(), "192.0.2.5").with("HTTP_X_FORWARDED_PROTO", "https");
    let r = site.dashboard().answer(&direct, &mut std::io::empty());
    let cookie = r.header_value("Set-Cookie").unwrap();
    assert!(
        !cookie.contains("__Host-") && !cookie.contains("Secure"),
        "{cookie}"
    );
}

#[test]
fn forms_from_another_site_are_refused_even_with_the_token() {
    let site = site();
    let mut jar = Jar::default();
    let body = sign_in_form(&site.token(&mut jar), PASSWORD);
    let send = |jar: &mut Jar, name: &str, value: &str| {
        let env = env("POST", jar, "203.0.113.9")
            .with("HTTP_HOST", "mysite.example")
            .with(name, value)
            .with("CONTENT_TYPE", "application/x-www-form-urlencoded")
            .with("CONTENT_LENGTH", body.len().to_string());
        let r = site.dashboard().answer(&env, &mut body.as_bytes());
        jar.take(&r);
        r
    };
    for (name, value) in [
        ("HTTP_ORIGIN", "https://evil.example"),
        ("HTTP_ORIGIN", "null"),
        ("HTTP_SEC_FETCH_SITE", "cross-site"),
    ] {
        let r = send(&mut jar.clone(), name, value);
        assert_eq!(r.status, 403, "{value}");
        assert!(
            !r.headers
                .iter()
                .any(|(_, v)| v.contains("resolve_admin=s1"))
        );
    }
    assert!(
        site.log()
            .contains("refused a form from another site (Origin https://evil.example)")
    );
    assert!(
        !site.log().contains("wrong password"),
        "not counted as a sign-in"
    );
    // From the site's own page: signed in.
    let r = send(&mut jar, "HTTP_ORIGIN", "https://mysite.example");
    assert_eq!(r.status, 303);
}
