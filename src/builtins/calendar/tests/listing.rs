//! Whole feeds listed at a given `now`: zones, series, all-day and floating events, the text
//! and structured forms, and feeds that are partly or wholly unreadable.

use super::*;

#[test]
fn events_relative_to_now_in_two_zones_with_a_weekly_series() {
    let now = this_morning();
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
    let now = this_morning();
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
    let out = list_events(
        &[
            "UID:w\r\nDTSTART;TZID=America/New_York:20250226T090000\r\nDTEND;TZID=America/New_York:20250226T100000\r\nRRULE:FREQ=WEEKLY;UNTIL=20250320T000000Z\r\nEXDATE;TZID=America/New_York:20250312T090000\r\nSUMMARY:NY weekly\r\n",
            // Moved instance of the series (RECURRENCE-ID override).
            "UID:d\r\nDTSTART;TZID=Europe/Berlin:20250303T080000\r\nDURATION:PT30M\r\nRRULE:FREQ=DAILY;COUNT=5\r\nSUMMARY:Berlin daily\r\n",
            "UID:d\r\nRECURRENCE-ID;TZID=Europe/Berlin:20250306T080000\r\nDTSTART;TZID=Europe/Berlin:20250306T110000\r\nDTEND;TZID=Europe/Berlin:20250306T113000\r\nSUMMARY:Berlin daily (moved)\r\n",
            "UID:d\r\nRECURRENCE-ID;TZID=Europe/Berlin:20250307T080000\r\nDTSTART;TZID=Europe/Berlin:20250307T080000\r\nSTATUS:CANCELLED\r\nSUMMARY:Berlin daily\r\n",
        ],
        now,
        15,
        rrule::Tz::UTC,
    );
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
    let out = list_events(
        &[
            "UID:a\r\nDTSTART;VALUE=DATE:20250101\r\nRRULE:FREQ=MONTHLY;BYMONTHDAY=3;UNTIL=20251231\r\nEXDATE;VALUE=DATE:20250703\r\nSUMMARY:Rent\r\n",
            "UID:f\r\nDTSTART:20250526T073000\r\nDTEND:20250526T080000\r\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE\r\nSUMMARY:Gym\r\n",
            "UID:r\r\nDTSTART:20250601T120000Z\r\nRDATE:20250604T120000Z,20250605T120000Z\r\nSUMMARY:Extra\r\n",
        ],
        now,
        45,
        local(),
    );
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
    let out = list_events(
        &[
            "UID:1\r\nDTSTART:20250520T120000\r\nDTEND:20250520T123000\r\nRRULE:FREQ=WEEKLY;UNTIL=20250610T120000\r\nSUMMARY:Lunch\r\n",
        ],
        now,
        30,
        rrule::Tz::LOCAL,
    );
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
    let out = list_events(
        &[
            "UID:1\r\nDTSTART:20250602T110000Z\r\nDTEND:20250602T130000Z\r\nSUMMARY:In progress\r\n",
            "UID:2\r\nDTSTART;VALUE=DATE:20250530\r\nDTEND;VALUE=DATE:20250604\r\nSUMMARY:Conference\r\n",
            "UID:3\r\nDTSTART:20250602T100000Z\r\nDTEND:20250602T113000Z\r\nSUMMARY:Over\r\n",
            "UID:4\r\nDTSTART:20250603T100000Z\r\nSUMMARY:Reminder\r\n",
        ],
        now,
        7,
        rrule::Tz::UTC,
    );
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
fn unknown_zone_is_read_as_utc_with_a_note() {
    let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
    let out = list_events(
        &["UID:1\r\nDTSTART;TZID=Mars/Olympus:20250603T100000\r\nSUMMARY:Odd\r\n"],
        now,
        7,
        rrule::Tz::UTC,
    );
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
fn bad_feeds_are_reported() {
    let now = Utc.with_ymd_and_hms(2025, 6, 2, 0, 0, 0).unwrap();
    let good = ics(&["UID:1\r\nDTSTART:20250603T100000Z\r\nSUMMARY:Fine\r\n"]);
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
    let out = list_events(
        &[
            "UID:1\r\nDTSTART:20250603T100000Z\r\nRRULE:FREQ=SOMETIMES\r\nSUMMARY:Odd rule\r\n",
            "UID:2\r\nDTSTART:20250101T000000Z\r\nRRULE:FREQ=SECONDLY\r\nSUMMARY:Busy\r\n",
        ],
        now,
        7,
        rrule::Tz::UTC,
    );
    let evs = events(&out);
    assert_eq!(find(&evs, "Odd rule").len(), 1);
    assert!(
        find(&evs, "Busy").is_empty(),
        "expansion stops at the scan cap"
    );
    assert!(out.text.contains("could not be read"), "{}", out.text);
    assert!(out.text.contains("repeats too often"), "{}", out.text);
}

/// Found by the fuzzer (tests/fuzz, target `calendar`): a `BYDAY` ending inside a multi-byte
/// character panicked in the rrule crate's parser.
#[test]
fn a_rule_that_is_not_ascii_is_unreadable_not_a_panic() {
    let now: DateTime<Utc> = "2026-03-01T06:00:00Z".parse().unwrap();
    let out = list_events(
        &[
            "UID:x\r\nSUMMARY:Odd\r\nDTSTART:20260302T090000Z\r\nRRULE:FREQ=WEEKLY;BYDAY=M\u{fffd}\r\n",
        ],
        now,
        7,
        local(),
    );
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(events(&out).len(), 1, "only the first date: {}", out.text);
    assert!(out.text.contains("could not be read"), "{}", out.text);
}

/// Found by hand while checking the fuzz target's time bound (tests/fuzz, target `calendar`):
/// each series was bounded, the feed was not. Fifty rules that never match (the rrule crate
/// loops 100 000 times per step looking) in a 5 KB feed took seconds; the 2 MB a feed may be,
/// many minutes. The expansion now stops after a time (`FEED_TIME`, 2 s, in the tool), with a
/// note.
#[test]
fn a_feed_of_many_pathological_series_is_cut_short_in_time() {
    let now: DateTime<Utc> = "2026-03-01T06:00:00Z".parse().unwrap();
    let series = "DTSTART:20200101T000000Z\r\nRRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30\r\n";
    let mut lines: Vec<String> = (0..200)
        .map(|i| format!("UID:{i}\r\nSUMMARY:Never\r\n{series}"))
        .collect();
    lines.push("UID:plain\r\nSUMMARY:Plain\r\nDTSTART:20260302T090000Z\r\n".into());
    let budget = std::time::Duration::from_millis(500);
    let started = std::time::Instant::now();
    let out = listing_within(&[feed("c", &ics(&lines))], now, 7, local(), budget);
    let took = started.elapsed();
    // The budget, one series' worth of looking past it, and room for a slow machine (one
    // series takes about 0.6 s unoptimised; all 200 would take two minutes).
    assert!(took < budget * 10, "{took:?}");
    assert!(out.text.contains("take too long to expand"), "{}", out.text);
    // What needs no expanding is still listed.
    assert_eq!(find(&events(&out), "Plain").len(), 1, "{}", out.text);
}
