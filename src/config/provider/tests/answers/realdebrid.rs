//! Real-Debrid's documented answers: one call, errors as HTTP 4xx/5xx with `error_code`.

use super::*;

const RD: &str = "/rest/1.0/unrestrict/link";

fn rd(status: u16, error: &str, code: i32) -> (&'static str, Answer) {
    (
        RD,
        reply(status, json!({"error": error, "error_code": code})),
    )
}

#[test]
fn realdebrid_answers() {
    let download = "https://abc12.download.real-debrid.com/d/ABCDEF123/movie.mkv";
    let answer = ok(json!({
        "id": "ABCDEF123", "filename": "movie.mkv", "mimeType": "video/x-matroska",
        "filesize": 1_234_567_890u64, "link": LINK, "host": "hoster.example", "chunks": 16,
        "crc": 1, "download": download, "streamable": 1
    }));
    assert_eq!(
        resolves_sized("realdebrid", &[(RD, answer)]),
        (
            download.into(),
            Some("movie.mkv".into()),
            Some(1_234_567_890)
        )
    );
    // "filesize": 0 is Real-Debrid's word for a size it does not know.
    let unknown = ok(json!({"filename": "movie.mkv", "filesize": 0, "download": download}));
    assert_eq!(resolves_sized("realdebrid", &[(RD, unknown)]).2, None);
    use Failure::*;
    let c = |what, status, error, code: &'static str, failure| {
        case(
            what,
            rd(status, error, code.parse().unwrap()),
            failure,
            Some(code),
        )
    };
    table(
        "realdebrid",
        &[
            c("bad token (401, 8)", 401, "bad_token", "8", Auth),
            c(
                "permission denied (403, 9)",
                403,
                "permission_denied",
                "9",
                Auth,
            ),
            c(
                "account locked (403, 14)",
                403,
                "account_locked",
                "14",
                Auth,
            ),
            c(
                "account not activated (403, 15)",
                403,
                "account_not_activated",
                "15",
                Auth,
            ),
            c(
                "IP address not allowed (403, 22)",
                403,
                "ip_not_allowed",
                "22",
                ServerRefused,
            )
            .advice("\"remote\": true"),
            c(
                "not for free users (403, 20)",
                403,
                "hoster_not_free",
                "20",
                Plan,
            )
            .advice("not premium for this file host"),
            c(
                "traffic exhausted (403, 23)",
                403,
                "traffic_exhausted",
                "23",
                Quota,
            ),
            c("fair usage (403, 36)", 403, "fair_usage_limit", "36", Quota),
            c(
                "hoster limit (400, 18)",
                400,
                "hoster_limit_reached",
                "18",
                Quota,
            ),
            c(
                "too many active (400, 21)",
                400,
                "too_many_active_downloads",
                "21",
                Quota,
            ),
            c(
                "unsupported hoster (400, 16)",
                400,
                "hoster_unsupported",
                "16",
                Unsupported,
            ),
            c(
                "file unavailable (404, 24)",
                404,
                "unavailable_file",
                "24",
                DeadLink,
            ),
            c(
                "infringing file (451, 35)",
                451,
                "infringing_file",
                "35",
                DeadLink,
            ),
            c(
                "hoster maintenance (400, 17)",
                400,
                "hoster_in_maintenance",
                "17",
                Temporary,
            ),
            c(
                "hoster unavailable (503, 19)",
                503,
                "hoster_unavailable",
                "19",
                Temporary,
            ),
            c(
                "service unavailable (503, 25)",
                503,
                "service_unavailable",
                "25",
                Temporary,
            ),
            c(
                "disabled endpoint (403, 37)",
                403,
                "disabled_endpoint",
                "37",
                Retired,
            )
            .advice("upgrade resolve"),
            case(
                "unavailable for legal reasons (451, no code)",
                (
                    RD,
                    reply(451, json!({"error": "unavailable_for_legal_reasons"})),
                ),
                DeadLink,
                None,
            ),
            case(
                "unavailable for legal reasons (451, no body)",
                (RD, raw(451, "")),
                DeadLink,
                None,
            ),
            // The catch-all -1 yields to what the status says: 429 is the rate.
            case(
                "internal error under too many requests (429, -1)",
                (RD, rd(429, "internal_error", -1).1.wait(9)),
                RateLimited,
                Some("-1"),
            )
            .retry_after(9),
            c(
                "internal error (500, -1)",
                500,
                "internal_error",
                "-1",
                Unavailable,
            ),
            case(
                "too many requests (429, 34, Retry-After)",
                (RD, rd(429, "too_many_requests", 34).1.wait(7)),
                RateLimited,
                Some("34"),
            )
            .retry_after(7),
            c("slow down (429, 5)", 429, "slow_down", "5", RateLimited),
            case(
                "HTTP 429 without a body",
                (RD, raw(429, "")),
                RateLimited,
                None,
            ),
            c(
                "unknown code (400, 2)",
                400,
                "Bad parameter value",
                "2",
                Rejected,
            )
            .message("Bad parameter value"),
            case(
                "server error (500, no JSON)",
                (RD, raw(500, "<h1>oops</h1>")),
                Unavailable,
                None,
            ),
            case(
                "maintenance page (200, HTML)",
                (RD, raw(200, "<html>Down for maintenance</html>")),
                BadAnswer,
                None,
            ),
        ],
    );
}
