//! Where OAuth tokens and client registrations live: the OS keyring when one answers (checked
//! by writing, reading back and deleting a probe entry), else private files (0600, written
//! atomically) under `<state dir>/oauth/`. Cross-process refreshes are serialised with a lock
//! file, so two openpact processes never spend the same rotating refresh token twice.

use super::register::AuthMethod;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The keyring service name every entry is filed under.
const SERVICE: &str = "openpact";
/// A keyring that has not answered by then (a hung D-Bus) counts as absent.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Which backend holds the secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Keyring,
    File,
}

/// Tokens and client registrations, keyed by server + resource and by issuer.
#[derive(Debug, Clone)]
pub struct TokenStore {
    kind: StoreKind,
    /// `<state dir>/oauth`: the files (file store) and the lock files (both stores).
    dir: PathBuf,
}

/// One server's tokens, as stored. Never printed: its `Debug` shows no token.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredTokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; None when the server gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Granted scopes (or, when the server did not say, the requested ones).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The RFC 8707 resource the tokens were issued for.
    pub resource: String,
    pub issuer: String,
    /// Enough to refresh without discovery: the endpoint and the client that got the tokens.
    pub token_endpoint: String,
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub auth_method: AuthMethod,
    /// Unix seconds.
    pub obtained_at: u64,
}

impl std::fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTokens")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Refresh this long before the access token expires (less for short-lived tokens).
const REFRESH_MARGIN_SECS: u64 = 60;

impl StoredTokens {
    /// The values here that must never show: the tokens and the client secret.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = vec![self.access_token.clone()];
        out.extend(self.refresh_token.clone());
        out.extend(self.client_secret.clone());
        out
    }

    /// Expired, or expiring within `margin`.
    pub fn expires_within(&self, margin: Duration) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now_secs().saturating_add(margin.as_secs()))
    }

    /// Time to refresh: within a minute of expiry, or within the last half of the lifetime
    /// of a token that lives less than two minutes.
    pub fn due_for_refresh(&self) -> bool {
        let Some(at) = self.expires_at else {
            return false;
        };
        let margin = (at.saturating_sub(self.obtained_at) / 2).min(REFRESH_MARGIN_SECS);
        at <= now_secs().saturating_add(margin)
    }
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl TokenStore {
    /// The store for this state dir: `OPENPACT_TOKEN_STORE=file|keyring` forces one;
    /// otherwise the keyring if it passes the probe, else files.
    pub fn open(state_dir: &Path) -> TokenStore {
        let forced = std::env::var("OPENPACT_TOKEN_STORE").unwrap_or_default();
        let kind = match forced.to_ascii_lowercase().as_str() {
            "file" => StoreKind::File,
            "keyring" => StoreKind::Keyring,
            _ if keyring_answers() => StoreKind::Keyring,
            _ => StoreKind::File,
        };
        TokenStore {
            kind,
            dir: state_dir.join("oauth"),
        }
    }

    /// The file store, whatever the keyring can do (tests: the hub picks by what the
    /// machine offers).
    #[cfg(any(test, feature = "internals"))]
    pub fn file(state_dir: &Path) -> TokenStore {
        TokenStore {
            kind: StoreKind::File,
            dir: state_dir.join("oauth"),
        }
    }

    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// For status output: "OS keyring" or "file store (DIR)".
    pub fn describe(&self) -> String {
        match self.kind {
            StoreKind::Keyring => "OS keyring".to_string(),
            StoreKind::File => format!("file store ({})", self.dir.display()),
        }
    }

    /// The file that holds `server`'s tokens in the file store.
    #[cfg(test)]
    pub fn tokens_path(&self, server: &str, resource: &str) -> PathBuf {
        self.path(&tokens_key(server, resource))
    }

    pub fn load_tokens(
        &self,
        server: &str,
        resource: &str,
    ) -> Result<Option<StoredTokens>, String> {
        self.get_json(&tokens_key(server, resource))
    }

    pub fn save_tokens(
        &self,
        server: &str,
        tokens: &StoredTokens,
        resource: &str,
    ) -> Result<(), String> {
        self.put_json(&tokens_key(server, resource), tokens)
    }

    /// True when there was something to delete.
    pub fn delete_tokens(&self, server: &str, resource: &str) -> Result<bool, String> {
        self.delete(&tokens_key(server, resource))
    }

    pub fn load_client<T: serde::de::DeserializeOwned>(
        &self,
        issuer: &str,
    ) -> Result<Option<T>, String> {
        self.get_json(&client_key(issuer))
    }

    pub fn save_client<T: Serialize>(&self, issuer: &str, client: &T) -> Result<(), String> {
        self.put_json(&client_key(issuer), client)
    }

    /// Blocks until this process holds the refresh lock of `server`'s tokens (released on
    /// drop). Call from a blocking context.
    pub fn lock(&self, server: &str, resource: &str) -> Result<crate::state::Lock, String> {
        let path = self
            .dir
            .join("locks")
            .join(file_name(&tokens_key(server, resource), "lock"));
        crate::state::ensure_dir(path.parent().unwrap_or(&self.dir))
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        crate::state::lock_private(&path).map_err(|e| e.to_string())
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(file_name(key, "json"))
    }

    fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, String> {
        let Some(text) = self.get(key)? else {
            return Ok(None);
        };
        // serde's messages may quote a value, and values here are secrets: position only.
        serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "the stored login in the {} is unreadable (line {}, column {}); run `openpact auth logout` and log in again",
                self.describe(),
                e.line(),
                e.column()
            )
        })
    }

    fn put_json<T: Serialize>(&self, key: &str, value: &T) -> Result<(), String> {
        let text = serde_json::to_string(value).map_err(|e| format!("cannot encode: {e}"))?;
        self.put(key, &text)
    }

    fn get(&self, key: &str) -> Result<Option<String>, String> {
        match self.kind {
            StoreKind::File => match std::fs::read_to_string(self.path(key)) {
                Ok(text) => Ok(Some(text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("cannot read {}: {e}", self.path(key).display())),
            },
            StoreKind::Keyring => match entry(key)?.get_password() {
                Ok(text) => Ok(Some(text)),
                Err(keyring::Error::NoEntry) => Ok(None),
                Err(e) => Err(format!("the OS keyring: {}", keyring_error(&e))),
            },
        }
    }

    fn put(&self, key: &str, value: &str) -> Result<(), String> {
        match self.kind {
            StoreKind::File => {
                let path = self.path(key);
                crate::state::write_atomic(&path, value.as_bytes())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
            StoreKind::Keyring => entry(key)?
                .set_password(value)
                .map_err(|e| format!("the OS keyring: {}", keyring_error(&e))),
        }
    }

    fn delete(&self, key: &str) -> Result<bool, String> {
        match self.kind {
            StoreKind::File => match std::fs::remove_file(self.path(key)) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(format!("cannot delete {}: {e}", self.path(key).display())),
            },
            StoreKind::Keyring => match entry(key)?.delete_credential() {
                Ok(()) => Ok(true),
                Err(keyring::Error::NoEntry) => Ok(false),
                Err(e) => Err(format!("the OS keyring: {}", keyring_error(&e))),
            },
        }
    }
}

