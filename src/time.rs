//! Wall-clock timestamps as RFC 3339 text (`2026-11-21T06:40:01Z`), without a date crate.

use std::time::SystemTime;

/// `2026-11-21T06:40:01Z` without pulling in a date crate.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // Written digit by digit: `format!` took ~2,800 instructions, once per audit record.
    let mut out = String::with_capacity(20);
    let fields = [
        (y.unsigned_abs(), 4, '-'),
        (m.unsigned_abs(), 2, '-'),
        (d.unsigned_abs(), 2, 'T'),
        (rem / 3600, 2, ':'),
        (rem % 3600 / 60, 2, ':'),
        (rem % 60, 2, 'Z'),
    ];
    for (value, width, then) in fields {
        push_padded(&mut out, value, width);
        out.push(then);
    }
    out
}

/// `value` in decimal, zero-padded to at least `width` digits.
fn push_padded(out: &mut String, value: u64, width: usize) {
    let digits = value.checked_ilog10().map_or(1, |l| l as usize + 1);
    out.extend(std::iter::repeat_n('0', width.saturating_sub(digits)));
    let mut buf = [0u8; 20];
    let mut n = value;
    for slot in buf[..digits].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend(buf[..digits].iter().map(|&b| char::from(b)));
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
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(at(253_402_300_800), "10000-01-01T00:00:00Z");
    }
}
