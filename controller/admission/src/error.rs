//! Why admission could not start or keep its certificate. A request it
//! refuses is no error: that is its answer, with a message for the user.

use std::path::PathBuf;

/// Admission could not be set up, or its certificate not renewed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The API server refused or failed a request.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A certificate or key could not be made or read.
    #[error("the webhook's certificate: {0}")]
    Certificate(String),
    /// A file of `--webhook-cert-dir` could not be read.
    #[error("reading {path}: {source}")]
    CertFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listening address could not be bound or served.
    #[error("serving admission on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A setting is wrong or missing.
    #[error("{0}")]
    Setting(String),
}

impl AdmissionError {
    /// Wraps a client error with what was being done.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        AdmissionError::Kube {
            action: action.into(),
            source,
        }
    }
}

impl From<rcgen::Error> for AdmissionError {
    fn from(e: rcgen::Error) -> Self {
        AdmissionError::Certificate(e.to_string())
    }
}
