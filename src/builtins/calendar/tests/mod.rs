//! Tests of `calendar_read`, and the helpers and the generated feed they share.

mod listing;
mod tool;
mod values;

// The integration tests write their feeds the same way: one file, compiled into both.
#[path = "../../../../tests/support/ics.rs"]
mod ics_text;
use ics_text::{ics, stamp};

use super::ics::{Raw, VTimezone, normalize, parse_duration, parse_offset, parse_time};
use super::zones::{WINDOWS_ZONES, localize, resolve_tzid};
use super::*;
use crate::config::CalendarFeed;
use chrono::{
    DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone, Weekday,
};
use std::collections::HashMap;

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

/// `events` as one feed, `c`, listed at `now` for `days` with floating times in `local`.
fn list_events(events: &[&str], now: DateTime<Utc>, days: i64, local: rrule::Tz) -> ToolOutput {
    listing(&[feed("c", &ics(events))], now, days, local)
}

/// 06:00 UTC today: mid-morning, so every wall time of the [`fixture`] is still ahead.
fn this_morning() -> DateTime<Utc> {
    Utc::now()
        .date_naive()
        .and_hms_opt(6, 0, 0)
        .unwrap()
        .and_utc()
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
