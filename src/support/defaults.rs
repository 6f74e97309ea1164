//! Every default value of the program, in one place, each with the reason it was chosen.

/// Name of the default rule, which keys on the client address.
pub const RULE_NAME: &str = "ip";
/// Requests admitted per window by the default rule.
pub const RULE_LIMIT: u32 = 30;
/// Length of the default rule's window, in seconds.
pub const RULE_WINDOW_SECS: u32 = 60;
/// How a rule's store keys are written when it names no `key_template`, by what it counts:
/// the keys resolve has always written, so counts carry over an upgrade; each starts with
/// `resolve:` and the rule's name, so rules never share a key.
pub const KEY_TEMPLATE_IP: &str = "resolve:{rule}:{ip}";
pub const KEY_TEMPLATE_API_KEY: &str = "resolve:{rule}:key:{api_key}";
pub const KEY_TEMPLATE_GLOBAL: &str = "resolve:{rule}:*";

/// IPv6 clients are grouped by this prefix length: one subscriber owns a whole /64.
pub const IPV6_PREFIX: u8 = 64;
/// Header that carries a program's API key (arrives as HTTP_X_API_KEY).
pub const API_KEY_HEADER: &str = "X-API-Key";
/// Header read for the client address when the request comes from a trusted proxy.
pub const FORWARDED_HEADER: &str = "X-Forwarded-For";

/// Largest request body read, in bytes. A form with one link needs a fraction of it.
pub const MAX_BODY_BYTES: u64 = 8 * 1024;
/// Longest accepted link, in bytes.
pub const MAX_LINK_BYTES: usize = 2048;
/// Links one request may carry (`request.max_links`): a hoster's archive in parts is rarely
/// more than twenty, and each is still counted by every rule as a request of its own.
pub const MAX_LINKS: u32 = 20;
/// The most `request.max_links` may be set to: every link may wait for the provider, and the
/// list must be answered within the web server's time limit.
pub const MAX_LINKS_LIMIT: u32 = 100;
/// Links of one request served at once, each on a thread with its own store connection: the
/// provider's calls overlap, and a shared host sees at most this many more connections.
pub const LINKS_AT_ONCE: usize = 4;
/// How long a request with several links may take under CGI, in milliseconds: no link is
/// started that could not finish (with the provider's `deadline_ms`) before this, inside
/// Apache's default `Timeout` of 60 s (mod_cgid's `CGIDScriptTimeout` when unset). A link not
/// started is answered `not_tried`, counted by nothing.
pub const LINKS_TIME_BUDGET_MS: u64 = 55_000;
/// The same under FastCGI: inside mod_fcgid's default `FcgidIOTimeout` of 40 s.
pub const LINKS_TIME_BUDGET_FASTCGI_MS: u64 = 38_000;
/// The longest one of several links waits for those pasted before it to be counted (each
/// only looked up and decided by then, unless a store's lock or a challenge holds it up):
/// past it, the link is counted without waiting any longer.
pub const LINK_TURN_WAIT_MS: u64 = 10_000;

/// Directory name of the file store, beside the configuration file.
pub const DATA_DIR_NAME: &str = "ratelimit";
/// Directory under the account's home that holds `config.json` and the data directory.
pub const HOME_SUBDIR: &str = "resolve";
/// Name of the configuration file in that directory.
pub const CONFIG_FILE_NAME: &str = "config.json";
/// The list of installed files beside the configuration (`SHA256  PATH` lines, paths from the
/// home directory), written by `deploy.sh` and carried by the release archives.
pub const INSTALLED_LIST: &str = "installed.txt";
/// The folder beside the configuration (mode 700) with the owner's copies of the page files
/// they edited, put back after an upgrade writes over them.
pub const KEPT_PAGE_DIR: &str = "kept";
/// Environment variable that names the configuration file (not available under suEXEC).
pub const CONFIG_ENV: &str = "RESOLVE_CONFIG";

