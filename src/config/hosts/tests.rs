//! Host patterns: each form, what it matches, and why a pattern is refused.

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
