//! Remote links: the transport kinds a config names, and (in `auth`) a link that must
//! authorize.

mod auth;

use super::*;

#[test]
fn kinds_from_config() {
    assert_eq!(RemoteKind::from_config("http"), RemoteKind::Auto);
    assert_eq!(
        RemoteKind::from_config("streamable-http"),
        RemoteKind::Streamable
    );
    assert_eq!(RemoteKind::from_config("sse"), RemoteKind::Sse);
}
