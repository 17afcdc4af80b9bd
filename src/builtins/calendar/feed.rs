//! One feed: fetching its text (over HTTP or from a file, size-capped), and reading the
//! events it has in the look-ahead window.

use super::ics::{normalize, raw_event, unquote, value, vtimezone};
use super::listing::{Occurrence, Window};
use super::recurrence::{Budget, Exclusions, expand};
use super::zones::Zones;
use crate::builtins::net::{Fetcher, HttpRequest};
use crate::config::CalendarFeed;
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The text of one feed, size-capped.
pub(super) async fn load(
    feed: &CalendarFeed,
    fetcher: Result<Fetcher, String>,
    max_bytes: u64,
) -> Result<String, String> {
    let too_big =
        || format!("the feed is larger than {max_bytes} bytes (openpact.builtins.web.maxBytes)");
    let bytes = match feed {
        CalendarFeed::Url(url) => {
            let resp = fetcher?
                .fetch(HttpRequest::get(url.clone()))
                .await
                .map_err(|e| e.to_string())?;
            if !resp.is_success() {
                return Err(format!("HTTP {} {}", resp.status, resp.status_text)
                    .trim_end()
                    .to_string());
            }
            if resp.truncated {
                return Err(too_big());
            }
            resp.body
        }
        CalendarFeed::File(path) => {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            let mut buf = Vec::new();
            file.take(max_bytes.saturating_add(1))
                .read_to_end(&mut buf)
                .await
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if buf.len() as u64 > max_bytes {
                return Err(too_big());
            }
            buf
        }
    };
    // iCalendar is UTF-8 (RFC 5545 §3.1.4); a stray byte should not lose the whole feed.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One feed's name and its text, or why it could not be read.
pub struct Feed {
    pub name: String,
    pub body: Result<String, String>,
}

/// The events of one feed that overlap the window, and notes on what was approximated.
pub(super) fn read_feed(
    calendar: &str,
    text: &str,
    window: &Window,
    time: Duration,
) -> Result<(Vec<Occurrence>, Vec<String>), String> {
    let text = normalize(text);
    if !text
        .lines()
        .any(|l| l.trim().eq_ignore_ascii_case("BEGIN:VCALENDAR"))
    {
        return Err("not an iCalendar feed (no BEGIN:VCALENDAR)".into());
    }
    let cal = icalendar::parser::read_calendar(&text).map_err(|e| {
        let first: Vec<&str> = e.lines().take(3).map(str::trim).collect();
        format!("invalid iCalendar data: {}", first.join(" "))
    })?;

    let mut zones_def = HashMap::new();
    let mut raw_events = Vec::new();
    let mut notes = Vec::new();
    let mut unreadable = 0usize;
    for c in &cal.components {
        match c.name.as_str().to_ascii_uppercase().as_str() {
            "VTIMEZONE" => {
                if let Some(id) = value(c, "TZID") {
                    zones_def.insert(unquote(&id).to_string(), vtimezone(c));
                }
            }
            "VEVENT" => {
                let ev = raw_event(c);
                if ev.start.is_none() {
                    unreadable += 1;
                } else {
                    raw_events.push(ev);
                }
            }
            _ => {}
        }
    }
    if unreadable > 0 {
        notes.push(format!(
            "{unreadable} event(s) without a readable DTSTART were skipped"
        ));
    }

    // Instances replaced by an override (RECURRENCE-ID) are left out of the master's series,
    // whether the override moves them or cancels them.
    let mut zones = Zones::new(window.local, &zones_def);
    let mut replaced: HashMap<String, Exclusions> = HashMap::new();
    for ev in &raw_events {
        if let (Some(uid), Some(rid)) = (&ev.uid, &ev.recurrence_id) {
            let m = zones.moment(rid);
            replaced.entry(uid.clone()).or_default().add(&m);
        }
    }

    let mut out = Vec::new();
    let mut budget = Budget::new(time);
    for ev in &raw_events {
        if ev.cancelled {
            continue;
        }
        let mut skip = Exclusions::default();
        for x in &ev.exdates {
            let m = zones.moment(x);
            skip.add(&m);
        }
        if ev.recurrence_id.is_none()
            && let Some(r) = ev.uid.as_ref().and_then(|u| replaced.get(u))
        {
            skip.merge(r);
        }
        for span in expand(ev, &skip, &mut zones, window, &mut budget) {
            out.push(Occurrence {
                calendar: calendar.to_string(),
                summary: if ev.summary.is_empty() {
                    "(no title)".to_string()
                } else {
                    ev.summary.clone()
                },
                location: ev.location.clone(),
                description: ev.description.clone(),
                span,
            });
        }
    }
    notes.extend(zones.notes);
    if budget.spent {
        notes.push(format!(
            "its recurring events take too long to expand (over {} ms); some instances may be missing",
            time.as_millis()
        ));
    }
    Ok((out, notes))
}
