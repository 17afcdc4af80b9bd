//! Watching the hub from outside: a [`Sample`] of its `/proc` figures (VmRSS, open fds,
//! threads, child processes) and its `/metrics` gauges, and reading single series out of
//! the metrics text.

use anyhow::{Context, Result, anyhow};
use std::time::Duration;

/// One look at the hub.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Seconds since the clients started (negative: before).
    pub secs: f64,
    pub rss_kib: u64,
    pub fds: u64,
    pub threads: u64,
    /// The hub's own children (its stdio servers).
    pub children: u64,
    /// `openpact_sessions`.
    pub sessions: u64,
    /// `openpact_runtime_tasks`.
    pub tasks: u64,
    /// `openpact_servers{state="ready"}`.
    pub ready: u64,
}

/// Reads the hub `pid` and its metrics at `base` (`http://HOST:PORT`).
pub struct Probe {
    pub pid: u32,
    pub base: String,
    http: reqwest::Client,
}

impl Probe {
    pub fn new(pid: u32, base: &str) -> Result<Probe> {
        Ok(Probe {
            pid,
            base: base.to_string(),
            http: crate::mcp::http_client()?,
        })
    }

    pub async fn sample(&self, secs: f64) -> Result<Sample> {
        let metrics = self.metrics().await?;
        let gauge = |name: &str| series(&metrics, name).map(|v| v as u64);
        Ok(Sample {
            secs,
            rss_kib: status_field(self.pid, "VmRSS")?,
            fds: count_fds(self.pid)?,
            threads: status_field(self.pid, "Threads")?,
            children: children(self.pid)?,
            sessions: gauge("openpact_sessions")
                .ok_or_else(|| anyhow!("/metrics has no openpact_sessions"))?,
            tasks: gauge("openpact_runtime_tasks")
                .ok_or_else(|| anyhow!("/metrics has no openpact_runtime_tasks"))?,
            ready: gauge("openpact_servers{state=\"ready\"}").unwrap_or(0),
        })
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        let resp = self
            .http
            .get(format!("{}/metrics", self.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .context("GET /metrics")?;
        Ok(resp.text().await?)
    }

    pub fn rss_kib(&self) -> Result<u64> {
        status_field(self.pid, "VmRSS")
    }
}

/// The value of `series` (a name, or a name with its labels as the hub writes them); a
/// name alone sums every series of that name.
pub fn series(text: &str, series: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = key.split('{').next().unwrap_or(key);
        if key == series || (!series.contains('{') && name == series) {
            let v: f64 = value.parse().ok()?;
            found = Some(found.unwrap_or(0.0) + v);
        }
    }
    found
}

/// A `kB` or count field of `/proc/PID/status`.
pub fn status_field(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

fn count_fds(pid: u32) -> Result<u64> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("cannot list /proc/{pid}/fd"))?
        .count() as u64)
}

/// The pids listed in `/proc/PID/task/*/children`: zombies too (one the hub never reaps is
/// a leak like any other).
pub fn child_pids(pid: u32) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("cannot list /proc/{pid}/task"))?
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

fn children(pid: u32) -> Result<u64> {
    Ok(child_pids(pid)?.len() as u64)
}
