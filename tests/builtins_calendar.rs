//! `calendar_read` end to end through `openpact serve`: a feed served by a loopback HTTP
//! stand-in and a `file` feed, with events generated relative to now in two time zones, a
//! weekly recurrence with an exception, an all-day and a floating event; and feeds that fail.
//!
//! The hub runs with `TZ` set to a fixed +05:30 zone, so the expected local times do not
//! depend on the machine running the tests.

use crate::support::{Scratch, Stand, ics, reply, serve_with, stamp, text};
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

/// The hub's local zone as a POSIX TZ string (needs no tz database); the same offset as
/// Asia/Kolkata, which the expectations use.
const HUB_TZ: &str = "IST-5:30";
const LOCAL: Tz = chrono_tz::Asia::Kolkata;

/// A loopback stand-in answering each path with a status and a body (404 elsewhere).
fn feed_server(routes: Vec<(&'static str, u16, String)>) -> Stand {
    Stand::start(move |rq| {
        let (status, body) = routes
            .iter()
            .find(|(path, _, _)| *path == rq.url)
            .map(|(_, s, b)| (*s, b.clone()))
            .unwrap_or((404, "not found".into()));
        reply(status, "text/calendar", body)
    })
}

fn wall(tz: Tz, t: NaiveDateTime) -> DateTime<Utc> {
    tz.from_local_datetime(&t).unwrap().with_timezone(&Utc)
}

/// `(start in UTC, end in UTC)` of each event in `structuredContent` named `summary`.
fn instants(response: &Value, summary: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let p = |v: &Value| {
        DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc)
    };
    response["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no structured events in {response}"))
        .iter()
        .filter(|e| e["summary"] == summary)
        .map(|e| (p(&e["start"]), p(&e["end"])))
        .collect()
}

