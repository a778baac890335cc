//! Durations as flows write them: `30s`, `5m`, `1h30m`, `250ms`.

use std::time::Duration;

/// Reads a duration: one or more `<number><unit>` groups with units `ms`,
/// `s`, `m`, `h`, `d`. Returns the message for the author on failure.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("a duration cannot be empty; write it like `30s`, `5m` or `1h30m`".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "`{text}` is not a duration; write it like `30s`, `5m` or `1h30m`"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}` is too long a duration"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            "d" => Duration::from_secs(number.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "`{text}` needs a unit after {number}: ms, s, m, h or d"
                ));
            }
            other => {
                return Err(format!(
                    "`{other}` in `{text}` is not a unit; use ms, s, m, h or d"
                ));
            }
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_single_and_combined_units() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        assert!(parse_duration("").unwrap_err().contains("empty"));
        assert!(parse_duration("30").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("5y").unwrap_err().contains("not a unit"));
        assert!(parse_duration("s").is_err());
    }
}
