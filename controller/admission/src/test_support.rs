//! What this crate's unit tests share.

use std::fmt::{Debug, Display};

/// The refusal `result` must be, as the person who sent the request reads
/// it; `what` names the case when it was not refused.
pub fn refused<T: Debug, E: Display>(result: Result<T, E>, what: &str) -> String {
    match result {
        Ok(value) => panic!("{what}: a refusal was expected, not {value:?}"),
        Err(error) => error.to_string(),
    }
}
