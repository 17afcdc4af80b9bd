//! The HTTP face's settings (`openpact.http`): address, bearer token (`${VAR}` expanded),
//! extra allowed origins, body size and per-session limits.

use super::{Builder, kind_of};
use crate::config::expand::{self, ExpandError, Unset};
use crate::config::suggest::{child, closest_key};
use crate::config::{HttpSettings, HttpToken, units};
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
                "token" => http.token = self.http_token(v, &p),
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

    /// `openpact.http.token`. A token that cannot be had (unset or empty) is not a problem of
    /// the config: only `serve --http` needs it, and it refuses to start (saying why, once);
    /// every other command and stdio `serve` work and say nothing about it.
    fn http_token(&mut self, v: &Value, path: &str) -> HttpToken {
        let Value::String(text) = v else {
            if *v == Value::Bool(false) {
                return HttpToken::Off;
            }
            self.error(
                path,
                format!(
                    "{v} is not a token; write \"${{OPENPACT_HTTP_TOKEN}}\" (the variable holding it), or false to serve without one"
                ),
            );
            return HttpToken::None;
        };
        if !text.trim().is_empty() && !text.contains("${") {
            self.warn(
                path,
                "a secret written into the config file; put it in an environment variable and write \"${VAR}\"",
            );
        }
        let variable = expand::first_variable(text).map(String::from);
        let missing = |why: String| HttpToken::Missing {
            why: format!("{}: {path}: {why}", self.label),
            variable: variable.clone(),
        };
        let mut discard = Vec::new();
        match expand::expand(text, self.env, Unset::Fail, &mut discard) {
            Ok(token) if !token.trim().is_empty() => HttpToken::Bearer(token),
            Ok(_) if variable.is_some() => missing(format!(
                "{text:?} is empty (its variable is unset or empty), and an empty token would let every request in"
            )),
            Ok(_) => missing("is empty, and an empty token would let every request in".to_string()),
            Err(ExpandError::Unset { reference, .. }) => missing(format!("{reference} is not set")),
            Err(e) => {
                self.error(path, e.message());
                HttpToken::None
            }
        }
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
