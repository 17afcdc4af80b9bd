//! What every request passes before it reaches MCP: the `Origin` check (403), the `Host`
//! check against DNS rebinding on loopback binds (403), and the bearer token (401, compared
//! in constant time).

use crate::config::HttpSettings;
use axum::http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;

/// Host names that always mean this machine.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

pub struct Guard {
    allowed_origins: Vec<String>,
    /// Hosts a `Host` header may name; `None` when bound beyond loopback (the token guards).
    allowed_hosts: Option<Vec<String>>,
    token: Option<String>,
}

/// `host[:port]` → `host` (`[::1]:8765` → `[::1]`), lower case.
fn host_part(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if a.starts_with('[') {
        return match a.find(']') {
            Some(end) => a[..=end].to_string(),
            None => a,
        };
    }
    match a.split_once(':') {
        Some((host, _)) => host.to_string(),
        None => a,
    }
}

impl Guard {
    pub fn new(settings: &HttpSettings, loopback: bool) -> Guard {
        let allowed_hosts = loopback.then(|| {
            LOOPBACK_HOSTS
                .iter()
                .map(|h| h.to_string())
                .chain(settings.allowed_origins.iter().filter_map(|o| {
                    o.split_once("://")
                        .map(|(_, authority)| host_part(authority))
                }))
                .collect()
        });
        Guard {
            allowed_origins: settings.allowed_origins.clone(),
            allowed_hosts,
            token: settings.token.bearer().map(String::from),
        }
    }

    /// `Err((status, why))` when the request must be refused.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin) {
                return Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Origin {origin:?} is not allowed (add it to openpact.http.allowedOrigins)"
                    ),
                ));
            }
        }
        self.check_host(headers)?;
        if self.token.is_some() && !self.bearer_matches(headers) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer <openpact.http.token>)"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Whether the request carries the configured bearer token (compared in constant time);
    /// false when none is configured.
    pub fn bearer_matches(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            });
        given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(token.as_bytes())))
    }

    /// The `Host` check alone, against DNS rebinding on loopback binds (403).
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        if let Some(hosts) = &self.allowed_hosts {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(host_part);
            if !host.as_ref().is_some_and(|h| hosts.contains(h)) {
                return Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Host {:?} is not this machine; openpact answers only to localhost names here",
                        host.unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether `origin` is one of openpact.http.allowedOrigins, or the page's own
    /// (`http://` + the request's `Host`) on a loopback name: the dashboard takes no other, not
    /// even another local port, since any local web app could otherwise act in the person's
    /// name; nor a page whose name was merely pointed at this machine (`Host` is the
    /// attacker's to choose on a non-loopback bind).
    pub fn same_origin(&self, origin: &str, host: &str) -> bool {
        let Some(normal) = HttpSettings::normal_origin(origin) else {
            return false;
        };
        let own =
            HttpSettings::normal_origin(&format!("http://{host}")).is_some_and(|own| own == normal);
        (own && self.origin_allowed(origin)) || self.allowed_origins.contains(&normal)
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let Some(origin) = HttpSettings::normal_origin(origin) else {
            return false;
        };
        let local = origin
            .split_once("://")
            .is_some_and(|(_, authority)| LOOPBACK_HOSTS.contains(&host_part(authority).as_str()));
        local || self.allowed_origins.contains(&origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HttpToken;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn guard(token: Option<&str>, origins: &[&str], loopback: bool) -> Guard {
        let settings = HttpSettings {
            token: token.map_or(HttpToken::None, |t| HttpToken::Bearer(t.to_string())),
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            ..HttpSettings::default()
        };
        Guard::new(&settings, loopback)
    }

    #[test]
    fn origins_local_and_listed_pass_others_are_forbidden() {
        let g = guard(None, &["https://app.example.com"], true);
        let host = (header::HOST, "127.0.0.1:8765");
        for ok in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:9",
            "https://app.example.com",
            "HTTPS://APP.example.com/",
        ] {
            assert!(
                g.check(&headers(&[host.clone(), (header::ORIGIN, ok)]))
                    .is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://evil.example",
            "null",
            "https://app.example.com:444",
            "http://localhost.evil.example",
            "file://",
        ] {
            let e = g.check(&headers(&[host.clone(), (header::ORIGIN, bad)]));
            assert_eq!(e.unwrap_err().0, StatusCode::FORBIDDEN, "{bad}");
        }
        // No Origin (a non-browser client) is fine.
        assert!(g.check(&headers(&[host])).is_ok());
    }

    #[test]
    fn the_dashboards_origin_is_its_own_on_a_loopback_name_or_listed() {
        let wide = guard(Some("t"), &["https://app.example.com"], false);
        assert!(wide.same_origin("http://127.0.0.1:8765", "127.0.0.1:8765"));
        assert!(wide.same_origin("http://localhost:8765/", "localhost:8765"));
        assert!(
            !wide.same_origin("http://localhost:1", "localhost:8765"),
            "another port"
        );
        // A name pointed at this machine (DNS rebinding) is the attacker's own origin.
        assert!(!wide.same_origin("http://evil.example", "evil.example"));
        assert!(
            wide.same_origin("https://app.example.com", "10.0.0.2:8765"),
            "listed"
        );
        assert!(!wide.same_origin("null", "127.0.0.1:8765"));
    }

    #[test]
    fn host_is_checked_on_loopback_binds_only() {
        let g = guard(None, &["https://app.example.com"], true);
        for ok in ["localhost:8765", "127.0.0.1", "[::1]:1", "app.example.com"] {
            assert!(g.check(&headers(&[(header::HOST, ok)])).is_ok(), "{ok}");
        }
        for bad in ["evil.example:8765", "127.0.0.1.nip.io"] {
            assert!(g.check(&headers(&[(header::HOST, bad)])).is_err(), "{bad}");
        }
        assert!(g.check(&HeaderMap::new()).is_err(), "no Host");
        let wide = guard(Some("t"), &[], false);
        let ok = headers(&[
            (header::HOST, "hub.lan:8765"),
            (header::AUTHORIZATION, "Bearer t"),
        ]);
        assert!(wide.check(&ok).is_ok());
    }

    #[test]
    fn token_must_match_exactly() {
        let g = guard(Some("s3cret"), &[], true);
        let host = (header::HOST, "localhost");
        let with = |auth: &str| headers(&[host.clone(), (header::AUTHORIZATION, auth)]);
        assert!(g.check(&with("Bearer s3cret")).is_ok());
        assert!(g.check(&with("bearer s3cret")).is_ok());
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret"] {
            assert_eq!(
                g.check(&with(bad)).unwrap_err().0,
                StatusCode::UNAUTHORIZED,
                "{bad}"
            );
        }
        assert_eq!(
            g.check(&headers(&[host])).unwrap_err().0,
            StatusCode::UNAUTHORIZED
        );
    }
}
