//! A chat connection: the Secret a flow's `command.chat` names, read into
//! what the followers and the outcome poster need.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// The Slack Web API, when a connection names no other.
pub const SLACK_API: &str = "https://slack.com/api";

/// A chat service and the bot's credentials on it.
#[derive(Clone, PartialEq, Eq)]
pub enum Connection {
    /// A Matrix homeserver; the token is the bot user's access token.
    Matrix {
        /// The homeserver's base URL.
        url: String,
        /// The access token.
        token: String,
    },
    /// A Slack app; the Events API calls are signed with `signing_secret`.
    Slack {
        /// The Web API base URL.
        url: String,
        /// The bot token (`xoxb-…`).
        token: String,
        /// The app's signing secret.
        signing_secret: String,
    },
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Connection::Matrix { url, .. } => write!(f, "Matrix({url})"),
            Connection::Slack { url, .. } => write!(f, "Slack({url})"),
        }
    }
}

/// Why a connection cannot be used; each message names the Secret.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The Secret could not be read.
    #[error("chat connection {namespace}/{name}: reading the Secret failed: {reason}")]
    Read {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A key is missing or not text.
    #[error("chat connection {namespace}/{name}: the Secret has no `{key}` ({why})")]
    Missing {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: &'static str,
        /// What the key is for.
        why: &'static str,
    },
    /// `type` is neither `matrix` nor `slack`.
    #[error("chat connection {namespace}/{name}: `type` is `{kind}`; write `matrix` or `slack`")]
    Kind {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What it says.
        kind: String,
    },
}

impl ConnectionError {
    /// Whether reading again later may help (the API server was away), as
    /// opposed to a Secret that is wrong until someone fixes it.
    pub fn is_transient(&self) -> bool {
        matches!(self, ConnectionError::Read { .. })
    }
}

/// Reads the connection `name` in `namespace`.
pub async fn read(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Connection, ConnectionError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets.get(name).await.map_err(|e| ConnectionError::Read {
        namespace: namespace.to_string(),
        name: name.to_string(),
        reason: e.to_string(),
    })?;
    from_secret(namespace, name, &secret)
}

/// The connection a Secret describes.
pub fn from_secret(
    namespace: &str,
    name: &str,
    secret: &Secret,
) -> Result<Connection, ConnectionError> {
    let value = |key: &'static str| -> Option<String> {
        let bytes = secret.data.as_ref()?.get(key)?;
        let text = String::from_utf8(bytes.0.clone()).ok()?;
        let text = text.trim().to_string();
        (!text.is_empty()).then_some(text)
    };
    let need = |key: &'static str, why: &'static str| {
        value(key).ok_or_else(|| ConnectionError::Missing {
            namespace: namespace.to_string(),
            name: name.to_string(),
            key,
            why,
        })
    };
    let kind = need("type", "`matrix` or `slack`")?;
    match kind.as_str() {
        "matrix" => Ok(Connection::Matrix {
            url: need("url", "the homeserver's URL")?,
            token: need("token", "the bot's access token")?,
        }),
        "slack" => Ok(Connection::Slack {
            url: value("url").unwrap_or_else(|| SLACK_API.to_string()),
            token: need("token", "the bot token")?,
            signing_secret: need("signingSecret", "the app's signing secret")?,
        }),
        other => Err(ConnectionError::Kind {
            namespace: namespace.to_string(),
            name: name.to_string(),
            kind: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn matrix_and_slack_connections_are_read() {
        let matrix = from_secret(
            "ns",
            "c",
            &secret(&[("type", "matrix"), ("url", "http://m"), ("token", "t\n")]),
        )
        .expect("matrix");
        assert_eq!(
            matrix,
            Connection::Matrix {
                url: "http://m".into(),
                token: "t".into()
            }
        );
        let slack = from_secret(
            "ns",
            "c",
            &secret(&[("type", "slack"), ("token", "x"), ("signingSecret", "s")]),
        )
        .expect("slack");
        assert!(matches!(slack, Connection::Slack { ref url, .. } if url == SLACK_API));
        assert!(!format!("{slack:?}").contains('x'));
    }

    #[test]
    fn a_wrong_secret_says_what_is_missing() {
        let error = from_secret("ns", "c", &secret(&[("type", "matrix"), ("url", "u")]))
            .expect_err("no token");
        assert_eq!(
            error.to_string(),
            "chat connection ns/c: the Secret has no `token` (the bot's access token)"
        );
        let error = from_secret("ns", "c", &secret(&[("type", "irc")])).expect_err("kind");
        assert!(error.to_string().contains("`irc`"), "{error}");
    }
}
