//! A cPanel-style hosting account for the tests that run the program as the account: a system user with a home laid out as cPanel's (`public_html` 750 for Apache's group, `cgi-bin` 755), removed on drop; Debian's suEXEC wrapper and its log; and Apache serving the account through suEXEC.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::apache::Apache;
use super::client::{Request, Response};
use super::system::server_user;
use super::temp::set_mode;

pub const SUEXEC: &str = "/usr/lib/apache2/suexec";
pub const SUEXEC_LOG: &str = "/var/log/apache2/suexec.log";

// ---------------------------------------------------------------------------------------------
// suEXEC on this machine

/// `suexec -V`: the values compiled into Debian's wrapper.
pub fn suexec_settings() -> BTreeMap<String, String> {
    let meta = fs::metadata(SUEXEC).unwrap_or_else(|e| {
        panic!(
            "{SUEXEC}: {e}: install apache2-suexec-pristine (tests/run-all.sh does when run as root)"
        )
    });
    assert!(
        meta.uid() == 0 && meta.mode() & 0o4000 != 0,
        "{SUEXEC} must be setuid root for Apache to enable suEXEC (mode {:o}, uid {})",
        meta.mode(),
        meta.uid()
    );
    let out = Command::new(SUEXEC)
        .arg("-V")
        .output()
        .unwrap_or_else(|e| panic!("run {SUEXEC} -V: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("-D "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// Checks that this wrapper can run programs of `user` from `~user/public_html` for Apache's
/// account; returns the settings for messages.
pub fn check_suexec_fits(user: &HostUser) -> BTreeMap<String, String> {
    let s = suexec_settings();
    let get = |k: &str| {
        s.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{SUEXEC} -V does not show {k}: {s:?}"))
    };
    assert_eq!(get("AP_USERDIR_SUFFIX"), "public_html", "{s:?}");
    let apache_user = server_user().expect("root has a server account");
    assert_eq!(
        get("AP_HTTPD_USER"),
        apache_user.name,
        "suEXEC accepts calls only from this account: {s:?}"
    );
    let uid_min: u32 = get("AP_UID_MIN").parse().expect("AP_UID_MIN");
    let gid_min: u32 = get("AP_GID_MIN").parse().expect("AP_GID_MIN");
    assert!(
        user.uid >= uid_min && user.gid >= gid_min,
        "{user:?} is below suEXEC's minimum ({uid_min}/{gid_min})"
    );
    s
}

/// The suEXEC log from a given length on.
pub struct SuexecLog {
    start: u64,
}

impl SuexecLog {
    pub fn mark() -> SuexecLog {
        SuexecLog {
            start: fs::metadata(SUEXEC_LOG).map(|m| m.len()).unwrap_or(0),
        }
    }

    pub fn since(&self) -> String {
        let bytes = fs::read(SUEXEC_LOG).unwrap_or_default();
        let start = (self.start as usize).min(bytes.len());
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// The log since the mark, with runs of successful starts counted instead of listed.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let mut ran = 0;
        for line in self.since().lines() {
            if line.contains(" cmd: resolve") && line.contains("]: uid: (") {
                ran += 1;
                continue;
            }
            if ran > 0 {
                out.push_str(&format!("({ran} programs started)\n"));
                ran = 0;
            }
            out.push_str(line);
            out.push('\n');
        }
        if ran > 0 {
            out.push_str(&format!("({ran} programs started)\n"));
        }
        out
    }
}

impl Drop for SuexecLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{SUEXEC_LOG} during the test:\n{}", self.summary());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A hosting account, removed on drop

#[derive(Debug)]
pub struct HostUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

pub fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let mix = (nanos as u64) ^ (u64::from(std::process::id()) << 20) ^ (n << 28);
    format!("{:08x}", mix & 0xffff_ffff)
}

impl HostUser {
    /// A new account `resolvetest<random>` with no shell and a home laid out like cPanel's:
    /// home 711, public_html 750 (group: Apache's), and `public_html/cgi-bin` 755 unless
    /// `cgi_bin` is false.
    pub fn create(cgi_bin: bool) -> HostUser {
        HostUser::create_with_shell(cgi_bin, "/usr/sbin/nologin")
    }

    /// The same, for an account the host gives a shell (ssh, FTP logins check it).
    pub fn create_with_shell(cgi_bin: bool, shell: &str) -> HostUser {
        let name = format!("resolvetest{}", random_suffix());
        let home = PathBuf::from("/home").join(&name);
        // useradd takes a lock on /etc/passwd: retry when a parallel test holds it.
        let mut last = String::new();
        let mut created = false;
        for _ in 0..20 {
            let out = Command::new("useradd")
                .args(["--create-home", "--home-dir"])
                .arg(&home)
                .args(["--shell", shell, "--user-group", &name])
                .output()
                .unwrap_or_else(|e| panic!("run useradd: {e}"));
            if out.status.success() {
                created = true;
                break;
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(250));
        }
        assert!(created, "useradd {name} failed: {last}");
        let passwd = fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
        let fields: Vec<&str> = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&name.as_str()))
            .unwrap_or_else(|| panic!("{name} not in /etc/passwd after useradd"));
        let user = HostUser {
            uid: fields[2].parse().expect("uid"),
            gid: fields[3].parse().expect("gid"),
            name,
            home,
        };
        assert!(
            user.uid >= 1000,
            "useradd gave {} uid {}: an unprivileged account needs >= 1000",
            user.name,
            user.uid
        );
        set_mode(&user.home, 0o711);
        let web = user.home.join("public_html");
        user.mkdir(&web, 0o750);
        let apache = server_user().expect("root has a server account");
        std::os::unix::fs::chown(&web, Some(user.uid), Some(apache.gid)).expect("chown web root");
        if cgi_bin {
            user.mkdir(&web.join("cgi-bin"), 0o755);
        }
        user
    }

    pub fn web(&self) -> PathBuf {
        self.home.join("public_html")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    /// `mkdir` owned by the account.
    pub fn mkdir(&self, path: &Path, mode: u32) {
        fs::create_dir(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).expect("chown");
        set_mode(path, mode);
    }

    /// Write a file owned by the account.
    pub fn write(&self, path: &Path, contents: impl AsRef<[u8]>, mode: u32) {
        fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).expect("chown");
        set_mode(path, mode);
    }

    /// Sets the account's password (`None`: no password, but not locked either, so that a key
    /// login works).
    pub fn set_password(&self, password: Option<&str>) {
        let entry = match password {
            Some(p) => format!("{}:{p}\n", self.name),
            None => format!("{}:*\n", self.name),
        };
        let mut cmd = Command::new("chpasswd");
        if password.is_none() {
            cmd.arg("--encrypted");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run chpasswd: {e}"));
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(entry.as_bytes())
            .expect("write to chpasswd");
        assert!(child.wait().expect("chpasswd").success(), "chpasswd failed");
    }

    /// `/~user/<rel>`
    pub fn url(&self, rel: &str) -> String {
        format!("/~{}/{rel}", self.name)
    }
}

impl Drop for HostUser {
    fn drop(&mut self) {
        let out = Command::new("userdel")
            .args(["--remove", "--force", &self.name])
            .output();
        let removed = !self.home.exists();
        if !removed || out.as_ref().map(|o| !o.status.success()).unwrap_or(true) {
            // A leftover account is worth a line, never a second panic.
            eprintln!(
                "userdel --remove {}: {:?}; home {} removed: {removed}",
                self.name,
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()),
                self.home.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Apache serving the account, through suEXEC

/// Apache serving the account's `public_html` at `/~NAME/` (UserDir), each program run through
/// suEXEC as the account, with `/cgi-bin/` taken to the account's own `cgi-bin` as on a cPanel
/// host (where the domain's `/cgi-bin/` is the account's): a rewrite to `/~NAME/cgi-bin/`, so
/// that suEXEC still runs it as the account.
pub fn apache_for(user: &HostUser) -> Apache {
    let home = user.home.display();
    Apache::builder("suexec")
        .module("suexec")
        .module("userdir")
        .module("rewrite")
        .log_level("notice")
        .conf(&format!(
            r#"UserDir disabled
UserDir enabled {name}
UserDir public_html
RewriteEngine On
RewriteRule "^/cgi-bin/(.*)$" "/~{name}/cgi-bin/$1" [PT]
<Directory "{home}/public_html">
    AllowOverride All
    Options SymLinksIfOwnerMatch
    Require all granted
</Directory>
<Directory "{home}/public_html/cgi-bin">
    AllowOverride None
    Options +ExecCGI
    SetHandler cgi-script
</Directory>"#,
            name = user.name
        ))
        .start()
}

/// Everything useful when a request through suEXEC went wrong.
pub fn diagnostics(apache: &Apache, suexec: &SuexecLog) -> String {
    format!(
        "--- apache error_log\n{}\n--- {SUEXEC_LOG} (this test)\n{}",
        apache.error_log(),
        suexec.summary()
    )
}

pub fn assert_status(r: &Response, status: u16, apache: &Apache, suexec: &SuexecLog) {
    assert_eq!(
        r.status,
        status,
        "{}\n{}",
        r.everything(),
        diagnostics(apache, suexec)
    );
}

impl HostUser {
    /// Runs `program` with `args` as the account, in its home directory (as cPanel's File
    /// Manager runs the archive tools); panics when it fails.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new("runuser")
            .args(["-u", &self.name, "--", program])
            .args(args)
            .current_dir(&self.home)
            .env_remove("RESOLVE_CONFIG")
            .output()
            .unwrap_or_else(|e| panic!("run {program} as {}: {e}", self.name));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{program} {args:?} as {}: {text}",
            self.name
        );
        text
    }

    /// Panics unless `rel` (from the home) has `mode` and belongs to the account.
    pub fn assert_mode(&self, rel: &str, mode: u32) {
        let path = self.path(rel);
        let meta = fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            (meta.mode() & 0o7777, meta.uid()),
            (mode, self.uid),
            "{rel}: mode {:o} owner {}, expected {mode:o} owned by {}",
            meta.mode() & 0o7777,
            meta.uid(),
            self.name
        );
    }
}

/// The `action` of the page's form: where the page sends links.
pub fn form_action(html: &str) -> String {
    let at = html.find("<form").expect("a form in the page");
    let tag = &html[at..at + html[at..].find('>').expect("end of the form tag")];
    let value = tag
        .split(" action=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no action in {tag}"));
    value[..value.find('"').expect("closing quote")].to_string()
}

/// Sends `link` as the page at `page` (a path on the server, ending in `/`) does: reads the
/// page, takes its form's action (resolved against the page's path when relative), and posts
/// the link there from the page's origin, asking for JSON as its script does. Returns where it
/// was sent and the answer.
pub fn send_through_page(apache: &Apache, page: &str, link: &str) -> (String, Response) {
    let client = apache.client();
    let r = client
        .get(page)
        .unwrap_or_else(|e| panic!("GET {page}: {e}"));
    assert_eq!(r.status, 200, "GET {page}:\n{}", r.everything());
    let action = form_action(&r.text());
    let target = if action.starts_with('/') {
        action
    } else {
        format!("{}{action}", &page[..page.rfind('/').expect("a path") + 1])
    };
    let r = client
        .send(
            &Request::post_form(&target, super::urlenc::link_param(link))
                .header("Accept", "application/json")
                .header("Origin", &apache.base_url())
                .header("Referer", &format!("{}{page}", apache.base_url())),
        )
        .unwrap_or_else(|e| panic!("POST {target}: {e}"));
    (target, r)
}
