//! Secret values for `coxswain run`, where there is no Kubernetes Secret.
//!
//! A flow names a secret the way a cluster would (`name` and `key`), so the
//! same flow runs locally and in a cluster. Locally the value comes from an
//! environment variable or a file, never from the flow itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{SecretError, SecretFuture, Secrets};

/// Prefix of the environment variables [`EnvSecrets`] reads.
pub const ENV_PREFIX: &str = "COXSWAIN_SECRET_";

/// The environment variable that holds `key` of the secret `name`:
/// `COXSWAIN_SECRET_<NAME>_<KEY>`, upper-cased, anything not a letter or a
/// digit made `_`. Public so error messages and docs can name it exactly.
pub fn env_var_name(name: &str, key: &str) -> String {
    let mut var = String::from(ENV_PREFIX);
    for c in name.chars().chain(std::iter::once('_')).chain(key.chars()) {
        if c.is_ascii_alphanumeric() {
            var.push(c.to_ascii_uppercase());
        } else {
            var.push('_');
        }
    }
    var
}

/// Reads secrets from the environment, then from an optional directory laid
/// out like a mounted Secret (`<dir>/<name>/<key>`), so a laptop can hold
/// the tokens a flow needs without writing them into the flow.
#[derive(Debug, Clone, Default)]
pub struct EnvSecrets {
    dir: Option<PathBuf>,
}

impl EnvSecrets {
    /// Secrets from environment variables only.
    pub fn new() -> Self {
        EnvSecrets { dir: None }
    }

    /// Also look in `dir/<name>/<key>` when the variable is not set.
    pub fn with_dir(dir: impl Into<PathBuf>) -> Self {
        EnvSecrets {
            dir: Some(dir.into()),
        }
    }

    fn from_dir(dir: &Path, name: &str, key: &str) -> Option<Result<String, SecretError>> {
        // A name or key that could leave the directory is never looked up.
        let unsafe_part =
            |s: &str| s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\']);
        if unsafe_part(name) || unsafe_part(key) {
            return None;
        }
        let path = dir.join(name).join(key);
        match std::fs::read_to_string(&path) {
            Ok(mut value) => {
                // `echo token > file` adds a line break that would break a
                // header; one trailing line break is not part of the value.
                if value.ends_with('\n') {
                    value.pop();
                    if value.ends_with('\r') {
                        value.pop();
                    }
                }
                Some(Ok(value))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(Err(SecretError::Unavailable {
                name: name.to_string(),
                key: key.to_string(),
                reason: format!("cannot read {}: {e}", path.display()),
            })),
        }
    }
}

impl EnvSecrets {
    /// The lookup itself; reading the environment and a small file does not
    /// wait, so it is synchronous underneath the trait's future.
    fn read(&self, name: &str, key: &str) -> Result<String, SecretError> {
        let var = env_var_name(name, key);
        if let Ok(value) = std::env::var(&var) {
            return Ok(value);
        }
        let hint = match &self.dir {
            Some(dir) => {
                if let Some(found) = Self::from_dir(dir, name, key) {
                    return found;
                }
                format!(
                    "set the environment variable {var} or create the file {}",
                    dir.join(name).join(key).display()
                )
            }
            None => format!("set the environment variable {var}"),
        };
        Err(SecretError::NotSet {
            name: name.to_string(),
            key: key.to_string(),
            hint,
        })
    }
}

impl Secrets for EnvSecrets {
    fn get<'a>(&'a self, name: &'a str, key: &'a str) -> SecretFuture<'a> {
        let found = self.read(name, key);
        Box::pin(std::future::ready(found))
    }
}

/// Secrets held in memory, for tests and for embedding the executors where
/// values are already loaded.
#[derive(Debug, Clone, Default)]
pub struct MapSecrets {
    values: BTreeMap<(String, String), String>,
}

impl MapSecrets {
    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key` of the secret `name`.
    pub fn with(mut self, name: &str, key: &str, value: &str) -> Self {
        self.values
            .insert((name.to_string(), key.to_string()), value.to_string());
        self
    }
}

impl Secrets for MapSecrets {
    fn get<'a>(&'a self, name: &'a str, key: &'a str) -> SecretFuture<'a> {
        let found = self
            .values
            .get(&(name.to_string(), key.to_string()))
            .cloned()
            .ok_or_else(|| SecretError::KeyMissing {
                name: name.to_string(),
                key: key.to_string(),
            });
        Box::pin(std::future::ready(found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_var_names_are_upper_case_with_underscores() {
        assert_eq!(
            env_var_name("slack-bot", "token"),
            "COXSWAIN_SECRET_SLACK_BOT_TOKEN"
        );
        assert_eq!(env_var_name("a.b", "c d"), "COXSWAIN_SECRET_A_B_C_D");
    }

    #[tokio::test]
    async fn missing_secret_names_the_variable() {
        let err = EnvSecrets::new()
            .get("no-such-secret-xyz", "key")
            .await
            .unwrap_err();
        assert!(matches!(err, SecretError::NotSet { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("COXSWAIN_SECRET_NO_SUCH_SECRET_XYZ_KEY"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn directory_values_lose_one_trailing_line_break() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("api-unit-test")).unwrap();
        std::fs::write(dir.path().join("api-unit-test/token"), "abc\n").unwrap();
        let secrets = EnvSecrets::with_dir(dir.path());
        assert_eq!(secrets.get("api-unit-test", "token").await.unwrap(), "abc");
        let err = secrets.get("api-unit-test", "other").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("COXSWAIN_SECRET_API_UNIT_TEST_OTHER"),
            "{err}"
        );
        assert!(secrets.get("..", "token").await.is_err());
        std::fs::create_dir(dir.path().join("api-unit-test/unreadable")).unwrap();
        let err = secrets
            .get("api-unit-test", "unreadable")
            .await
            .unwrap_err();
        assert!(matches!(err, SecretError::Unavailable { .. }), "{err:?}");
    }
}
