//! The pieces on their own: time-zone names, daylight-saving gaps and overlaps, and date,
//! duration and offset values.

use super::*;

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
