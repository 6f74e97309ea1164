<?php
// What a site owner keeps instead of resolve when limits live in MySQL: the limiter in PHP that
// the benchmark (bench/run.sh, benches/apache.rs) serves under PHP-FPM beside resolve, on the
// same MariaDB, so that every run says how resolve compares with it. Written for the benchmark;
// not part of resolve.
//
// A sliding log: one row per admitted request in `rate_events`, keyed 'resolve:' . the client's
// address; a new PDO connection per request (emulated prepares, PDO's default for MySQL), then
// three statements: delete the key's rows older than the window (60 seconds), count the rows
// left, and when fewer than ANCHOR_LIMIT insert one. Any database error, connecting included,
// admits the request (fail open). Over the limit: 429 in plain text with Retry-After (the window:
// the log is not asked when its oldest row ends). Admitted: one GET to the provider, whose
// "download" field is the answer.
//
// Settings, from the environment (under PHP-FPM: env[NAME] = value in the pool):
//   ANCHOR_MYSQL_DSN       PDO DSN, e.g. mysql:host=127.0.0.1;port=3306;dbname=bench
//                          or mysql:unix_socket=/path/mysql.sock;dbname=bench
//   ANCHOR_MYSQL_USER, ANCHOR_MYSQL_PASSWORD
//   ANCHOR_PROVIDER_URL    the provider's endpoint, called as URL?link=LINK (required)
//   ANCHOR_LIMIT           requests per window and address (default 30)
//
// The table:
//   CREATE TABLE rate_events (
//     id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
//     rkey VARCHAR(120) NOT NULL,
//     ts DATETIME NOT NULL,
//     KEY ix_rate (rkey, ts)
//   ) ENGINE=InnoDB;

const WINDOW_SECONDS = 60;

require __DIR__ . '/common.php';

/** Whether the request under `$key` is admitted; records it when it is. */
function admit(string $key, int $limit, int $window): bool
{
    try {
        $db = new PDO(
            setting('ANCHOR_MYSQL_DSN'),
            setting('ANCHOR_MYSQL_USER'),
            setting('ANCHOR_MYSQL_PASSWORD'),
            [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]
        );
        $db->prepare(
            'DELETE FROM rate_events WHERE rkey = ? AND ts < NOW() - INTERVAL ? SECOND'
        )->execute([$key, $window]);
        $recent = $db->prepare(
            'SELECT COUNT(*) FROM rate_events WHERE rkey = ? AND ts >= NOW() - INTERVAL ? SECOND'
        );
        $recent->execute([$key, $window]);
        if ((int) $recent->fetchColumn() >= $limit) {
            return false;
        }
        $db->prepare('INSERT INTO rate_events (rkey, ts) VALUES (?, NOW())')->execute([$key]);
        return true;
    } catch (PDOException $e) {
        return true;
    }
}

$limit = limit();
if (!admit('resolve:' . ($_SERVER['REMOTE_ADDR'] ?? 'unknown'), $limit, WINDOW_SECONDS)) {
    http_response_code(429);
    header('Content-Type: text/plain; charset=utf-8');
    header('Retry-After: ' . WINDOW_SECONDS);
    echo 'Too many requests: try again in ' . WINDOW_SECONDS . " seconds.\n";
    exit;
}

answer_from_provider();
