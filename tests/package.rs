//! The release archives of `deploy.sh --package`, as an owner uses them: built twice (the same bytes), checked against SHA256SUMS, listed with their modes (no settings in them), then the zip extracted in a new cPanel-style account's home exactly as INSTALL.txt says, the page resolving a link through Apache with suEXEC, and the next version extracted over it (and into the web root by mistake) without touching the settings.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use support::account::{
    SuexecLog, apache_for, assert_status, check_suexec_fits, send_through_page,
};
use support::temp::entries_under;
use support::{HostUser, TempDir, is_root};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require_root() {
    assert!(
        is_root(),
        "tests/package.rs must run as root: it creates a system account and runs Apache with \
         suEXEC, which only root can start (run tests/run-all.sh as root)"
    );
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn package(dir: &Path) -> String {
    run(Command::new("bash")
        .arg(repo().join("deploy.sh"))
        .args(["--settings", "/dev/null", "--package"])
        .arg(dir)
        .current_dir(repo())
        .env_remove("RESOLVE_CONFIG"))
}

fn version() -> String {
    let cargo = fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("version in Cargo.toml")
        .to_string()
}

/// `(mode string, path)` of each entry, as `unzip -Z` or `tar -tv` shows them.
fn modes(listing: &str, path_field: usize) -> Vec<(String, String)> {
    listing
        .lines()
        .filter(|l| l.starts_with('-') || l.starts_with('d'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[path_field..].join(" ").trim_end_matches('/').to_string(),
            )
        })
        .collect()
}

/// What the archives hold, with the modes extraction gives: the program, the page and the list
/// of the files installed (no entry for `resolve/` itself), no settings (the program makes
/// them).
const EXPECTED: [(&str, &str); 8] = [
    ("-rw-r--r--", "INSTALL.txt"),
    ("drwxr-xr-x", "public_html/cgi-bin"),
    ("-rwxr-xr-x", "public_html/cgi-bin/resolve"),
    ("drwxr-xr-x", "public_html/resolve"),
    ("-rw-r--r--", "public_html/resolve/app.js"),
    ("-rw-r--r--", "public_html/resolve/index.html"),
    ("-rw-r--r--", "public_html/resolve/style.css"),
    ("-rw-------", "resolve/installed.txt"),
];

fn expected() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = EXPECTED
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    all.sort_by(|a, b| a.1.cmp(&b.1));
    all
}

/// The next version's archives: this repository's `deploy.sh`, page and INSTALL.txt copied
/// with the version raised, packaged around the binary of `first` (the program's code is not
/// what an upgrade is about: what the archive replaces and keeps is). Returns the zip.
fn next_version(dir: &TempDir, binary: &Path) -> (String, PathBuf) {
    let copy = dir.mkdir("next-repo");
    for f in [
        "deploy.sh",
        "docs/INSTALL.txt",
        "public/index.html",
        "public/style.css",
        "public/app.js",
    ] {
        let to = copy.join(f);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(repo().join(f), &to).unwrap();
    }
    let next = format!("{}-next", version());
    let cargo = fs::read_to_string(repo().join("Cargo.toml"))
        .unwrap()
        .replacen(
            &format!("version = \"{}\"", version()),
            &format!("version = \"{next}\""),
            1,
        );
    fs::write(copy.join("Cargo.toml"), cargo).unwrap();
    let out = dir.mkdir("next");
    run(Command::new("bash")
        .arg(copy.join("deploy.sh"))
        .args(["--settings", "/dev/null", "--package"])
        .arg(&out)
        .arg("--binary")
        .arg(binary)
        .current_dir(&copy)
        .env_remove("RESOLVE_CONFIG"));
    let zip = out.join(format!("resolve-{next}-x86_64-linux.zip"));
    assert!(zip.is_file(), "{}", zip.display());
    (next, zip)
}

