//! `calendar_read`: upcoming events from the configured iCalendar feeds (`url` over HTTP, or a
//! local `file`).
//!
//! The original read every time as UTC and ignored recurrence. Here:
//! - `TZID` is honoured: IANA names (also behind vendor prefixes such as
//!   `/mozilla.org/…/Europe/Berlin`), common Windows and Outlook display names, and a
//!   `VTIMEZONE`'s `X-LIC-LOCATION` or fixed standard offset; an unknown zone is read as UTC
//!   with a note in the output.
//! - UTC (`…Z`) times, floating times (read in the user's local zone), all-day dates.
//! - `RRULE` (expanded with the `rrule` crate), `RDATE`, `EXDATE`, and `RECURRENCE-ID`
//!   overrides (the override replaces the instance; a cancelled one removes it).
//!
//! Events overlapping `[now, now + days)` are listed by start, with times in the local zone:
//! the original text format, plus `structuredContent` with RFC 3339 instants (all-day events
//! give dates: `start` inclusive, `end` exclusive, as in iCalendar).
//!
//! The parts: `feed` fetches a feed and reads its events in the window; `ics` reads the
//! iCalendar text; `zones` maps `TZID`s to real zones; `recurrence` expands series;
//! `listing` turns the events into the tool's answer.

mod feed;
mod ics;
mod listing;
mod recurrence;
#[cfg(test)]
mod tests;
mod zones;

/// The feed reader and the listing, for the fuzz targets in `tests/fuzz`.
#[doc(hidden)]
pub use feed::Feed;
/// For the fuzz target `calendar` (tests/fuzz).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use listing::listing_within;

use super::net::Fetcher;
use super::{BoxFuture, Group, ToolDef, ToolOutput};
use crate::config::{CalendarSource, WebSettings};
use chrono::Utc;
use feed::load;
use listing::listing;
use serde_json::{Value, json};
use std::sync::Arc;

const TOOL: &str = "calendar_read";
const DEFAULT_DAYS: i64 = 7;
const MAX_DAYS: i64 = 366;

/// The calendar group, or None when no calendars are configured.
pub fn group(calendars: &[CalendarSource], web: &WebSettings) -> Option<Arc<dyn Group>> {
    if calendars.is_empty() {
        return None;
    }
    // Feed URLs come from the config, not from the model: no private-address guard.
    let fetcher = Fetcher::new(web, false).map_err(|e| e.to_string());
    Some(Arc::new(Calendars {
        sources: calendars.to_vec(),
        fetcher,
        max_bytes: web.max_bytes,
    }))
}

struct Calendars {
    sources: Vec<CalendarSource>,
    /// An HTTP client that could not be built is reported by each call that needs it.
    fetcher: Result<Fetcher, String>,
    max_bytes: u64,
}

impl Group for Calendars {
    fn tools(&self) -> Vec<ToolDef> {
        let names: Vec<&str> = self.sources.iter().map(|s| s.name.as_str()).collect();
        vec![ToolDef {
            name: TOOL,
            description: format!(
                "Read upcoming events from the configured calendars ({}). Recurring events are \
                 expanded; times are shown in the local time zone.",
                names.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "calendar": {
                        "type": "string",
                        "description": "Calendar name to read (optional, reads all if not specified)"
                    },
                    "days": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_DAYS,
                        "default": DEFAULT_DAYS,
                        "description": "Number of days to look ahead (default: 7)"
                    }
                }
            }),
            annotations: Some(json!({"readOnlyHint": true, "openWorldHint": true})),
        }]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if tool != TOOL {
                return ToolOutput::unknown_tool(tool);
            }
            self.read(args).await
        })
    }
}

impl Calendars {
    async fn read(&self, args: &Value) -> ToolOutput {
        let days = match args.get("days").filter(|v| !v.is_null()) {
            None => DEFAULT_DAYS,
            Some(v) => match v.as_i64() {
                Some(d) if (1..=MAX_DAYS).contains(&d) => d,
                _ => {
                    return ToolOutput::error(format!(
                        "days must be between 1 and {MAX_DAYS} (got {v})"
                    ));
                }
            },
        };
        let selected: Vec<CalendarSource> =
            match args.get("calendar").and_then(Value::as_str).map(str::trim) {
                None | Some("") => self.sources.clone(),
                Some(name) => match self
                    .sources
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(name))
                {
                    Some(s) => vec![s.clone()],
                    None => {
                        let names: Vec<&str> =
                            self.sources.iter().map(|s| s.name.as_str()).collect();
                        return ToolOutput::error(format!(
                            "calendar '{name}' not found; configured calendars: {}",
                            names.join(", ")
                        ));
                    }
                },
            };

        // All feeds at once: one slow server should not add its timeout to the others'.
        let mut tasks = tokio::task::JoinSet::new();
        for (i, source) in selected.iter().enumerate() {
            let feed = source.feed.clone();
            let fetcher = self.fetcher.clone();
            let max_bytes = self.max_bytes;
            tasks.spawn(async move { (i, load(&feed, fetcher, max_bytes).await) });
        }
        let mut bodies: Vec<Result<String, String>> =
            vec![Err("the read did not finish".to_string()); selected.len()];
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, body)) = joined
                && let Some(slot) = bodies.get_mut(i)
            {
                *slot = body;
            }
        }
        let feeds: Vec<Feed> = selected
            .into_iter()
            .zip(bodies)
            .map(|(s, body)| Feed { name: s.name, body })
            .collect();

        let now = Utc::now();
        // Parsing and expansion are CPU work; keep them off the async workers.
        tokio::task::spawn_blocking(move || listing(&feeds, now, days, rrule::Tz::LOCAL))
            .await
            .unwrap_or_else(|e| ToolOutput::error(format!("reading the calendars failed: {e}")))
    }
}
