//! TorBox's documented answers: create, poll until finished, then request the link.

use super::*;

const TB_CREATE: &str = "/v1/api/webdl/createwebdownload";
const TB_LIST: &str = "/v1/api/webdl/mylist";
const TB_REQUEST: &str = "/v1/api/webdl/requestdl";

fn tb_created(id: u64) -> Answer {
    ok(json!({
        "success": true, "error": null, "detail": "Found Cached Download. Using Cached Download.",
        "data": {"webdownload_id": id, "hash": "6f1ed002ab5595859014ebf0951522d9", "auth_id": "d3b07384"}
    }))
}

fn tb_list(id: u64, finished: bool) -> Answer {
    ok(json!({
        "success": true, "error": null, "detail": "Web downloads list retrieved successfully.",
        "data": {
            "id": id, "name": "archive.zip", "size": 1_048_576, "download_state":
            if finished { "completed" } else { "downloading" },
            "download_finished": finished, "download_present": finished,
            "progress": if finished { 1.0 } else { 0.4 },
            "files": if finished { json!([{"id": 0, "name": "archive.zip/archive.zip", "short_name": "archive.zip", "size": 1_048_576, "mimetype": "application/zip"}]) } else { json!([]) }
        }
    }))
}

fn tb_error(code: &str) -> Answer {
    ok(json!({"success": false, "error": code, "detail": "as the API says", "data": null}))
}

#[test]
fn torbox_answers() {
    let download = "https://store-041.weur.tb-cdn.st/zip/4242?token=c0ffee";
    let link = ok(
        json!({"success": true, "error": null, "detail": "Download link generated.", "data": download}),
    );
    let answers = [
        (TB_CREATE, tb_created(4242)),
        (TB_LIST, tb_list(4242, false)),
        (TB_LIST, tb_list(4242, true)),
        (TB_REQUEST, link),
    ];
    assert_eq!(
        resolves_sized("torbox", &answers),
        (download.into(), Some("archive.zip".into()), Some(1_048_576))
    );
    use Failure::*;
    let c =
        |code: &'static str, failure| case(code, (TB_CREATE, tb_error(code)), failure, Some(code));
    table(
        "torbox",
        &[
            c("BAD_TOKEN", Auth),
            c("AUTH_ERROR", Auth),
            case(
                "NO_AUTH with HTTP 403",
                (
                    TB_CREATE,
                    reply(
                        403,
                        json!({"success": false, "error": "NO_AUTH", "detail": "No auth.", "data": null}),
                    ),
                ),
                Auth,
                Some("NO_AUTH"),
            ),
            c("MONTHLY_LIMIT", Quota),
            c("COOLDOWN_LIMIT", Quota),
            c("ACTIVE_LIMIT", Quota),
            // The file exceeds what the owner's plan may download: the account's limit.
            c("DOWNLOAD_TOO_LARGE", Quota),
            c("LINK_OFFLINE", DeadLink),
            c("DOWNLOAD_SERVER_ERROR", Temporary),
            c("DATABASE_ERROR", Unavailable),
            c("UNKNOWN_ERROR", Unavailable),
            case(
                "HTTP 429 with Retry-After",
                (
                    TB_CREATE,
                    reply(
                        429,
                        json!({"success": false, "error": "RATE_LIMITED", "detail": "Slow down.", "data": null}),
                    )
                    .wait(30),
                ),
                RateLimited,
                None,
            )
            .retry_after(30),
            // The catch-all code yields to the status: 429 is the rate.
            case(
                "HTTP 429 with UNKNOWN_ERROR",
                (
                    TB_CREATE,
                    reply(
                        429,
                        json!({"success": false, "error": "UNKNOWN_ERROR", "detail": "Too many requests.", "data": null}),
                    ),
                ),
                RateLimited,
                Some("UNKNOWN_ERROR"),
            ),
            case(
                "ITEM_NOT_FOUND at requestdl",
                (TB_REQUEST, tb_error("ITEM_NOT_FOUND")),
                DeadLink,
                Some("ITEM_NOT_FOUND"),
            )
            .after(TB_LIST, tb_list(4242, true))
            .after(TB_CREATE, tb_created(4242)),
            case(
                "BAD_TOKEN while polling",
                (TB_LIST, tb_error("BAD_TOKEN")),
                Auth,
                Some("BAD_TOKEN"),
            )
            .after(TB_CREATE, tb_created(4242)),
        ],
    );
}
