<?php
// What both PHP limiters of the benchmark share (bench/php/file_limiter.php and
// mysql_limiter.php): their settings, the limit, and the provider's call once a request is
// admitted. Written for the benchmark; not part of resolve.

// A setting from the environment (under PHP-FPM: env[NAME] = value in the pool).
function setting(string $name, string $default = ''): string
{
    $value = getenv($name);
    return $value === false || $value === '' ? $default : $value;
}

// Requests per window and address: ANCHOR_LIMIT, 30 when unset or not a positive number.
function limit(): int
{
    $limit = (int) setting('ANCHOR_LIMIT', '30');
    return $limit > 0 ? $limit : 30;
}

// One GET to the provider (ANCHOR_PROVIDER_URL?link=LINK), whose "download" field is the answer.
function answer_from_provider(): void
{
    $link = (string) ($_REQUEST['link'] ?? '');
    $reply = @file_get_contents(setting('ANCHOR_PROVIDER_URL') . '?link=' . rawurlencode($link));
    $answer = $reply === false ? null : json_decode($reply, true);
    header('Content-Type: text/plain; charset=utf-8');
    if (!is_array($answer) || !isset($answer['download'])) {
        http_response_code(502);
        echo "The provider did not answer.\n";
        exit;
    }
    echo $answer['download'], "\n";
}
