//! A remote server's entry: `url` (http or https), `headers`, and the `oauth` object.

use super::servers::check_header_name;
use super::{Builder, get, kind_of};
use crate::config::display_url;
use crate::config::expand::Unset;
use crate::config::suggest::{child, closest_key, index};
use crate::config::{OAuthSettings, Transport};
use serde_json::{Map, Value};

const OAUTH_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "scopes",
    "redirectPort",
    "callbackPath",
];

impl Builder<'_> {
    pub(super) fn remote(
        &mut self,
        entry: &Map<String, Value>,
        path: &str,
        kind: String,
        disabled: bool,
    ) -> Option<Transport> {
        let unset = Unset::for_server(disabled);
        let mut discard = Vec::new();
        let url_path = child(path, "url");
        let url = match get(entry, "url") {
            Some(v) => self.expanded(v, &url_path, unset, &mut discard),
            None => {
                self.error(
                    path,
                    format!("\"type\": \"{kind}\" needs a `url`; add \"url\": \"https://…\""),
                );
                None
            }
        };
        let url = url.filter(|u| match check_url(u) {
            Ok(()) => true,
            Err(message) if disabled => {
                self.warn(&url_path, message);
                true
            }
            Err(message) => {
                self.error(&url_path, message);
                false
            }
        });
        let headers = self.string_map(
            entry,
            "headers",
            path,
            unset,
            &mut discard,
            check_header_name,
        );
        let oauth = match get(entry, "oauth") {
            Some(v) => self.oauth(v, &child(path, "oauth"), unset),
            None => OAuthSettings::default(),
        };
        Some(Transport::Http {
            url: url?,
            headers,
            kind,
            oauth,
        })
    }

    fn oauth(&mut self, value: &Value, path: &str, unset: Unset) -> OAuthSettings {
        let mut oauth = OAuthSettings::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"clientId\": \"…\", \"scopes\": [\"read\"]}}",
                    kind_of(value)
                ),
            );
            return oauth;
        };
        let mut discard = Vec::new();
        for (key, v) in map {
            let p = child(path, key);
            if v.is_null() {
                continue;
            }
            match key.as_str() {
                "clientId" => oauth.client_id = self.expanded(v, &p, unset, &mut discard),
                "clientSecret" => {
                    if v.as_str().is_some_and(|s| !s.contains("${")) {
                        self.warn(
                            &p,
                            "a secret written into the config file; put it in an environment variable and write \"${VAR}\"",
                        );
                    }
                    oauth.client_secret = self.expanded(v, &p, unset, &mut discard);
                }
                "scopes" => oauth.scopes = self.scopes(v, &p),
                "redirectPort" => match v.as_u64().and_then(|n| u16::try_from(n).ok()) {
                    Some(port) if port > 0 => oauth.redirect_port = Some(port),
                    _ => self.error(
                        &p,
                        format!("{v} is not a port; use a whole number from 1 to 65535, or leave it out for any free port"),
                    ),
                },
                "callbackPath" => match v.as_str() {
                    Some(s) if s.starts_with('/') && !s.contains(['?', '#', ' ']) => {
                        oauth.callback_path = Some(s.to_string());
                    }
                    _ => self.error(
                        &p,
                        format!("{v} is not a URL path; use one like \"/callback\""),
                    ),
                },
                _ => self.unknown(&p, closest_key(key, OAUTH_KEYS)),
            }
        }
        oauth
    }

    /// `["a", "b"]`, or one space-separated string as OAuth writes them.
    fn scopes(&mut self, value: &Value, path: &str) -> Vec<String> {
        match value {
            Value::String(s) => s.split_whitespace().map(String::from).collect(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item.as_str() {
                    Some(s) if !s.is_empty() && !s.contains(char::is_whitespace) => {
                        Some(s.to_string())
                    }
                    _ => {
                        self.error(
                            &index(path, i),
                            format!("{item} is not a scope; use a string without spaces"),
                        );
                        None
                    }
                })
                .collect(),
            other => {
                self.error(
                    path,
                    format!(
                        "is {}; it must be an array of scopes like [\"read\", \"write\"]",
                        kind_of(other)
                    ),
                );
                Vec::new()
            }
        }
    }
}

/// A server URL must be absolute http(s) with a host. Messages show it without credentials.
fn check_url(u: &str) -> Result<(), String> {
    let lower = u.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "\"{}\" is not an http:// or https:// URL; give the server's full URL",
            display_url(u)
        ));
    }
    match url::Url::parse(u) {
        Ok(parsed) if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        Ok(_) => Err(format!(
            "\"{}\" has no host; give the server's full URL like \"https://mcp.example.com/mcp\"",
            display_url(u)
        )),
        Err(e) => Err(format!(
            "\"{}\" is not a valid URL ({e}); give the server's full URL like \"https://mcp.example.com/mcp\"",
            display_url(u)
        )),
    }
}
