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

use super::net::{Fetcher, HttpRequest};
use super::{BoxFuture, Group, ToolDef, ToolOutput};
use crate::config::{CalendarFeed, CalendarSource, WebSettings};
use chrono::offset::LocalResult;
use chrono::{
    DateTime, NaiveDate, NaiveDateTime, NaiveTime, SecondsFormat, TimeDelta, TimeZone, Utc,
};
use icalendar::parser::{Component, Property};
use rrule::{RRule, RRuleSet, Unvalidated};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::io::AsyncReadExt;

const TOOL: &str = "calendar_read";
const DEFAULT_DAYS: i64 = 7;
const MAX_DAYS: i64 = 366;
/// Recurrence instances looked at per event. A rule that started long ago is expanded from
/// its start, so this bounds the work a pathological feed (e.g. minutely for years) can cost.
const MAX_SCAN: usize = 100_000;
/// Events listed per call; a year of a busy calendar fits, a runaway feed does not flood the
/// model's context.
const MAX_EVENTS: usize = 1000;
/// Characters of each event's description in `structuredContent`.
const MAX_DESCRIPTION: usize = 2000;

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
                return ToolOutput::error(format!("Unknown tool: {tool}"));
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

/// The text of one feed, size-capped.
async fn load(
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
struct Feed {
    name: String,
    body: Result<String, String>,
}

/// The tool result for these feeds at `now`, with floating times and the display in `local`
/// (the machine's zone in production; fixed zones in tests).
fn listing(feeds: &[Feed], now: DateTime<Utc>, days: i64, local: rrule::Tz) -> ToolOutput {
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
            .and_then(|text| read_feed(&feed.name, text, &window));
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

fn one_line(s: &str) -> String {
    s.split(['\r', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The look-ahead window and the zone floating times and all-day dates live in.
#[derive(Clone, Copy)]
struct Window {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    local: rrule::Tz,
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
    fn keeps(&self, span: &Span) -> bool {
        let (start, end) = self.bounds(span);
        start < self.to && (end > self.from || (end <= start && start >= self.from))
    }

    fn starts_after(&self, span: &Span) -> bool {
        self.bounds(span).0 >= self.to
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Span {
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
struct Occurrence {
    calendar: String,
    summary: String,
    location: String,
    description: String,
    span: Span,
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
            "description": super::cap_chars(&self.description, MAX_DESCRIPTION),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

/// A date or date-time as written, before its zone is looked up.
#[derive(Debug, Clone, PartialEq)]
enum Raw {
    Date(NaiveDate),
    Utc(NaiveDateTime),
    /// Wall-clock time in `tzid`, or floating (the user's zone) without one.
    Wall {
        at: NaiveDateTime,
        tzid: Option<String>,
    },
}

#[derive(Debug, Default)]
struct RawEvent {
    uid: Option<String>,
    summary: String,
    location: String,
    description: String,
    start: Option<Raw>,
    end: Option<Raw>,
    duration: Option<TimeDelta>,
    rrule: Option<String>,
    rdates: Vec<Raw>,
    exdates: Vec<Raw>,
    recurrence_id: Option<Raw>,
    cancelled: bool,
}

/// What a `VTIMEZONE` says that helps map it to a real zone.
#[derive(Debug, Default)]
struct VTimezone {
    /// `X-LIC-LOCATION`, an IANA name many producers add.
    location: Option<String>,
    /// The `STANDARD` offset, seconds east of UTC.
    standard: Option<i32>,
    has_daylight: bool,
}

/// The events of one feed that overlap the window, and notes on what was approximated.
fn read_feed(
    calendar: &str,
    text: &str,
    window: &Window,
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
        for span in expand(ev, &skip, &mut zones, window) {
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
    Ok((out, notes))
}

/// Unfolds lines (RFC 5545 §3.1: a line break followed by one space or tab continues the
/// line), normalises line ends and drops blank lines and a BOM, which the parser rejects.
fn normalize(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = String::with_capacity(text.len() + 1);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(rest) = line.strip_prefix([' ', '\t'])
            && !out.is_empty()
        {
            out.push_str(rest);
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out.push('\n');
    out
}

fn props<'c, 'a>(c: &'c Component<'a>, name: &'c str) -> impl Iterator<Item = &'c Property<'a>> {
    c.properties
        .iter()
        .filter(move |p| p.name.as_str().eq_ignore_ascii_case(name))
}

/// The (already unescaped, for TEXT properties) value of the first `name` property.
fn value(c: &Component<'_>, name: &str) -> Option<String> {
    props(c, name).next().map(|p| p.val.as_str().to_string())
}

fn param<'p>(p: &'p Property<'_>, key: &str) -> Option<&'p str> {
    p.params
        .iter()
        .find(|x| x.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|x| x.val.as_ref())
        .map(|v| v.as_str())
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('"')
}

fn raw_event(c: &Component<'_>) -> RawEvent {
    let times = |name: &str| -> Vec<Raw> { props(c, name).flat_map(prop_times).collect() };
    RawEvent {
        uid: value(c, "UID").filter(|u| !u.is_empty()),
        summary: value(c, "SUMMARY").unwrap_or_default(),
        location: value(c, "LOCATION").unwrap_or_default(),
        description: value(c, "DESCRIPTION").unwrap_or_default(),
        start: times("DTSTART").into_iter().next(),
        end: times("DTEND").into_iter().next(),
        duration: value(c, "DURATION").and_then(|d| parse_duration(&d)),
        rrule: value(c, "RRULE"),
        rdates: times("RDATE"),
        exdates: times("EXDATE"),
        recurrence_id: times("RECURRENCE-ID").into_iter().next(),
        cancelled: value(c, "STATUS").is_some_and(|s| s.trim().eq_ignore_ascii_case("CANCELLED")),
    }
}

/// The values of a date/date-time property (`EXDATE` and `RDATE` may list several).
fn prop_times(p: &Property<'_>) -> Vec<Raw> {
    let kind = param(p, "VALUE").map(str::to_ascii_uppercase);
    let date_only = kind.as_deref() == Some("DATE");
    let tzid = param(p, "TZID").map(|t| unquote(t).to_string());
    p.val
        .as_str()
        .split(',')
        // A PERIOD (`start/end` or `start/duration`) contributes its start.
        .filter_map(|v| v.split('/').next())
        .filter_map(|v| parse_time(v, date_only, tzid.as_deref()))
        .collect()
}

/// `YYYYMMDD`, `YYYYMMDDTHHMMSS[Z]`, and the dashed ISO forms some producers write.
fn parse_time(v: &str, date_only: bool, tzid: Option<&str>) -> Option<Raw> {
    let compact: String = v
        .trim()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let (body, utc) = match compact.strip_suffix(['Z', 'z']) {
        Some(b) => (b, true),
        None => (compact.as_str(), false),
    };
    if date_only || body.len() == 8 {
        return NaiveDate::parse_from_str(body.get(..8)?, "%Y%m%d")
            .ok()
            .map(Raw::Date);
    }
    // Fractional seconds carry nothing a calendar listing needs.
    let body = body.split(['.', ',']).next().unwrap_or(body);
    let at = NaiveDateTime::parse_from_str(body, "%Y%m%dT%H%M%S")
        .or_else(|_| NaiveDateTime::parse_from_str(body, "%Y%m%dT%H%M"))
        .ok()?;
    Some(if utc {
        Raw::Utc(at)
    } else {
        Raw::Wall {
            at,
            tzid: tzid.map(str::to_string),
        }
    })
}

/// RFC 5545 §3.3.6 durations: `[+|-]P[nW][nD][T[nH][nM][nS]]`.
fn parse_duration(s: &str) -> Option<TimeDelta> {
    let s = s.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let s = s.strip_prefix(['P', 'p'])?;
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut in_time = false;
    let mut any = false;
    for c in s.chars() {
        let unit: i64 = match (c.to_ascii_uppercase(), in_time) {
            ('0'..='9', _) => {
                digits.push(c);
                continue;
            }
            ('T', false) if digits.is_empty() => {
                in_time = true;
                continue;
            }
            ('W', false) => 7 * 86_400,
            ('D', false) => 86_400,
            ('H', true) => 3600,
            ('M', true) => 60,
            ('S', true) => 1,
            _ => return None,
        };
        let n: i64 = digits.parse().ok()?;
        digits.clear();
        total = total.checked_add(n.checked_mul(unit)?)?;
        any = true;
    }
    if !any || !digits.is_empty() {
        return None;
    }
    TimeDelta::try_seconds(if negative { -total } else { total })
}

fn vtimezone(c: &Component<'_>) -> VTimezone {
    let offset = |sub: &Component<'_>| value(sub, "TZOFFSETTO").and_then(|o| parse_offset(&o));
    let mut tz = VTimezone {
        location: value(c, "X-LIC-LOCATION").map(|l| unquote(&l).to_string()),
        ..VTimezone::default()
    };
    for sub in &c.components {
        match sub.name.as_str().to_ascii_uppercase().as_str() {
            "STANDARD" => tz.standard = tz.standard.or_else(|| offset(sub)),
            "DAYLIGHT" => tz.has_daylight = true,
            _ => {}
        }
    }
    tz
}

/// `+0100`, `-0500`, `+053000` → seconds east of UTC.
fn parse_offset(s: &str) -> Option<i32> {
    let s = s.trim();
    let (sign, digits) = match s.split_at_checked(1)? {
        ("+", d) => (1, d),
        ("-", d) => (-1, d),
        _ => return None,
    };
    if !(digits.len() == 4 || digits.len() == 6) || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| digits.get(r).and_then(|x| x.parse::<i32>().ok());
    let secs = n(0..2)? * 3600 + n(2..4)? * 60 + if digits.len() == 6 { n(4..6)? } else { 0 };
    Some(sign * secs)
}

// ---------------------------------------------------------------------------------------
// Time zones

/// A resolved date or instant.
#[derive(Debug, Clone, Copy)]
enum Moment {
    Date(NaiveDate),
    Time(DateTime<rrule::Tz>),
}

/// Looks up `TZID`s once per feed and remembers what had to be approximated.
struct Zones<'d> {
    local: rrule::Tz,
    defs: &'d HashMap<String, VTimezone>,
    cache: HashMap<String, rrule::Tz>,
    notes: Vec<String>,
}

impl<'d> Zones<'d> {
    fn new(local: rrule::Tz, defs: &'d HashMap<String, VTimezone>) -> Zones<'d> {
        Zones {
            local,
            defs,
            cache: HashMap::new(),
            notes: Vec::new(),
        }
    }

    fn zone(&mut self, tzid: &str) -> rrule::Tz {
        if let Some(z) = self.cache.get(tzid) {
            return *z;
        }
        let (z, note) = resolve_tzid(tzid, self.defs);
        self.notes.extend(note);
        self.cache.insert(tzid.to_string(), z);
        z
    }

    fn moment(&mut self, raw: &Raw) -> Moment {
        match raw {
            Raw::Date(d) => Moment::Date(*d),
            Raw::Utc(at) => Moment::Time(rrule::Tz::UTC.from_utc_datetime(at)),
            Raw::Wall { at, tzid } => {
                let tz = match tzid {
                    Some(id) => self.zone(id),
                    None => self.local,
                };
                Moment::Time(localize(tz, at))
            }
        }
    }
}

/// Wall-clock time in `tz`. An ambiguous time (clocks going back) is the first of the two; a
/// time in a gap (clocks going forward) moves forward by the gap, as RFC 5545 §3.3.5 says.
fn localize(tz: rrule::Tz, at: &NaiveDateTime) -> DateTime<rrule::Tz> {
    use chrono::Offset;
    match tz.from_local_datetime(at) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t,
        LocalResult::None => {
            // The offset in force before the gap (a day earlier is safely before it).
            let before = tz
                .offset_from_utc_datetime(&(*at - TimeDelta::days(1)))
                .fix()
                .local_minus_utc();
            tz.from_utc_datetime(&(*at - TimeDelta::seconds(i64::from(before))))
        }
    }
}

/// The zone a `TZID` names, and a note when it had to be guessed.
fn resolve_tzid(tzid: &str, defs: &HashMap<String, VTimezone>) -> (rrule::Tz, Option<String>) {
    let name = unquote(tzid);
    let def = defs.get(name).or_else(|| defs.get(tzid));
    let known = iana(name)
        .or_else(|| def.and_then(|d| d.location.as_deref()).and_then(iana))
        .or_else(|| windows_zone(name))
        .or_else(|| city_zone(name));
    if let Some(z) = known {
        return (rrule::Tz::Tz(z), None);
    }
    if let Some(d) = def
        && let Some(z) = d.standard.and_then(etc_zone)
    {
        let note = d.has_daylight.then(|| {
            format!(
                "time zone '{name}' is not a known zone; its times were read at its standard \
                 offset ({}), without daylight saving time",
                z.name()
            )
        });
        return (rrule::Tz::Tz(z), note);
    }
    (
        rrule::Tz::UTC,
        Some(format!(
            "time zone '{name}' is not known; its times were read as UTC"
        )),
    )
}

/// An IANA name, case-insensitively, also behind a vendor prefix
/// (`/mozilla.org/20050126_1/America/New_York`, `/citadel.org/…/Europe/Berlin`).
fn iana(name: &str) -> Option<chrono_tz::Tz> {
    let exact = |n: &str| -> Option<chrono_tz::Tz> {
        n.parse::<chrono_tz::Tz>().ok().or_else(|| {
            chrono_tz::TZ_VARIANTS
                .iter()
                .find(|z| z.name().eq_ignore_ascii_case(n))
                .copied()
        })
    };
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    if let Some(z) = exact(name) {
        return Some(z);
    }
    let mut rest = name;
    while let Some(i) = rest.find('/') {
        rest = &rest[i + 1..];
        // Only multi-part suffixes (`Europe/Berlin`) or the bare UTC names: a lone city
        // segment of a made-up path is too weak a hint.
        if (rest.contains('/') || rest.eq_ignore_ascii_case("UTC"))
            && let Some(z) = exact(rest)
        {
            return Some(z);
        }
    }
    None
}

/// A whole-hour offset as an `Etc/GMT±N` zone (whose sign is inverted by POSIX convention).
fn etc_zone(offset: i32) -> Option<chrono_tz::Tz> {
    if offset % 3600 != 0 {
        return None;
    }
    let hours = offset / 3600;
    let name = if hours == 0 {
        "Etc/UTC".to_string()
    } else {
        format!("Etc/GMT{:+}", -hours)
    };
    name.parse().ok()
}

/// Windows zone names (Outlook, Exchange) and Outlook's display names, per CLDR's
/// windowsZones table (territory 001); the common ones, not all.
const WINDOWS_ZONES: &[(&str, &str)] = &[
    ("Dateline Standard Time", "Etc/GMT+12"),
    ("UTC-11", "Etc/GMT+11"),
    ("Hawaiian Standard Time", "Pacific/Honolulu"),
    ("Alaskan Standard Time", "America/Anchorage"),
    ("Pacific Standard Time (Mexico)", "America/Tijuana"),
    ("Pacific Standard Time", "America/Los_Angeles"),
    ("US Mountain Standard Time", "America/Phoenix"),
    ("Mountain Standard Time (Mexico)", "America/Mazatlan"),
    ("Mountain Standard Time", "America/Denver"),
    ("Central America Standard Time", "America/Guatemala"),
    ("Central Standard Time (Mexico)", "America/Mexico_City"),
    ("Central Standard Time", "America/Chicago"),
    ("Canada Central Standard Time", "America/Regina"),
    ("SA Pacific Standard Time", "America/Bogota"),
    ("Eastern Standard Time (Mexico)", "America/Cancun"),
    ("Eastern Standard Time", "America/New_York"),
    ("US Eastern Standard Time", "America/Indiana/Indianapolis"),
    ("Venezuela Standard Time", "America/Caracas"),
    ("Atlantic Standard Time", "America/Halifax"),
    ("SA Western Standard Time", "America/La_Paz"),
    ("Pacific SA Standard Time", "America/Santiago"),
    ("Newfoundland Standard Time", "America/St_Johns"),
    ("E. South America Standard Time", "America/Sao_Paulo"),
    ("Argentina Standard Time", "America/Argentina/Buenos_Aires"),
    ("SA Eastern Standard Time", "America/Cayenne"),
    ("Greenland Standard Time", "America/Nuuk"),
    ("UTC-02", "Etc/GMT+2"),
    ("Azores Standard Time", "Atlantic/Azores"),
    ("Cape Verde Standard Time", "Atlantic/Cape_Verde"),
    ("UTC", "Etc/UTC"),
    ("Coordinated Universal Time", "Etc/UTC"),
    ("GMT Standard Time", "Europe/London"),
    ("Greenwich Standard Time", "Atlantic/Reykjavik"),
    ("Morocco Standard Time", "Africa/Casablanca"),
    ("W. Europe Standard Time", "Europe/Berlin"),
    ("Central Europe Standard Time", "Europe/Budapest"),
    ("Romance Standard Time", "Europe/Paris"),
    ("Central European Standard Time", "Europe/Warsaw"),
    ("W. Central Africa Standard Time", "Africa/Lagos"),
    ("GTB Standard Time", "Europe/Bucharest"),
    ("E. Europe Standard Time", "Europe/Chisinau"),
    ("Egypt Standard Time", "Africa/Cairo"),
    ("FLE Standard Time", "Europe/Kyiv"),
    ("Israel Standard Time", "Asia/Jerusalem"),
    ("South Africa Standard Time", "Africa/Johannesburg"),
    ("Turkey Standard Time", "Europe/Istanbul"),
    ("Arabic Standard Time", "Asia/Baghdad"),
    ("Arab Standard Time", "Asia/Riyadh"),
    ("Russian Standard Time", "Europe/Moscow"),
    ("E. Africa Standard Time", "Africa/Nairobi"),
    ("Iran Standard Time", "Asia/Tehran"),
    ("Arabian Standard Time", "Asia/Dubai"),
    ("Afghanistan Standard Time", "Asia/Kabul"),
    ("Pakistan Standard Time", "Asia/Karachi"),
    ("West Asia Standard Time", "Asia/Tashkent"),
    ("India Standard Time", "Asia/Kolkata"),
    ("Sri Lanka Standard Time", "Asia/Colombo"),
    ("Nepal Standard Time", "Asia/Kathmandu"),
    ("Central Asia Standard Time", "Asia/Almaty"),
    ("Bangladesh Standard Time", "Asia/Dhaka"),
    ("Myanmar Standard Time", "Asia/Yangon"),
    ("SE Asia Standard Time", "Asia/Bangkok"),
    ("China Standard Time", "Asia/Shanghai"),
    ("Singapore Standard Time", "Asia/Singapore"),
    ("Taipei Standard Time", "Asia/Taipei"),
    ("W. Australia Standard Time", "Australia/Perth"),
    ("Korea Standard Time", "Asia/Seoul"),
    ("Tokyo Standard Time", "Asia/Tokyo"),
    ("Cen. Australia Standard Time", "Australia/Adelaide"),
    ("AUS Central Standard Time", "Australia/Darwin"),
    ("E. Australia Standard Time", "Australia/Brisbane"),
    ("AUS Eastern Standard Time", "Australia/Sydney"),
    ("Tasmania Standard Time", "Australia/Hobart"),
    ("West Pacific Standard Time", "Pacific/Port_Moresby"),
    ("New Zealand Standard Time", "Pacific/Auckland"),
    ("UTC+12", "Etc/GMT-12"),
    ("Tonga Standard Time", "Pacific/Tongatapu"),
    ("Samoa Standard Time", "Pacific/Apia"),
    // Outlook display names without a city in them.
    ("Eastern Time (US & Canada)", "America/New_York"),
    ("Central Time (US & Canada)", "America/Chicago"),
    ("Mountain Time (US & Canada)", "America/Denver"),
    ("Pacific Time (US & Canada)", "America/Los_Angeles"),
];

fn windows_zone(name: &str) -> Option<chrono_tz::Tz> {
    let name = name.trim();
    // Outlook writes "(UTC-05:00) Eastern Time (US & Canada)": drop the offset prefix.
    let bare = match name.strip_prefix('(').and_then(|r| r.split_once(')')) {
        Some((_, rest)) => rest.trim(),
        None => name,
    };
    WINDOWS_ZONES
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(name) || w.eq_ignore_ascii_case(bare))
        .and_then(|(_, z)| z.parse().ok())
}

/// Outlook display names list cities: "(UTC+01:00) Amsterdam, Berlin, Bern, Rome, …".
/// The first city that is an IANA zone's city names the zone.
fn city_zone(name: &str) -> Option<chrono_tz::Tz> {
    let rest = match name
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.split_once(')'))
    {
        Some((_, rest)) => rest,
        None => return None,
    };
    rest.split([',', '/'])
        .map(|c| c.trim().replace(' ', "_"))
        .filter(|c| c.len() > 2)
        .find_map(|city| {
            chrono_tz::TZ_VARIANTS
                .iter()
                .find(|z| {
                    z.name().contains('/')
                        && z.name()
                            .rsplit('/')
                            .next()
                            .is_some_and(|last| last.eq_ignore_ascii_case(&city))
                })
                .copied()
        })
}

// ---------------------------------------------------------------------------------------
// Recurrence

/// Instances a series leaves out: `EXDATE`s and the ones overrides replace.
#[derive(Debug, Default, Clone)]
struct Exclusions {
    instants: HashSet<i64>,
    days: HashSet<NaiveDate>,
}

impl Exclusions {
    fn add(&mut self, m: &Moment) {
        match m {
            Moment::Date(d) => {
                self.days.insert(*d);
            }
            Moment::Time(t) => {
                self.instants.insert(t.timestamp());
            }
        }
    }

    fn merge(&mut self, other: &Exclusions) {
        self.instants.extend(&other.instants);
        self.days.extend(&other.days);
    }

    /// A timed instance is matched by its instant, or by its date in the event's zone when
    /// the exclusion was written as a date; an all-day one by its date (or by midnight UTC,
    /// how some producers write it).
    fn covers(&self, occ: &DateTime<rrule::Tz>) -> bool {
        self.instants.contains(&occ.timestamp()) || self.days.contains(&occ.date_naive())
    }
}

/// The spans of an event's instances that overlap the window.
fn expand(ev: &RawEvent, skip: &Exclusions, zones: &mut Zones, window: &Window) -> Vec<Span> {
    let Some(start_raw) = &ev.start else {
        return Vec::new();
    };
    let start = zones.moment(start_raw);
    let end = ev.end.as_ref().map(|r| zones.moment(r));
    let recurring = ev.rrule.is_some() || !ev.rdates.is_empty();

    // Each instance is a DateTime in the event's own zone, so the rule steps in wall-clock
    // time (a weekly 09:00 stays 09:00 across daylight-saving changes). All-day series run
    // in UTC at midnight and are turned back into dates.
    let (dtstart, all_day) = match start {
        Moment::Date(d) => (
            rrule::Tz::UTC.from_utc_datetime(&d.and_time(NaiveTime::MIN)),
            true,
        ),
        Moment::Time(t) => (t, false),
    };
    let span_of = |occ: &DateTime<rrule::Tz>| -> Span {
        match start {
            Moment::Date(d) => {
                let len = match end {
                    Some(Moment::Date(e)) if e > d => (e - d).num_days(),
                    Some(Moment::Time(e)) if e.date_naive() > d => (e.date_naive() - d).num_days(),
                    _ => ev
                        .duration
                        .map(|x| (x.num_seconds() + 86_399) / 86_400)
                        .filter(|n| *n > 0)
                        .unwrap_or(1),
                };
                let s = occ.date_naive();
                Span::Day(s, s + TimeDelta::days(len))
            }
            Moment::Time(t) => {
                let len = match end {
                    Some(Moment::Time(e)) if e >= t => {
                        e.with_timezone(&Utc) - t.with_timezone(&Utc)
                    }
                    _ => ev
                        .duration
                        .filter(|x| *x >= TimeDelta::zero())
                        .unwrap_or_default(),
                };
                let s = occ.with_timezone(&Utc);
                Span::Timed(s, s + len)
            }
        }
    };

    if !recurring {
        let span = span_of(&dtstart);
        return if window.keeps(&span) && !skip.covers(&dtstart) {
            vec![span]
        } else {
            Vec::new()
        };
    }

    let zone = dtstart.timezone();
    let mut set = RRuleSet::new(dtstart).limit();
    if let Some(text) = &ev.rrule {
        match rule(text, dtstart, all_day) {
            Ok(r) => set = set.rrule(r),
            Err(e) => zones.notes.push(format!(
                "the recurrence of '{}' could not be read ({e}); only its first date is shown",
                one_line(&ev.summary)
            )),
        }
    }
    // DTSTART is always the first instance (RFC 5545 §3.8.5.3), even when the rule would not
    // produce it; duplicates are dropped below.
    set = set.rdate(dtstart);
    for r in &ev.rdates {
        let extra = match zones.moment(r) {
            Moment::Date(d) if all_day => {
                Some(rrule::Tz::UTC.from_utc_datetime(&d.and_time(NaiveTime::MIN)))
            }
            Moment::Date(d) => {
                // A date in a timed series: that day at the series' time of day.
                Some(localize(zone, &d.and_time(dtstart.time())))
            }
            Moment::Time(t) if all_day => {
                Some(rrule::Tz::UTC.from_utc_datetime(&t.date_naive().and_time(NaiveTime::MIN)))
            }
            Moment::Time(t) => Some(t.with_timezone(&zone)),
        };
        if let Some(x) = extra {
            set = set.rdate(x);
        }
    }

    let mut out = Vec::new();
    let mut last: Option<i64> = None;
    let mut scanned = 0usize;
    for occ in &set {
        scanned += 1;
        if scanned > MAX_SCAN {
            zones.notes.push(format!(
                "'{}' repeats too often to expand fully; later instances may be missing",
                one_line(&ev.summary)
            ));
            break;
        }
        if last == Some(occ.timestamp()) {
            continue;
        }
        last = Some(occ.timestamp());
        let span = span_of(&occ);
        if window.starts_after(&span) {
            break;
        }
        if window.keeps(&span) && !skip.covers(&occ) {
            out.push(span);
        }
    }
    out
}

/// The `RRULE` value for this start. `UNTIL` is read here rather than by the rrule crate,
/// which insists on UTC for zoned starts, while feeds also write it as a local time or a
/// bare date.
fn rule(text: &str, dtstart: DateTime<rrule::Tz>, all_day: bool) -> Result<RRule, String> {
    let zone = dtstart.timezone();
    let mut until = None;
    let mut parts = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("UNTIL") => until = Some(v.trim()),
            _ => parts.push(part),
        }
    }
    let mut r: RRule<Unvalidated> = parts.join(";").parse().map_err(|e| format!("{e}"))?;
    if let Some(u) = until {
        let bad = || format!("unreadable UNTIL {u:?}");
        let instant = match parse_time(u, false, None).ok_or_else(bad)? {
            Raw::Utc(at) => at.and_utc(),
            Raw::Wall { at, .. } if all_day => at.date().and_time(NaiveTime::MIN).and_utc(),
            Raw::Wall { at, .. } => localize(zone, &at).with_timezone(&Utc),
            Raw::Date(d) if all_day => d.and_time(NaiveTime::MIN).and_utc(),
            // A bare date bounds a timed series inclusively: through the end of that day.
            Raw::Date(d) => {
                let last = d.and_hms_opt(23, 59, 59).ok_or_else(bad)?;
                localize(zone, &last).with_timezone(&Utc)
            }
        };
        r = r.until(rrule::Tz::UTC.from_utc_datetime(&instant.naive_utc()));
    }
    r.validate(dtstart).map_err(|e| format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, Weekday};

    const NY: chrono_tz::Tz = chrono_tz::America::New_York;
    const BERLIN: chrono_tz::Tz = chrono_tz::Europe::Berlin;
    /// The display zone in most tests: +05:30 all year, so conversions are visible and no
    /// daylight-saving change can shift an expected line.
    const KOLKATA: chrono_tz::Tz = chrono_tz::Asia::Kolkata;

    fn local() -> rrule::Tz {
        rrule::Tz::Tz(KOLKATA)
    }

    fn feed(name: &str, text: &str) -> Feed {
        Feed {
            name: name.into(),
            body: Ok(text.into()),
        }
    }

    fn ics(events: &[String]) -> String {
        let mut s = String::from("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n");
        for e in events {
            s.push_str("BEGIN:VEVENT\r\n");
            s.push_str(e);
            s.push_str("END:VEVENT\r\n");
        }
        s.push_str("END:VCALENDAR\r\n");
        s
    }

    fn stamp(t: NaiveDateTime) -> String {
        t.format("%Y%m%dT%H%M%S").to_string()
    }

    fn events(out: &ToolOutput) -> Vec<Value> {
        out.structured.as_ref().unwrap()["events"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn utc(v: &Value) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc)
    }

    fn find<'v>(evs: &'v [Value], summary: &str) -> Vec<&'v Value> {
        evs.iter().filter(|e| e["summary"] == summary).collect()
    }

    /// The calendar of the issue, generated relative to `now`: two zones, a weekly series
    /// with an EXDATE crossing the window, all-day, floating, outside the window, folding and
    /// escapes.
    struct Fixture {
        text: String,
        ny_start: DateTime<Utc>,
        berlin_start: DateTime<Utc>,
        weekly: Vec<DateTime<Utc>>,
        all_day: NaiveDate,
        floating: DateTime<Utc>,
    }

    fn fixture(now: DateTime<Utc>) -> Fixture {
        let today = now.date_naive();
        let day = |n: i64| today + TimeDelta::days(n);
        let at = |d: NaiveDate, h: u32, m: u32| d.and_hms_opt(h, m, 0).unwrap();
        let ny_wall = at(day(1), 9, 0);
        let berlin_wall = at(day(2), 14, 30);
        // Weekly at 18:00 Berlin from 13 days ago (days -13, -6, 1, 8, 15, … ten times):
        // it crosses the window, and its instance on day 8 is excluded.
        let weekly_first = at(day(-13), 18, 0);
        let excluded = at(day(8), 18, 0);
        let floating_wall = at(day(3), 7, 15);
        let s = |t: NaiveDateTime| stamp(t);
        let text = ics(&[
            format!(
                "UID:ny@test\r\nDTSTAMP:20250101T000000Z\r\nDTSTART;TZID=America/New_York:{}\r\nDTEND;TZID=America/New_York:{}\r\nSUMMARY:Standup\\, New York\r\nLOCATION:Room 1\\; 5th floor\r\nDESCRIPTION:Line one\\nLine two\r\n",
                s(ny_wall),
                s(ny_wall + TimeDelta::minutes(30))
            ),
            format!(
                "UID:berlin@test\r\nDTSTART;TZID=\"Europe/Berlin\":{}\r\nDURATION:PT1H30M\r\nSUMMARY:Berlin review with a summary long enough that it has to be folded acr\r\n oss two lines\r\n",
                s(berlin_wall)
            ),
            format!(
                "UID:weekly@test\r\nDTSTART;TZID=Europe/Berlin:{}\r\nDTEND;TZID=Europe/Berlin:{}\r\nRRULE:FREQ=WEEKLY;COUNT=10\r\nEXDATE;TZID=Europe/Berlin:{}\r\nSUMMARY:Weekly sync\r\n",
                s(weekly_first),
                s(weekly_first + TimeDelta::hours(1)),
                s(excluded)
            ),
            format!(
                "UID:allday@test\r\nDTSTART;VALUE=DATE:{}\r\nDTEND;VALUE=DATE:{}\r\nSUMMARY:Holiday\r\n",
                day(4).format("%Y%m%d"),
                day(5).format("%Y%m%d")
            ),
            format!(
                "UID:floating@test\r\nDTSTART:{}\r\nDTEND:{}\r\nSUMMARY:Floating breakfast\r\n",
                s(floating_wall),
                s(floating_wall + TimeDelta::minutes(45))
            ),
            format!(
                "UID:far@test\r\nDTSTART:{}Z\r\nDTEND:{}Z\r\nSUMMARY:Far away\r\n",
                s(at(day(40), 10, 0)),
                s(at(day(40), 11, 0))
            ),
            format!(
                "UID:past@test\r\nDTSTART:{}Z\r\nDTEND:{}Z\r\nSUMMARY:Already over\r\n",
                s(at(day(-3), 10, 0)),
                s(at(day(-3), 11, 0))
            ),
        ]);
        let berlin = |t: NaiveDateTime| BERLIN.from_local_datetime(&t).unwrap().to_utc();
        Fixture {
            text,
            ny_start: NY.from_local_datetime(&ny_wall).unwrap().to_utc(),
            berlin_start: berlin(berlin_wall),
            weekly: (0..10)
                .map(|k| berlin(weekly_first + TimeDelta::days(7 * k)))
                .collect(),
            all_day: day(4),
            floating: KOLKATA
                .from_local_datetime(&floating_wall)
                .unwrap()
                .to_utc(),
        }
    }

    #[test]
    fn events_relative_to_now_in_two_zones_with_a_weekly_series() {
        // Mid-morning UTC so the fixture's wall times are all in the future of "now".
        let now = Utc::now()
            .date_naive()
            .and_hms_opt(6, 0, 0)
            .unwrap()
            .and_utc();
        let f = fixture(now);
        let out = listing(&[feed("work", &f.text)], now, 7, local());
        assert!(!out.is_error, "{}", out.text);
        let evs = events(&out);

        let ny = find(&evs, "Standup, New York");
        assert_eq!(ny.len(), 1, "{evs:?}");
        assert_eq!(utc(&ny[0]["start"]), f.ny_start);
        assert_eq!(utc(&ny[0]["end"]), f.ny_start + TimeDelta::minutes(30));
        // Not the naive reading (the wall time taken as UTC) the original made.
        assert_ne!(
            f.ny_start.naive_utc(),
            f.ny_start.with_timezone(&NY).naive_local()
        );
        assert_eq!(ny[0]["location"], "Room 1; 5th floor");
        assert_eq!(ny[0]["description"], "Line one\nLine two");
        assert_eq!(ny[0]["calendar"], "work");
        assert_eq!(ny[0]["all_day"], false);

        let b = find(
            &evs,
            "Berlin review with a summary long enough that it has to be folded across two lines",
        );
        assert_eq!(b.len(), 1, "{evs:?}");
        assert_eq!(utc(&b[0]["start"]), f.berlin_start);
        assert_eq!(utc(&b[0]["end"]), f.berlin_start + TimeDelta::minutes(90));

        let weekly: Vec<DateTime<Utc>> = find(&evs, "Weekly sync")
            .iter()
            .map(|e| utc(&e["start"]))
            .collect();
        let want: Vec<DateTime<Utc>> = f
            .weekly
            .iter()
            .copied()
            .filter(|t| *t >= now && *t < now + TimeDelta::days(7))
            .filter(|t| *t != f.weekly[3])
            .collect();
        assert_eq!(weekly, want);
        assert_eq!(weekly, vec![f.weekly[2]], "day 1 only");

        let holiday = find(&evs, "Holiday");
        assert_eq!(holiday.len(), 1);
        assert_eq!(holiday[0]["all_day"], true);
        assert_eq!(holiday[0]["start"], f.all_day.to_string());
        assert_eq!(
            holiday[0]["end"],
            (f.all_day + TimeDelta::days(1)).to_string()
        );

        let fl = find(&evs, "Floating breakfast");
        assert_eq!(utc(&fl[0]["start"]), f.floating);

        assert!(find(&evs, "Far away").is_empty());
        assert!(find(&evs, "Already over").is_empty());

        // Sorted by start.
        let starts: Vec<DateTime<Utc>> = evs
            .iter()
            .map(|e| match e["all_day"].as_bool().unwrap() {
                true => KOLKATA
                    .from_local_datetime(
                        &NaiveDate::parse_from_str(e["start"].as_str().unwrap(), "%Y-%m-%d")
                            .unwrap()
                            .and_time(NaiveTime::MIN),
                    )
                    .unwrap()
                    .to_utc(),
                false => utc(&e["start"]),
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
        assert_eq!(evs.len(), 5, "{}", out.text);

        // Longer windows: day 8 stays excluded; COUNT=10 ends the series on day 50.
        let weekly = |days: i64| -> Vec<DateTime<Utc>> {
            let out = listing(&[feed("work", &f.text)], now, days, local());
            find(&events(&out), "Weekly sync")
                .iter()
                .map(|e| utc(&e["start"]))
                .collect()
        };
        assert_eq!(weekly(14), vec![f.weekly[2]]);
        assert_eq!(weekly(21), vec![f.weekly[2], f.weekly[4]]);
        let mut all = f.weekly[2..].to_vec();
        all.remove(1);
        assert_eq!(weekly(366), all);
    }

    #[test]
    fn text_format_in_the_local_zone() {
        let now = Utc::now()
            .date_naive()
            .and_hms_opt(6, 0, 0)
            .unwrap()
            .and_utc();
        let f = fixture(now);
        let out = listing(&[feed("work", &f.text)], now, 7, local());
        let hm = |t: DateTime<Utc>| t.with_timezone(&KOLKATA).format("%H:%M").to_string();
        let heading =
            |t: DateTime<Utc>| format!("## {}", t.with_timezone(&KOLKATA).format("%A, %B %-d"));
        let mut lines: Vec<(DateTime<Utc>, String)> = vec![
            (
                f.ny_start,
                format!(
                    "- [{}-{}] Standup, New York\n  Location: Room 1; 5th floor",
                    hm(f.ny_start),
                    hm(f.ny_start + TimeDelta::minutes(30))
                ),
            ),
            (
                f.berlin_start,
                format!(
                    "- [{}-{}] Berlin review with a summary long enough that it has to be folded across two lines",
                    hm(f.berlin_start),
                    hm(f.berlin_start + TimeDelta::minutes(90))
                ),
            ),
            (f.floating, "- [07:15-08:00] Floating breakfast".to_string()),
            (
                f.weekly[2],
                format!(
                    "- [{}-{}] Weekly sync",
                    hm(f.weekly[2]),
                    hm(f.weekly[2] + TimeDelta::hours(1))
                ),
            ),
            (
                KOLKATA
                    .from_local_datetime(&f.all_day.and_time(NaiveTime::MIN))
                    .unwrap()
                    .to_utc(),
                "- [All day] Holiday".to_string(),
            ),
        ];
        lines.sort_by_key(|(t, _)| *t);
        let mut want = "Events in the next 7 days:\n\n".to_string();
        let mut last = String::new();
        for (t, line) in lines {
            let h = heading(t);
            if h != last {
                want.push_str(&h);
                want.push('\n');
                last = h;
            }
            want.push_str(&line);
            want.push('\n');
        }
        assert_eq!(out.text, want);
        assert!(out.text.starts_with("Events in the next 7 days:\n\n## "));
    }

    #[test]
    fn fixed_now_across_a_daylight_saving_change() {
        // 2025-03-09 is the US spring-forward; Berlin changes on 2025-03-30.
        let now = Utc.with_ymd_and_hms(2025, 3, 5, 12, 0, 0).unwrap();
        let text = ics(&[
            "UID:w\r\nDTSTART;TZID=America/New_York:20250226T090000\r\nDTEND;TZID=America/New_York:20250226T100000\r\nRRULE:FREQ=WEEKLY;UNTIL=20250320T000000Z\r\nEXDATE;TZID=America/New_York:20250312T090000\r\nSUMMARY:NY weekly\r\n".to_string(),
            // Moved instance of the series (RECURRENCE-ID override).
            "UID:d\r\nDTSTART;TZID=Europe/Berlin:20250303T080000\r\nDURATION:PT30M\r\nRRULE:FREQ=DAILY;COUNT=5\r\nSUMMARY:Berlin daily\r\n".to_string(),
            "UID:d\r\nRECURRENCE-ID;TZID=Europe/Berlin:20250306T080000\r\nDTSTART;TZID=Europe/Berlin:20250306T110000\r\nDTEND;TZID=Europe/Berlin:20250306T113000\r\nSUMMARY:Berlin daily (moved)\r\n".to_string(),
            "UID:d\r\nRECURRENCE-ID;TZID=Europe/Berlin:20250307T080000\r\nDTSTART;TZID=Europe/Berlin:20250307T080000\r\nSTATUS:CANCELLED\r\nSUMMARY:Berlin daily\r\n".to_string(),
        ]);
        let out = listing(&[feed("c", &text)], now, 15, rrule::Tz::UTC);
        let evs = events(&out);
        let starts = |s: &str| -> Vec<DateTime<Utc>> {
            find(&evs, s).iter().map(|e| utc(&e["start"])).collect()
        };
        let u = |d, h, m| Utc.with_ymd_and_hms(2025, 3, d, h, m, 0).unwrap();
        // 09:00 EST = 14:00 UTC on the 5th, then 09:00 EDT = 13:00 UTC on the 19th; the
        // 12th is excluded; UNTIL (the 20th) ends the series before the 26th.
        assert_eq!(starts("NY weekly"), vec![u(5, 14, 0), u(19, 13, 0)]);
        // Berlin daily 08:00 CET = 07:00 UTC on the 3rd..7th: before now (5th 12:00) only
        // the 6th and 7th could show; the 6th moved to 10:00 UTC, the 7th is cancelled.
        assert_eq!(starts("Berlin daily"), Vec::<DateTime<Utc>>::new());
        assert_eq!(starts("Berlin daily (moved)"), vec![u(6, 10, 0)]);
        assert!(
            out.text
                .contains("## Wednesday, March 5\n- [14:00-15:00] NY weekly\n"),
            "{}",
            out.text
        );
        assert!(
            out.text
                .contains("## Wednesday, March 19\n- [13:00-14:00] NY weekly\n"),
            "{}",
            out.text
        );
    }

    #[test]
    fn recurring_all_day_and_floating_series() {
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 3, 0, 0).unwrap(); // a Monday
        let text = ics(&[
            "UID:a\r\nDTSTART;VALUE=DATE:20250101\r\nRRULE:FREQ=MONTHLY;BYMONTHDAY=3;UNTIL=20251231\r\nEXDATE;VALUE=DATE:20250703\r\nSUMMARY:Rent\r\n".to_string(),
            "UID:f\r\nDTSTART:20250526T073000\r\nDTEND:20250526T080000\r\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE\r\nSUMMARY:Gym\r\n".to_string(),
            "UID:r\r\nDTSTART:20250601T120000Z\r\nRDATE:20250604T120000Z,20250605T120000Z\r\nSUMMARY:Extra\r\n".to_string(),
        ]);
        let out = listing(&[feed("c", &text)], now, 45, local());
        let evs = events(&out);
        let rent: Vec<&str> = find(&evs, "Rent")
            .iter()
            .map(|e| e["start"].as_str().unwrap())
            .collect();
        assert_eq!(rent, vec!["2025-06-03"]); // July 3rd is excluded
        let gym: Vec<DateTime<Utc>> = find(&evs, "Gym").iter().map(|e| utc(&e["start"])).collect();
        // Floating 07:30 in Kolkata = 02:00 UTC. Now is Monday 03:00 UTC, so that day's
        // session (02:00-02:30 UTC) is over; next: Wed 4th, Mon 9th, …
        assert_eq!(
            gym.first(),
            Some(&Utc.with_ymd_and_hms(2025, 6, 4, 2, 0, 0).unwrap())
        );
        assert!(gym.iter().all(|t| {
            let wd = t.with_timezone(&KOLKATA).weekday();
            wd == Weekday::Mon || wd == Weekday::Wed
        }));
        assert_eq!(gym.len(), 13, "{gym:?}"); // Jun 4 … Jul 16
        let extra: Vec<DateTime<Utc>> = find(&evs, "Extra")
            .iter()
            .map(|e| utc(&e["start"]))
            .collect();
        assert_eq!(
            extra,
            vec![
                Utc.with_ymd_and_hms(2025, 6, 4, 12, 0, 0).unwrap(),
                Utc.with_ymd_and_hms(2025, 6, 5, 12, 0, 0).unwrap()
            ]
        );
    }

    #[test]
    fn floating_series_in_the_machine_zone() {
        // Production reads floating times in chrono's Local (rrule's Tz::LOCAL), whatever
        // zone this machine has; UNTIL written as a floating time bounds it the same way.
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
        let text = ics(&["UID:1\r\nDTSTART:20250520T120000\r\nDTEND:20250520T123000\r\nRRULE:FREQ=WEEKLY;UNTIL=20250610T120000\r\nSUMMARY:Lunch\r\n".to_string()]);
        let out = listing(&[feed("c", &text)], now, 30, rrule::Tz::LOCAL);
        let got: Vec<DateTime<Utc>> = find(&events(&out), "Lunch")
            .iter()
            .map(|e| utc(&e["start"]))
            .collect();
        let want: Vec<DateTime<Utc>> = [3, 10]
            .iter()
            .map(|d| {
                chrono::Local
                    .with_ymd_and_hms(2025, 6, *d, 12, 0, 0)
                    .earliest()
                    .unwrap()
                    .with_timezone(&Utc)
            })
            .collect();
        assert_eq!(got, want, "{}", out.text);
        assert!(out.text.contains("- [12:00-12:30] Lunch"), "{}", out.text);
    }

    #[test]
    fn ongoing_and_multi_day_events_are_kept() {
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 12, 0, 0).unwrap();
        let text = ics(&[
            "UID:1\r\nDTSTART:20250602T110000Z\r\nDTEND:20250602T130000Z\r\nSUMMARY:In progress\r\n".to_string(),
            "UID:2\r\nDTSTART;VALUE=DATE:20250530\r\nDTEND;VALUE=DATE:20250604\r\nSUMMARY:Conference\r\n".to_string(),
            "UID:3\r\nDTSTART:20250602T100000Z\r\nDTEND:20250602T113000Z\r\nSUMMARY:Over\r\n".to_string(),
            "UID:4\r\nDTSTART:20250603T100000Z\r\nSUMMARY:Reminder\r\n".to_string(),
        ]);
        let out = listing(&[feed("c", &text)], now, 7, rrule::Tz::UTC);
        let names: Vec<String> = events(&out)
            .iter()
            .map(|e| e["summary"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, vec!["Conference", "In progress", "Reminder"]);
        assert!(
            out.text
                .contains("## Friday, May 30\n- [All day] Conference\n"),
            "{}",
            out.text
        );
        assert!(out.text.contains("- [10:00] Reminder"), "{}", out.text);
    }

    #[test]
    fn outlook_and_google_style_feeds() {
        // What real exports carry besides events: VTIMEZONE blocks, alarms, attendees with
        // quoted parameters holding `:` and `,`, HTML descriptions, X- properties, CRLF.
        let text = "BEGIN:VCALENDAR\r\nPRODID:-//Microsoft Corporation//Outlook 16.0 MIMEDIR//EN\r\n\
VERSION:2.0\r\nMETHOD:PUBLISH\r\nX-WR-CALNAME:Work\r\n\
BEGIN:VTIMEZONE\r\nTZID:W. Europe Standard Time\r\n\
BEGIN:STANDARD\r\nDTSTART:16011028T030000\r\nRRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10\r\n\
TZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\n\
BEGIN:DAYLIGHT\r\nDTSTART:16010325T020000\r\nRRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=3\r\n\
TZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nEND:DAYLIGHT\r\nEND:VTIMEZONE\r\n\
BEGIN:VTIMEZONE\r\nTZID:Customized Time Zone\r\nX-LIC-LOCATION:Asia/Tokyo\r\n\
BEGIN:STANDARD\r\nDTSTART:16010101T000000\r\nTZOFFSETFROM:+0900\r\nTZOFFSETTO:+0900\r\nEND:STANDARD\r\n\
END:VTIMEZONE\r\n\
BEGIN:VEVENT\r\nCLASS:PUBLIC\r\nCREATED:20250101T120000Z\r\n\
ATTENDEE;CN=\"Doe, Jane\";RSVP=TRUE;ROLE=REQ-PARTICIPANT:mailto:jane@example.com\r\n\
ORGANIZER;CN=\"Boss: Big\":mailto:boss@example.com\r\n\
DESCRIPTION:Join at https://example.com/meet?id=1\\;x=2\\, please\\n\r\n\
X-ALT-DESC;FMTTYPE=text/html:<html><body><p>Join</p></body></html>\r\n\
DTSTART;TZID=W. Europe Standard Time:20250604T100000\r\n\
DTEND;TZID=W. Europe Standard Time:20250604T110000\r\n\
SUMMARY;LANGUAGE=en-us:Quarterly review\r\nUID:040000008200E00074C5B7101A82E008\r\n\
SEQUENCE:0\r\nTRANSP:OPAQUE\r\nSTATUS:CONFIRMED\r\n\
BEGIN:VALARM\r\nTRIGGER:-PT15M\r\nACTION:DISPLAY\r\nDESCRIPTION:Reminder\r\nEND:VALARM\r\n\
END:VEVENT\r\n\
BEGIN:VEVENT\r\nDTSTART;TZID=Customized Time Zone:20250605T090000\r\nDURATION:PT1H\r\n\
SUMMARY:Tokyo call\r\nUID:tokyo\r\nEND:VEVENT\r\n\
END:VCALENDAR\r\n";
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
        let out = listing(&[feed("work", text)], now, 7, rrule::Tz::UTC);
        assert!(!out.is_error, "{}", out.text);
        let evs = events(&out);
        let review = find(&evs, "Quarterly review");
        assert_eq!(review.len(), 1, "{}", out.text);
        // 10:00 CEST = 08:00 UTC.
        assert_eq!(
            utc(&review[0]["start"]),
            Utc.with_ymd_and_hms(2025, 6, 4, 8, 0, 0).unwrap()
        );
        assert_eq!(
            review[0]["description"],
            "Join at https://example.com/meet?id=1;x=2, please\n"
        );
        // 09:00 in Tokyo (from X-LIC-LOCATION) = 00:00 UTC.
        let tokyo = find(&evs, "Tokyo call");
        assert_eq!(
            utc(&tokyo[0]["start"]),
            Utc.with_ymd_and_hms(2025, 6, 5, 0, 0, 0).unwrap()
        );
        assert!(!out.text.contains("Note:"), "{}", out.text);
    }

    #[test]
    fn time_zone_names() {
        let defs = HashMap::from([
            (
                "Custom".to_string(),
                VTimezone {
                    location: Some("Europe/Paris".into()),
                    ..Default::default()
                },
            ),
            (
                "Fixed".to_string(),
                VTimezone {
                    location: None,
                    standard: Some(3 * 3600),
                    has_daylight: false,
                },
            ),
            (
                "Odd".to_string(),
                VTimezone {
                    location: None,
                    standard: Some(-5 * 3600),
                    has_daylight: true,
                },
            ),
        ]);
        let name = |id: &str| {
            let (z, note) = resolve_tzid(id, &defs);
            (z.name().to_string(), note.is_some())
        };
        assert_eq!(name("America/New_York"), ("America/New_York".into(), false));
        assert_eq!(name("\"europe/berlin\""), ("Europe/Berlin".into(), false));
        assert_eq!(
            name("/mozilla.org/20050126_1/America/New_York"),
            ("America/New_York".into(), false)
        );
        assert_eq!(
            name("W. Europe Standard Time"),
            ("Europe/Berlin".into(), false)
        );
        assert_eq!(
            name("(UTC-05:00) Eastern Time (US & Canada)"),
            ("America/New_York".into(), false)
        );
        assert_eq!(
            name("(UTC+01:00) Amsterdam, Berlin, Bern, Rome, Stockholm, Vienna"),
            ("Europe/Amsterdam".into(), false)
        );
        assert_eq!(name("Custom"), ("Europe/Paris".into(), false));
        assert_eq!(name("Fixed"), ("Etc/GMT-3".into(), false));
        assert_eq!(name("Odd"), ("Etc/GMT+5".into(), true));
        assert_eq!(name("Nowhere/Special"), ("UTC".into(), true));
        for (w, z) in WINDOWS_ZONES {
            assert!(z.parse::<chrono_tz::Tz>().is_ok(), "{w} → {z}");
        }
    }

    #[test]
    fn unknown_zone_is_read_as_utc_with_a_note() {
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
        let text = ics(&[
            "UID:1\r\nDTSTART;TZID=Mars/Olympus:20250603T100000\r\nSUMMARY:Odd\r\n".to_string(),
        ]);
        let out = listing(&[feed("c", &text)], now, 7, rrule::Tz::UTC);
        assert_eq!(
            utc(&events(&out)[0]["start"]),
            Utc.with_ymd_and_hms(2025, 6, 3, 10, 0, 0).unwrap()
        );
        assert!(
            out.text.ends_with(
                "\n\nNote: calendar 'c': time zone 'Mars/Olympus' is not known; its times were read as UTC"
            ),
            "{}",
            out.text
        );
    }

    #[test]
    fn daylight_saving_gaps_and_overlaps() {
        let ny = rrule::Tz::Tz(NY);
        // 02:30 does not exist on 2025-03-09 in New York: it is read as 03:30 EDT.
        let gap = NaiveDate::from_ymd_opt(2025, 3, 9)
            .unwrap()
            .and_hms_opt(2, 30, 0)
            .unwrap();
        assert_eq!(
            localize(ny, &gap).with_timezone(&Utc),
            Utc.with_ymd_and_hms(2025, 3, 9, 7, 30, 0).unwrap()
        );
        // 01:30 happens twice on 2025-11-02: the first (EDT).
        let twice = NaiveDate::from_ymd_opt(2025, 11, 2)
            .unwrap()
            .and_hms_opt(1, 30, 0)
            .unwrap();
        assert_eq!(
            localize(ny, &twice).with_timezone(&Utc),
            Utc.with_ymd_and_hms(2025, 11, 2, 5, 30, 0).unwrap()
        );
    }

    #[test]
    fn values_and_durations() {
        assert_eq!(
            parse_time("2025-06-03T10:00:00Z", false, None),
            Some(Raw::Utc(
                NaiveDate::from_ymd_opt(2025, 6, 3)
                    .unwrap()
                    .and_hms_opt(10, 0, 0)
                    .unwrap()
            ))
        );
        assert_eq!(
            parse_time("20250603", false, Some("Europe/Berlin")),
            Some(Raw::Date(NaiveDate::from_ymd_opt(2025, 6, 3).unwrap()))
        );
        assert_eq!(parse_time("garbage", false, None), None);
        assert_eq!(parse_duration("PT1H30M"), Some(TimeDelta::minutes(90)));
        assert_eq!(parse_duration("P1W"), Some(TimeDelta::days(7)));
        assert_eq!(parse_duration("-P1DT2H"), Some(-TimeDelta::hours(26)));
        assert_eq!(parse_duration("P"), None);
        assert_eq!(parse_duration("PT5"), None);
        assert_eq!(parse_duration("P99999999999999999W"), None);
        assert_eq!(parse_offset("+0530"), Some(19_800));
        assert_eq!(parse_offset("-0500"), Some(-18_000));
        assert_eq!(parse_offset("0500"), None);
        assert_eq!(
            normalize("\u{feff}A:b\r\n c\r\n\r\nD:e\n\tf\n"),
            "A:bc\nD:ef\n"
        );
    }

    #[test]
    fn bad_feeds_are_reported() {
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
        let good = ics(&["UID:1\r\nDTSTART:20250603T100000Z\r\nSUMMARY:Fine\r\n".to_string()]);
        let feeds = [
            feed("good", &good),
            feed("html", "<html><body>Login</body></html>"),
            Feed {
                name: "down".into(),
                body: Err("HTTP 500 Internal Server Error".into()),
            },
        ];
        let out = listing(&feeds, now, 7, rrule::Tz::UTC);
        assert!(!out.is_error);
        assert_eq!(
            out.text,
            "Events in the next 7 days:\n\n## Tuesday, June 3\n- [10:00] Fine\n\n\
             Could not read calendar 'html': not an iCalendar feed (no BEGIN:VCALENDAR)\n\
             Could not read calendar 'down': HTTP 500 Internal Server Error"
        );
        let s = out.structured.unwrap();
        assert_eq!(s["errors"].as_array().unwrap().len(), 2);
        assert_eq!(s["errors"][1]["calendar"], "down");

        // Every feed failed: an error result.
        let out = listing(&feeds[1..], now, 7, rrule::Tz::UTC);
        assert!(out.is_error);
        assert!(
            out.text.starts_with("Could not read calendar 'html'"),
            "{}",
            out.text
        );

        // Broken structure inside a calendar.
        let out = listing(
            &[feed(
                "x",
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:x\nEND:VCALENDAR\n",
            )],
            now,
            7,
            rrule::Tz::UTC,
        );
        assert!(out.is_error);
        assert!(out.text.contains("invalid iCalendar data"), "{}", out.text);

        // Nothing in the window.
        let out = listing(&[feed("good", &good)], now, 1, rrule::Tz::UTC);
        assert_eq!(out.text, "No events in the next 1 days");
        assert!(!out.is_error);
    }

    #[test]
    fn bad_rules_fall_back_to_the_first_instance() {
        let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
        let text = ics(&[
            "UID:1\r\nDTSTART:20250603T100000Z\r\nRRULE:FREQ=SOMETIMES\r\nSUMMARY:Odd rule\r\n"
                .to_string(),
            "UID:2\r\nDTSTART:20250101T000000Z\r\nRRULE:FREQ=SECONDLY\r\nSUMMARY:Busy\r\n"
                .to_string(),
        ]);
        let out = listing(&[feed("c", &text)], now, 7, rrule::Tz::UTC);
        let evs = events(&out);
        assert_eq!(find(&evs, "Odd rule").len(), 1);
        assert!(
            find(&evs, "Busy").is_empty(),
            "expansion stops at the scan cap"
        );
        assert!(out.text.contains("could not be read"), "{}", out.text);
        assert!(out.text.contains("repeats too often"), "{}", out.text);
    }

    fn group_with(sources: Vec<CalendarSource>) -> Arc<dyn Group> {
        group(&sources, &web()).unwrap()
    }

    fn web() -> WebSettings {
        WebSettings {
            enabled: true,
            allow_private: false,
            max_bytes: 64 * 1024,
            timeout: std::time::Duration::from_secs(10),
            max_redirects: 5,
        }
    }

    #[tokio::test]
    async fn arguments_and_unknown_calendars() {
        assert!(group(&[], &web()).is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home.ics");
        let start = Utc::now() + TimeDelta::hours(2);
        std::fs::write(
            &path,
            ics(&[format!(
                "UID:1\r\nDTSTART:{}Z\r\nSUMMARY:Soon\r\n",
                stamp(start.naive_utc())
            )]),
        )
        .unwrap();
        let g = group_with(vec![
            CalendarSource {
                name: "Home".into(),
                feed: CalendarFeed::File(path.clone()),
            },
            CalendarSource {
                name: "Work".into(),
                feed: CalendarFeed::File(dir.path().join("missing.ics")),
            },
        ]);
        let tools = g.tools();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "calendar_read");
        assert!(tools[0].description.contains("Home, Work"));

        let out = g.call("calendar_read", &json!({"calendar": "nope"})).await;
        assert!(out.is_error);
        assert_eq!(
            out.text,
            "calendar 'nope' not found; configured calendars: Home, Work"
        );
        for bad in [json!(0), json!(367), json!(-3)] {
            let out = g.call("calendar_read", &json!({"days": bad})).await;
            assert!(out.is_error, "{bad}");
            assert!(
                out.text.starts_with("days must be between 1 and 366"),
                "{}",
                out.text
            );
        }
        for ok in [json!(1), json!(366)] {
            let out = g
                .call("calendar_read", &json!({"days": ok, "calendar": "home"}))
                .await;
            assert!(!out.is_error, "{}", out.text);
            assert!(out.text.contains("] Soon"), "{}", out.text);
        }
        // Default: all calendars, 7 days; the missing file is reported, the other listed.
        let out = g.call("calendar_read", &json!({})).await;
        assert!(!out.is_error, "{}", out.text);
        assert!(
            out.text.starts_with("Events in the next 7 days:"),
            "{}",
            out.text
        );
        assert!(
            out.text
                .contains("Could not read calendar 'Work': cannot open"),
            "{}",
            out.text
        );
        let out = g.call("calendar_read", &json!({"calendar": "WORK"})).await;
        assert!(out.is_error, "{}", out.text);

        // Over the size cap.
        std::fs::write(&path, vec![b'x'; 64 * 1024 + 1]).unwrap();
        let out = g.call("calendar_read", &json!({"calendar": "home"})).await;
        assert!(out.is_error);
        assert!(out.text.contains("larger than 65536 bytes"), "{}", out.text);
    }

    #[tokio::test]
    async fn feeds_over_http() {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let start = Utc::now() + TimeDelta::hours(3);
        let body = ics(&[format!(
            "UID:1\r\nDTSTART:{}Z\r\nDURATION:PT1H\r\nSUMMARY:Served\r\n",
            stamp(start.naive_utc())
        )]);
        let handle = std::thread::spawn(move || {
            for _ in 0..2 {
                let Ok(rq) = server.recv() else { return };
                let resp = if rq.url() == "/cal.ics" {
                    tiny_http::Response::from_data(body.clone().into_bytes())
                } else {
                    tiny_http::Response::from_data(b"boom".to_vec()).with_status_code(500)
                };
                let _ = rq.respond(resp);
            }
        });
        let g = group_with(vec![
            CalendarSource {
                name: "team".into(),
                feed: CalendarFeed::Url(format!("http://127.0.0.1:{port}/cal.ics")),
            },
            CalendarSource {
                name: "broken".into(),
                feed: CalendarFeed::Url(format!("http://127.0.0.1:{port}/fail")),
            },
        ]);
        let out = g.call("calendar_read", &json!({})).await;
        handle.join().unwrap();
        assert!(!out.is_error, "{}", out.text);
        assert!(out.text.contains("] Served"), "{}", out.text);
        assert!(
            out.text
                .contains("Could not read calendar 'broken': HTTP 500 Internal Server Error"),
            "{}",
            out.text
        );
        let evs = events(&out);
        assert_eq!(evs.len(), 1);
        assert_eq!(utc(&evs[0]["start"]).timestamp(), start.timestamp());
    }
}
