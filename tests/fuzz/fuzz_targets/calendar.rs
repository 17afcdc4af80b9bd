//! `calendar_read`'s feed reading on arbitrary iCalendar text (bare properties are wrapped in
//! a calendar and an event, so the fuzzer reaches recurrence quickly): unfolding, properties,
//! dates, zones, `RRULE`/`RDATE`/`EXDATE`/`RECURRENCE-ID`, and the listing, for a window of
//! 1 to 366 days around daylight-saving changes in several zones. Checked: never a panic, an
//! answer in bounded time (the series of a feed get 200 ms to expand here, 2 s in the tool;
//! the answer must come within 5 s), at most 1000 events, each overlapping the window, listed
//! by start (all-day first), with a start no later than its end.
#![no_main]

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use openpact::builtins::calendar::{Feed, listing_within};
use serde_json::Value;
use std::time::{Duration, Instant};

const ZONES: [rrule::Tz; 6] = [
    rrule::Tz::UTC,
    rrule::Tz::Europe__Berlin,
    rrule::Tz::America__New_York,
    rrule::Tz::Asia__Kolkata,
    rrule::Tz::Australia__Lord_Howe,
    rrule::Tz::Pacific__Chatham,
];

/// Instants near a daylight-saving change (Europe, United States) and one far from any.
const NOWS: [&str; 3] = [
    "2026-03-28T22:30:00Z",
    "2026-10-31T12:00:00Z",
    "2026-06-15T09:00:00Z",
];

fn midnight(local: rrule::Tz, d: NaiveDate) -> DateTime<Utc> {
    local
        .from_local_datetime(&d.and_time(NaiveTime::MIN))
        .earliest()
        .expect("these zones have every midnight")
        .with_timezone(&Utc)
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, rest)) = data.split_first() else {
        return;
    };
    let Some((&days, rest)) = rest.split_first() else {
        return;
    };
    let days = i64::from(days) * 366 / 256 + 1;
    let local = ZONES[usize::from(knobs) % ZONES.len()];
    let now: DateTime<Utc> = NOWS[usize::from(knobs / 8) % NOWS.len()]
        .parse()
        .expect("now");
    let mut text = String::from_utf8_lossy(rest).into_owned();
    if !text.to_ascii_uppercase().contains("BEGIN:VCALENDAR") {
        text = format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:fuzz\r\n{text}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
    }
    let feeds = [Feed {
        name: "fuzz".into(),
        body: Ok(text),
    }];
    let started = Instant::now();
    let out = listing_within(&feeds, now, days, local, Duration::from_millis(200));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the listing took {took:?}");

    let from = now;
    let to = now + TimeDelta::days(days);
    let structured = out.structured.expect("structuredContent");
    let events = structured["events"].as_array().expect("events");
    assert!(events.len() <= 1000, "{} events", events.len());
    let mut last: Option<(DateTime<Utc>, bool, String)> = None;
    for e in events {
        let s = e["start"].as_str().expect("start");
        let t = e["end"].as_str().expect("end");
        let all_day = e["all_day"].as_bool().expect("all_day");
        let start_key = if all_day {
            let s = NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("a date");
            let t = NaiveDate::parse_from_str(t, "%Y-%m-%d").expect("a date");
            assert!(s < t, "an all-day event ending on or before its start: {e}");
            // Local dates: the window's first and last days bound it.
            assert!(
                s <= to.with_timezone(&local).date_naive()
                    && t > from.with_timezone(&local).date_naive(),
                "outside the window {from}..{to}: {e}"
            );
            midnight(local, s)
        } else {
            let s = DateTime::parse_from_rfc3339(s)
                .expect("RFC 3339")
                .with_timezone(&Utc);
            let t = DateTime::parse_from_rfc3339(t)
                .expect("RFC 3339")
                .with_timezone(&Utc);
            assert!(s <= t, "an event ending before its start: {e}");
            assert!(
                s < to && (t > from || (t == s && s >= from)),
                "outside the window {from}..{to}: {e}"
            );
            s
        };
        let summary = e["summary"].as_str().unwrap_or_default().to_string();
        let key = (start_key, !all_day, summary);
        if let Some(prev) = &last {
            assert!(prev <= &key, "not sorted by start: {prev:?} then {key:?}");
        }
        last = Some(key);
    }
    assert!(matches!(structured["notes"], Value::Array(_)));
});
