//! A loopback HTTP stand-in for the services the network built-ins call: it answers with a
//! handler and records every request, so a test checks both what the tool made of the reply
//! and what it sent.
//!
//! Two test crates compile this one file: the integration binary (as `support::stand`) and
//! the library's unit tests (through `#[path]` from `src/builtins/net/tests.rs`), so it uses
//! nothing but std, tiny_http and serde_json.

use std::sync::{Arc, Mutex};

/// A request a stand-in received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// A reply from a stand-in: status, headers, body.
pub type Reply = (u16, Vec<(String, String)>, Vec<u8>);

/// A loopback HTTP server on 127.0.0.1:0 (or another address) answering with `handler`, recording requests;
/// it stops on drop.
pub struct Stand {
    /// `http://127.0.0.1:<port>` (or the address it was started on).
    pub base: String,
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    server: Arc<tiny_http::Server>,
}

impl Drop for Stand {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

impl Stand {
    pub fn start<F>(handler: F) -> Stand
    where
        F: Fn(&Seen) -> Reply + Send + Sync + 'static,
    {
        Stand::start_on(std::net::Ipv4Addr::LOCALHOST.into(), handler)
    }

    /// [`Stand::start`] on another of the machine's addresses (a port chosen on it).
    pub fn start_on<F>(ip: std::net::IpAddr, handler: F) -> Stand
    where
        F: Fn(&Seen) -> Reply + Send + Sync + 'static,
    {
        let server = Arc::new(tiny_http::Server::http((ip, 0)).unwrap());
        let addr = server.server_addr().to_ip().unwrap();
        let port = addr.port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let (srv, log) = (server.clone(), seen.clone());
        std::thread::spawn(move || {
            while let Ok(mut rq) = srv.recv() {
                let mut body = String::new();
                let _ = rq.as_reader().read_to_string(&mut body);
                let s = Seen {
                    method: rq.method().as_str().to_string(),
                    url: rq.url().to_string(),
                    headers: rq
                        .headers()
                        .iter()
                        .map(|h| (h.field.as_str().to_string(), h.value.to_string()))
                        .collect(),
                    body,
                };
                log.lock().unwrap().push(s.clone());
                let handler = handler.clone();
                // One thread per request so a slow reply does not hold up the others.
                std::thread::spawn(move || {
                    let (status, headers, body) = handler(&s);
                    let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
                    for (k, v) in headers {
                        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                            resp.add_header(h);
                        }
                    }
                    let _ = rq.respond(resp);
                });
            }
        });
        Stand {
            base: format!("http://{addr}"),
            port,
            seen,
            server,
        }
    }

    /// Every request so far, in the order they came.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// A reply with one `Content-Type`.
pub fn reply(status: u16, ctype: &str, body: impl Into<Vec<u8>>) -> Reply {
    (
        status,
        vec![("Content-Type".to_string(), ctype.to_string())],
        body.into(),
    )
}

/// A JSON reply (what the API-backed tools' stand-ins answer).
pub fn json_reply(status: u16, v: serde_json::Value) -> Reply {
    reply(status, "application/json", v.to_string())
}
