//! Every secret the checked configuration holds, so that logs can mask them wherever they
//! appear.

use crate::config::Config;
use crate::provider::described::ProviderSpec;
use crate::store::settings::StoreKind;

impl Config {
    /// Every secret in the configuration, so logs can mask them wherever they appear.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = self.provider_secrets();
        if let StoreKind::Redis(r) = &self.store.kind {
            secrets.extend(r.password.iter().map(|p| p.expose().to_owned()));
        }
        if let StoreKind::Mysql(m) = &self.store.kind {
            secrets.extend(m.password.iter().map(|p| p.expose().to_owned()));
            if let Some(url) = &m.url
                && let Ok(parts) = crate::store::mysql::settings::url_parts(url.expose())
                && let Some(pass) = parts.password
            {
                secrets.push(pass);
            }
        }
        if let Some(admin) = &self.admin {
            secrets.push(admin.password_hash.expose().to_owned());
        }
        if let Some(challenge) = &self.challenge {
            secrets.push(challenge.secret.expose().to_owned());
        }
        secrets.retain(|s| !s.is_empty());
        secrets
    }

    fn provider_secrets(&self) -> Vec<String> {
        let specs = self
            .provider
            .iter()
            .chain(self.services.iter().skip(1).map(|s| &s.spec));
        specs
            .filter_map(|spec| match spec {
                ProviderSpec::Http(h) => h.token.as_ref(),
                ProviderSpec::Echo => None,
            })
            .filter(|t| !t.expose().is_empty())
            .map(|t| t.expose().to_owned())
            .collect()
    }
}