/// One request in this many sweeps stale files from the store.
pub const SWEEP_ONE_IN: u32 = 100;
/// Time a sweeping request may spend on it, in milliseconds.
pub const SWEEP_BUDGET_MS: u64 = 5;
/// A key whose window ended more than this many seconds ago is removed by a sweep.
pub const SWEEP_GRACE_SECS: u64 = 600;
/// Retry-After sent when the store fails and the policy is `deny`.
pub const DENY_RETRY_AFTER_SECS: u32 = 30;

/// Time allowed to connect to the provider, in milliseconds.
pub const PROVIDER_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Time allowed for the whole provider call, in milliseconds; well under Apache's 60 s Timeout.
pub const PROVIDER_TIMEOUT_MS: u64 = 25_000;
/// Time for all the calls of one resolution, polling included, in milliseconds: under
/// Apache's 60 s Timeout and mod_fcgid's 40 s FcgidIOTimeout.
pub const PROVIDER_DEADLINE_MS: u64 = 35_000;
/// A resolved link is answered from the store for this long without a new paid call. Off by
/// default: a cached answer hands one visitor's download URL to the next, which the owner
/// should choose knowing the provider's links (600, ten minutes, suits the common ones).
pub const CACHE_TTL_SECS: u64 = 0;
/// Largest provider answer read, in bytes.
pub const PROVIDER_MAX_ANSWER_BYTES: u64 = 256 * 1024;
/// Retry-After sent when the provider is busy or rate-limits the site and says nothing.
pub const PROVIDER_BUSY_RETRY_AFTER_SECS: u32 = 60;
/// Retry-After sent when the file host is down for now and the provider says nothing.
pub const PROVIDER_TEMPORARY_RETRY_AFTER_SECS: u32 = 300;
/// Retry-After sent when the owner's provider account has no quota left.
pub const PROVIDER_QUOTA_RETRY_AFTER_SECS: u32 = 3600;
/// How long a provider job still under way is kept for asking again (seconds): its link polls
/// the job, not a new paid call, for this long after it was last asked about.
pub const PROVIDER_JOB_KEEP_SECS: u64 = 900;
/// How long a provider's list of supported hosts is used, and the longest between two fetches
/// of it (seconds).
pub const PROVIDER_HOSTS_MAX_AGE_SECS: u64 = 86_400;
/// Retry-After sent while no provider is configured.
pub const NOT_CONFIGURED_RETRY_AFTER_SECS: u32 = 300;
/// While the configuration cannot be read, each distinct problem is logged at most this
/// often: every request would otherwise repeat it, and the owner needs one line to act on, not
/// thousands; a different problem is logged at once.
pub const CONFIG_ERROR_LOG_INTERVAL_SECS: u64 = 60;
/// The file beside the configuration that remembers which problems were logged within the
/// last interval, and when (see [`crate::support::recent`]).
pub const CONFIG_ERROR_STAMP: &str = ".config-error-logged";
/// Most entries in `block` or in `allow`: far more than any owner writes by hand, few enough
/// that the configuration stays quick to load on every request.
pub const MAX_LIST_ENTRIES: usize = 100_000;
/// A blocked client's 403 is logged at most once per this many seconds per client, so a
/// blocked scraper cannot flood the log.
pub const BLOCKED_LOG_INTERVAL_SECS: u32 = 60;

/// A block from the dashboard's top clients lasts a day: long enough to stop a scraper's run,
/// short enough that a shared address is not shut out for good.
pub const ADMIN_BLOCK_SECS: u64 = 24 * 3600;
/// Automatic blocks in one network (below) past which the network is blocked instead: an
/// attacker rotating through the addresses of one /48 (65,536 /64s) or /24 makes one block, not
/// thousands, and cannot fill the list to push its first blocks out.
pub const AUTO_BLOCK_WIDEN_AT: usize = 3;
/// The networks automatic blocks and refusals are also counted by: an IPv4 /24, an IPv6 /48.
pub const AUTO_BLOCK_NETWORK_V4_PREFIX: u8 = 24;
pub const AUTO_BLOCK_NETWORK_V6_PREFIX: u8 = 48;
/// Refusals of one network, as a multiple of `auto_block.refusals`, that block the network
/// when its addresses each stay below the threshold (one refusal each from many /64s).
pub const AUTO_BLOCK_NETWORK_FACTOR: u32 = 4;
/// The widest ranges the dashboard may block: an IPv4 /16 and an IPv6 /32 (one provider's
/// customers, not the whole Internet): a leaked session cannot shut every visitor out. Wider
/// blocks are for `resolve block` and the configuration, with a shell.
pub const ADMIN_BLOCK_WIDEST_V4: u8 = 16;
pub const ADMIN_BLOCK_WIDEST_V6: u8 = 32;