#[test]
fn the_package_installs_with_file_manager_steps_and_resolves_under_suexec() {
    require_root();
    let dir = TempDir::new("package");
    let first = dir.mkdir("first");
    let second = dir.mkdir("second");
    let built = Instant::now();
    let out = package(&first);
    eprintln!("deploy.sh --package, with the build: {:?}", built.elapsed());
    let name = format!("resolve-{}-x86_64-linux", version());
    let zip = first.join(format!("{name}.zip"));
    let tgz = first.join(format!("{name}.tar.gz"));
    for f in [&zip, &tgz] {
        assert!(out.contains(&f.display().to_string()), "{out}");
    }
    let mut names: Vec<String> = fs::read_dir(&first)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "SHA256SUMS",
            &format!("{name}.tar.gz"),
            &format!("{name}.zip")
        ]
    );
    eprintln!(
        "sizes: {} bytes (zip), {} bytes (tar.gz)",
        fs::metadata(&zip).unwrap().len(),
        fs::metadata(&tgz).unwrap().len()
    );

    // SHA256SUMS holds both archives' checksums, and they match.
    let sums = fs::read_to_string(first.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), 2, "{sums}");
    let checked = run(Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&first));
    assert_eq!(
        checked,
        format!("{name}.zip: OK\n{name}.tar.gz: OK\n"),
        "{checked}"
    );

    // The same commit gives the same bytes.
    package(&second);
    for f in [
        format!("{name}.zip"),
        format!("{name}.tar.gz"),
        "SHA256SUMS".into(),
    ] {
        assert!(
            fs::read(first.join(&f)).unwrap() == fs::read(second.join(&f)).unwrap(),
            "{f} differs between two builds of the same commit"
        );
    }

    // Contents and modes of both archives; no entry for public_html itself, so extracting
    // never changes the web root's own mode, and no settings.
    let zip_list = run(Command::new("unzip").arg("-Z").arg(&zip));
    let mut zip_modes = modes(&zip_list, 8);
    zip_modes.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(zip_modes, expected(), "{zip_list}");
    let tar_list = run(Command::new("tar").arg("-tvzf").arg(&tgz));
    let mut tar_modes = modes(&tar_list, 5);
    tar_modes.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(tar_modes, expected(), "{tar_list}");
    assert!(
        tar_list.lines().all(|l| l.contains(" 0/0 ")),
        "entries owned by root (0/0), not by whoever built them:\n{tar_list}"
    );
    let install = run(Command::new("unzip").arg("-p").arg(&zip).arg("INSTALL.txt"));
    for step in [
        "1. Upload",
        "2. Extract",
        "3. Check the permissions",
        "4. Open the page",
        "5. Set your provider and token",
        "Cron Jobs",
        "Upgrading",
        "Extract the new archive where you extracted the first",
        "allowed_origins",
        "Metrics > Errors",
        "Change Permissions",
        &format!("resolve-{}-x86_64-linux.zip", version()),
    ] {
        assert!(
            install.contains(step),
            "{step:?} in INSTALL.txt:\n{install}"
        );
    }
    assert!(
        !install.contains('@'),
        "a placeholder left in INSTALL.txt:\n{install}"
    );

    // INSTALL.txt, step by step, in a new account. The clock runs from the empty account.
    let started = Instant::now();
    let suexec = SuexecLog::mark();
    let user = HostUser::create(true);
    check_suexec_fits(&user);
    let mine = "<!doctype html><title>Already here</title>\n";
    user.write(&user.web().join("index.html"), mine, 0o644);
    // 1. Upload to the home directory (File Manager writes it as the account).
    let uploaded = user.path(&format!("{name}.zip"));
    user.write(&uploaded, fs::read(&zip).unwrap(), 0o644);
    // 2. Extract there (File Manager runs the archive tool as the account), delete the archive.
    user.run("unzip", &["-q", &format!("{name}.zip")]);
    fs::remove_file(&uploaded).unwrap();
    // 3. The permissions, as File Manager shows them: the archive's, with no chmod.
    user.assert_mode("public_html/cgi-bin", 0o755);
    user.assert_mode("public_html/cgi-bin/resolve", 0o755);
    user.assert_mode("public_html", 0o750);
    let home_files: Vec<_> = entries_under(&user.path("resolve"));
    assert_eq!(
        home_files,
        [user.path("resolve/installed.txt")],
        "settings came with the archive"
    );
    user.assert_mode("resolve/installed.txt", 0o600);
    assert_eq!(
        fs::read_to_string(user.web().join("index.html")).unwrap(),
        mine,
        "the owner's home page"
    );
    for p in entries_under(&user.home) {
        let meta = fs::symlink_metadata(&p).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(meta.uid(), user.uid, "{} is not the account's", p.display());
    }
    // 4. Open the page and send a link: the first request makes the starter settings, with
    // the echo provider (nothing is spent).
    let apache = apache_for(&user);
    let link = "https://example.com/file/package";
    let (sent_to, r) = send_through_page(&apache, &user.url("resolve/"), link);
    assert_eq!(sent_to, "/cgi-bin/resolve");
    assert_status(&r, 200, &apache, &suexec);
    assert!(r.text().contains(link), "{}", r.everything());
    user.assert_mode("resolve", 0o700);
    user.assert_mode("resolve/config.json", 0o600);
    user.assert_mode("resolve/ratelimit", 0o700);
    // 5. The settings: the echo provider stays; the site's address goes into allowed_origins
    // as the step says, and the owner names the site.
    let config = user.path("resolve/config.json");
    let starter = fs::read_to_string(&config).unwrap();
    assert!(starter.contains("\"allowed_origins\": [],"), "{starter}");
    let edited = starter.replace(
        "\"allowed_origins\": [],",
        &format!(
            "\"allowed_origins\": [\"{}\"],\n  \"page\": {{\"site_name\": \"Owner's links\"}},",
            apache.base_url()
        ),
    );
    user.write(&config, &edited, 0o600);
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), link);
    assert_status(&r, 200, &apache, &suexec);
    eprintln!(
        "from an empty account to the first resolved link: {:?}",
        started.elapsed()
    );
    let log = suexec.since();
    assert!(
        log.contains(&format!("uid: ({}/{})", user.uid, user.name)),
        "not run through suEXEC as the account:\n{log}"
    );
    assert!(
        !entries_under(&user.path("resolve/ratelimit"))
            .iter()
            .all(|p| p.ends_with(".htaccess")),
        "no counters were written"
    );

    // The settings pass check, run as the account where the web server runs it.
    let check = user.run("public_html/cgi-bin/resolve", &["check"]);
    assert!(check.lines().any(|l| l.trim() == "OK"), "{check}");

    // The owner edits the page in File Manager; the cron job's sweep keeps a copy of it.
    let index = user.web().join("resolve/index.html");
    let shipped = fs::read_to_string(&index).unwrap();
    let owners_page = shipped.replace("</title>", " (Owner's edition)</title>");
    assert_ne!(owners_page, shipped);
    user.write(&index, &owners_page, 0o644);
    user.run("public_html/cgi-bin/resolve", &["sweep"]);

    // Upgrading: the next version extracted where the first was, as INSTALL.txt says. The
    // program and the page are the new ones; the settings and counters are the owner's.
    let (next, next_zip) = next_version(&dir, &zip_binary(&dir, &zip, &name));
    let counters = entries_under(&user.path("resolve/ratelimit"));
    let uploaded = user.path(&format!("resolve-{next}-x86_64-linux.zip"));
    user.write(&uploaded, fs::read(&next_zip).unwrap(), 0o644);
    user.run(
        "unzip",
        &["-q", "-o", &format!("resolve-{next}-x86_64-linux.zip")],
    );
    fs::remove_file(&uploaded).unwrap();
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        edited,
        "the settings were replaced"
    );
    user.assert_mode("resolve/config.json", 0o600);
    user.assert_mode("resolve", 0o700);
    for file in ["style.css", "app.js"] {
        assert_eq!(
            fs::read(user.web().join("resolve").join(file)).unwrap(),
            fs::read(dir.join("next-repo/public").join(file)).unwrap(),
            "{file} is the next version's"
        );
    }
    // The edited page is back after the next sweep, the new version's beside it, and the
    // sweep's output (the cron job's mail) says so.
    let swept = user.run("public_html/cgi-bin/resolve", &["sweep"]);
    assert_eq!(fs::read_to_string(&index).unwrap(), owners_page);
    let new_page = user.web().join("resolve/index.html.new");
    assert!(
        fs::read_to_string(&new_page)
            .unwrap()
            .contains(&format!("resolve {next}")),
        "the next version's page is beside the owner's"
    );
    user.assert_mode("public_html/resolve/index.html", 0o644);
    user.assert_mode("public_html/resolve/index.html.new", 0o644);
    assert!(
        swept.contains(&format!(
            "the upgrade replaced {}, which you had edited",
            index.display()
        )) && swept.contains("index.html.new"),
        "{swept}"
    );
    let r = apache.client().get(&user.url("resolve/")).unwrap();
    assert!(r.text().contains("(Owner's edition)"), "{}", r.everything());
    for c in &counters {
        assert!(c.exists(), "{} went with the upgrade", c.display());
    }
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), link);
    assert_status(&r, 200, &apache, &suexec);
    assert!(r.text().contains(link), "{}", r.everything());
    // The next version extracted into the web root by mistake: nothing secret lands there,
    // the mistake shows as public_html/public_html, and the site goes on as it was.
    user.write(
        &user.web().join("next.zip"),
        fs::read(&next_zip).unwrap(),
        0o644,
    );
    user.run(
        "sh",
        &["-c", "cd public_html && unzip -q next.zip && rm next.zip"],
    );
    assert!(user.web().join("public_html/cgi-bin/resolve").is_file());
    assert!(!user.web().join("resolve/config.json").exists());
    assert!(
        entries_under(&user.web())
            .iter()
            .all(|p| !p.ends_with("config.json") && !p.ends_with("ratelimit")),
        "settings under the web root"
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), edited);
    let (_, r) = send_through_page(&apache, &user.url("resolve/"), link);
    assert_status(&r, 200, &apache, &suexec);

    // A host whose extraction ignores the archive's modes (Python's zipfile, like some file
    // managers, writes plain 644 files): the program does not run, as INSTALL.txt describes,
    // until step 3's fix by hand.
    let other = HostUser::create(true);
    other.write(
        &other.path(&format!("{name}.zip")),
        fs::read(&zip).unwrap(),
        0o644,
    );
    other.run(
        "/usr/bin/python3",
        &["-m", "zipfile", "-e", &format!("{name}.zip"), "."],
    );
    other.assert_mode("public_html/cgi-bin/resolve", 0o644);
    let apache = apache_for(&other);
    let suexec = SuexecLog::mark();
    let (_, r) = send_through_page(&apache, &other.url("resolve/"), link);
    assert!(
        r.status >= 500,
        "a program without its execute bit answered:\n{}",
        r.everything()
    );
    assert!(
        install.contains("0644") && install.contains("500 Internal Server Error"),
        "INSTALL.txt names what this looks like"
    );
    // Step 3 by hand: 755 for the program; the settings the program makes are 600.
    other.run("chmod", &["755", "public_html/cgi-bin/resolve"]);
    let (_, r) = send_through_page(&apache, &other.url("resolve/"), link);
    assert_status(&r, 200, &apache, &suexec);
    assert!(r.text().contains(link), "{}", r.everything());
    other.assert_mode("resolve/config.json", 0o600);
}

