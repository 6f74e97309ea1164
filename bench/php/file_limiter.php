<?php
// What a site owner keeps instead of resolve when limits live in files: the limiter in PHP that
// the benchmark (bench/run.sh, benches/apache.rs) serves under PHP-FPM beside resolve, so that
// every run says how resolve compares with it. Written for the benchmark; not part of resolve.
//
// A fixed window per client address: one JSON file {"count": N, "start": UNIX_TIME} per address,
// read and rewritten under an exclusive flock; a window is 60 seconds from its first request and
// admits ANCHOR_LIMIT requests. One request in 100 deletes the files untouched for an hour. Over
// the limit: 429 in plain text with Retry-After. Admitted: one GET to the provider, whose
// "download" field is the answer.
//
// Settings, from the environment (under PHP-FPM: env[NAME] = value in the pool):
//   ANCHOR_DATA_DIR      directory of the counters (required, writable by the pool's account)
//   ANCHOR_PROVIDER_URL  the provider's endpoint, called as URL?link=LINK (required)
//   ANCHOR_LIMIT         requests per window and address (default 30)

const WINDOW_SECONDS = 60;
const SWEEP_ONE_IN = 100;
const STALE_AFTER_SECONDS = 3600;

require __DIR__ . '/common.php';

$limit = limit();
$dir = setting('ANCHOR_DATA_DIR');
$now = time();

// The address as a file name: anything but hex digits, colons and dots becomes '_'.
$client = preg_replace('/[^0-9A-Fa-f:.]/', '_', $_SERVER['REMOTE_ADDR'] ?? 'unknown');
$counter = fopen($dir . '/' . $client . '.json', 'c+');
flock($counter, LOCK_EX);
$state = json_decode((string) stream_get_contents($counter), true);
if (!is_array($state) || $now - (int) ($state['start'] ?? 0) > WINDOW_SECONDS) {
    $state = ['count' => 0, 'start' => $now];
}
$state['count'] = (int) $state['count'] + 1;
rewind($counter);
ftruncate($counter, 0);
fwrite($counter, json_encode($state));
fflush($counter);
flock($counter, LOCK_UN);
fclose($counter);

if (mt_rand(1, SWEEP_ONE_IN) === 1) {
    foreach (glob($dir . '/*.json') ?: [] as $old) {
        if (@filemtime($old) < $now - STALE_AFTER_SECONDS) {
            @unlink($old);
        }
    }
}

if ($state['count'] > $limit) {
    $wait = max(1, $state['start'] + WINDOW_SECONDS - $now);
    http_response_code(429);
    header('Content-Type: text/plain; charset=utf-8');
    header('Retry-After: ' . $wait);
    echo "Too many requests: try again in $wait seconds.\n";
    exit;
}

answer_from_provider();
