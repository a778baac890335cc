//! One small JSON exchange with a service that posts messages (a webhook,
//! Slack's Web API): the address checked against the policy, the request
//! sent within a time limit, the answer read up to a cap, anything but a
//! 2xx refused. What the answer means is the caller's business.

use std::time::Duration;

use reqwest::{RequestBuilder, Url};

use super::{NetError, NetPolicy, ReadError, chain, preview, read_capped, redact, size};

/// Why an exchange failed. Messages name the endpoint without credentials.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The network policy refused the address.
    #[error("{0}")]
    Refused(NetError),
    /// No answer within the time limit.
    #[error("posting to {shown} took longer than {}s", .limit.as_secs_f64())]
    Timeout {
        /// The endpoint, without credentials.
        shown: String,
        /// The limit that applied.
        limit: Duration,
    },
    /// The request failed on the way.
    #[error("posting to {shown} failed: {reason}")]
    Send {
        /// The endpoint, without credentials.
        shown: String,
        /// Every cause, joined.
        reason: String,
    },
    /// The answer was over its cap.
    #[error("the answer from {shown} is larger than {}", size(*.limit))]
    TooLarge {
        /// The endpoint, without credentials.
        shown: String,
        /// The cap.
        limit: usize,
    },
    /// The answer could not be read.
    #[error("reading the answer from {shown} failed: {reason}")]
    Read {
        /// The endpoint, without credentials.
        shown: String,
        /// Every cause, joined.
        reason: String,
    },
    /// A status other than 2xx.
    #[error("{shown} answered {status}: {body}")]
    Status {
        /// The endpoint, without credentials.
        shown: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The start of the answer.
        body: String,
    },
}

impl PostError {
    /// Whether trying again later may work: network trouble, a rate limit
    /// or a server error; not a refusal.
    pub fn is_transient(&self) -> bool {
        match self {
            PostError::Timeout { .. } | PostError::Send { .. } | PostError::Read { .. } => true,
            PostError::Status { status, .. } => {
                status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS
            }
            PostError::Refused(_) | PostError::TooLarge { .. } => false,
        }
    }
}

/// Sends `request` (built for `url`) within `limit` once the policy allows
/// `url`, and returns the body of a 2xx answer of at most `cap` bytes.
pub async fn exchange(
    policy: &NetPolicy,
    url: &Url,
    request: RequestBuilder,
    limit: Duration,
    cap: usize,
) -> Result<Vec<u8>, PostError> {
    policy.check_url(url).await.map_err(PostError::Refused)?;
    let shown = redact(url);
    let response = request.timeout(limit).send().await.map_err(|e| {
        if e.is_timeout() {
            PostError::Timeout {
                shown: shown.clone(),
                limit,
            }
        } else {
            PostError::Send {
                shown: shown.clone(),
                reason: chain(&e),
            }
        }
    })?;
    let status = response.status();
    let bytes = match read_capped(response, cap).await {
        Ok(bytes) => bytes,
        Err(ReadError::TooLarge(limit)) => return Err(PostError::TooLarge { shown, limit }),
        Err(ReadError::Failed(e)) => {
            return Err(PostError::Read {
                shown,
                reason: chain(&e),
            });
        }
    };
    if !status.is_success() {
        return Err(PostError::Status {
            shown,
            status,
            body: preview(String::from_utf8_lossy(&bytes).trim(), 300),
        });
    }
    Ok(bytes)
}