/// The program out of an archive, for packaging the next version around it.
fn zip_binary(dir: &TempDir, zip: &Path, name: &str) -> PathBuf {
    let out = dir.mkdir(&format!("{name}-binary"));
    run(Command::new("unzip")
        .args(["-q", "-o"])
        .arg(zip)
        .arg("public_html/cgi-bin/resolve")
        .arg("-d")
        .arg(&out));
    out.join("public_html/cgi-bin/resolve")
}

/// INSTALL.txt as the archive holds it, with this repository's values in its placeholders.
fn install_text() -> String {
    fs::read_to_string(repo().join("docs/INSTALL.txt"))
        .unwrap()
        .replace("@VERSION@", &version())
        .replace("@WEB@", "public_html")
        .replace("@PAGE_PATH@", "public_html/resolve")
        .replace("@PAGE_URL@", "https://YOUR-DOMAIN/resolve/")
}

/// The quotes INSTALL.txt gives as what the page or the error log shows (`shows "..."`, and
/// `or "..."` right after one), with the text's line breaks as spaces.
fn shown_quotes(text: &str) -> Vec<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut quotes = Vec::new();
    let mut rest = flat.as_str();
    while let Some(at) = rest.find("shows \"") {
        rest = &rest[at + "shows ".len()..];
        while let Some(end) = rest[1..].find('"') {
            quotes.push(rest[1..=end].to_owned());
            rest = &rest[end + 2..];
            match rest.strip_prefix(" or \"") {
                Some(r) => rest = &rest[rest.len() - r.len() - 1..],
                None => break,
            }
        }
    }
    quotes
}