/// The usage journal is on: the owner's figures (`resolve stats`, `resolve report`) come from
/// it, for one small write per request.
pub const JOURNAL: bool = true;
/// A usage journal that cannot be written is logged at most this often: the answers go on,
/// and one line a minute tells the owner without flooding the log.
pub const JOURNAL_ERROR_LOG_INTERVAL_SECS: u64 = 60;
/// The file in the data directory whose time stamp says when that was last logged.
pub const JOURNAL_ERROR_STAMP: &str = ".journal-error-logged";
/// Where a store on a server (MySQL, Redis) spools its journal, in the data directory: each
/// request appends its entry to a local file, and one request a second writes them all.
pub const JOURNAL_SPOOL_DIR: &str = "journal-spool";
/// The time one spool file covers: the store gets one journal statement per hour this often.
pub const JOURNAL_SPOOL_PERIOD_MS: u64 = 1000;
/// Spool files one request writes to the store at most (a spool left to grow while the store
/// refused its entries is written over the next requests).
pub const JOURNAL_SPOOL_FILES_PER_MOVE: usize = 64;
/// Rounds of that a reader (`stats`) makes at most to write the whole spool before reading.
pub const JOURNAL_SPOOL_MOVES_TO_READ: usize = 1000;
/// This server's copy of the store's block list (MySQL, Redis), in the data directory.
pub const BLOCKS_COPY: &str = "blocks.copy";
/// How long a request trusts that copy before reading the list from the store again: a block
/// made on another server sharing the store applies here within this time.
pub const BLOCKS_COPY_SECS: u64 = 5;

/// The longest a request waits for another process's lock on a file of the file store
/// (`store.lock_timeout_ms`). Requests hold a lock for microseconds; only a stuck process or
/// another program holds one this long.
pub const FILE_LOCK_TIMEOUT_MS: u32 = 2000;

/// The file store's data directory budget (`store.max_files`, `store.max_bytes`): a shared
/// host counts every file against the account's inode quota (often 100,000 to 250,000 in all),
/// so the counters keep to a tenth of a small one. Past it, new clients are counted by shared
/// buckets (see `store::file::budget`).
pub const FILE_STORE_MAX_FILES: u64 = 10_000;
pub const FILE_STORE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The least each may be set to: the journal's share (below) and room for keys.
pub const FILE_STORE_MIN_MAX_FILES: u64 = 2_000;
pub const FILE_STORE_MIN_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Of the budget, what the usage journal and the directories take: 16 hour files for each of
/// 49 hours, a day's file for each of 401 days, its notes and locks (1,190), the 256 shard
/// directories and the journal's (each an inode too), and the journal's bytes for a busy site.
pub const FILE_STORE_JOURNAL_FILES: u64 = 1_500;
pub const FILE_STORE_JOURNAL_BYTES: u64 = 8 * 1024 * 1024;
/// What one key's file takes on disk: one block.
pub const FILE_STORE_KEY_FILE_BYTES: u64 = 4096;
/// Of the room for keys, the share (percent) clients' own keys may fill: past it a new client
/// is counted by a folded key (a shared bucket); the rest is for those buckets and the
/// controls' and sign-ins' own counts, which are never folded.
pub const FILE_STORE_CLIENT_SHARE_PERCENT: u64 = 75;
/// Of the room for keys, the share (percent) the folded keys may take, all rules together.
pub const FILE_STORE_FOLD_SHARE_PERCENT: u64 = 20;
/// The most folded keys (buckets) per rule: with this many, one spent bucket holds back one
/// new visitor in 256.
pub const FILE_STORE_FOLD_MAX_BUCKETS: u64 = 256;
/// The rules that fold, when the store is not told (the starter's two `ip` rules).
pub const FILE_STORE_FOLD_RULES: u64 = 2;
/// Networks a new client's bucket is chosen by, so that one network's clients share one: an
/// IPv4 address's /24, an IPv6 prefix's /48. The ranges the owner is told to block are these.
pub const FILE_STORE_FOLD_V4_PREFIX: u8 = 24;
pub const FILE_STORE_FOLD_V6_PREFIX: u8 = 48;
/// The directory of the folded keys, beside the shard directories.
pub const FILE_STORE_FOLD_DIR: &str = "folded";
/// The file that holds how many entries each shard directory holds (one read tells whether a
/// new key has room).
pub const FILE_STORE_COUNT_FILE: &str = "shard-entries";
/// The file whose creation says folding has started (logged once; removed when a new client
/// finds room again).
pub const FILE_STORE_FOLDING_MARK: &str = "folding";

