//! Coxswain's stored records (issue 23): steps `save` what they learned
//! and later runs `lookup` it, in SQLite on a laptop and PostgreSQL on a
//! cluster, and finished Runs archived in the same database.
//!
//! - [`store`]: the API both backends answer ([`Store`]), its semantics
//!   and what differs between the two.
//! - [`order`]: the one order of a lookup's records, in SQL and in Rust.
//! - [`record`]: the PostgreSQL table ([`record::SCHEMA`]) and a record as
//!   `$record` reads it ([`record::Record`]).
//! - [`filter`]: a `where` condition compiled to PostgreSQL that keeps
//!   exactly the records the in-memory evaluator keeps, fails exactly where
//!   it fails, and says which records it cannot decide ([`filter::compile`],
//!   [`filter::bind`]).
//!
//! Numbers deserve a word: `jsonb` stores every number as a decimal and
//! hands it back as text, which serde_json reads as a whole number when it
//! is one of 64 bits and as a float otherwise. A float saved as
//! `1.152921504606847e18` (2^60) therefore comes back from PostgreSQL as the
//! whole number 1152921504606847000, and a lookup's records, like the
//! condition's evaluation in memory, see that. The compiler reproduces the
//! evaluator on the values as they come back. SQLite keeps serde_json's own
//! text, so the same float comes back from it as the float it was.

#![warn(missing_docs)]

pub mod filter;
pub mod model;
mod number;
pub mod order;
mod pg;
pub mod record;
mod sqlite;
pub mod store;

pub use filter::{Bindings, CompileError, Filter, NotCompiled, Param, bind, compile};
pub use model::{
    ArchivedRun, Lookup, LookupError, MAX_LIMIT, RunQuery, RunSummary, SCHEMA_VERSION, Saved,
    Saving, StoreError,
};
pub use pg::{MIGRATION_LOCK, PgStore};
pub use record::{Record, SCHEMA};
pub use sqlite::SqliteStore;
pub use store::{PgSettings, Store};