/// Every file of the program that says something to a visitor or the owner: the Rust
/// sources and the page, their text with line continuations joined.
fn program_text() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path
                .extension()
                .is_some_and(|e| e == "rs" || e == "js" || e == "html")
            {
                out.push_str(&fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut all = String::new();
    walk(&repo().join("src"), &mut all);
    walk(&repo().join("public"), &mut all);
    // A Rust string continued with `\` at a line's end reads as one line: the break and the
    // next line's indent are not in the string.
    let mut joined = String::with_capacity(all.len());
    let mut rest = all.as_str();
    while let Some(at) = rest.find("\\\n") {
        joined.push_str(&rest[..at]);
        rest = rest[at + 2..].trim_start();
    }
    joined.push_str(rest);
    joined
}

#[test]
fn install_txt_quotes_what_the_program_says_in_lines_of_80() {
    let text = install_text();
    for (i, line) in text.lines().enumerate() {
        assert!(
            line.chars().count() <= 80,
            "INSTALL.txt line {} is {} characters long:\n{line}",
            i + 1,
            line.chars().count()
        );
    }
    let quotes = shown_quotes(&text);
    assert!(quotes.len() >= 8, "{quotes:?}");
    assert!(shown_quotes("shows \"a\" or \"b\", then \"c\"") == ["a", "b"]);
    let program = program_text();
    for q in &quotes {
        assert!(
            program.contains(q.as_str()),
            "INSTALL.txt quotes {q:?}, which the program never says"
        );
    }
    // Only files the archive holds or the program makes.
    for name in ["README", "docs/", ".md", "SHA256SUMS", "deploy.sh"] {
        assert!(
            !text.contains(name),
            "INSTALL.txt names {name}, not in the archive"
        );
    }
}
