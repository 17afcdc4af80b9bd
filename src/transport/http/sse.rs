//! The deprecated HTTP+SSE transport (2024-11-05): a GET opens the server's event stream,
//! whose first `endpoint` event names the URL to POST messages to; every answer comes back
//! on that stream. The stream cannot be resumed: when it ends, so does the link.

use super::events::{Events, StreamError, message_data};
use super::shared::{Shared, content_type, status_text};
use super::streamable::{Outbound, spawn_exchange};
use super::{LinkEnd, RemoteKind};
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use url::Url;

/// How long the server may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// Opens the event stream and waits for the endpoint; the stream is then read by a task of
/// the link. Errors read after "server 'NAME' ".
pub(super) async fn open(
    shared: &Arc<Shared>,
    tasks: &mut JoinSet<()>,
) -> Result<Arc<Url>, LinkEnd> {
    let url = &shared.spec.url;
    let resp = shared
        .send("GET", || {
            shared
                .request(Method::GET, url)
                .header(ACCEPT, "text/event-stream")
        })
        .await?;
    let status = resp.status();
    if !status.is_success() {
        return Err(LinkEnd::Lost(format!(
            "answered the GET for its SSE stream with HTTP {}",
            status_text(status)
        )));
    }
    if content_type(&resp) != "text/event-stream" {
        return Err(LinkEnd::Lost(format!(
            "answered the GET for its SSE stream with `{}`, not an event stream",
            content_type(&resp)
        )));
    }
    let mut events = Events::new(resp, shared.spec.max_message_size);
    let first = async {
        loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => {
                    return Ok(ev.data.unwrap_or_default());
                }
                Some(Ok(_)) => {}
                Some(Err(StreamError::TooLarge(len))) => {
                    return Err(format!(
                        "sent an event of {len} bytes before naming its endpoint"
                    ));
                }
                Some(Err(StreamError::Broken(e))) => {
                    return Err(format!("broke off its SSE stream: {e}"));
                }
                None => return Err("closed its SSE stream before naming its endpoint".into()),
            }
        }
    };
    let data = match tokio::time::timeout(ENDPOINT_WAIT, first).await {
        Ok(Ok(data)) => data,
        Ok(Err(why)) => return Err(LinkEnd::Lost(why)),
        Err(_) => {
            return Err(LinkEnd::Lost(format!(
                "named no endpoint on its SSE stream within {}s",
                ENDPOINT_WAIT.as_secs()
            )));
        }
    };
    let endpoint = url
        .join(data.trim())
        .map_err(|e| LinkEnd::Lost(format!("named an endpoint that is not a URL ({e})")))?;
    if endpoint.origin() != url.origin() {
        return Err(LinkEnd::Lost(format!(
            "named an endpoint on another origin ({}); openpact only posts to the server's own",
            endpoint.origin().ascii_serialization()
        )));
    }
    shared.learn(RemoteKind::Sse);
    tasks.spawn(read(shared.clone(), events));
    Ok(Arc::new(endpoint))
}

/// Reads the event stream to its end, which ends the link.
async fn read(shared: Arc<Shared>, mut events: Events) {
    loop {
        match events.next().await {
            Some(Ok(mut ev)) => {
                if message_data(&ev).is_some() {
                    shared.deliver(ev.data.take().unwrap_or_default().into_bytes());
                }
            }
            Some(Err(StreamError::TooLarge(len))) => {
                // Which request it answered is lost with it, and so is the rest of the
                // stream: the link must start over.
                return shared.end(LinkEnd::Lost(format!(
                    "sent a message of {len} bytes, over the limit (openpact.maxMessageSize), on its SSE stream"
                )));
            }
            Some(Err(StreamError::Broken(e))) => {
                return shared.end(LinkEnd::Lost(format!("broke off its SSE stream: {e}")));
            }
            None => return shared.end(LinkEnd::Lost("closed its SSE stream".into())),
        }
    }
}

/// POSTs one message to the endpoint; the answer comes on the stream.
pub(super) async fn send(
    shared: &Arc<Shared>,
    tasks: &mut JoinSet<()>,
    endpoint: &Arc<Url>,
    out: Outbound,
) {
    let me = shared.clone();
    let endpoint = endpoint.clone();
    spawn_exchange(shared, tasks, out.id.is_some(), async move {
        let resp = me
            .send("POST", || {
                me.request(Method::POST, &endpoint)
                    .header(CONTENT_TYPE, "application/json")
                    .body(out.body.clone())
            })
            .await;
        let resp = match resp {
            Ok(resp) => resp,
            Err(end) => return me.end(end),
        };
        if !resp.status().is_success() {
            me.refused(out.id.as_deref(), resp).await;
        }
    })
    .await;
}
