//! Whether a connection goes through: the allow list, the gate's decision about a host outside
//! it (one question for a burst), and the check of the addresses a name resolves to.

use super::{CONNECT_DEADLINE, Decision, Refusal, Rules, host_port};
use crate::config::hosts::{HostPattern, is_local_address, is_private_address};
use std::net::{IpAddr, SocketAddr};
use std::sync::PoisonError;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::timeout;

/// Why a connection that waited on another's question is refused when that one went away.
const ABANDONED: &str = "the connection that asked about it ended before an answer";

/// Why a destination could not be reached.
pub(super) enum Failure {
    /// The gate or the address check said no: 403, and counted. `listable`: see
    /// [`Refusal::listable`].
    Refused { reason: String, listable: bool },
    /// Allowed, but resolving or connecting failed: 502.
    Unreachable(String),
}

impl Rules {
    /// Checks `host:port` against the allow list (or has the gate decide about it), and only
    /// then resolves and connects.
    pub(super) async fn open(&self, host: &str, port: u16) -> Result<TcpStream, Failure> {
        let mut matched = false;
        let mut local_ok = false;
        // Whether an entry names the host (not just "any public host"): only that reaches
        // a private network.
        let mut private_ok = false;
        for pattern in self.allow.iter().filter(|p| p.matches(host, port)) {
            matched = true;
            local_ok |= pattern.names_local();
            private_ok |= !pattern.is_any_public();
        }
        if !matched {
            match self.decide(host, port).await {
                // Allowed as named: a local address only when the name is one.
                Decision::Allow => {
                    local_ok =
                        HostPattern::parse(&host_port(host, port)).is_ok_and(|p| p.names_local());
                    private_ok = true;
                }
                Decision::Refuse(reason) => {
                    return Err(Failure::Refused {
                        reason,
                        listable: true,
                    });
                }
            }
        }
        let resolved: Vec<SocketAddr> =
            match timeout(CONNECT_DEADLINE, tokio::net::lookup_host((host, port))).await {
                Ok(Ok(found)) => found.collect(),
                Ok(Err(e)) => {
                    return Err(Failure::Unreachable(format!("cannot resolve {host}: {e}")));
                }
                Err(_) => return Err(deadline()),
            };
        let addresses = match usable(&resolved, local_ok, private_ok) {
            Ok(addresses) => addresses,
            Err(Unusable::Local(reason)) => {
                return Err(Failure::Refused {
                    reason,
                    listable: false,
                });
            }
            // Only "any public host" matched: asked about like a host outside the list, as
            // naming it in the list would allow it.
            Err(Unusable::Private(ip)) => match self.decide(host, port).await {
                Decision::Allow => usable(&resolved, local_ok, true).unwrap_or_default(),
                Decision::Refuse(reason) => {
                    return Err(Failure::Refused {
                        reason: format!(
                            "it resolves to {ip}, a private address, which \"any public host\" \
                             does not reach and only an entry naming the host or the address \
                             allows; {reason}"
                        ),
                        listable: true,
                    });
                }
            },
        };
        let attempt = async {
            let mut last = format!("{host} has no address");
            for address in addresses {
                match TcpStream::connect(address).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last = format!("{address}: {e}"),
                }
            }
            Err(Failure::Unreachable(last))
        };
        timeout(CONNECT_DEADLINE, attempt)
            .await
            .unwrap_or_else(|_| Err(deadline()))
    }

    /// The gate's decision about a host outside the list; connections that come while it
    /// is being decided share it.
    async fn decide(&self, host: &str, port: u16) -> Decision {
        let key = (host.to_owned(), port);
        let (mut waiting, asker) = {
            let mut deciding = self.deciding.lock().unwrap_or_else(PoisonError::into_inner);
            match deciding.get(&key) {
                Some(pending) => (pending.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    deciding.insert(key.clone(), rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        if let Some(tx) = asker {
            let decision = self.gate.decide(host, port).await;
            self.deciding
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            let _ = tx.send(Some(decision.clone()));
            return decision;
        }
        match waiting.wait_for(Option::is_some).await {
            Ok(decided) => decided
                .clone()
                .unwrap_or(Decision::Refuse(ABANDONED.into())),
            Err(_) => Decision::Refuse(ABANDONED.into()),
        }
    }

    pub(super) fn refuse(&self, host: &str, port: u16, reason: String, listable: bool) -> Refusal {
        tracing::warn!(server = %self.server, host, port, "egress refused: {reason}");
        let refusal = Refusal {
            server: self.server.clone(),
            config: self.config.clone(),
            host: host.to_owned(),
            port,
            reason,
            listable,
        };
        self.gate.refused(&refusal);
        refusal
    }
}

/// Why [`usable`] left no address to connect to.
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    /// Every address was local; the reason for refusing.
    Local(String),
    /// Every address was local or private, and this one private.
    Private(IpAddr),
}

/// The addresses of `resolved` the proxy may connect to: local ones (loopback, link-local,
/// unspecified) only when `local_ok`, that is when an allow entry matching the name names a
/// local host itself; private ones (see [`is_private_address`]) only when `private_ok`, that
/// is when an entry matching it names the host rather than being "any public host".
fn usable(
    resolved: &[SocketAddr],
    local_ok: bool,
    private_ok: bool,
) -> Result<Vec<SocketAddr>, Unusable> {
    let reachable: Vec<SocketAddr> = resolved
        .iter()
        .filter(|a| local_ok || !is_local_address(a.ip()))
        .filter(|a| private_ok || !is_private_address(a.ip()))
        .copied()
        .collect();
    if !reachable.is_empty() {
        return Ok(reachable);
    }
    if let Some(private) = resolved
        .iter()
        .find(|a| !private_ok && is_private_address(a.ip()))
    {
        return Err(Unusable::Private(private.ip()));
    }
    match resolved.first() {
        Some(local) => Err(Unusable::Local(format!(
            "it resolves to {}, a local address, which only an entry naming a local host (such \
             as `localhost:PORT` or the address itself) allows",
            local.ip()
        ))),
        None => Ok(Vec::new()),
    }
}

/// Why a connection allowed by the list still failed: it took too long.
fn deadline() -> Failure {
    Failure::Unreachable(format!(
        "no connection within {} s",
        CONNECT_DEADLINE.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_addresses_need_an_entry_that_names_them() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        for local in [
            "127.0.0.1:80",
            "127.1.2.3:80",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "[::1]:80",
            "[fe80::1]:80",
            "[::]:80",
            "[::ffff:127.0.0.1]:80",
            "[fd00:ec2::254]:80",
        ] {
            let Err(Unusable::Local(reason)) = usable(&[addr(local)], false, true) else {
                panic!("{local} is local");
            };
            assert!(reason.contains("local address"), "{local}: {reason}");
            assert_eq!(usable(&[addr(local)], true, true).unwrap(), [addr(local)]);
        }
        // A name that resolves both ways reaches only its remote address.
        let mixed = [addr("127.0.0.1:443"), addr("93.184.216.34:443")];
        assert_eq!(
            usable(&mixed, false, false).unwrap(),
            [addr("93.184.216.34:443")]
        );
        assert_eq!(
            usable(&[addr("[2606:4700::1111]:443")], false, false)
                .unwrap()
                .len(),
            1
        );
        assert!(usable(&[], false, false).unwrap().is_empty());
    }

    #[test]
    fn private_addresses_need_an_entry_that_names_the_host() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        for private in [
            "10.0.0.1:443",
            "172.16.5.4:80",
            "192.168.1.1:80",
            "100.64.0.1:80",
            "[fd12::1]:80",
            "[::ffff:192.168.1.1]:80",
        ] {
            let only = [addr(private)];
            assert_eq!(
                usable(&only, false, false),
                Err(Unusable::Private(addr(private).ip()))
            );
            assert_eq!(usable(&only, false, true).unwrap(), only);
        }
        // Public ones are preferred; local ones stay local whatever names the host.
        let mixed = [addr("192.168.1.1:443"), addr("93.184.216.34:443")];
        assert_eq!(
            usable(&mixed, false, false).unwrap(),
            [addr("93.184.216.34:443")]
        );
        let local_and_private = [addr("127.0.0.1:80"), addr("10.0.0.1:80")];
        assert_eq!(
            usable(&local_and_private, false, true).unwrap(),
            [addr("10.0.0.1:80")]
        );
        assert_eq!(
            usable(&local_and_private, false, false),
            Err(Unusable::Private(addr("10.0.0.1:80").ip()))
        );
    }
}
