//! AllDebrid's documented answers: errors inside HTTP 200; some hosts answer "delayed", which
//! is then polled.

use super::*;

// The calls that have a v4.1 form are made there; the v4 forms answer DISCONTINUED.
const AD_UNLOCK: &str = "/v4.1/link/unlock";
const AD_DELAYED: &str = "/v4.1/link/delayed";

fn ad(code: &str, message: &str) -> Answer {
    ok(json!({"status": "error", "error": {"code": code, "message": message}}))
}

fn ad_delayed(id: u64) -> Answer {
    ok(json!({"status": "success", "data": {"link": "", "delayed": id}}))
}

#[test]
fn alldebrid_answers() {
    let download = "https://a1b2c3.debrid.it/dl/2f3e4d/archive.zip";
    let answer = ok(json!({"status": "success", "data": {
        "link": download, "host": "hoster", "filename": "archive.zip", "streams": [],
        "paws": false, "filesize": 52_428_800, "id": "2f3e4d", "hostDomain": "hoster.example"
    }}));
    assert_eq!(
        resolves_sized("alldebrid", &[(AD_UNLOCK, answer)]),
        (
            download.into(),
            Some("archive.zip".into()),
            Some(52_428_800)
        )
    );
    // Delayed: polled until ready.
    let polled = [
        (AD_UNLOCK, ad_delayed(987_654)),
        (
            AD_DELAYED,
            ok(json!({"status": "success", "data": {"status": 1, "time_left": 5, "link": ""}})),
        ),
        (
            AD_DELAYED,
            ok(
                json!({"status": "success", "data": {"status": 2, "time_left": 0, "link": download}}),
            ),
        ),
    ];
    assert_eq!(resolves("alldebrid", &polled).0, download);

    use Failure::*;
    // The message of each code as the documentation's "All errors" gives it.
    let c = |code: &'static str, message, failure| {
        case(code, (AD_UNLOCK, ad(code, message)), failure, Some(code))
    };
    let too_many =
        json!({"status": "error", "error": {"code": "TOO_MANY_REQUESTS", "message": "Slow down"}});
    table(
        "alldebrid",
        &[
            c("AUTH_BAD_APIKEY", "The auth apikey is invalid", Auth)
                .advice("approved from the security e-mail"),
            c("AUTH_MISSING_APIKEY", "The auth apikey was not sent", Auth),
            c("AUTH_USER_BANNED", "This account is banned", Auth),
            c(
                "AUTH_MISSING_AGENT",
                "You must send a meaningful agent parameter, see api docs",
                Auth,
            ),
            c("AUTH_BAD_AGENT", "Bad agent", Auth),
            c(
                "NO_SERVER",
                "Servers are not allowed to use this feature. Visit https://alldebrid.com/vpn if you're using a VPN.",
                ServerRefused,
            )
            .advice("https://alldebrid.com/vpn"),
            c("AUTH_BLOCKED", "This apikey is geo-blocked or ip-blocked", ServerRefused)
                .advice("geo- or IP-blocked")
                .advice("security e-mail"),
            c("MUST_BE_PREMIUM", "You must be premium to process this link", Plan),
            c(
                "FREE_TRIAL_LIMIT_REACHED",
                "You have reached the free trial limit (7 days // 25GB downloaded or host uneligible for free trial)",
                Plan,
            ),
            c(
                "LINK_HOST_LIMIT_REACHED",
                "You have reached the download limit for this host",
                Quota,
            ),
            c(
                "LINK_TOO_MANY_DOWNLOADS",
                "Too many concurrent downloads for this host",
                Quota,
            ),
            c("LINK_HOST_NOT_SUPPORTED", "This host or link is not supported", Unsupported),
            c("LINK_NOT_SUPPORTED", "The link is not supported for this host", Unsupported),
            c("REDIRECTOR_NOT_SUPPORTED", "Redirector not supported", Unsupported),
            c(
                "LINK_DOWN",
                "This link is not available on the file hoster website",
                DeadLink,
            ),
            c("BAD_LINK", "Sent link in not valid", DeadLink),
            c("LINK_IS_MISSING", "No link was sent", DeadLink),
            c("LINK_PASS_PROTECTED", "Link is password protected", Password),
            c(
                "LINK_HOST_UNAVAILABLE",
                "Host under maintenance or not available",
                Temporary,
            ),
            c(
                "LINK_HOST_FULL",
                "All servers are full for this host, please retry later",
                Temporary,
            ),
            c(
                "LINK_TEMPORARY_UNAVAILABLE",
                "The link is temporary unavalible on the website",
                Temporary,
            ),
            c(
                "MAINTENANCE",
                "Alldebrid is under maintenance, please retry later",
                Temporary,
            ),
            c("GENERIC", "An orror occured", Unavailable),
            // An endpoint the service retired, and one it never had: the owner's to fix.
            case(
                "DISCONTINUED (an endpoint retired)",
                (
                    AD_UNLOCK,
                    ok(json!({"status": "error", "error": {"code": "DISCONTINUED",
                        "message": "This API endpoint has been discontinued, please migrate to newest API. See https://docs.alldebrid.com"},
                        "deprecated": true})),
                ),
                Retired,
                Some("DISCONTINUED"),
            )
            .advice("upgrade resolve"),
            c("404", "Endpoint doesn't exist", Retired).advice("upgrade resolve"),
            // The catch-all code yields to the status the service documents: 503 is "too many
            // requests".
            case(
                "HTTP 503 with GENERIC",
                (AD_UNLOCK, reply(503, json!({"status": "error", "error": {"code": "GENERIC", "message": "An orror occured"}})).wait(4)),
                RateLimited,
                Some("GENERIC"),
            )
            .retry_after(4),
            case(
                "HTTP 500 with GENERIC",
                (AD_UNLOCK, reply(500, json!({"status": "error", "error": {"code": "GENERIC", "message": "An orror occured"}}))),
                Unavailable,
                Some("GENERIC"),
            ),
            case(
                "HTTP 429 with Retry-After",
                (AD_UNLOCK, reply(429, too_many.clone()).wait(2)),
                RateLimited,
                None,
            )
            .retry_after(2),
            case(
                "HTTP 503, too many requests, JSON",
                (AD_UNLOCK, reply(503, too_many)),
                RateLimited,
                None,
            ),
            case(
                "HTTP 503, too many requests, no JSON",
                (
                    AD_UNLOCK,
                    raw(503, "<html>503 Service Temporarily Unavailable</html>"),
                ),
                RateLimited,
                None,
            ),
            case("HTTP 500", (AD_UNLOCK, raw(500, "<html>500</html>")), Unavailable, None),
            case(
                "LINK_ERROR, message passed on",
                (AD_UNLOCK, ad("LINK_ERROR", "Could not unlock this link")),
                Rejected,
                Some("LINK_ERROR"),
            )
            .message("Could not unlock this link"),
            case(
                "delayed, then status 3 (error)",
                (
                    AD_DELAYED,
                    ok(json!({"status": "success", "data": {"status": 3, "time_left": 0}})),
                ),
                Rejected,
                None,
            )
            .after(AD_UNLOCK, ad_delayed(55)),
            case(
                "delayed, then DELAYED_INVALID_ID",
                (
                    AD_DELAYED,
                    ad("DELAYED_INVALID_ID", "This delayed link id is invalid"),
                ),
                Unavailable,
                Some("DELAYED_INVALID_ID"),
            )
            .after(AD_UNLOCK, ad_delayed(56)),
        ],
    );
}
