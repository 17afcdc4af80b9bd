//! Time zones: `TZID`s (IANA, vendor-prefixed, Windows and Outlook names, `VTIMEZONE`
//! definitions) to real zones, and wall-clock times to instants across daylight-saving changes.

use super::ics::{Raw, VTimezone, unquote};
use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, TimeZone};
use std::collections::HashMap;

/// A resolved date or instant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Moment {
    Date(NaiveDate),
    Time(DateTime<rrule::Tz>),
}

/// Looks up `TZID`s once per feed and remembers what had to be approximated.
pub(super) struct Zones<'d> {
    local: rrule::Tz,
    defs: &'d HashMap<String, VTimezone>,
    cache: HashMap<String, rrule::Tz>,
    pub(super) notes: Vec<String>,
}

impl<'d> Zones<'d> {
    pub(super) fn new(local: rrule::Tz, defs: &'d HashMap<String, VTimezone>) -> Zones<'d> {
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

    pub(super) fn moment(&mut self, raw: &Raw) -> Moment {
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
pub(super) fn localize(tz: rrule::Tz, at: &NaiveDateTime) -> DateTime<rrule::Tz> {
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
pub(super) fn resolve_tzid(
    tzid: &str,
    defs: &HashMap<String, VTimezone>,
) -> (rrule::Tz, Option<String>) {
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
pub(super) const WINDOWS_ZONES: &[(&str, &str)] = &[
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
