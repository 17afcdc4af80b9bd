//! Parsing of durations ("500ms", "30s", "2m", or a number of seconds) and byte sizes ("16MiB", "1MB", or a number of bytes), and durations written back the same way for messages.

use serde_json::Value;
use std::time::Duration;

const DURATION_HINT: &str = r#"use a number of seconds or a string like "500ms", "30s" or "2m""#;
const SIZE_HINT: &str = r#"use a number of bytes or a string like "512KiB", "16MiB" or "1MB""#;

/// Splits "12.5 MiB" into (12.5, "mib").
fn split_number(text: &str) -> Option<(f64, String)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number: f64 = text[..end].parse().ok()?;
    Some((number, text[end..].trim().to_ascii_lowercase()))
}

pub(crate) fn duration(value: &Value) -> Result<Duration, String> {
    let seconds = match value {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("{n} is not a valid duration; {DURATION_HINT}"))?,
        Value::String(s) => {
            let Some((number, unit)) = split_number(s) else {
                return Err(format!("{value} is not a valid duration; {DURATION_HINT}"));
            };
            let scale = match unit.as_str() {
                "ms" => 0.001,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "" => {
                    return Err(format!(
                        "{value} has no unit; write \"{}s\" for seconds or \"{}ms\" for milliseconds",
                        s.trim(),
                        s.trim()
                    ));
                }
                _ => return Err(format!("{value} has an unknown unit; {DURATION_HINT}")),
            };
            number * scale
        }
        _ => return Err(format!("expected a duration, got {value}; {DURATION_HINT}")),
    };
    if seconds < 0.0 {
        return Err(format!("{value} is negative; {DURATION_HINT}"));
    }
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{value} is not a valid duration; {DURATION_HINT}"))
}

pub(crate) fn size(value: &Value) -> Result<u64, String> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("{n} is not a whole number of bytes; {SIZE_HINT}")),
        Value::String(s) => {
            let Some((number, unit)) = split_number(s) else {
                return Err(format!("{value} is not a valid size; {SIZE_HINT}"));
            };
            let scale: u64 = match unit.as_str() {
                "" | "b" => 1,
                "kb" | "k" => 1_000,
                "mb" | "m" => 1_000_000,
                "gb" | "g" => 1_000_000_000,
                "kib" => 1 << 10,
                "mib" => 1 << 20,
                "gib" => 1 << 30,
                _ => return Err(format!("{value} has an unknown unit; {SIZE_HINT}")),
            };
            let bytes = (number * scale as f64).floor();
            // u64::MAX is not exactly representable; anything this large is a mistake anyway.
            if !bytes.is_finite() || bytes >= u64::MAX as f64 {
                return Err(format!("{value} is too large"));
            }
            Ok(bytes as u64)
        }
        _ => Err(format!("expected a size, got {value}; {SIZE_HINT}")),
    }
}

/// `1.5s`, `250ms`, `2m` — for messages.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations() {
        assert_eq!(duration(&json!(30)).unwrap(), Duration::from_secs(30));
        assert_eq!(duration(&json!(0.5)).unwrap(), Duration::from_millis(500));
        assert_eq!(
            duration(&json!("500ms")).unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(duration(&json!("30s")).unwrap(), Duration::from_secs(30));
        assert_eq!(duration(&json!("2m")).unwrap(), Duration::from_secs(120));
        assert_eq!(
            duration(&json!(" 1.5 h ")).unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(duration(&json!("0s")).unwrap(), Duration::ZERO);
    }

    #[test]
    fn bad_durations() {
        assert!(duration(&json!("30")).unwrap_err().contains("\"30s\""));
        assert!(
            duration(&json!("30 fortnights"))
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(duration(&json!("fast")).is_err());
        assert!(duration(&json!(-1)).unwrap_err().contains("negative"));
        assert!(duration(&json!(true)).is_err());
        assert!(duration(&json!("1e400s")).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(size(&json!(2048)).unwrap(), 2048);
        assert_eq!(size(&json!("16MiB")).unwrap(), 16 * 1024 * 1024);
        assert_eq!(size(&json!("512KiB")).unwrap(), 512 * 1024);
        assert_eq!(size(&json!("1MB")).unwrap(), 1_000_000);
        assert_eq!(size(&json!("1.5kib")).unwrap(), 1536);
        assert_eq!(size(&json!("100")).unwrap(), 100);
        assert_eq!(size(&json!("3 GiB")).unwrap(), 3 << 30);
    }

    #[test]
    fn bad_sizes() {
        assert!(size(&json!(1.5)).unwrap_err().contains("whole number"));
        assert!(size(&json!(-5)).is_err());
        assert!(
            size(&json!("16 MiBs"))
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(size(&json!("lots")).is_err());
        assert!(
            size(&json!("99999999999GiB"))
                .unwrap_err()
                .contains("too large")
        );
        assert!(size(&json!(null)).is_err());
    }
}
