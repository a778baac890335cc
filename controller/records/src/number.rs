//! A JSON number as its exact value, for the two places that compare
//! numbers the way the expression evaluator does: the order of a lookup's
//! records ([`crate::order`]) and the `where` compiler ([`crate::filter`]).
//! One conversion, so the two never read a number differently.

use serde_json::Number;

/// A number exactly as the evaluator holds it: a whole number of up to 128
/// bits, or a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Exact {
    /// A whole number (every `i64` and `u64` JSON holds).
    Int(i128),
    /// Anything else.
    Float(f64),
}

/// `n` exactly. serde_json (without `arbitrary_precision`, which this
/// workspace does not enable) holds every other number as an `f64`, so
/// `as_f64` always answers; were it ever not to, the number would be NaN,
/// which no comparison holds for and which sorts with equal numbers.
pub(crate) fn exact(n: &Number) -> Exact {
    if let Some(i) = n.as_i64() {
        Exact::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Exact::Int(i128::from(u))
    } else {
        Exact::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_stay_whole_and_floats_stay_floats() {
        let n = |text: &str| serde_json::from_str::<Number>(text).expect("a number");
        assert_eq!(
            exact(&n("-9223372036854775808")),
            Exact::Int(i128::from(i64::MIN))
        );
        assert_eq!(
            exact(&n("18446744073709551615")),
            Exact::Int(i128::from(u64::MAX))
        );
        assert_eq!(exact(&n("1.5")), Exact::Float(1.5));
        assert_eq!(exact(&n("1e300")), Exact::Float(1e300));
    }
}
