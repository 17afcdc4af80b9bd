//! The tool's answer: the feeds' events in the window, sorted, as the original's text and as
//! `structuredContent`; and the window and spans those events are measured in.

use super::feed::{Feed, read_feed};
use super::recurrence::FEED_TIME;
use super::zones::localize;
use crate::builtins::ToolOutput;
use chrono::{DateTime, NaiveDate, NaiveTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{Value, json};
use std::time::Duration;

/// Events listed per call; a year of a busy calendar fits, a runaway feed does not flood the
/// model's context.
const MAX_EVENTS: usize = 1000;
/// Characters of each event's description in `structuredContent`.
const MAX_DESCRIPTION: usize = 2000;

/// The tool result for these feeds at `now`, with floating times and the display in `local`
/// (the machine's zone in production; fixed zones in tests).
pub fn listing(feeds: &[Feed], now: DateTime<Utc>, days: i64, local: rrule::Tz) -> ToolOutput {
    listing_within(feeds, now, days, local, FEED_TIME)
}

/// [`listing`], with `time` for each feed's recurring series to expand in (the fuzz targets
/// in `tests/fuzz` spend less than the tool does).
pub fn listing_within(
    feeds: &[Feed],
    now: DateTime<Utc>,
    days: i64,
    local: rrule::Tz,
    time: Duration,
) -> ToolOutput {
    let window = Window {
        from: now,
        to: now + TimeDelta::days(days),
        local,
    };
    let mut events = Vec::new();
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut notes = Vec::new();
    for feed in feeds {
        let parsed = feed
            .body
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|text| read_feed(&feed.name, text, &window, time));
        match parsed {
            Ok((found, feed_notes)) => {
                events.extend(found);
                notes.extend(
                    feed_notes
                        .into_iter()
                        .map(|n| format!("calendar '{}': {n}", feed.name)),
                );
            }
            Err(e) => errors.push((feed.name.clone(), e)),
        }
    }
    events.sort_by(|a, b| {
        let key = |o: &Occurrence| (window.start_of(&o.span), !o.span.all_day());
        key(a).cmp(&key(b)).then_with(|| a.summary.cmp(&b.summary))
    });
    if events.len() > MAX_EVENTS {
        notes.push(format!(
            "{} more events are not shown; ask for fewer days",
            events.len() - MAX_EVENTS
        ));
        events.truncate(MAX_EVENTS);
    }

    let body = if events.is_empty() {
        format!("No events in the next {days} days")
    } else {
        render(&events, days, local)
    };
    let failed_all = !feeds.is_empty() && errors.len() == feeds.len();
    let mut sections = Vec::new();
    if !failed_all {
        sections.push(body);
    }
    if !errors.is_empty() {
        let lines: Vec<String> = errors
            .iter()
            .map(|(name, e)| format!("Could not read calendar '{name}': {e}"))
            .collect();
        sections.push(lines.join("\n"));
    }
    if !notes.is_empty() {
        let lines: Vec<String> = notes.iter().map(|n| format!("Note: {n}")).collect();
        sections.push(lines.join("\n"));
    }
    // Alone, the listing keeps the original's trailing newline; sections get a blank line
    // between them.
    let text = if sections.len() == 1 {
        sections.concat()
    } else {
        sections
            .iter()
            .map(|s| s.trim_end())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let structured = json!({
        "events": events.iter().map(|e| e.to_json(local)).collect::<Vec<_>>(),
        "errors": errors
            .iter()
            .map(|(calendar, error)| json!({"calendar": calendar, "error": error}))
            .collect::<Vec<_>>(),
        "notes": notes,
    });
    ToolOutput {
        text,
        structured: Some(structured),
        is_error: failed_all,
    }
}

/// The original's layout: a heading per local start date, one line per event.
fn render(events: &[Occurrence], days: i64, local: rrule::Tz) -> String {
    let mut out = format!("Events in the next {days} days:\n\n");
    let mut current = None;
    for e in events {
        let day = match e.span {
            Span::Day(start, _) => start,
            Span::Timed(start, _) => start.with_timezone(&local).date_naive(),
        };
        if current != Some(day) {
            current = Some(day);
            out.push_str(&format!("## {}\n", day.format("%A, %B %-d")));
        }
        // A summary with line breaks would break the one-line-per-event layout.
        let summary = one_line(&e.summary);
        match e.span {
            Span::Day(..) => out.push_str(&format!("- [All day] {summary}\n")),
            Span::Timed(start, end) => {
                let s = start.with_timezone(&local).format("%H:%M").to_string();
                if end > start {
                    let t = end.with_timezone(&local).format("%H:%M");
                    out.push_str(&format!("- [{s}-{t}] {summary}\n"));
                } else {
                    out.push_str(&format!("- [{s}] {summary}\n"));
                }
            }
        }
        if !e.location.is_empty() {
            out.push_str(&format!("  Location: {}\n", one_line(&e.location)));
        }
    }
    out
}

pub(super) fn one_line(s: &str) -> String {
    s.split(['\r', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The look-ahead window and the zone floating times and all-day dates live in.
#[derive(Clone, Copy)]
pub(super) struct Window {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    pub(super) local: rrule::Tz,
}

impl Window {
    /// Local midnight starting `date` (all-day events span local days).
    fn midnight(&self, date: NaiveDate) -> DateTime<Utc> {
        localize(self.local, &date.and_time(NaiveTime::MIN)).with_timezone(&Utc)
    }

    fn start_of(&self, span: &Span) -> DateTime<Utc> {
        match *span {
            Span::Day(d, _) => self.midnight(d),
            Span::Timed(s, _) => s,
        }
    }

    fn bounds(&self, span: &Span) -> (DateTime<Utc>, DateTime<Utc>) {
        match *span {
            Span::Day(s, e) => (self.midnight(s), self.midnight(e)),
            Span::Timed(s, e) => (s, e),
        }
    }

    /// Overlaps the window; an instant (no duration) counts when it falls inside it.
    pub(super) fn keeps(&self, span: &Span) -> bool {
        let (start, end) = self.bounds(span);
        start < self.to && (end > self.from || (end <= start && start >= self.from))
    }

    pub(super) fn starts_after(&self, span: &Span) -> bool {
        self.bounds(span).0 >= self.to
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Span {
    /// All day, `[start, end)` in dates.
    Day(NaiveDate, NaiveDate),
    Timed(DateTime<Utc>, DateTime<Utc>),
}

impl Span {
    fn all_day(&self) -> bool {
        matches!(self, Span::Day(..))
    }
}

#[derive(Debug, Clone)]
pub(super) struct Occurrence {
    pub(super) calendar: String,
    pub(super) summary: String,
    pub(super) location: String,
    pub(super) description: String,
    pub(super) span: Span,
}

impl Occurrence {
    fn to_json(&self, local: rrule::Tz) -> Value {
        let (start, end) = match self.span {
            Span::Day(s, e) => (s.to_string(), e.to_string()),
            Span::Timed(s, e) => {
                let f = |t: DateTime<Utc>| {
                    t.with_timezone(&local)
                        .fixed_offset()
                        .to_rfc3339_opts(SecondsFormat::Secs, true)
                };
                (f(s), f(e))
            }
        };
        json!({
            "calendar": self.calendar,
            "summary": self.summary,
            "start": start,
            "end": end,
            "all_day": self.span.all_day(),
            "location": self.location,
            // HTML descriptions from some producers run long; the listing is for reading.
            "description": crate::builtins::cap_chars(&self.description, MAX_DESCRIPTION),
        })
    }
}