/// Added to the data directory's name for the mark beside it (`.ratelimit.made`) that says
/// which directory the file store counted in: one made again where it was is said out loud.
pub const DATA_DIR_MARK_SUFFIX: &str = ".made";
/// The file whose creation in a data directory made again says so (logged once).
pub const DATA_DIR_MADE_AGAIN_MARK: &str = "made-again";
/// How long the store's notes say the data directory was made again: a month, the longest
/// spend window of the starter, whose count restarted with it.
pub const DATA_DIR_MADE_AGAIN_NOTE_SECS: u64 = 31 * 86_400;

/// Requests one FastCGI process answers before it exits and the web server starts a fresh one.
pub const FASTCGI_MAX_REQUESTS: u32 = 10_000;
/// The longest a FastCGI process holds its requests' journal entries before writing them as
/// one sum (and when it is idle, sooner): `stats` lags by at most about this much.
pub const FASTCGI_JOURNAL_HOLD_MS: u64 = 1000;
/// Distinct totals and client counts a FastCGI process holds at most before writing them.
pub const FASTCGI_JOURNAL_HOLD_ROWS: usize = 4096;
/// The longest a refusal is answered from memory (a FastCGI process's, or the data directory's
/// `refusals` file under CGI) without asking the store again (never past the refusal's
/// end): a paid call taken back by another process frees a place at most this much later.
pub const REFUSAL_MEMORY_MS: u64 = 1000;
/// Refusals a FastCGI process remembers at once.
pub const FASTCGI_REFUSALS_REMEMBERED: usize = 1024;
/// How often an idle FastCGI process wakes to write what it holds, and to see whether it was
/// asked to stop.
pub const FASTCGI_IDLE_TICK_MS: u64 = 1000;

/// The file in the data directory where CGI processes keep this server's refusals
/// (`store::refusals`).
pub const REFUSALS_FILE: &str = "refusals";
/// Slots of the `refusals` file: refusals of this many clients at once (512 bytes each).
pub const REFUSAL_SLOTS: usize = 1024;
/// The file in the data directory where CGI processes keep the answers given from the memory
/// of refusals, for the same request repeated (`store::answers`, `gateway::replay`).
pub const KEPT_ANSWERS_FILE: &str = "answers";
/// Slots of the `answers` file: answers to this many different requests at once (16 KiB each).
pub const KEPT_ANSWER_SLOTS: usize = 256;

/// Address `resolve serve` listens on.
pub const SERVE_ADDR: &str = "127.0.0.1:8080";
/// Directory `resolve serve` serves pages from.
pub const SERVE_PUBLIC_DIR: &str = "public";