fn tokens_key(server: &str, resource: &str) -> String {
    format!("tokens {server} {resource}")
}

fn client_key(issuer: &str) -> String {
    format!("client {issuer}")
}

/// A readable, collision-free file name for a key: a sanitised prefix and a hash.
fn file_name(key: &str, ext: &str) -> String {
    let slug: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(48)
        .collect();
    let digest = Sha256::digest(key.as_bytes());
    format!("{slug}.{}.{ext}", hex::encode(&digest[..8]))
}

fn entry(key: &str) -> Result<keyring::Entry, String> {
    keyring::Entry::new(SERVICE, key).map_err(|e| format!("the OS keyring: {}", keyring_error(&e)))
}

/// A keyring error without the payloads some variants carry (they may hold secret bytes).
fn keyring_error(e: &keyring::Error) -> String {
    match e {
        keyring::Error::BadEncoding(_) | keyring::Error::BadDataFormat(..) => {
            "an entry is not in the expected format".to_string()
        }
        keyring::Error::Ambiguous(_) => "several entries match".to_string(),
        other => other.to_string(),
    }
}

/// Whether the OS keyring works here: a probe entry is written, read back, compared and
/// deleted (headless sessions can have a keyring that accepts writes it cannot read). Done
/// once per process, on a thread, with a time limit.
fn keyring_answers() -> bool {
    static ANSWER: OnceLock<bool> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("openpact-keyring-probe".into())
            .spawn(move || {
                let _ = tx.send(probe());
            });
        if spawned.is_err() {
            return false;
        }
        match rx.recv_timeout(PROBE_TIMEOUT) {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!("no usable OS keyring ({e}); tokens go to files");
                false
            }
            Err(_) => {
                tracing::debug!("the OS keyring did not answer; tokens go to files");
                false
            }
        }
    })
}

