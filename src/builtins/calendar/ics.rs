//! Reading iCalendar text (RFC 5545): unfolding lines, properties and parameters, dates and
//! date-times, durations and UTC offsets; events and `VTIMEZONE`s as written, before any
//! zone is looked up.

use chrono::{NaiveDate, NaiveDateTime, TimeDelta};
use icalendar::parser::{Component, Property};

/// A date or date-time as written, before its zone is looked up.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Raw {
    Date(NaiveDate),
    Utc(NaiveDateTime),
    /// Wall-clock time in `tzid`, or floating (the user's zone) without one.
    Wall {
        at: NaiveDateTime,
        tzid: Option<String>,
    },
}

#[derive(Debug, Default)]
pub(super) struct RawEvent {
    pub(super) uid: Option<String>,
    pub(super) summary: String,
    pub(super) location: String,
    pub(super) description: String,
    pub(super) start: Option<Raw>,
    pub(super) end: Option<Raw>,
    pub(super) duration: Option<TimeDelta>,
    pub(super) rrule: Option<String>,
    pub(super) rdates: Vec<Raw>,
    pub(super) exdates: Vec<Raw>,
    pub(super) recurrence_id: Option<Raw>,
    pub(super) cancelled: bool,
}

/// What a `VTIMEZONE` says that helps map it to a real zone.
#[derive(Debug, Default)]
pub(super) struct VTimezone {
    /// `X-LIC-LOCATION`, an IANA name many producers add.
    pub(super) location: Option<String>,
    /// The `STANDARD` offset, seconds east of UTC.
    pub(super) standard: Option<i32>,
    pub(super) has_daylight: bool,
}

/// Unfolds lines (RFC 5545 §3.1: a line break followed by one space or tab continues the
/// line), normalises line ends and drops blank lines and a BOM, which the parser rejects.
pub(super) fn normalize(text: &str) -> String {
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
pub(super) fn value(c: &Component<'_>, name: &str) -> Option<String> {
    props(c, name).next().map(|p| p.val.as_str().to_string())
}

fn param<'p>(p: &'p Property<'_>, key: &str) -> Option<&'p str> {
    p.params
        .iter()
        .find(|x| x.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|x| x.val.as_ref())
        .map(|v| v.as_str())
}

pub(super) fn unquote(s: &str) -> &str {
    s.trim().trim_matches('"')
}

pub(super) fn raw_event(c: &Component<'_>) -> RawEvent {
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
pub(super) fn parse_time(v: &str, date_only: bool, tzid: Option<&str>) -> Option<Raw> {
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
pub(super) fn parse_duration(s: &str) -> Option<TimeDelta> {
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

pub(super) fn vtimezone(c: &Component<'_>) -> VTimezone {
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
pub(super) fn parse_offset(s: &str) -> Option<i32> {
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
