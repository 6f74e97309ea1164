//! Premiumize.me's documented answers: errors inside HTTP 200 (`status` "error", `message`),
//! mostly without codes.

use super::*;

const PM: &str = "/api/transfer/directdl";

#[test]
fn premiumize_answers() {
    let download = "https://sasha.premiumize.me/dl/9a8b7c/pm-1.rar";
    for answer in [
        ok(json!({"status": "success", "content": [{
            "path": "pm-1.rar", "size": 734_003_200, "link": download,
            "stream_link": null, "transcode_status": "not_applicable"
        }]})),
        // The older shape.
        ok(
            json!({"status": "success", "location": download, "filename": "pm-1.rar", "filesize": 734_003_200}),
        ),
    ] {
        assert_eq!(
            resolves_sized("premiumize", &[(PM, answer)]),
            (download.into(), Some("pm-1.rar".into()), Some(734_003_200))
        );
    }
    use Failure::*;
    let error = |message: &str| ok(json!({"status": "error", "message": message}));
    table(
        "premiumize",
        &[
            // The answer of a call made without a valid login; a bad or missing key alike.
            case(
                "\"Not logged in\" inside 200",
                (PM, error("Not logged in. Please log in first.")),
                Auth,
                None,
            )
            .advice("Account page"),
            // The account-level refusals: an error code beside the message (as mature clients
            // read it), and the fair-use refusal in words only.
            case(
                "topup_required inside 200",
                (
                    PM,
                    ok(
                        json!({"status": "error", "error": "topup_required", "message": "Please top up your account."}),
                    ),
                ),
                Plan,
                Some("topup_required"),
            ),
            // Fair use at 100%: the code, whatever the message says.
            case(
                "account_limit_reached inside 200",
                (
                    PM,
                    ok(
                        json!({"status": "error", "error": "account_limit_reached", "message": "Your account has reached its limit."}),
                    ),
                ),
                Quota,
                Some("account_limit_reached"),
            )
            .advice("account_limit_reached"),
            case(
                "fair use limit inside 200",
                (PM, error("Fair use limit reached!")),
                Quota,
                None,
            ),
            case(
                "error inside 200, message passed on",
                (PM, error("This file is offline")),
                Rejected,
                None,
            )
            .message("This file is offline"),
            case(
                "HTTP 401",
                (
                    PM,
                    reply(
                        401,
                        json!({"status": "error", "message": "Invalid API key"}),
                    ),
                ),
                Auth,
                None,
            ),
            case(
                "HTTP 429",
                (
                    PM,
                    reply(
                        429,
                        json!({"status": "error", "message": "Too many requests"}),
                    ),
                ),
                RateLimited,
                None,
            ),
            case(
                "HTTP 502",
                (PM, raw(502, "<html>Bad Gateway</html>")),
                Unavailable,
                None,
            ),
        ],
    );
}
