//! The `requestState` of the hub's input-required results: an HMAC-signed handle to a
//! request waiting in this process for the client's input, bound to that request (origin,
//! method, name, arguments) and to an expiry, so a client can neither forge one nor replay
//! it for another request.
//!
//! Public (hidden) only for the fuzz targets in `tests/fuzz`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

type HmacSha256 = Hmac<Sha256>;

/// Names the format, so a later change can refuse old states plainly.
const PREFIX: &str = "op1";

/// Why a `requestState` was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error(
        "requestState is not one openpact issued (malformed); send the request again without it"
    )]
    Malformed,
    #[error(
        "requestState was altered or issued by another openpact process; send the request again without it"
    )]
    Forged,
    #[error(
        "requestState belongs to another request; echo it only with the request that received it"
    )]
    OtherRequest,
}

/// What a valid state says.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// The handle of the waiting request.
    Live(String),
    /// Signed by us but past its time: the waiting request is gone.
    Expired,
}

/// Signs and checks states with a key that lives and dies with the process: a state cannot
/// outlive the waiting request it names anyway.
pub struct Signer {
    /// One SHA-256 block: HMAC's natural key size, which makes keying infallible.
    key: [u8; 64],
}

impl Signer {
    /// None when the OS has no random source (nothing then can be signed).
    pub fn new() -> Option<Signer> {
        let mut key = [0u8; 64];
        getrandom::fill(&mut key).ok()?;
        Some(Signer { key })
    }

    fn mac(&self, body: &str) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new(&self.key.into());
        mac.update(body.as_bytes());
        mac
    }

    pub fn sign(&self, handle: &str, expires: u64, digest: &str) -> String {
        let body = format!("{PREFIX}.{handle}.{expires}.{digest}");
        let tag = hex::encode(self.mac(&body).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// Checks `state` against the request it came back with (`digest`).
    pub fn open(&self, state: &str, digest: &str) -> Result<Opened, StateError> {
        let (body, tag) = state.rsplit_once('.').ok_or(StateError::Malformed)?;
        let mut parts = body.split('.');
        let (Some(PREFIX), Some(handle), Some(expires), Some(signed_digest), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(StateError::Malformed);
        };
        // Only the spelling we issue (lower case): the hex crate also reads upper case, and
        // a state spelled another way than we wrote it is not one we issued.
        let tag = hex::decode(tag)
            .ok()
            .filter(|bytes| hex::encode(bytes) == tag)
            .ok_or(StateError::Malformed)?;
        self.mac(body)
            .verify_slice(&tag)
            .map_err(|_| StateError::Forged)?;
        if signed_digest != digest {
            return Err(StateError::OtherRequest);
        }
        let expires: u64 = expires.parse().map_err(|_| StateError::Malformed)?;
        if expires <= now() {
            return Ok(Opened::Expired);
        }
        Ok(Opened::Live(handle.to_string()))
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A short fingerprint of `parts` (NUL-separated), to bind a state to its request.
pub fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}

/// 128 random bits as hex: the handle of a waiting request.
pub fn random_handle() -> Option<String> {
    crate::platform::random_hex(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_only_for_its_request_and_untouched() {
        let s = Signer::new().expect("random");
        let d = digest(&["http", "tools/call", "echo", "{}"]);
        let state = s.sign("abc", now() + 60, &d);
        assert_eq!(s.open(&state, &d), Ok(Opened::Live("abc".into())));
        let other = digest(&["http", "tools/call", "echo", "{\"x\":1}"]);
        assert_eq!(s.open(&state, &other), Err(StateError::OtherRequest));
        let tampered = state.replacen("abc", "abd", 1);
        assert_eq!(s.open(&tampered, &d), Err(StateError::Forged));
        let mut flipped = state.clone();
        let last = flipped.pop().expect("char");
        flipped.push(if last == '0' { '1' } else { '0' });
        assert_eq!(s.open(&flipped, &d), Err(StateError::Forged));
        assert_eq!(s.open("garbage", &d), Err(StateError::Malformed));
        let stranger = Signer::new().expect("random");
        assert_eq!(stranger.open(&state, &d), Err(StateError::Forged));
    }

    /// Found by the fuzzer (tests/fuzz, target `request_state`): the tag's hex was read in
    /// upper case too (and `+f` for `0f`), so an altered state still opened.
    #[test]
    fn only_the_issued_spelling_of_a_state_opens() {
        let s = Signer::new().expect("random");
        let d = digest(&["x"]);
        // A state whose tag has a byte below 0x10 (a leading zero) and a letter.
        let (state, at) = (0..)
            .find_map(|n| {
                let state = s.sign(&format!("h{n}"), now() + 60, &d);
                let tag = state.rsplit_once('.')?.1.as_bytes();
                let at = (0..tag.len() / 2).find(|i| tag[2 * i] == b'0')?;
                tag.iter()
                    .any(u8::is_ascii_alphabetic)
                    .then_some((state, at))
            })
            .expect("such a tag");
        assert!(matches!(s.open(&state, &d), Ok(Opened::Live(_))));
        let (body, tag) = state.rsplit_once('.').expect("tag");
        let upper = format!("{body}.{}", tag.to_ascii_uppercase());
        assert_eq!(s.open(&upper, &d), Err(StateError::Malformed));
        let plus = format!("{body}.{}+{}", &tag[..2 * at], &tag[2 * at + 1..]);
        assert_eq!(s.open(&plus, &d), Err(StateError::Malformed));
    }

    #[test]
    fn an_expired_state_says_so() {
        let s = Signer::new().expect("random");
        let d = digest(&["x"]);
        let state = s.sign("h", now() - 1, &d);
        assert_eq!(s.open(&state, &d), Ok(Opened::Expired));
    }
}
