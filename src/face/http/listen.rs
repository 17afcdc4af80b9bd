//! The HTTP face's accept loop: hyper's HTTP/1.1 server under the hub's own limits — a
//! deadline for each request's headers (slowloris), a cap on open connections, and a
//! graceful stop that leaves no connection task behind.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

/// How long a client may take to send a request's headers, counted from when the connection
/// opens or its previous response ends: a client that trickles headers byte by byte
/// (slowloris), or opens a socket and sends nothing, or leaves a keep-alive connection idle,
/// is disconnected after this. Real clients send their headers in one write, so 10 s is
/// generous even across slow links, and short enough that held sockets are recycled quickly.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once. Each costs a file descriptor and a task, and the hub needs
/// descriptors for its children's pipes and its logs too: without a cap a flood of idle or
/// slow sockets would exhaust them. 512 covers the default 64 sessions with room to spare
/// (an HTTP/1.1 client opens one connection per concurrent request: a GET stream plus a
/// few POSTs each), and stays well below the common 1024 descriptor soft limit. At the cap
/// the loop stops accepting: new clients wait in the kernel's backlog until one closes.
pub const MAX_CONNECTIONS: usize = 512;

/// After an accept error that is not about one connection (out of descriptors, out of
/// memory), wait this long before accepting again rather than spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `stop` fires (or its sender is dropped), then lets every
/// connection finish the response it is writing and returns once they are all closed.
pub async fn serve(listener: TcpListener, app: Router, stop: oneshot::Receiver<()>) {
    serve_within(listener, app, stop, HEADER_READ_TIMEOUT, MAX_CONNECTIONS).await;
}

/// [`serve`] with its limits given (the tests use small ones).
async fn serve_within(
    listener: TcpListener,
    app: Router,
    stop: oneshot::Receiver<()>,
    header_read_timeout: Duration,
    max_connections: usize,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let slots = Arc::new(Semaphore::new(max_connections));
    // Dropped when this future is (an aborted stop), which aborts every connection task.
    let mut conns = JoinSet::new();
    let (closing_tx, closing) = watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let slot = tokio::select! {
            _ = &mut stop => break,
            Some(_) = conns.join_next() => continue,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                // The semaphore is never closed.
                Err(_) => break,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if !is_connection_error(&e) {
                        tracing::warn!("the HTTP face could not accept a connection: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
        };
        // Responses are small JSON lines and SSE events: send each at once.
        let _ = tcp.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app.clone()));
        let mut closing = closing.clone();
        conns.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                _ = closing.changed() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = served {
                tracing::debug!(%peer, "HTTP connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    while conns.join_next().await.is_some() {}
}

/// Errors about the one connection being accepted (it was reset before we took it): the
/// listener itself is fine.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

    /// What the server sends on `tcp` within `limit` (empty when it closed it or sent nothing).
    async fn reply(tcp: &mut TcpStream, limit: Duration) -> Option<String> {
        let mut buf = vec![0u8; 1024];
        match tokio::time::timeout(limit, tcp.read(&mut buf)).await {
            Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Ok(Err(_)) => Some(String::new()),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn held_sockets_are_dropped_after_the_header_deadline_and_capped_meanwhile() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let (stop, stopped) = oneshot::channel();
        let deadline = Duration::from_millis(400);
        let server = tokio::spawn(serve_within(listener, app, stopped, deadline, 2));

        // Two sockets take both slots: one silent, one trickling a header.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut trickle = TcpStream::connect(addr).await.unwrap();
        trickle
            .write_all(b"GET / HTTP/1.1\r\nX-Slow: a")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A third client waits in the backlog, unserved while the two hold their slots.
        let t0 = std::time::Instant::now();
        let mut third = TcpStream::connect(addr).await.unwrap();
        third.write_all(GET).await.unwrap();
        assert_eq!(reply(&mut third, Duration::from_millis(200)).await, None);
        // At the deadline both are dropped, and the third is served.
        let served = reply(&mut third, Duration::from_secs(5)).await.unwrap();
        assert!(served.starts_with("HTTP/1.1 200"), "{served:?}");
        assert!(t0.elapsed() >= deadline - Duration::from_millis(100));
        assert_eq!(
            reply(&mut silent, Duration::from_secs(1)).await.as_deref(),
            Some("")
        );
        assert_eq!(
            reply(&mut trickle, Duration::from_secs(1)).await.as_deref(),
            Some("")
        );

        // Stopping returns once the (idle, keep-alive) third connection is closed.
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            reply(&mut third, Duration::from_secs(1)).await.as_deref(),
            Some("")
        );
    }
}