fn probe() -> Result<(), String> {
    let key = format!("probe {} {}", std::process::id(), now_secs());
    let value = hex::encode(Sha256::digest(key.as_bytes()));
    let e = entry(&key)?;
    e.set_password(&value).map_err(|e| keyring_error(&e))?;
    let back = e.get_password().map_err(|e| keyring_error(&e));
    let _ = e.delete_credential();
    if back? == value {
        Ok(())
    } else {
        Err("the probe entry read back differently".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(token: &str) -> StoredTokens {
        StoredTokens {
            access_token: token.to_string(),
            refresh_token: Some(format!("{token}-refresh")),
            expires_at: Some(now_secs() + 3600),
            scopes: vec!["read".into()],
            resource: "http://127.0.0.1:1/mcp".into(),
            issuer: "http://127.0.0.1:1".into(),
            token_endpoint: "http://127.0.0.1:1/token".into(),
            client_id: "c".into(),
            client_secret: Some("s3cret".into()),
            auth_method: AuthMethod::Basic,
            obtained_at: now_secs(),
        }
    }

    #[test]
    fn file_store_is_private_atomic_and_keyed() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::file(dir.path());
        let r = "http://127.0.0.1:1/mcp";
        assert_eq!(store.load_tokens("a", r).unwrap(), None);
        store.save_tokens("a", &sample("one"), r).unwrap();
        store.save_tokens("a", &sample("two"), r).unwrap();
        store.save_tokens("b", &sample("other"), r).unwrap();
        assert_eq!(
            store.load_tokens("a", r).unwrap().unwrap().access_token,
            "two"
        );
        assert_eq!(
            store.load_tokens("b", r).unwrap().unwrap().access_token,
            "other"
        );
        // Another URL for the same name is another key: tokens never go to another server.
        assert_eq!(
            store.load_tokens("a", "http://127.0.0.1:2/mcp").unwrap(),
            None
        );
        let path = store.tokens_path("a", r);
        let mode = |p: &Path| crate::platform::mode(&std::fs::metadata(p).unwrap()) & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        assert!(store.delete_tokens("a", r).unwrap());
        assert!(!store.delete_tokens("a", r).unwrap());
        assert_eq!(store.load_tokens("a", r).unwrap(), None);
    }

    #[test]
    fn refresh_is_due_before_expiry() {
        let mut t = sample("x");
        assert!(!t.due_for_refresh());
        // An hour-long token is due in its last minute.
        t.obtained_at = now_secs() - 3570;
        t.expires_at = Some(now_secs() + 30);
        assert!(t.due_for_refresh());
        // A 10 s token is due in its last 5 s, not at once.
        t.obtained_at = now_secs();
        t.expires_at = Some(now_secs() + 10);
        assert!(!t.due_for_refresh());
        t.obtained_at = now_secs() - 6;
        t.expires_at = Some(now_secs() + 4);
        assert!(t.due_for_refresh());
        t.expires_at = None;
        assert!(!t.due_for_refresh());
    }

    #[test]
    fn debug_and_errors_show_no_secret() {
        let t = sample("tok-visible-nowhere");
        let shown = format!("{t:?}");
        assert!(
            !shown.contains("tok-visible-nowhere") && !shown.contains("s3cret"),
            "{shown}"
        );
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::file(dir.path());
        let r = "http://x/mcp";
        std::fs::create_dir_all(dir.path().join("oauth")).unwrap();
        std::fs::write(
            store.tokens_path("a", r),
            r#"{"access_token": "leaky-value", "expires_at": "x"}"#,
        )
        .unwrap();
        let e = store.load_tokens("a", r).unwrap_err();
        assert!(!e.contains("leaky-value") && e.contains("logout"), "{e}");
    }

    #[test]
    fn concurrent_writers_never_tear_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::file(dir.path());
        let r = "http://127.0.0.1:1/mcp";
        std::thread::scope(|s| {
            for n in 0..4 {
                let store = store.clone();
                s.spawn(move || {
                    for i in 0..50 {
                        store
                            .save_tokens("x", &sample(&format!("w{n}-{i}")), r)
                            .unwrap();
                        let got = store.load_tokens("x", r).unwrap().unwrap();
                        assert!(got.access_token.starts_with('w'));
                    }
                });
            }
        });
        // The lock excludes a second holder until the first is dropped.
        let held = store.lock("x", r).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = store.clone();
        std::thread::spawn(move || {
            let _l = other.lock("x", r).unwrap();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(held);
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
