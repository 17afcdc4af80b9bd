//! `sandbox.network.allow` entries: the hosts (and ports) a confined server may reach through
//! its egress proxy, parsed once at load time so that matching a connection is a comparison.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a message about a bad entry offers as a valid one.
const EXAMPLE: &str = "e.g. `api.github.com`, `api.github.com:443` or `*.github.com`";

/// AWS's IPv6 instance metadata service: a unique-local address, not link-local, so it is
/// named here to get the same treatment as 169.254.169.254.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

/// One `sandbox.network.allow` entry: `host`, `host:port`, `*.domain`, `*.domain:port`, an
/// IPv4 literal, or `[v6]` / `[v6]:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    /// As written in the config, for messages and for `config check`.
    text: String,
    host: Host,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Host {
    /// Lower-case, without a trailing dot.
    Name(String),
    /// `*.github.com` holds `github.com`: names strictly below it, not the domain itself.
    Subdomains(String),
    Ip(IpAddr),
    /// Every host that is neither local nor private: never written in a config (`*` is refused there), only
    /// given by the known-servers table to a server whose job is any URL.
    Public,
}

impl HostPattern {
    /// Parses one entry; the error says what is wrong and shows a valid entry.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        if text.is_empty() {
            return Err(format!("is empty; name a host, {EXAMPLE}"));
        }
        if text.chars().any(char::is_whitespace) {
            return Err(format!(
                "`{text}` contains whitespace; write one host per entry, {EXAMPLE}"
            ));
        }
        if let Some((scheme, rest)) = text.split_once("://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let fix = if authority.is_empty() {
                EXAMPLE.to_owned()
            } else {
                format!("write `{authority}`")
            };
            return Err(format!(
                "`{text}` has a scheme (`{scheme}://`); drop it and name the host alone: {fix}"
            ));
        }
        if let Some(at) = text.find(['/', '?', '#']) {
            let host = &text[..at];
            let fix = if host.is_empty() {
                EXAMPLE.to_owned()
            } else {
                format!("write `{host}`")
            };
            return Err(format!(
                "`{text}` has a path; an entry names a host (and optionally a port), not a \
                 URL: {fix}"
            ));
        }
        if text.contains('@') {
            return Err(format!(
                "`{text}` has a user name (`…@`); name the host alone, {EXAMPLE}"
            ));
        }
        let (host_text, port) = split_port(text)?;
        let host = parse_host(text, host_text)?;
        Ok(HostPattern {
            text: text.to_owned(),
            host,
            port,
        })
    }

    /// Any host that is not this machine, its link or a private network, on any port (see
    /// [`Host::Public`]): the proxy still refuses local, metadata and private addresses,
    /// which it names not.
    pub fn any_public() -> HostPattern {
        HostPattern {
            text: "any public host".to_owned(),
            host: Host::Public,
            port: None,
        }
    }

    /// Whether a connection to `host` (a name or an IP literal, an IPv6 one with or without
    /// brackets) on `port` is allowed by this entry. Names compare case-insensitively and one
    /// trailing dot is ignored.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.strip_suffix('.').unwrap_or(host);
        match &self.host {
            Host::Ip(ip) => {
                let bare = host
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .unwrap_or(host);
                bare.parse::<IpAddr>().is_ok_and(|h| h == *ip)
            }
            Host::Name(name) => host.eq_ignore_ascii_case(name),
            Host::Public => true,
            Host::Subdomains(domain) => {
                // ASCII only, so the byte offsets below are character boundaries.
                if !host.is_ascii() || host.len() <= domain.len() + 1 {
                    return false;
                }
                let (below, suffix) = host.split_at(host.len() - domain.len());
                let Some(labels) = below.strip_suffix('.') else {
                    return false;
                };
                suffix.eq_ignore_ascii_case(domain)
                    && labels
                        .split('.')
                        .all(|l| !l.is_empty() && l.bytes().all(name_byte))
            }
        }
    }

    /// Whether this is [`HostPattern::any_public`], which names no host: it reaches no
    /// private address (see [`is_private_address`]) on its own.
    pub fn is_any_public(&self) -> bool {
        self.host == Host::Public
    }

    /// Whether the pattern names a loopback or link-local address or `localhost` literally (so
    /// the proxy may connect there). The unspecified address and the cloud metadata addresses
    /// count as local too: reaching them is allowed only when an entry names them.
    pub fn names_local(&self) -> bool {
        match &self.host {
            Host::Ip(ip) => is_local_address(*ip),
            Host::Public => false,
            // RFC 6761: `localhost` and every name below it are loopback.
            Host::Name(name) | Host::Subdomains(name) => {
                name == "localhost" || name.ends_with(".localhost")
            }
        }
    }

    /// The entry as written in the config.
    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// Whether connecting to `ip` reaches this machine or its link rather than the internet:
/// loopback, link-local (where cloud metadata services answer), the unspecified address
/// (0.0.0.0/8 and `::`, which Linux routes to this host), AWS's IPv6 metadata address, and
/// any of those as an IPv4-mapped IPv6 address.
pub fn is_local_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.octets()[0] == 0,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_local_address(IpAddr::V4(v4)),
            None => {
                v6.is_loopback()
                    || v6.is_unspecified()
                    || (v6.segments()[0] & 0xffc0) == 0xfe80
                    || v6 == METADATA_V6
            }
        },
    }
}

