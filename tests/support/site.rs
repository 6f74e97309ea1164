//! A site under test, built in one place: the provider stand-in, a temp dir with a data dir the server account may write, the configuration file (the stand-in as provider, a file store, rules, the test's edits) and, for a `Site`, a real Apache running the binary in the mode RESOLVE_TEST_APACHE_MODE selects unless the test chooses one.
//!
//! `Site::builder(label)...start()` starts Apache; `Setup::builder(label)...write()` stops
//! before, for tests that run the binary directly (tests/run-all.sh runs the files that call
//! `Site::builder` once more under mod_fcgid, unless they choose a mode with `.mode(Mode::..)`).

use std::ops::Deref;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::apache::{Apache, ApacheBuilder, Mode};
use super::cgi::{Cgi, CgiOutput};
use super::client::{HttpClient, Response};
use super::config::{self, rule};
use super::provider::Provider;
use super::temp::TempDir;

/// A change to Apache's builder.
type ApacheEdit = Box<dyn FnOnce(ApacheBuilder) -> ApacheBuilder>;
/// A change to the configuration before it is written.
type ConfigEdit = Box<dyn FnOnce(&mut Value)>;
/// Makes the configuration's provider section from the stand-in.
type ProviderSection = Box<dyn FnOnce(&Provider) -> Value>;

/// What a site is made of; see the module documentation.
pub struct SiteBuilder {
    label: String,
    provider: Option<Provider>,
    provider_section: Option<ProviderSection>,
    store: Option<Value>,
    rules: Vec<Value>,
    edits: Vec<ConfigEdit>,
    mode: Option<Mode>,
    fcgid_pool: Option<usize>,
    apache: Vec<ApacheEdit>,
}

impl SiteBuilder {
    fn new(label: &str) -> SiteBuilder {
        SiteBuilder {
            label: label.to_owned(),
            provider: None,
            provider_section: None,
            store: None,
            rules: vec![rule("ip", "ip", 1000, 60)],
            edits: Vec::new(),
            mode: None,
            fcgid_pool: None,
            apache: Vec::new(),
        }
    }

    /// This stand-in instead of a fresh `Provider::start()`.
    pub fn provider(mut self, provider: Provider) -> SiteBuilder {
        self.provider = Some(provider);
        self
    }

    /// The configuration's `provider` section, made from the stand-in (default: the `http`
    /// provider at `/unrestrict` with the test token, `config::http_provider`).
    pub fn provider_section(
        mut self,
        section: impl FnOnce(&Provider) -> Value + 'static,
    ) -> SiteBuilder {
        self.provider_section = Some(Box::new(section));
        self
    }

    /// The configuration's `store` section (default: the file store in the data dir).
    pub fn store(mut self, store: Value) -> SiteBuilder {
        self.store = Some(store);
        self
    }

    /// The configuration's rules (default: `ip`, 1000 a minute).
    pub fn rules(mut self, rules: Vec<Value>) -> SiteBuilder {
        self.rules = rules;
        self
    }

    /// Changes the configuration before it is written (edits apply in order).
    pub fn config(mut self, edit: impl FnOnce(&mut Value) + 'static) -> SiteBuilder {
        self.edits.push(Box::new(edit));
        self
    }

    /// Run the binary this way, whatever RESOLVE_TEST_APACHE_MODE says.
    pub fn mode(mut self, mode: Mode) -> SiteBuilder {
        self.mode = Some(mode);
        self
    }

    /// FastCGI processes to start before the first request in fcgid mode
    /// (`ApacheBuilder::fcgid_pool`).
    pub fn fcgid_pool(mut self, processes: usize) -> SiteBuilder {
        self.fcgid_pool = Some(processes);
        self
    }

    /// Changes Apache's builder (modules, configuration lines...) before it starts.
    pub fn apache(
        mut self,
        edit: impl FnOnce(ApacheBuilder) -> ApacheBuilder + 'static,
    ) -> SiteBuilder {
        self.apache.push(Box::new(edit));
        self
    }

    /// The stand-in, the temp dir and the configuration file, without a web server.
    pub fn write(self) -> Setup {
        self.split().0
    }

