//! iCalendar text for the calendar tests: a feed around a list of events, and local times in
//! the form `DTSTART` takes.
//!
//! Two test crates compile this one file: the integration binary (as `support::ics`) and the
//! library's unit tests (through `#[path]` from `src/builtins/calendar/tests/mod.rs`), so it
//! uses nothing but std and chrono.

use chrono::NaiveDateTime;

/// A `VCALENDAR` holding one `VEVENT` per entry of `events` (each its property lines, CRLF
/// ended).
pub fn ics<S: AsRef<str>>(events: &[S]) -> String {
    let mut s = String::from("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//openpact tests//EN\r\n");
    for e in events {
        s.push_str("BEGIN:VEVENT\r\n");
        s.push_str(e.as_ref());
        s.push_str("END:VEVENT\r\n");
    }
    s.push_str("END:VCALENDAR\r\n");
    s
}

/// `t` as `YYYYMMDDTHHMMSS`.
pub fn stamp(t: NaiveDateTime) -> String {
    t.format("%Y%m%dT%H%M%S").to_string()
}