/// Whether `ip` is on a private network rather than the internet (and not local, see
/// [`is_local_address`]): RFC 1918's 10/8, 172.16/12 and 192.168/16, carrier-grade NAT's
/// 100.64/10, IPv6 unique-local fc00::/7, the other ranges the internet does not route
/// (IANA's special-purpose 192.0.0/24, documentation 192.0.2/24, 198.51.100/24, 203.0.113/24
/// and 2001:db8::/32, benchmarking 198.18/15, reserved 240/4), and any of those as an
/// IPv4-mapped IPv6 address. Whatever answers there is a private network's — the user's
/// router, NAS, services bound to 0.0.0.0 — so "any public host" does not reach it.
pub fn is_private_address(ip: IpAddr) -> bool {
    if is_local_address(ip) {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_private()
                || (a == 100 && (b & 0xc0) == 64)
                || (a == 192 && b == 0 && (c == 0 || c == 2))
                || (a == 198 && (b & 0xfe) == 18)
                || (a == 198 && b == 51 && c == 100)
                || (a == 203 && b == 0 && c == 113)
                || a >= 240
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_address(IpAddr::V4(v4)),
            None => {
                let [s0, s1, ..] = v6.segments();
                (s0 & 0xfe00) == 0xfc00 || (s0 == 0x2001 && s1 == 0x0db8)
            }
        },
    }
}

/// Splits `host[:port]` / `[v6][:port]` into the host text and the port.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err(format!(
                "`{text}` opens `[` without closing it; write IPv6 addresses as `[::1]` or \
                 `[::1]:8080`"
            ));
        };
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(parse_port(text, port)?),
                None => {
                    return Err(format!(
                        "`{text}` has `{after}` after the address; write `[::1]` or `[::1]:8080`"
                    ));
                }
            },
        };
        return Ok((inside, port));
    }
    if text.matches(':').count() > 1 {
        return Err(if text.parse::<Ipv6Addr>().is_ok() {
            format!("`{text}` is an IPv6 address; write it in brackets: `[{text}]`")
        } else {
            format!("`{text}` has more than one `:`; {EXAMPLE}")
        });
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(text, port)?))),
        None => Ok((text, None)),
    }
}

fn parse_port(text: &str, port: &str) -> Result<u16, String> {
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{text}` has port `{port}`, which is not a number; e.g. `api.github.com:443`"
        ));
    }
    match port.parse::<u16>() {
        Ok(0) => Err(format!(
            "`{text}` has port 0, which no connection uses; give a port from 1 to 65535, or \
             none for any port"
        )),
        Ok(p) => Ok(p),
        Err(_) => Err(format!(
            "`{text}` has port {port}, past 65535; give a port from 1 to 65535, or none for \
             any port"
        )),
    }
}

/// The host part of an entry (`text` is the whole entry, for messages).
fn parse_host(text: &str, host: &str) -> Result<Host, String> {
    if text.starts_with('[') {
        return match host.parse::<Ipv6Addr>() {
            Ok(v6) => Ok(Host::Ip(IpAddr::V6(v6))),
            Err(_) => Err(format!(
                "`{text}`: `{host}` is not an IPv6 address; write e.g. `[::1]` or \
                 `[2001:db8::1]:443`"
            )),
        };
    }
    if host == "*" {
        return Err(format!(
            "`{text}` would allow every host; name the hosts, or a domain's subdomains \
             as in `*.github.com`"
        ));
    }
    if host.is_empty() {
        return Err(format!("`{text}` has no host before the port; {EXAMPLE}"));
    }
    if let Some(domain) = host.strip_prefix("*.") {
        if domain.contains('*') {
            return Err(wildcard_error(text));
        }
        if domain.trim_end_matches('.').parse::<Ipv4Addr>().is_ok() {
            return Err(format!(
                "`{text}`: a `*.` wildcard applies to names, not addresses; e.g. `*.github.com`"
            ));
        }
        return Ok(Host::Subdomains(parse_name(text, domain)?));
    }
    if host.contains('*') {
        return Err(wildcard_error(text));
    }
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    Ok(Host::Name(parse_name(text, host)?))
}

fn wildcard_error(text: &str) -> String {
    format!("`{text}`: a `*` may only begin an entry, as `*.` before a domain: `*.github.com`")
}

/// A DNS name, lower-cased and without its trailing dot.
fn parse_name(text: &str, name: &str) -> Result<String, String> {
    if !name.is_ascii() {
        return Err(format!(
            "`{text}` is not ASCII; write an internationalised name in its `xn--` (punycode) \
             form"
        ));
    }
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let invalid = || {
        format!(
            "`{text}` is not a valid host name (labels of letters, digits and `-`, joined by `.`); {EXAMPLE}"
        )
    };
    if name.is_empty() || name.len() > 253 {
        return Err(invalid());
    }
    for label in name.split('.') {
        if label.is_empty()
            || label.len() > 63
            || label.starts_with('-')
            || label.ends_with('-')
            || !label.bytes().all(name_byte)
        {
            return Err(invalid());
        }
    }
    // Resolvers read a name ending in a number as an IPv4 address (`10.1`, `0x7f.1`), so such
    // an entry would not mean what it says.
    if name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"))
    {
        return Err(format!(
            "`{text}` is neither a host name nor an IPv4 address (write all four numbers: \
             `10.0.0.1`)"
        ));
    }
    Ok(name)
}

/// A byte allowed in a host name label (`_` too: some service names use it).
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests;