/// MySQL table of per-key counters (fixed windows; the lock row of sliding windows).
pub const MYSQL_COUNTER_TABLE: &str = "rate_counters";
/// MySQL table of one row per admitted request (sliding windows), as PHP limiters keep it.
pub const MYSQL_EVENTS_TABLE: &str = "rate_events";
/// MySQL table of cached answers.
pub const MYSQL_CACHE_TABLE: &str = "rate_cache";
/// MySQL table of the usage journal: counts per hour, for the site and per client.
pub const MYSQL_JOURNAL_TABLE: &str = "rate_journal";
/// MySQL table of the newest `ACTION NEEDED` notes.
pub const MYSQL_NOTES_TABLE: &str = "rate_notes";
/// MySQL port when only a host is given.
pub const MYSQL_PORT: u16 = 3306;
/// Time allowed to connect to MySQL, in milliseconds.
pub const MYSQL_CONNECT_TIMEOUT_MS: u64 = 1_000;
/// Time allowed for each MySQL read or write, in milliseconds; also the lock wait.
pub const MYSQL_READ_TIMEOUT_MS: u64 = 2_000;

/// Redis port when only a host is given.
pub const REDIS_PORT: u16 = 6379;
/// Time allowed to connect to Redis, in milliseconds.
pub const REDIS_CONNECT_TIMEOUT_MS: u64 = 1_000;
/// Time allowed for each Redis reply, in milliseconds.
pub const REDIS_READ_TIMEOUT_MS: u64 = 1_000;
/// Most seeds `store.cluster_nodes` may name: a client needs one that answers to learn the
/// rest, so a few in different places are plenty.
pub const REDIS_CLUSTER_MAX_SEEDS: usize = 16;
/// Most redirections (`MOVED`, `ASK`) and retries one Redis Cluster command follows before
/// the store gives up (within the request's time too): a slot moves once, a failover settles
/// in a few tries.
pub const REDIS_CLUSTER_MAX_TRIES: u32 = 16;
/// Pause before trying a Redis Cluster again while it says it is down or reconfiguring
/// (`CLUSTERDOWN`, `TRYAGAIN`, a master unreachable), so that a failover is waited for
/// within the request's time without spinning.
pub const REDIS_CLUSTER_RETRY_PAUSE_MS: u64 = 100;

