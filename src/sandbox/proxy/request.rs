//! The HTTP/1.1 a proxy client speaks: a request head parsed (`CONNECT host:port` or an
//! absolute-form `http://` request) and, for plain HTTP, rewritten for the origin server.

use std::net::Ipv6Addr;

/// What a client asked for.
pub(super) enum Request {
    Connect {
        host: String,
        port: u16,
    },
    /// A plain-HTTP request, with `head` rewritten for the origin server.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Parses a request head; an error is the body of a 400 answer.
pub(super) fn parse_head(head: &[u8]) -> Result<Request, String> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let request_line = std::str::from_utf8(request_line)
        .ok()
        .filter(|l| l.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
        .ok_or_else(|| malformed("the request line is not ASCII text"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("expected `METHOD TARGET HTTP/1.1`"));
    };
    if method.is_empty() || !method.bytes().all(token_byte) {
        return Err(malformed("the method is not a token"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(malformed("only HTTP/1.1 and HTTP/1.0 are spoken"));
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if line.starts_with(b" ") || line.starts_with(b"\t") {
            return Err(malformed("folded header lines are not accepted"));
        }
        let colon =
            memchr::memchr(b':', line).ok_or_else(|| malformed("a header line has no `:`"))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.is_empty() || !name.iter().all(|&b| token_byte(b)) {
            return Err(malformed("a header name is not a token"));
        }
        if value.iter().any(|&b| b == b'\r' || b == 0) {
            return Err(malformed("a header value has a control character"));
        }
        // Token bytes are ASCII.
        let name = std::str::from_utf8(name).unwrap_or_default();
        headers.push((name, value));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = parse_authority(target, None)?;
        return Ok(Request::Connect { host, port });
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        if target.starts_with('/') || target == "*" {
            return Err(
                "openpact: this is the egress proxy of a sandboxed MCP server, not a web \
                 server; send requests in absolute form (`GET http://host/path`) or tunnel \
                 with `CONNECT host:port`\n"
                    .to_owned(),
            );
        }
        if strip_prefix_ignore_case(target, "https://").is_some() {
            return Err(malformed("tunnel https with `CONNECT host:443`"));
        }
        return Err(malformed("the target is not an http:// URL"));
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = parse_authority(authority, Some(80))?;
    let path = path.split('#').next().unwrap_or_default();
    let head = origin_head(method, authority, path, version, &headers);
    Ok(Request::Forward { host, port, head })
}

/// The head sent upstream for a plain-HTTP request: origin-form target, `Host` from the URL
/// (RFC 9112 §3.2.2: a proxy replaces the client's), no hop-by-hop headers, and
/// `Connection: close`, since the proxy forwards one request per connection.
fn origin_head(
    method: &str,
    authority: &str,
    path: &str,
    version: &str,
    headers: &[(&str, &[u8])],
) -> Vec<u8> {
    let slash = if path.starts_with('/') { "" } else { "/" };
    let start = format!("{method} {slash}{path} {version}\r\nHost: {authority}\r\n");
    // Headers a `Connection` header names are hop-by-hop too; the framing ones stay, since
    // the body is forwarded as it came.
    let mut nominated: Vec<String> = Vec::new();
    for (_, value) in headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
    {
        let value = String::from_utf8_lossy(value);
        nominated.extend(value.split(',').map(|t| t.trim().to_ascii_lowercase()));
    }
    let mut head = start.into_bytes();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        let framing = lower == "content-length" || lower == "transfer-encoding";
        if lower == "host"
            || lower == "connection"
            || lower == "keep-alive"
            || lower.starts_with("proxy-")
            || (!framing && nominated.contains(&lower))
        {
            continue;
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// `host:port`, `[v6]:port`, or (with a default port) either without the port. The host
/// comes back lower-cased, an IPv6 address without brackets.
fn parse_authority(authority: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| malformed("an IPv6 address has no closing `]`"))?;
        let v6: Ipv6Addr = inside
            .parse()
            .map_err(|_| malformed("the bracketed host is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| malformed("junk after the IPv6 address"))?,
            ),
        };
        (v6.to_string(), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        let valid = !host.is_empty()
            && host.len() <= 254
            && host.bytes().all(|b| name_byte(b) || b == b'.');
        if !valid {
            return Err(malformed("the host is not a host name or an address"));
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match (port, default_port) {
        (Some(""), Some(default)) | (None, Some(default)) => default,
        (None, None) => return Err(malformed("CONNECT needs `host:port`")),
        // `parse` alone would take a sign (`+80`).
        (Some(text), _) => match text.parse::<u16>() {
            Ok(port) if port != 0 && text.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(malformed("the port is not a number from 1 to 65535")),
        },
    };
    Ok((host, port))
}

fn malformed(what: &str) -> String {
    format!("openpact: malformed proxy request: {what}\n")
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// RFC 9110 `tchar`.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}
