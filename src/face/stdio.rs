//! The stdio face: one session on our own stdin/stdout, and the grace its in-flight requests
//! get after stdin closes.

use crate::hub::{Hub, Session};
use crate::transport::stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long in-flight requests may still finish after stdin closes, so that
/// `printf '…' | openpact serve` gets its answers.
const FINISH_GRACE: Duration = Duration::from_millis(1000);

pub struct StdioFace {
    session: Arc<Session>,
    stdout: stdio::Stdout,
    /// Fires when stdin reaches its end.
    pub stdin_closed: oneshot::Receiver<()>,
}

/// Opens stdout (before the hub starts, so a failure costs no child process).
pub fn open_stdout() -> std::io::Result<stdio::Stdout> {
    stdio::stdout()
}

/// Starts the stdio session of `hub`, writing to `stdout`.
/// The session sees view `view` (0: the whole catalogue; a profile's, for `--profile`).
pub fn start(hub: &Arc<Hub>, stdout: stdio::Stdout, view: usize) -> std::io::Result<StdioFace> {
    let session = Session::new(hub.clone(), stdout.outgoing.clone(), view);
    let stdin_closed = {
        let (session, paced) = (session.clone(), session.clone());
        stdio::read_stdin(
            hub.settings.max_message_size,
            move |frame| session.handle_frame(frame),
            move || {
                let s = paced.clone();
                async move { s.room().await }
            },
        )?
    };
    Ok(StdioFace {
        session,
        stdout,
        stdin_closed,
    })
}

impl StdioFace {
    /// Lets in-flight requests finish briefly (`grace`), then answers the rest with an error.
    pub async fn finish(&self, grace: bool) {
        let grace = if grace { FINISH_GRACE } else { Duration::ZERO };
        self.session
            .finish(grace, "openpact is shutting down")
            .await;
    }

    /// Flushes stdout (after the hub has stopped).
    pub async fn close(self) {
        self.stdout.outgoing.close();
        let _ = tokio::time::timeout(Duration::from_millis(300), self.stdout.flushed).await;
    }
}
