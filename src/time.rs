//! Wall-clock timestamps as RFC 3339 text (`2026-11-21T06:40:01Z`), the one form every record
//! and status file uses.

use chrono::{DateTime, SecondsFormat, Utc};
use std::time::SystemTime;

/// `2026-11-21T06:40:01Z`: whole seconds, UTC.
pub fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_pads_every_field() {
        let at = |secs| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_290_900), "2026-11-21T19:55:00Z");
        assert_eq!(at(1_795_328_461), "2026-11-22T06:21:01Z");
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
    }
}
