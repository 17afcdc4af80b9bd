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
mod tests {
    use super::*;

    fn p(text: &str) -> HostPattern {
        match HostPattern::parse(text) {
            Ok(pattern) => pattern,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    fn err(text: &str) -> String {
        match HostPattern::parse(text) {
            Ok(pattern) => panic!("{text} parsed as {pattern:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn any_public_host_matches_every_name_and_names_no_local_one() {
        let any = HostPattern::any_public();
        assert!(any.matches("example.com", 443) && any.matches("10.0.0.1", 8080));
        assert!(
            !any.names_local(),
            "the proxy keeps refusing local addresses"
        );
        // Never from a config: `*` stays an error there.
        assert!(HostPattern::parse("*").is_err());
    }

    #[test]
    fn private_addresses_are_the_private_networks_and_not_local_ones() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for private in [
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.254",
            "fc00::1",
            "fd12:3456::1",
            "::ffff:192.168.1.1",
            "::ffff:10.1.2.3",
            "192.0.2.2",
            "198.51.100.7",
            "203.0.113.9",
            "198.19.0.1",
            "192.0.0.8",
            "240.0.0.1",
            "2001:db8::1",
        ] {
            assert!(is_private_address(ip(private)), "{private}");
            assert!(!is_local_address(ip(private)), "{private}");
        }
        for not in [
            "93.184.216.34",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "192.169.0.1",
            "11.0.0.1",
            "198.20.0.1",
            "192.0.3.1",
            "2606:4700::1111",
            "fe00::1",
            "::ffff:8.8.8.8",
            // Local, not private: refused as local whatever the entries.
            "127.0.0.1",
            "169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_private_address(ip(not)), "{not}");
        }
        assert!(HostPattern::any_public().is_any_public());
        assert!(!p("10.0.0.1").is_any_public() && !p("*.lan").is_any_public());
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            p("API.GitHub.com").host,
            Host::Name("api.github.com".into())
        );
        assert_eq!(p("API.GitHub.com").as_str(), "API.GitHub.com");
        assert_eq!(p("example.com.").host, Host::Name("example.com".into()));
        assert_eq!(p("example.com:443").port, Some(443));
        assert_eq!(p("example.com").port, None);
        assert_eq!(
            p("*.GitHub.com").host,
            Host::Subdomains("github.com".into())
        );
        assert_eq!(p("*.github.com:22").port, Some(22));
        assert_eq!(p("10.0.0.1").host, Host::Ip("10.0.0.1".parse().unwrap()));
        assert_eq!(p("10.0.0.1:65535").port, Some(65535));
        assert_eq!(p("[::1]").host, Host::Ip("::1".parse().unwrap()));
        assert_eq!(p("[2001:db8::1]:8443").port, Some(8443));
        assert_eq!(
            p("_service.example.com").host,
            Host::Name("_service.example.com".into())
        );
        assert_eq!(p("localhost").host, Host::Name("localhost".into()));
    }

    #[test]
    fn rejects_with_a_reason_and_an_example() {
        let e = err("");
        assert!(e.contains("empty") && e.contains("api.github.com"), "{e}");
        let e = err("https://api.github.com/repos");
        assert!(
            e.contains("scheme") && e.contains("`api.github.com`"),
            "{e}"
        );
        let e = err("api.github.com/repos");
        assert!(e.contains("path") && e.contains("`api.github.com`"), "{e}");
        let e = err("*");
        assert!(
            e.contains("every host") && e.contains("*.github.com"),
            "{e}"
        );
        assert!(err("*:443").contains("every host"));
        for bad in ["example.com:0", "[::1]:0"] {
            assert!(err(bad).contains("port 0"), "{bad}");
        }
        for bad in ["example.com:65536", "example.com:99999999999"] {
            assert!(err(bad).contains("65535"), "{bad}");
        }
        assert!(err("example.com:").contains("not a number"));
        assert!(err("example.com:http").contains("not a number"));
        for bad in [
            "api.*.com",
            "*github.com",
            "*.*.github.com",
            "a*.github.com",
            "github.*",
        ] {
            assert!(err(bad).contains("may only begin"), "{bad}: {}", err(bad));
        }
        assert!(err("::1").contains("`[::1]`"));
        assert!(err("[::1").contains("`[`"));
        assert!(err("[example.com]").contains("not an IPv6"));
        assert!(err("[::1]x").contains("after the address"));
        assert!(err("a b").contains("whitespace"));
        assert!(err("user@example.com").contains("user name"));
        assert!(err(":443").contains("no host"));
        assert!(err("*.10.0.0.1").contains("names, not addresses"));
        for bad in ["10.1", "1.2.3", "999.1.1.1", "0x7f.1"] {
            assert!(err(bad).contains("IPv4"), "{bad}: {}", err(bad));
        }
        for bad in [
            "a..b",
            ".example.com",
            "-a.com",
            "a-.com",
            "ex!ample.com",
            ".",
        ] {
            assert!(
                err(bad).contains("not a valid host name"),
                "{bad}: {}",
                err(bad)
            );
        }
        assert!(err("bücher.de").contains("xn--"));
        let long = format!("{}.com", "a".repeat(64));
        assert!(err(&long).contains("not a valid host name"));
    }

    #[test]
    fn names_match_case_insensitively_and_ignore_a_trailing_dot() {
        let exact = p("api.github.com");
        assert!(exact.matches("api.github.com", 443));
        assert!(exact.matches("API.GitHub.COM", 80));
        assert!(exact.matches("api.github.com.", 443));
        assert!(!exact.matches("api.github.com..", 443));
        assert!(!exact.matches("github.com", 443));
        assert!(!exact.matches("xapi.github.com", 443));
        assert!(p("example.com.").matches("example.com", 1));
    }

    #[test]
    fn wildcards_match_subdomains_only() {
        let any = p("*.github.com");
        assert!(any.matches("api.github.com", 443));
        assert!(any.matches("a.b.GITHUB.com.", 443));
        assert!(!any.matches("github.com", 443));
        assert!(!any.matches(".github.com", 443));
        assert!(!any.matches("a..github.com", 443));
        assert!(!any.matches("evilgithub.com", 443));
        assert!(!any.matches("github.com.evil.com", 443));
        assert!(!any.matches("ä.github.com", 443));
        assert!(!any.matches("localhost", 443));
    }

    #[test]
    fn ports_restrict_when_given() {
        let p443 = p("api.github.com:443");
        assert!(p443.matches("api.github.com", 443));
        assert!(!p443.matches("api.github.com", 80));
        assert!(p("*.github.com:22").matches("ssh.github.com", 22));
        assert!(!p("*.github.com:22").matches("ssh.github.com", 443));
    }

    #[test]
    fn addresses_match_addresses() {
        let v4 = p("127.0.0.1:8080");
        assert!(v4.matches("127.0.0.1", 8080));
        assert!(!v4.matches("127.0.0.1", 8081));
        assert!(!v4.matches("localhost", 8080));
        assert!(!v4.matches("127.1", 8080));
        let v6 = p("[::1]");
        assert!(v6.matches("::1", 1));
        assert!(v6.matches("[::1]", 1));
        assert!(v6.matches("0:0::1", 1));
        assert!(!v6.matches("127.0.0.1", 1));
    }

    #[test]
    fn names_local_for_loopback_link_local_and_localhost() {
        for local in [
            "localhost",
            "localhost:8080",
            "db.localhost",
            "*.localhost",
            "127.0.0.1",
            "127.9.9.9:1",
            "169.254.169.254",
            "0.0.0.0",
            "[::1]",
            "[fe80::1]:80",
            "[::ffff:127.0.0.1]",
            "[fd00:ec2::254]",
        ] {
            assert!(p(local).names_local(), "{local}");
        }
        for remote in [
            "api.github.com",
            "*.github.com",
            "localhost.example.com",
            "mylocalhost",
            "10.0.0.1",
            "[2001:db8::1]",
            "[fec0::1]",
        ] {
            assert!(!p(remote).names_local(), "{remote}");
        }
    }

    #[test]
    fn shows_and_serialises_as_written() {
        let pattern = p("*.GitHub.com:443");
        assert_eq!(pattern.to_string(), "*.GitHub.com:443");
        assert_eq!(
            serde_json::to_string(&pattern).unwrap(),
            r#""*.GitHub.com:443""#
        );
    }
}
