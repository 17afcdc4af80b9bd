//! What the built-ins' unit tests share: `web` settings and the loopback stand-in server
//! (`Stand`, `reply`, `json_reply`).

use crate::config::WebSettings;
use std::time::Duration;

// The integration tests use the same stand-in: one file, compiled into both.
#[path = "../../tests/support/stand.rs"]
mod stand;
pub(crate) use stand::{Stand, json_reply, reply};

pub(crate) fn web(allow_private: bool) -> WebSettings {
    WebSettings {
        enabled: true,
        allow_private,
        max_bytes: 1024 * 1024,
        timeout: Duration::from_secs(10),
        max_redirects: 5,
    }
}
