//! Debrid-Link's documented answers: errors inside HTTP 200 (`success` false, `error` code).

use super::*;

const DL: &str = "/api/v2/downloader/add";

#[test]
fn debridlink_answers() {
    let download = "https://dl3.debrid.link/dl/abc123/dl-1.mp4";
    let answer = ok(json!({"success": true, "value": {
        "id": "abc123", "name": "dl-1.mp4", "url": LINK, "downloadUrl": download,
        "host": "hoster", "size": 98_765_432, "chunk": 8, "expired": false,
        "created": 1_700_000_000
    }}));
    assert_eq!(
        resolves_sized("debridlink", &[(DL, answer)]),
        (download.into(), Some("dl-1.mp4".into()), Some(98_765_432))
    );
    use Failure::*;
    let c = |code: &'static str, failure| {
        let answer =
            ok(json!({"success": false, "error": code, "error_description": "as the API says"}));
        case(code, (DL, answer), failure, Some(code))
    };
    table(
        "debridlink",
        &[
            c("badToken", Auth),
            c("hidedToken", Auth),
            c("accountLocked", Auth),
            c("serverNotAllowed", ServerRefused).advice("ask Debrid-Link to allow"),
            c("disabledServerHost", ServerRefused),
            c("notFreeHost", Plan),
            c("floodDetected", RateLimited),
            c("hostNotValid", Unsupported),
            c("disabledHost", Unsupported),
            c("fileNotFound", DeadLink),
            c("badFileUrl", DeadLink),
            c("fileNotAvailable", Temporary),
            c("notDebrid", Temporary),
            c("maintenanceHost", Temporary),
            c("noServerHost", Temporary),
            c("freeServerOverload", Temporary),
            c("maxLink", Quota),
            c("maxLinkHost", Quota),
            c("maxData", Quota),
            c("maxDataHost", Quota),
            c("badFilePassword", Password),
            c("internalError", Unavailable),
            case(
                "badToken with HTTP 401",
                (
                    DL,
                    reply(401, json!({"success": false, "error": "badToken"})),
                ),
                Auth,
                Some("badToken"),
            ),
            case(
                "unknown code, description passed on",
                (
                    DL,
                    ok(
                        json!({"success": false, "error": "someNewError", "error_description": "Try another link"}),
                    ),
                ),
                Rejected,
                Some("someNewError"),
            )
            .message("Try another link"),
        ],
    );
}