/// The dashboard (`/admin`, on with `admin.password_hash`): how long a sign-in lasts, in
/// seconds. A working day; the expiry is inside the signed cookie, not only its `Max-Age`.
pub const ADMIN_SESSION_SECS: u64 = 12 * 3600;
/// How long a session may go unused before it ends, in seconds (30 minutes): a dashboard left
/// open on a shared computer does not stay signed in for the rest of the day.
pub const ADMIN_IDLE_SECS: u64 = 30 * 60;
/// The file in the data directory that lists the open sessions (signing out takes one off).
pub const ADMIN_SESSIONS_FILE: &str = "admin-sessions";
/// Most sessions open at once: one owner's few browsers; past it the longest unused ends.
pub const ADMIN_MAX_SESSIONS: usize = 16;
/// How long a sign-in form may stay open before it is sent, in seconds.
pub const ADMIN_FORM_SECS: u64 = 2 * 3600;
/// Failed sign-ins one client address may make per window before it must wait: a person who
/// mistypes gets a few tries; a guesser gets 480 a day, against a slow hash.
pub const ADMIN_SIGNIN_FAILURES: u32 = 5;
/// That window, in seconds (15 minutes); the other sign-in budgets below share it.
pub const ADMIN_SIGNIN_WINDOW_SECS: u32 = 15 * 60;
/// Failed sign-ins one network (an IPv4 /24, an IPv6 /48: what one customer or one attacker's
/// host usually holds) may make per window: twice an address's, so a household with two
/// forgetful people is not locked out, while a /48's 65,536 /64s get 10 guesses, not 327,680.
pub const ADMIN_SIGNIN_NETWORK_FAILURES: u32 = 10;
/// Failed sign-ins the whole site accepts per window from browsers it does not know: 30 in 15
/// minutes is 2,880 guesses a day at most, whatever the number of addresses, and at most 30
/// password hashes per window for strangers' CPU.
pub const ADMIN_SIGNIN_SITE_FAILURES: u32 = 30;
/// Failed sign-ins a browser that signed in before (its device cookie) may make per window,
/// counted apart from the others: strangers using up the site's budget do not lock it out.
pub const ADMIN_SIGNIN_DEVICE_FAILURES: u32 = 5;
/// How long a device cookie lasts, in seconds (a year): the owner's browser stays known.
pub const ADMIN_DEVICE_SECS: u64 = 365 * 24 * 3600;
/// The prefixes a network budget counts by: an IPv4 /24 and an IPv6 /48.
pub const ADMIN_SIGNIN_NETWORK_V4_PREFIX: u8 = 24;
pub const ADMIN_SIGNIN_NETWORK_V6_PREFIX: u8 = 48;
/// The names of those limits in the store (`resolve:admin-signin:ADDRESS`,
/// `resolve:admin-signin-net:RANGE`, ...); no rule of the configuration may take a name that
/// starts with the first.
pub const ADMIN_SIGNIN_RULE: &str = "admin-signin";
pub const ADMIN_SIGNIN_NETWORK_RULE: &str = "admin-signin-net";
pub const ADMIN_SIGNIN_SITE_RULE: &str = "admin-signin-site";
pub const ADMIN_SIGNIN_DEVICE_RULE: &str = "admin-signin-device";
/// Wrong setup codes one client address may send per window (the sign-ins' 15 minutes): a
/// person who mistypes gets a few tries; the code's 80 bits need no more.
pub const ADMIN_SETUP_FAILURES: u32 = 5;
/// Wrong setup codes one network (an IPv4 /24, an IPv6 /48) may send per window. There is no
/// budget for the whole site: one would let strangers keep the owner from setting it up.
pub const ADMIN_SETUP_NETWORK_FAILURES: u32 = 10;
/// The names of those limits in the store (`resolve:admin-signin-setup:ADDRESS`,
/// `resolve:admin-signin-setup-net:RANGE`): names kept for the dashboard, like the sign-in's.
pub const ADMIN_SETUP_RULE: &str = "admin-signin-setup";
pub const ADMIN_SETUP_NETWORK_RULE: &str = "admin-signin-setup-net";
/// The file in the data directory whose lock is held while a password hash is computed: one
/// at a time per site, so guesses cannot take more than one core of a shared host.
pub const ADMIN_HASH_LOCK_FILE: &str = "admin-hash.lock";
/// How long a sign-in waits for another's hash to be done before it is answered 429, in
/// milliseconds (a hash takes tens of milliseconds: a few queued owners get through).
pub const ADMIN_HASH_WAIT_MS: u64 = 1_000;
/// Most Argon2id costs a configured hash may ask for, near what `resolve hash-password` makes
/// (19 MiB, 2 passes, 1 lane): memory in KiB, passes, lanes, and memory times passes (twice the
/// default's). An unauthenticated visitor can make the server compute one hash per attempt.
pub const ADMIN_HASH_MAX_MEMORY_KIB: u32 = 48 * 1024;
pub const ADMIN_HASH_MAX_PASSES: u32 = 5;
pub const ADMIN_HASH_MAX_LANES: u32 = 2;
pub const ADMIN_HASH_MAX_WORK_KIB: u64 = 2 * 19 * 1024 * 2;
/// Shortest password `resolve hash-password` accepts, in characters.
pub const ADMIN_PASSWORD_MIN_CHARS: usize = 12;
/// Argon2id costs of a new hash: memory in KiB, passes, lanes. OWASP's recommended setting
/// (19 MiB, 2 passes): tens of milliseconds per sign-in, costly for a guesser with the hash.
pub const ADMIN_HASH_MEMORY_KIB: u32 = 19 * 1024;
pub const ADMIN_HASH_PASSES: u32 = 2;
pub const ADMIN_HASH_LANES: u32 = 1;
/// The file in the data directory that holds the server's secret for the dashboard's cookies
/// (32 random bytes, mode 600, made on first use): without it, a copy of the configuration
/// cannot sign a cookie. Removing it signs everyone out.
pub const ADMIN_SECRET_FILE: &str = "admin-secret";
/// Largest form the dashboard reads, in bytes: a password and a token, or the settings with
/// their lists of addresses and origins (a few hundred lines).
pub const ADMIN_MAX_BODY_BYTES: u64 = 16 * 1024;
/// The file beside the configuration that holds the one-time setup code (mode 600): the owner
/// reads it in cPanel's File Manager to prove the site is theirs before setting it up in the
/// browser.
pub const SETUP_CODE_FILE: &str = "setup-code.txt";
/// How long a setup code is good for, in seconds (an hour): long enough to find the file and
/// fill the form; an old one is replaced by a new one when the setup page is opened again.
pub const SETUP_CODE_SECS: u64 = 3600;
/// Random bytes in a setup code (80 bits, 16 letters and digits): out of reach of guessing
/// within its hour under the budgets per address and per network alone.
pub const SETUP_CODE_BYTES: usize = 10;
/// What is added to the configuration file's name for the copy a dashboard save keeps of the
/// file it replaced (`config.json.previous`), which one button puts back.
pub const CONFIG_BACKUP_SUFFIX: &str = ".previous";
/// What is added to the configuration file's name for the file that keeps the tokens of the
/// providers not in use (`config.json.tokens`, mode 600, beside the configuration and so
/// outside the web root): choosing another provider in the settings and coming back never
/// asks for a token again.
pub const KEPT_TOKENS_SUFFIX: &str = ".tokens";

