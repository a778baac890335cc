//! Durations as flows write them: `30s`, `5m`, `1h30m`, `250ms`.

use std::time::Duration;

use super::FlowError;

/// Reads a duration: one or more `<number><unit>` groups with units `ms`,
/// `s`, `m`, `h`, `d`. On failure, says what is wrong for the author.
pub fn parse_duration(text: &str) -> Result<Duration, FlowError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(FlowError::EmptyDuration);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(FlowError::NotADuration(text.into()));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| FlowError::DurationTooLong(text.into()))?;
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
                return Err(FlowError::NoUnit {
                    text: text.into(),
                    number,
                });
            }
            other => {
                return Err(FlowError::UnknownUnit {
                    unit: other.into(),
                    text: text.into(),
                });
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
        assert_eq!(parse_duration("30s").unwrap(), (Duration::from_secs(30)));
        assert_eq!(
            parse_duration("250ms").unwrap(),
            (Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("1h30m").unwrap(),
            (Duration::from_secs(5400))
        );
        assert_eq!(
            parse_duration("2d").unwrap(),
            (Duration::from_secs(172_800))
        );
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        assert!(matches!(parse_duration(""), Err(FlowError::EmptyDuration)));
        let no_unit = parse_duration("30").unwrap_err();
        assert!(matches!(no_unit, FlowError::NoUnit { number: 30, .. }));
        assert_eq!(
            no_unit.to_string(),
            "`30` needs a unit after 30: ms, s, m, h or d"
        );
        assert!(parse_duration("5 minutes").is_err());
        let unit = parse_duration("5y").unwrap_err();
        assert!(matches!(&unit, FlowError::UnknownUnit { unit, .. } if unit == "y"));
        assert_eq!(
            unit.to_string(),
            "`y` in `5y` is not a unit; use ms, s, m, h or d"
        );
        assert!(matches!(
            parse_duration("s"),
            Err(FlowError::NotADuration(_))
        ));
    }
}
