//! What numbers mean, in one place: whole numbers are exact 64-bit integers
//! (`i64`, or `u64` above `i64::MAX`), other numbers are `f64`, and a
//! comparison between an integer and a float is exact mathematically — never
//! by rounding the integer to a float, which would make
//! `9007199254740993 == 9007199254740992.0` true. JSON holding a number no
//! `f64` can hold (`1e400`) is an error that names the number, never `null`.

use std::cmp::Ordering;

/// A number during comparison: every 64-bit integer fits in `i128`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    /// A whole number, signed or not.
    Int(i128),
    /// Any other number.
    Float(f64),
}

impl Num {
    /// The order of two numbers, exact for every pair; `None` only with NaN.
    pub(crate) fn compare(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => int_vs_float(a, b),
            (Num::Float(a), Num::Int(b)) => int_vs_float(b, a).map(Ordering::reverse),
        }
    }
}

/// Compares an integer with a float without rounding either: the float's
/// whole part is exact as an `i128` (every `f64` below 2^127 in magnitude
/// with a fraction is small enough), and the fraction breaks a tie.
fn int_vs_float(int: i128, float: f64) -> Option<Ordering> {
    // 2^127 as f64 is exact; no i128 reaches it, every i128 is above -2^127 - 1.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if float.is_nan() {
        return None;
    }
    if float >= LIMIT {
        return Some(Ordering::Less);
    }
    if float < -LIMIT {
        return Some(Ordering::Greater);
    }
    let whole = float.trunc();
    // In range and whole: the cast is exact.
    let by_whole = int.cmp(&(whole as i128));
    if by_whole != Ordering::Equal {
        return Some(by_whole);
    }
    // Same whole part: the fraction decides (`3 < 3.5`, `-3 > -3.5`).
    0.0f64.partial_cmp(&(float - whole))
}

/// A number in JSON text that no `f64` can hold, such as `1e400`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "stdout is JSON but holds a number out of range (beyond ±1.8e308) ending at line {line} column {column}; \
     print it as a string to keep it"
)]
pub struct OutOfRange {
    /// The line of the number, from 1.
    pub line: usize,
    /// The column of the number's last character, from 1.
    pub column: usize,
}

/// Whether `text` would be JSON but for a number out of range: such text must
/// fail the step rather than be read as "not JSON" (whose output is `null`).
pub fn number_out_of_range(text: &str) -> Option<OutOfRange> {
    // Into a `Value`: skipping (`IgnoredAny`) would not look at the number.
    let error = serde_json::from_str::<serde_json::Value>(text).err()?;
    // serde_json reports this case with this wording and no public code.
    error
        .to_string()
        .starts_with("number out of range")
        .then(|| OutOfRange {
            line: error.line(),
            column: error.column(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(a: Num, b: Num) -> Option<Ordering> {
        a.compare(b)
    }

    #[test]
    fn integers_and_floats_compare_exactly_near_2_pow_53() {
        let big = Num::Int(9_007_199_254_740_993);
        let float = Num::Float(9_007_199_254_740_992.0);
        assert_eq!(cmp(big, float), Some(Ordering::Greater));
        assert_eq!(cmp(float, big), Some(Ordering::Less));
        assert_eq!(
            cmp(Num::Int(9_007_199_254_740_992), float),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn fractions_break_ties_on_both_signs() {
        assert_eq!(cmp(Num::Int(3), Num::Float(3.5)), Some(Ordering::Less));
        assert_eq!(cmp(Num::Int(-3), Num::Float(-3.5)), Some(Ordering::Greater));
        assert_eq!(cmp(Num::Int(0), Num::Float(-0.0)), Some(Ordering::Equal));
        assert_eq!(cmp(Num::Int(-1), Num::Float(-0.5)), Some(Ordering::Less));
    }

    #[test]
    fn the_ends_of_64_bits_and_beyond() {
        let max = Num::Int(i128::from(i64::MAX));
        assert_eq!(cmp(max, Num::Float(2f64.powi(63))), Some(Ordering::Less));
        let umax = Num::Int(i128::from(u64::MAX));
        assert_eq!(cmp(umax, Num::Float(2f64.powi(64))), Some(Ordering::Less));
        assert_eq!(cmp(umax, Num::Float(f64::INFINITY)), Some(Ordering::Less));
        assert_eq!(
            cmp(umax, Num::Float(f64::NEG_INFINITY)),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp(umax, Num::Float(1e300)), Some(Ordering::Less));
        assert_eq!(
            cmp(Num::Int(i128::MIN), Num::Float(-1e300)),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp(Num::Int(1), Num::Float(f64::NAN)), None);
    }

    #[test]
    fn only_an_out_of_range_number_is_reported() {
        assert_eq!(
            number_out_of_range("{\"a\": 1,\n \"b\": 1e400}"),
            Some(OutOfRange {
                line: 2,
                column: 11
            })
        );
        assert!(number_out_of_range("-1e400").is_some());
        assert_eq!(number_out_of_range("{\"a\": 1e300}"), None);
        assert_eq!(number_out_of_range("hello"), None);
        assert_eq!(number_out_of_range(""), None);
        assert_eq!(number_out_of_range("123456789012345678901234567890"), None);
    }
}
