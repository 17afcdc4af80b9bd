//! The HTTP face's settings (`openpact.http`): address, bearer token (`${VAR}` expanded),
//! extra allowed origins, body size and per-session limits.

use super::{Builder, kind_of};
use crate::config::expand::{self, ExpandError, Unset};
use crate::config::suggest::{child, closest_key};
use crate::config::{HttpSettings, units};
use serde_json::Value;

const HTTP_KEYS: &[&str] = &[
    "address",
    "token",
    "allowedOrigins",
    "maxBodySize",
    "maxSessions",
    "maxInFlight",
    "sessionIdleTimeout",
];

impl Builder<'_> {
    pub(super) fn http(&mut self, value: &Value, path: &str) -> HttpSettings {
        let mut http = HttpSettings::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"address\": \"127.0.0.1:8765\", \"token\": \"${{OPENPACT_TOKEN}}\"}}",
                    kind_of(value)
                ),
            );
            return http;
        };
        for (key, v) in map {
            let p = child(path, key);
            if v.is_null() {
                continue;
            }
            match key.as_str() {
                "address" => match v.as_str() {
                    Some(a) if a.parse::<std::net::SocketAddr>().is_ok() => {
                        http.address = a.to_string();
                    }
                    _ => self.error(
                        &p,
                        format!(
                            "{v} is not an address; use IP:PORT, like \"127.0.0.1:8765\" or \"[::1]:8765\""
                        ),
                    ),
                },
                "token" => {
                    if v.as_str().is_some_and(|s| !s.contains("${")) {
                        self.warn(
                            &p,
                            "a secret written into the config file; put it in an environment variable and write \"${VAR}\"",
                        );
                    }
                    let mut discard = Vec::new();
                    let expanded = v
                        .as_str()
                        .map(|text| expand::expand(text, self.env, Unset::Fail, &mut discard));
                    match expanded {
                        // Only `serve --http` needs the token: an unset variable must not
                        // break stdio serving or the other commands, so the face refuses to
                        // start instead (see `HttpSettings::token_unset`).
                        Some(Err(e @ ExpandError::Unset { .. })) => {
                            let why = format!(
                                "{}; `serve --http` refuses to start until it is set",
                                e.message()
                            );
                            http.token_unset = Some(format!("{}: {p}: {why}", self.label));
                            self.warn(&p, why);
                        }
                        _ => {
                            http.token = self
                                .expanded(v, &p, Unset::Fail, &mut discard)
                                .filter(|t| !t.is_empty());
                        }
                    }
                }
                "allowedOrigins" => http.allowed_origins = self.origins(v, &p),
                "maxBodySize" => match units::size(v).map(usize::try_from) {
                    Ok(Ok(n)) if n >= 1024 => http.max_body_size = n,
                    Ok(_) => self.error(&p, format!("{v} is out of range; use at least \"1KiB\"")),
                    Err(message) => self.error(&p, message),
                },
                "maxSessions" | "maxInFlight" => {
                    match v.as_u64().filter(|n| *n >= 1).map(usize::try_from) {
                        Some(Ok(n)) if key == "maxSessions" => http.max_sessions = n,
                        Some(Ok(n)) => http.max_in_flight = n,
                        _ => self.error(
                            &p,
                            format!("{v} is not a valid count; use a whole number of at least 1"),
                        ),
                    }
                }
                "sessionIdleTimeout" => match units::duration(v) {
                    Ok(d) => http.session_idle_timeout = d,
                    Err(message) => self.error(&p, message),
                },
                _ => self.unknown(&p, closest_key(key, HTTP_KEYS)),
            }
        }
        http
    }

    fn origins(&mut self, value: &Value, path: &str) -> Vec<String> {
        let Value::Array(items) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be a list like [\"https://app.example.com\"]",
                    kind_of(value)
                ),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            match item.as_str().and_then(HttpSettings::normal_origin) {
                Some(o) => out.push(o),
                None => self.error(
                    &p,
                    format!("{item} is not an origin; write scheme://host[:port], like \"https://app.example.com\""),
                ),
            }
        }
        out
    }
}