/// `challenge.when`: visitors with no admitted request in the last day are asked, so a script
/// rotating through fresh addresses meets the challenge at each, a returning person rarely.
pub const CHALLENGE_WHEN: &str = "new_clients";
/// `challenge.verify_url`: Cloudflare Turnstile's siteverify.
pub const CHALLENGE_VERIFY_URL: &str = "https://challenges.cloudflare.com/turnstile/v0/siteverify";
/// `challenge.script_url`: Turnstile's widget script.
pub const CHALLENGE_SCRIPT_URL: &str = "https://challenges.cloudflare.com/turnstile/v0/api.js";
/// `challenge.action`: what the widget is rendered with and siteverify must answer.
pub const CHALLENGE_ACTION: &str = "resolve";
/// `challenge.remember_secs`: a solved challenge is remembered for an hour (one visit).
pub const CHALLENGE_REMEMBER_SECS: u32 = 3600;
/// `challenge.extra`: links a solved challenge adds past a visitor's own limit (`over_limit`).
pub const CHALLENGE_EXTRA: u32 = 3;
/// `challenge.extra_window_secs`: how often that extra allowance may be had: once an hour.
pub const CHALLENGE_EXTRA_WINDOW_SECS: u32 = 3600;
/// `challenge.busy_share`: past 80% of a spend limit used, visitors are asked (`busy`).
pub const CHALLENGE_BUSY_SHARE: f64 = 0.8;
/// `challenge.on_error`: a siteverify that cannot answer refuses the link (closed): no paid call
/// goes unchecked while it is down.
pub const CHALLENGE_ON_ERROR: &str = "deny";
/// `challenge.timeout_ms`: siteverify answers in well under a second; past 5 s it is down.
pub const CHALLENGE_TIMEOUT_MS: u64 = 5000;
/// How long a verified token's mark is kept in the store: longer than a token lives (300 s at
/// Turnstile), so a replay is refused by the store even where the service would not.
pub const CHALLENGE_TOKEN_MARK_SECS: u64 = 600;
/// How long a client counts as seen after an admitted request (`new_clients`): a day.
pub const CHALLENGE_SEEN_SECS: u64 = 24 * 3600;
/// `Retry-After` of the 503 when siteverify cannot answer and the policy refuses.
pub const CHALLENGE_DENY_RETRY_AFTER_SECS: u32 = 30;
