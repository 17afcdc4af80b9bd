//! Recurrence: an event's instances in the window, from `RRULE` (with the `rrule` crate),
//! `RDATE` and `EXDATE`, less the instances overrides replace.

use super::ics::{Raw, RawEvent, parse_time};
use super::listing::{Span, Window, one_line};
use super::zones::{Moment, Zones, localize};
use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, TimeZone, Utc};
use rrule::{RRule, RRuleSet, Unvalidated};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Recurrence instances looked at per event. A rule that started long ago is expanded from
/// its start, so this bounds the work one pathological series (e.g. minutely for years) can
/// cost; [`Budget`] bounds what a feed of many such series costs.
const MAX_SCAN: usize = 100_000;

/// How long one feed's series may take to expand, all together. The rrule crate may loop up
/// to 100 000 times inside one step (a rule that never matches), which no count of instances
/// sees, so the bound is on time: a feed of thousands of pathological series would otherwise
/// keep a thread busy for many minutes.
pub(super) const FEED_TIME: Duration = Duration::from_secs(2);

/// The time left for a feed's series; once it is spent, series are no longer expanded.
#[derive(Debug)]
pub(super) struct Budget {
    deadline: Instant,
    /// A series was cut short, or skipped, for want of time.
    pub(super) spent: bool,
}

impl Budget {
    pub(super) fn new(time: Duration) -> Budget {
        Budget {
            deadline: Instant::now() + time,
            spent: false,
        }
    }

    fn out(&mut self) -> bool {
        if !self.spent && Instant::now() >= self.deadline {
            self.spent = true;
        }
        self.spent
    }
}

/// Instances a series leaves out: `EXDATE`s and the ones overrides replace.
#[derive(Debug, Default, Clone)]
pub(super) struct Exclusions {
    instants: HashSet<i64>,
    days: HashSet<NaiveDate>,
}

impl Exclusions {
    pub(super) fn add(&mut self, m: &Moment) {
        match m {
            Moment::Date(d) => {
                self.days.insert(*d);
            }
            Moment::Time(t) => {
                self.instants.insert(t.timestamp());
            }
        }
    }

    pub(super) fn merge(&mut self, other: &Exclusions) {
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
pub(super) fn expand(
    ev: &RawEvent,
    skip: &Exclusions,
    zones: &mut Zones,
    window: &Window,
    budget: &mut Budget,
) -> Vec<Span> {
    let Some(start_raw) = &ev.start else {
        return Vec::new();
    };
    let shape = Shape {
        start: zones.moment(start_raw),
        end: ev.end.as_ref().map(|r| zones.moment(r)),
        duration: ev.duration,
    };
    let recurring = ev.rrule.is_some() || !ev.rdates.is_empty();

    // Each instance is a DateTime in the event's own zone, so the rule steps in wall-clock
    // time (a weekly 09:00 stays 09:00 across daylight-saving changes). All-day series run
    // in UTC at midnight and are turned back into dates.
    let (dtstart, all_day) = match shape.start {
        Moment::Date(d) => (
            rrule::Tz::UTC.from_utc_datetime(&d.and_time(NaiveTime::MIN)),
            true,
        ),
        Moment::Time(t) => (t, false),
    };

    if !recurring {
        let span = shape.span_of(&dtstart);
        return if window.keeps(&span) && !skip.covers(&dtstart) {
            vec![span]
        } else {
            Vec::new()
        };
    }

    if budget.out() {
        return Vec::new();
    }
    let set = series(ev, dtstart, all_day, zones);
    let mut out = Vec::new();
    let mut last: Option<i64> = None;
    let mut scanned = 0usize;
    for occ in &set {
        scanned += 1;
        if budget.out() {
            break;
        }
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
        let span = shape.span_of(&occ);
        if window.starts_after(&span) {
            break;
        }
        if window.keeps(&span) && !skip.covers(&occ) {
            out.push(span);
        }
    }
    out
}

/// How long each instance of an event lasts, from its first one.
struct Shape {
    start: Moment,
    end: Option<Moment>,
    duration: Option<TimeDelta>,
}

impl Shape {
    /// The span of the instance starting at `occ`.
    fn span_of(&self, occ: &DateTime<rrule::Tz>) -> Span {
        match self.start {
            Moment::Date(d) => {
                let len = match self.end {
                    Some(Moment::Date(e)) if e > d => (e - d).num_days(),
                    Some(Moment::Time(e)) if e.date_naive() > d => (e.date_naive() - d).num_days(),
                    _ => self
                        .duration
                        .map(|x| (x.num_seconds() + 86_399) / 86_400)
                        .filter(|n| *n > 0)
                        .unwrap_or(1),
                };
                let s = occ.date_naive();
                Span::Day(s, s + TimeDelta::days(len))
            }
            Moment::Time(t) => {
                let len = match self.end {
                    Some(Moment::Time(e)) if e >= t => {
                        e.with_timezone(&Utc) - t.with_timezone(&Utc)
                    }
                    _ => self
                        .duration
                        .filter(|x| *x >= TimeDelta::zero())
                        .unwrap_or_default(),
                };
                let s = occ.with_timezone(&Utc);
                Span::Timed(s, s + len)
            }
        }
    }
}

/// The set of a recurring event's instances: its `RRULE` (a rule that cannot be read is noted
/// and left out), its start, and its `RDATE`s in the series' own terms.
fn series(
    ev: &RawEvent,
    dtstart: DateTime<rrule::Tz>,
    all_day: bool,
    zones: &mut Zones,
) -> RRuleSet {
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
    // produce it; duplicates are dropped as the set is read.
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
    set
}

/// The `RRULE` value for this start. `UNTIL` is read here rather than by the rrule crate,
/// which insists on UTC for zoned starts, while feeds also write it as a local time or a
/// bare date.
fn rule(text: &str, dtstart: DateTime<rrule::Tz>, all_day: bool) -> Result<RRule, String> {
    // RFC 5545 rules are ASCII; the rrule crate's parser panics on some other text (a
    // `BYDAY` ending inside a multi-byte character).
    if !text.is_ascii() {
        return Err("it is not ASCII".into());
    }
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