#[tokio::test]
async fn lists_events_from_an_http_feed_and_a_file_in_the_local_zone() {
    let today = Utc::now().date_naive();
    let day = |n: i64| today + TimeDelta::days(n);
    let at = |d: NaiveDate, h: u32, m: u32| d.and_hms_opt(h, m, 0).unwrap();

    // Remote feed: New York and Berlin, and a weekly Berlin series from 13 days ago
    // (days -13, -6, 1, 8, 15 …) whose day-8 instance is cancelled by an EXDATE.
    let planning = at(day(1), 10, 0);
    let weekly_first = at(day(-13), 18, 0);
    let team = ics(&[
        format!(
            "UID:plan@test\r\nDTSTART;TZID=America/New_York:{}\r\nDTEND;TZID=America/New_York:{}\r\nSUMMARY:Planning (NY)\r\nLOCATION:Conference room\\, 3rd floor\r\n",
            stamp(planning),
            stamp(planning + TimeDelta::hours(1))
        ),
        format!(
            "UID:sync@test\r\nDTSTART;TZID=Europe/Berlin:{}\r\nDTEND;TZID=Europe/Berlin:{}\r\nRRULE:FREQ=WEEKLY\r\nEXDATE;TZID=Europe/Berlin:{}\r\nSUMMARY:Berlin sync\r\nDESCRIPTION:Agenda:\\nitem one\r\n",
            stamp(weekly_first),
            stamp(weekly_first + TimeDelta::minutes(45)),
            stamp(at(day(8), 18, 0))
        ),
    ]);
    // Local file: an all-day event, a floating one (read in the hub's zone), one too far
    // ahead, and a folded summary.
    let dentist = at(day(3), 9, 0);
    let home = ics(&[
        format!(
            "UID:bday@test\r\nDTSTART;VALUE=DATE:{}\r\nDTEND;VALUE=DATE:{}\r\nSUMMARY:Birthday\r\n",
            day(2).format("%Y%m%d"),
            day(3).format("%Y%m%d")
        ),
        format!(
            "UID:dentist@test\r\nDTSTART:{}\r\nDTEND:{}\r\nSUMMARY:Dent\r\n ist\r\n",
            stamp(dentist),
            stamp(dentist + TimeDelta::minutes(30))
        ),
        format!(
            "UID:far@test\r\nDTSTART:{}Z\r\nSUMMARY:Far away\r\n",
            stamp(at(day(30), 12, 0))
        ),
    ]);

    let feeds = feed_server(vec![
        ("/team.ics", 200, team),
        ("/flaky.ics", 500, "oops".into()),
    ]);
    let scratch = Scratch::new();
    std::fs::write(scratch.path().join("home.ics"), home).unwrap();
    let cfg = scratch.config(&json!({
        "mcpServers": {},
        "openpact": {"builtins": {"calendars": [
            {"name": "team", "url": format!("{}/team.ics", feeds.base)},
            {"name": "home", "file": "home.ics"},
            {"name": "flaky", "url": format!("{}/flaky.ics", feeds.base)},
        ]}}
    }));
    let mut hub = serve_with(&cfg, &[], &[("TZ", HUB_TZ)]).await;
    hub.client.initialize().await;
    let tools = hub.client.list_tools().await;
    assert!(
        tools.iter().any(|t| t["name"] == "calendar_read"),
        "calendar_read is listed under its bare name: {tools:?}"
    );

    let r = hub.client.call("calendar_read", json!({"days": 14})).await;
    assert!(r["result"]["isError"].is_null(), "{r}");

    // Exact instants, compared in UTC.
    let planning_utc = wall(chrono_tz::America::New_York, planning);
    assert_eq!(
        instants(&r, "Planning (NY)"),
        vec![(planning_utc, planning_utc + TimeDelta::hours(1))]
    );
    let sync_utc = wall(chrono_tz::Europe::Berlin, at(day(1), 18, 0));
    assert_eq!(
        instants(&r, "Berlin sync"),
        vec![(sync_utc, sync_utc + TimeDelta::minutes(45))],
        "day 1 only: day 8 is excluded, day 15 is past the window"
    );
    let dentist_utc = wall(LOCAL, dentist);
    assert_eq!(
        instants(&r, "Dentist"),
        vec![(dentist_utc, dentist_utc + TimeDelta::minutes(30))]
    );
    let events = r["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap();
    let bday = events.iter().find(|e| e["summary"] == "Birthday").unwrap();
    assert_eq!(bday["all_day"], true);
    assert_eq!(bday["start"], day(2).to_string());
    assert_eq!(bday["calendar"], "home");
    let sync = events
        .iter()
        .find(|e| e["summary"] == "Berlin sync")
        .unwrap();
    assert_eq!(sync["calendar"], "team");
    assert_eq!(sync["description"], "Agenda:\nitem one");
    assert!(!events.iter().any(|e| e["summary"] == "Far away"));
    assert_eq!(events.len(), 4, "{r}");

    // The text, in the original's format, with times in the hub's zone.
    let hm = |t: DateTime<Utc>| t.with_timezone(&LOCAL).format("%H:%M").to_string();
    let mut lines: Vec<(DateTime<Utc>, NaiveDate, String)> = vec![
        (
            planning_utc,
            planning_utc.with_timezone(&LOCAL).date_naive(),
            format!(
                "- [{}-{}] Planning (NY)\n  Location: Conference room, 3rd floor",
                hm(planning_utc),
                hm(planning_utc + TimeDelta::hours(1))
            ),
        ),
        (
            sync_utc,
            sync_utc.with_timezone(&LOCAL).date_naive(),
            format!(
                "- [{}-{}] Berlin sync",
                hm(sync_utc),
                hm(sync_utc + TimeDelta::minutes(45))
            ),
        ),
        (
            wall(LOCAL, day(2).and_time(NaiveTime::MIN)),
            day(2),
            "- [All day] Birthday".into(),
        ),
        (dentist_utc, day(3), "- [09:00-09:30] Dentist".into()),
    ];
    lines.sort_by_key(|(t, _, _)| *t);
    let mut want = String::from("Events in the next 14 days:\n\n");
    let mut heading = None;
    for (_, d, line) in lines {
        if heading != Some(d) {
            heading = Some(d);
            want.push_str(&format!("## {}\n", d.format("%A, %B %-d")));
        }
        want.push_str(&line);
        want.push('\n');
    }
    want.push_str("\nCould not read calendar 'flaky': HTTP 500 Internal Server Error");
    assert_eq!(text(&r), want);

    // One calendar by name (case-insensitive), and an unknown name.
    let r = hub
        .client
        .call("calendar_read", json!({"calendar": "HOME", "days": 2}))
        .await;
    assert!(r["result"]["isError"].is_null(), "{r}");
    assert_eq!(
        text(&r),
        format!(
            "Events in the next 2 days:\n\n## {}\n- [All day] Birthday\n",
            day(2).format("%A, %B %-d")
        )
    );
    let r = hub
        .client
        .call("calendar_read", json!({"calendar": "work"}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "calendar 'work' not found; configured calendars: team, home, flaky"
    );
    let r = hub.client.call("calendar_read", json!({"days": 400})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[tokio::test]
async fn failing_feeds_are_reported() {
    let feeds = feed_server(vec![
        ("/down.ics", 500, "Internal trouble".into()),
        (
            "/login",
            200,
            "<html><body>Please log in</body></html>".into(),
        ),
        ("/empty.ics", 200, ics::<&str>(&[])),
    ]);
    let scratch = Scratch::new();
    let cfg = scratch.config(&json!({
        "mcpServers": {},
        "openpact": {"builtins": {"calendars": [
            {"name": "down", "url": format!("{}/down.ics", feeds.base)},
            {"name": "login", "url": format!("{}/login", feeds.base)},
            {"name": "empty", "url": format!("{}/empty.ics", feeds.base)},
        ]}}
    }));
    let mut hub = serve_with(&cfg, &[], &[("TZ", HUB_TZ)]).await;
    hub.client.initialize().await;

    // Some feeds work: the failures are reported beside the (empty) listing.
    let r = hub.client.call("calendar_read", json!({})).await;
    assert!(r["result"]["isError"].is_null(), "{r}");
    assert_eq!(
        text(&r),
        "No events in the next 7 days\n\n\
         Could not read calendar 'down': HTTP 500 Internal Server Error\n\
         Could not read calendar 'login': not an iCalendar feed (no BEGIN:VCALENDAR)"
    );
    let errors = &r["result"]["structuredContent"]["errors"];
    assert_eq!(errors[0]["calendar"], "down");
    assert_eq!(errors[0]["error"], "HTTP 500 Internal Server Error");

    // The only feed asked for fails: an error result.
    let r = hub
        .client
        .call("calendar_read", json!({"calendar": "down"}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "Could not read calendar 'down': HTTP 500 Internal Server Error"
    );
}