    /// Everything, with Apache serving the binary as `/cgi-bin/resolve`.
    pub fn start(self) -> Site {
        let (setup, apache) = self.split();
        let mut builder = Apache::builder(&setup.label).resolve_cgi();
        if let Some(mode) = apache.mode {
            builder = builder.mode(mode);
        }
        if let Some(n) = apache.fcgid_pool {
            builder = builder.fcgid_pool(n);
        }
        builder = builder.set_env(
            "RESOLVE_CONFIG",
            setup.config_path.to_str().expect("utf-8 path"),
        );
        for edit in apache.edits {
            builder = edit(builder);
        }
        Site {
            apache: builder.start(),
            setup,
        }
    }

    fn split(self) -> (Setup, ApacheParts) {
        let provider = self.provider.unwrap_or_else(Provider::start);
        let dir = TempDir::new(&self.label);
        // The data directory where deploy.sh makes it, beside the configuration: what every
        // store keeps there (refusals, the answers kept for them) is where a site keeps it.
        // Made here for the file store, whose directory it is; with a store on a server the
        // program makes it, as on a site.
        let data = match &self.store {
            None => dir.server_dir("ratelimit"),
            Some(_) => dir.path().join("ratelimit"),
        };
        let provider_section = match self.provider_section {
            Some(make) => make(&provider),
            None => config::http_provider(&provider.url("/unrestrict")),
        };
        let mut cfg = json!({
            "provider": provider_section,
            "store": self.store.unwrap_or_else(|| json!({"kind": "file", "dir": data})),
            "rules": self.rules,
        });
        for edit in self.edits {
            edit(&mut cfg);
        }
        let config_path = config::write(&dir, &cfg);
        let setup = Setup {
            label: self.label,
            provider,
            data,
            config_path,
            dir,
        };
        let apache = ApacheParts {
            mode: self.mode,
            fcgid_pool: self.fcgid_pool,
            edits: self.apache,
        };
        (setup, apache)
    }
}

struct ApacheParts {
    mode: Option<Mode>,
    fcgid_pool: Option<usize>,
    edits: Vec<ApacheEdit>,
}

/// The provider stand-in, a temp dir, its data dir and the configuration file in it.
pub struct Setup {
    pub label: String,
    pub provider: Provider,
    /// `ratelimit/`, where the file store keeps its files (made here, owned by the server
    /// account when root), and every store its refusals and journal spool (made by the program
    /// for a store on a server).
    pub data: PathBuf,
    /// `config.json`.
    pub config_path: PathBuf,
    pub dir: TempDir,
}

impl Setup {
    /// The stand-in, a temp dir and a configuration; see `SiteBuilder`.
    pub fn builder(label: &str) -> SiteBuilder {
        SiteBuilder::new(label)
    }

    /// Replaces the configuration file in one step (a running program reads the old file or
    /// the new one, never half of one).
    pub fn write_config(&self, cfg: &Value) {
        config::write(&self.dir, cfg);
    }

    /// Rewrites the configuration file as `edit` changes it (in one step).
    pub fn edit_config(&self, edit: impl FnOnce(&mut Value)) {
        let text = std::fs::read(&self.config_path).expect("read the configuration");
        let mut cfg: Value = serde_json::from_slice(&text).expect("the configuration is JSON");
        edit(&mut cfg);
        self.write_config(&cfg);
    }

    /// The binary run directly as a CGI program with this configuration.
    pub fn run(&self, cgi: Cgi) -> CgiOutput {
        cgi.config(&self.config_path).run()
    }
}

/// A `Setup` served by Apache. Apache stops first when it drops.
pub struct Site {
    pub apache: Apache,
    setup: Setup,
}

impl Site {
    /// The stand-in, a temp dir, a configuration and Apache; see `SiteBuilder`.
    pub fn builder(label: &str) -> SiteBuilder {
        SiteBuilder::new(label)
    }

    pub fn client(&self) -> HttpClient {
        self.apache.client()
    }

    /// `GET target` (e.g. `/cgi-bin/resolve?link=...`) with this `Accept`; panics when no
    /// answer comes.
    pub fn get(&self, target: &str, accept: &str) -> Response {
        self.client()
            .send(&super::client::Request::get(target).header("Accept", accept))
            .unwrap_or_else(|e| panic!("GET {target}: {e}"))
    }

    /// How this site's Apache runs the binary.
    pub fn mode(&self) -> Mode {
        self.apache.mode()
    }
}

impl Deref for Site {
    type Target = Setup;

    fn deref(&self) -> &Setup {
        &self.setup
    }
}
