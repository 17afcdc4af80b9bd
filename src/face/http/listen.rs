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
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
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
