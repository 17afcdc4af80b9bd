//! A serialisable picture of every server, for `openpact servers` and for the live status
//! file `openpact serve` keeps in the state dir.

use super::Hub;
use crate::upstream::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::SystemTime;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub state: String,
    pub reason: Option<String>,
    pub protocol_version: Option<String>,
    pub server_info: Option<Value>,
    pub tools: Option<usize>,
    pub started_at: Option<String>,
    pub ready_ms: Option<u64>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub pid: Option<u32>,
    pub stderr: Vec<String>,
}

/// What a running `openpact serve` publishes about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubStatus {
    pub pid: u32,
    pub config: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub servers: Vec<ServerStatus>,
}

impl Hub {
    pub fn status(&self) -> Vec<ServerStatus> {
        self.upstreams()
            .iter()
            .map(|up| {
                let s = up.snapshot();
                let info = s.info.as_ref();
                ServerStatus {
                    name: up.name().to_string(),
                    state: s.state.label().to_string(),
                    reason: match &s.state {
                        State::Failed(r) => Some(r.clone()),
                        _ => None,
                    },
                    protocol_version: info.map(|i| i.protocol_version.clone()),
                    server_info: info.and_then(|i| serde_json::from_str(&i.server_info).ok()),
                    tools: (s.state == State::Ready).then(|| s.tools.len()),
                    started_at: s.started_at.map(rfc3339),
                    ready_ms: s.ready_in.map(|d| d.as_millis() as u64),
                    restarts: s.restarts,
                    last_error: s.last_error.clone(),
                    pid: s.pid,
                    stderr: s.stderr.as_ref().map(|l| l.tail(10)).unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// `2026-11-21T06:40:01Z` without pulling in a date crate.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339;
    use std::time::{Duration, SystemTime};

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_328_461)),
            "2026-11-22T06:21:01Z"
        );
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }
}
