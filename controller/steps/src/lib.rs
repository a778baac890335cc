//! Executors: the code that carries out one attempt of a step. The same
//! executors serve `coxswain run` and the controller.

pub mod agent;
pub mod chat;

use std::future::Future;
use std::pin::Pin;

use coxswain_core::engine::{Work, WorkResult};

/// Carries out one attempt. Dropping the future cancels the work: a process
/// is killed, a request abandoned.
pub trait Executor: Send + Sync {
    /// Runs `work` to its end (success, failure or timeout).
    fn run(&self, work: &Work) -> impl Future<Output = WorkResult> + Send;
}

/// Where secret values come from: the Kubernetes Secret in a cluster (read
/// from the API server, so asynchronous), the environment or a file locally.
/// Values are never written to a status or a log.
///
/// The future is boxed because executors hold secrets as `Arc<dyn Secrets>`
/// (one source shared by every executor), and a trait object cannot return
/// `impl Future`.
pub trait Secrets: Send + Sync {
    /// The value of `key` in the secret `name`, or why it cannot be read.
    fn get<'a>(&'a self, name: &'a str, key: &'a str) -> SecretFuture<'a>;
}

/// What [`Secrets::get`] returns.
pub type SecretFuture<'a> = Pin<Box<dyn Future<Output = Result<String, SecretError>> + Send + 'a>>;

/// Why a secret value could not be read. Messages name the secret and key,
/// never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Locally: neither the environment variable nor the file is there.
    #[error("secret `{name}` key `{key}` is not set: {hint}")]
    NotSet {
        /// The secret.
        name: String,
        /// The key.
        key: String,
        /// Where the value would be looked for.
        hint: String,
    },
    /// No secret of that name exists.
    #[error("secret `{name}` does not exist")]
    NotFound {
        /// The secret.
        name: String,
    },
    /// The secret exists but has no such key.
    #[error("secret `{name}` has no key `{key}`")]
    KeyMissing {
        /// The secret.
        name: String,
        /// The key.
        key: String,
    },
    /// The reader may not read it (RBAC, or a Secret of another namespace).
    #[error("secret `{name}` may not be read: {reason}")]
    NotAllowed {
        /// The secret.
        name: String,
        /// Why not.
        reason: String,
    },
    /// It could not be read now (the API server or the file system failed);
    /// a later attempt may succeed.
    #[error("secret `{name}` key `{key}` cannot be read: {reason}")]
    Unavailable {
        /// The secret.
        name: String,
        /// The key.
        key: String,
        /// What failed.
        reason: String,
    },
}

pub mod http;
pub mod in_process;
pub mod launch;
pub mod local;
pub mod message;
pub mod net;
pub mod records;
pub mod script;
pub mod secrets;
pub mod workspace;
