//! Coxswain's stored records (issue 23), the groundwork: a `where`
//! condition of the expression language compiled to PostgreSQL SQL that
//! keeps exactly the records the in-memory evaluator keeps, fails exactly
//! where it fails, and says which records it cannot decide.
//!
//! - [`record`]: the table ([`record::SCHEMA`]) and a record as `$record`
//!   reads it ([`record::Record`]).
//! - [`filter`]: [`filter::compile`] and [`filter::bind`].
//!
//! Numbers deserve a word: `jsonb` stores every number as a decimal and
//! hands it back as text, which serde_json reads as a whole number when it
//! is one of 64 bits and as a float otherwise. A float saved as
//! `1.152921504606847e18` (2^60) therefore comes back as the whole number
//! 1152921504606847000, and a lookup's records, like the condition's
//! evaluation in memory, see that. The compiler reproduces the evaluator on
//! the values as they come back.

#![warn(missing_docs)]

pub mod filter;
pub mod record;

pub use filter::{Bindings, CompileError, Filter, NotCompiled, Param, bind, compile};
pub use record::{Record, SCHEMA};
