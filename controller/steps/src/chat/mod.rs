//! Chat services spoken by Coxswain: the `message` step posts through them,
//! and the controller's conversation commands read rooms and answer there.
//! Only the wire protocols live here; what a message means is decided by
//! the callers.

pub mod matrix;
pub mod slack;

pub use matrix::{Matrix, MatrixError, MatrixEvent, SyncBatch};
pub use slack::{Post, Posted, Slack, SlackError};
