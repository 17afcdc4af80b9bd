//! One client connection: read its request head, open the destination through the proxy's
//! rules, then tunnel (`CONNECT`) or forward (plain HTTP); what fails is answered in plain text.

use super::decide::Failure;
use super::request::{Request, parse_head};
use super::{CONNECT_DEADLINE, Rules, host_port};
use std::fmt::Write as _;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// The most a request head may take; proxy requests carry small heads.
pub(super) const HEAD_LIMIT: usize = 16 * 1024;
/// A client that has not sent its whole head by then is cut off, so it holds no slot for long.
const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// How long an error answer may take to write, including reading what the client still sends:
/// closing a socket with unread input resets it, and the reset can destroy the answer before
/// the client reads it.
const LINGER: Duration = Duration::from_secs(2);
/// The most a client's unread input is drained after an error answer.
const LINGER_LIMIT: usize = 64 * 1024;

/// Why a request head could not be read.
enum HeadError {
    /// The client went away (or failed) before finishing it: nothing to answer.
    Closed,
    TooLarge,
}

pub(super) async fn serve(mut client: TcpStream, rules: &Rules) {
    let (buf, end) = match timeout(HEAD_DEADLINE, read_head(&mut client)).await {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::TooLarge)) => {
            let body = format!("openpact: the request head is over {HEAD_LIMIT} bytes\n");
            return answer(&mut client, 431, &body).await;
        }
        Err(_) => {
            let body = "openpact: the request head did not arrive in time\n";
            return answer(&mut client, 408, body).await;
        }
    };
    let request = match parse_head(&buf[..end]) {
        Ok(request) => request,
        Err(body) => return answer(&mut client, 400, &body).await,
    };
    let (host, port) = match &request {
        Request::Connect { host, port } | Request::Forward { host, port, .. } => (host, *port),
    };
    let shown = host_port(host, port);
    let mut upstream = match rules.open(host, port).await {
        Ok(upstream) => upstream,
        Err(Failure::Refused { reason, listable }) => {
            let body = format!("{}\n", rules.refuse(host, port, reason, listable).message());
            return answer(&mut client, 403, &body).await;
        }
        Err(Failure::Unreachable(reason)) => {
            tracing::debug!(server = %rules.server, host, port, "egress failed: {reason}");
            let body = format!("openpact: cannot reach {shown}: {reason}\n");
            return answer(&mut client, 502, &body).await;
        }
    };
    tracing::debug!(server = %rules.server, host, port, "egress allowed");
    // Whatever the client sent past the head (the start of a TLS handshake, a request body)
    // belongs upstream too.
    let rest = &buf[end..];
    let opened = async {
        match &request {
            Request::Connect { .. } => {
                upstream.write_all(rest).await?;
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
            }
            Request::Forward { head, .. } => {
                upstream.write_all(head).await?;
                upstream.write_all(rest).await
            }
        }
    };
    match timeout(CONNECT_DEADLINE, opened).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(server = %rules.server, host, port, "egress: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(server = %rules.server, host, port, "egress: stalled at the start");
            return;
        }
    }
    // Interactive protocols in the tunnel should not wait for Nagle; failing to set it only
    // costs latency.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(server = %rules.server, host, port, "egress connection ended: {e}");
    }
}

/// Reads up to the blank line that ends the head; returns what was read and where the head
/// ends (bytes past it were sent ahead by the client).
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let scanned = buf.len().saturating_sub(3);
        let n = match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadError::Closed),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        match head_end(&buf, scanned) {
            Some(end) if end <= HEAD_LIMIT => return Ok((buf, end)),
            Some(_) => return Err(HeadError::TooLarge),
            None if buf.len() >= HEAD_LIMIT => return Err(HeadError::TooLarge),
            None => {}
        }
    }
}

/// Where the head ends: just past the first empty line (CRLF, or a bare LF as RFC 9112
/// tolerates), looking from `from`.
pub(super) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memchr_iter(b'\n', &buf[from..])
        .map(|i| from + i)
        .find_map(|i| match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        })
}

/// Writes a short plain-text answer and closes, reading (and discarding) what the client still
/// sends for a moment so the close does not reset the connection before the answer is read.
async fn answer(client: &mut TcpStream, status: u16, body: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let mut response = format!("HTTP/1.1 {status} {reason}\r\n");
    let _ = write!(
        response,
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let close = async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await?;
        let mut drained = 0;
        let mut sink = [0u8; 4096];
        while drained < LINGER_LIMIT {
            match client.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, io::Error>(())
    };
    let _ = timeout(LINGER, close).await;
}
