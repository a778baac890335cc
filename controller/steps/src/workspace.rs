//! A run's workspace made with the real `git`: each repo fetched at its ref
//! into `<dir>/<name>`, the run's branch made there from that commit, and at
//! the end the branch pushed back. `coxswain run` calls it on this machine;
//! the cluster's checkout and push Jobs are meant to call the same code.
//!
//! Credentials never reach a command line, a URL or `.git/config`: git
//! asks a credential helper given in its environment (`GIT_CONFIG_*`) for
//! that one command, which prints the values from two variables set for it
//! alone. Every git message kept is redacted of the secret values anyway.
//! git never prompts (`GIT_TERMINAL_PROMPT=0`, ssh in batch mode).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use coxswain_core::api::{PushedBranch, RepoCheckout, Workspace, WorkspaceRepo, WorkspaceStatus};
use coxswain_core::engine::{codes, step_error};
use tokio::process::Command;

use crate::net::Redactor;
use crate::{SecretError, Secrets};

/// The name and address commits made in a checkout carry unless a script
/// sets its own (`git -c user.name=…`, `GIT_AUTHOR_NAME`): a script's
/// `$HOME` is empty, so git would otherwise refuse to commit.
pub const COMMITTER: (&str, &str) = ("Coxswain", "coxswain@localhost");

/// The username sent with a `token` (the password), as GitHub, GitLab and
/// Gitea accept it.
pub const TOKEN_USERNAME: &str = "x-access-token";

/// The most of git's error output kept in a message.
const MAX_GIT_MESSAGE: usize = 2000;

/// The longest one git command may take (a clone of a large repo over a
/// slow link included) before it is stopped: a server that never answers
/// must not hold a run forever before its first step.
pub const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Why a workspace could not be made or pushed. Each message names the
/// repo; none holds a secret's value.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The workspace's folder could not be made (or, given, found).
    #[error("cannot make or open the workspace folder {}: {source}", .path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `git` could not be started.
    #[error("repo `{repo}`: cannot run git ({source}); is git installed and on PATH?")]
    NoGit {
        /// The repo's name.
        repo: String,
        /// Why.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("repo `{repo}` ({url}): {action} failed: {message}")]
    Git {
        /// The repo's name.
        repo: String,
        /// Its URL as the flow writes it.
        url: String,
        /// What was being done (`fetching ref main`).
        action: String,
        /// git's own words, redacted.
        message: String,
    },
    /// The repo's credentials could not be read.
    #[error(
        "repo `{repo}`: cannot read its credentials from the secret `{secret}`: {reason} (give `token`, or `username` and `password`)"
    )]
    Credentials {
        /// The repo's name.
        repo: String,
        /// The Secret.
        secret: String,
        /// What the secret store said.
        reason: Box<SecretError>,
    },
    /// `--workspace DIR` lacks a repo's checkout.
    #[error("repo `{repo}`: there is no git checkout at {} (the workspace given must hold one folder per repo)", .path.display())]
    NoCheckout {
        /// The repo's name.
        repo: String,
        /// Where it was looked for.
        path: PathBuf,
    },
}

impl From<WorkspaceError> for coxswain_core::api::StepError {
    fn from(error: WorkspaceError) -> Self {
        step_error(codes::WORKSPACE, error.to_string())
    }
}

/// A new private folder (0700) for a run's workspace in the system's
/// temporary directory, removed when the value is dropped.
pub fn temp_folder() -> Result<tempfile::TempDir, WorkspaceError> {
    tempfile::Builder::new()
        .prefix("coxswain-workspace-")
        .tempdir()
        .map_err(|source| WorkspaceError::Folder {
            path: std::env::temp_dir(),
            source,
        })
}

/// A repo's credentials, read from its `secretRef`.
#[derive(Clone)]
pub struct Credentials {
    username: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The workspace's repos with their credentials, ready for git.
#[derive(Debug)]
pub struct Repos<'w> {
    workspace: &'w Workspace,
    credentials: Vec<Option<Credentials>>,
    redactor: Redactor,
}

impl<'w> Repos<'w> {
    /// Reads each repo's credentials (`token`, else `username` and
    /// `password` of its `secretRef`) from `secrets`.
    pub async fn read(
        workspace: &'w Workspace,
        secrets: &dyn Secrets,
    ) -> Result<Repos<'w>, WorkspaceError> {
        let mut credentials = Vec::with_capacity(workspace.repos.len());
        let mut redactor = Redactor::new();
        for repo in &workspace.repos {
            let Some(secret) = &repo.secret_ref else {
                credentials.push(None);
                continue;
            };
            let failed = |reason| WorkspaceError::Credentials {
                repo: repo.name.clone(),
                secret: secret.name.clone(),
                reason: Box::new(reason),
            };
            let found = match secrets.get(&secret.name, "token").await {
                Ok(token) => {
                    redactor.add(&secret.name, "token", &token);
                    Credentials {
                        username: TOKEN_USERNAME.into(),
                        password: token,
                    }
                }
                Err(SecretError::NotSet { .. } | SecretError::KeyMissing { .. }) => {
                    let username = secrets
                        .get(&secret.name, "username")
                        .await
                        .map_err(failed)?;
                    let password = secrets
                        .get(&secret.name, "password")
                        .await
                        .map_err(failed)?;
                    redactor.add(&secret.name, "password", &password);
                    Credentials { username, password }
                }
                Err(other) => return Err(failed(other)),
            };
            credentials.push(Some(found));
        }
        Ok(Repos {
            workspace,
            credentials,
            redactor,
        })
    }

    /// Checks every repo out into `dir/<name>` at its ref and makes the
    /// branch `branch` there, in the flow's order; the first failure stops
    /// it. The status names each commit and `dir` as the volume.
    pub async fn check_out(
        &self,
        dir: &Path,
        branch: &str,
    ) -> Result<WorkspaceStatus, WorkspaceError> {
        let mut checkouts = Vec::with_capacity(self.workspace.repos.len());
        for (repo, credentials) in self.workspace.repos.iter().zip(&self.credentials) {
            let git = Git {
                repo,
                dir: dir.join(&repo.name),
                credentials: credentials.as_ref(),
                redactor: &self.redactor,
            };
            checkouts.push(git.check_out(branch).await?);
        }
        Ok(WorkspaceStatus {
            branch: branch.to_string(),
            repos: checkouts,
            volume: Some(dir.display().to_string()),
            ..Default::default()
        })
    }

    /// The checkouts already in `dir` (`coxswain run --workspace DIR`):
    /// nothing is fetched or made, each commit is the checkout's HEAD.
    pub async fn existing(
        &self,
        dir: &Path,
        branch: &str,
    ) -> Result<WorkspaceStatus, WorkspaceError> {
        let mut checkouts = Vec::with_capacity(self.workspace.repos.len());
        for repo in &self.workspace.repos {
            let git = Git {
                repo,
                dir: dir.join(&repo.name),
                credentials: None,
                redactor: &self.redactor,
            };
            if !git.dir.join(".git").exists() {
                return Err(WorkspaceError::NoCheckout {
                    repo: repo.name.clone(),
                    path: git.dir,
                });
            }
            let commit = git.run("reading its HEAD", &["rev-parse", "HEAD"]).await?;
            checkouts.push(RepoCheckout {
                name: repo.name.clone(),
                url: repo.url.clone(),
                ref_: repo.ref_.clone(),
                commit,
            });
        }
        Ok(WorkspaceStatus {
            branch: branch.to_string(),
            repos: checkouts,
            volume: Some(dir.display().to_string()),
            ..Default::default()
        })
    }

    /// Pushes `branch` from every checkout in `dir` to its repo. Each push
    /// that worked is listed, with the commit pushed, even when a later one
    /// failed; the error is the first failure.
    pub async fn push(
        &self,
        dir: &Path,
        branch: &str,
    ) -> (Vec<PushedBranch>, Option<WorkspaceError>) {
        let mut pushed = Vec::new();
        for (repo, credentials) in self.workspace.repos.iter().zip(&self.credentials) {
            let git = Git {
                repo,
                dir: dir.join(&repo.name),
                credentials: credentials.as_ref(),
                redactor: &self.redactor,
            };
            match git.push(branch).await {
                Ok(commit) => pushed.push(PushedBranch {
                    name: repo.name.clone(),
                    commit,
                }),
                Err(e) => return (pushed, Some(e)),
            }
        }
        (pushed, None)
    }
}

/// git in one repo's checkout.
struct Git<'a> {
    repo: &'a WorkspaceRepo,
    dir: PathBuf,
    credentials: Option<&'a Credentials>,
    redactor: &'a Redactor,
}

impl Git<'_> {
    async fn check_out(&self, branch: &str) -> Result<RepoCheckout, WorkspaceError> {
        let folder_failed = |source| WorkspaceError::Folder {
            path: self.dir.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(folder_failed)?;
        self.run("making the checkout", &["init", "--quiet"])
            .await?;
        for (key, value) in [("user.name", COMMITTER.0), ("user.email", COMMITTER.1)] {
            self.run("setting the committer", &["config", key, value])
                .await?;
        }
        self.run(
            "adding the remote",
            &["remote", "add", "origin", &self.repo.url],
        )
        .await?;
        let reference = self.repo.ref_.as_deref().unwrap_or("HEAD");
        let depth = self.repo.depth();
        let depth_arg = format!("--depth={depth}");
        let mut fetch = vec!["fetch", "--quiet", "--no-tags"];
        if depth > 0 {
            fetch.push(&depth_arg);
        }
        // The ref after `--`: validation refuses a leading `-`, and this
        // keeps git from ever reading one as an option.
        fetch.extend(["origin", "--", reference]);
        let action = match &self.repo.ref_ {
            Some(r) => format!("fetching the ref `{r}`"),
            None => "fetching the remote's HEAD".to_string(),
        };
        self.run(&action, &fetch).await?;
        self.run(
            &format!("making the branch `{branch}`"),
            &["checkout", "--quiet", "-b", branch, "FETCH_HEAD"],
        )
        .await?;
        let commit = self.run("reading its HEAD", &["rev-parse", "HEAD"]).await?;
        Ok(RepoCheckout {
            name: self.repo.name.clone(),
            url: self.repo.url.clone(),
            ref_: self.repo.ref_.clone(),
            commit,
        })
    }

    async fn push(&self, branch: &str) -> Result<String, WorkspaceError> {
        let action = format!("pushing the branch `{branch}`");
        let commit = self
            .run(
                &action,
                &["rev-parse", "--verify", &format!("refs/heads/{branch}")],
            )
            .await?;
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        self.run(&action, &["push", "--quiet", "origin", &refspec])
            .await?;
        Ok(commit)
    }

    /// Runs git with `args` in the checkout; its trimmed stdout, or an
    /// error naming `action` with git's redacted stderr.
    async fn run(&self, action: &str, args: &[&str]) -> Result<String, WorkspaceError> {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("GIT_TERMINAL_PROMPT", "0")
            // Only the transports a flow may name (validation refuses the
            // others, `file` on a cluster): never `ext::` and friends.
            .env("GIT_ALLOW_PROTOCOL", "https:http:git:ssh:file")
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
            .kill_on_drop(true);
        if let Some(credentials) = self.credentials {
            command
                .env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "credential.helper")
                .env(
                    "GIT_CONFIG_VALUE_0",
                    "!f() { test \"$1\" = get && printf 'username=%s\\npassword=%s\\n' \"$COXSWAIN_GIT_USERNAME\" \"$COXSWAIN_GIT_PASSWORD\"; }; f",
                )
                .env("COXSWAIN_GIT_USERNAME", &credentials.username)
                .env("COXSWAIN_GIT_PASSWORD", &credentials.password);
        }
        let output = command
            .output()
            .await
            .map_err(|source| WorkspaceError::NoGit {
                repo: self.repo.name.clone(),
                source,
            })?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_string());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let mut message = self.redactor.text(stderr.trim());
        if message.is_empty() {
            message = format!("git exited with {}", output.status);
        }
        if message.len() > MAX_GIT_MESSAGE {
            let mut cut = MAX_GIT_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        Err(WorkspaceError::Git {
            repo: self.repo.name.clone(),
            url: self.repo.url.clone(),
            action: action.to_string(),
            message: message.replace('\n', "; "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::RepoSecretRef;

    #[tokio::test]
    async fn git_errors_name_the_repo_and_never_a_secret_value() {
        let secrets_dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(secrets_dir.path().join("git-app")).unwrap();
        std::fs::write(secrets_dir.path().join("git-app/token"), "tok-9f8e7d\n").unwrap();
        let secrets = crate::secrets::EnvSecrets::with_dir(secrets_dir.path());
        // A repo whose git error quotes the secret's value (here through
        // the path git could not find).
        let workspace = Workspace {
            repos: vec![WorkspaceRepo {
                name: "app".into(),
                url: "file:///nonexistent/tok-9f8e7d/app.git".into(),
                secret_ref: Some(RepoSecretRef {
                    name: "git-app".into(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let repos = Repos::read(&workspace, &secrets).await.unwrap();
        assert!(!format!("{:?}", repos.credentials).contains("tok-9f8e7d"));
        let dir = tempfile::tempdir().unwrap();
        let error = repos
            .check_out(dir.path(), "coxswain/r")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("repo `app` (file:///nonexistent/tok-9f8e7d/app.git): fetching the remote's HEAD failed: "),
            "{error}"
        );
        let git_words = error
            .split_once("failed: ")
            .map(|(_, w)| w)
            .unwrap_or_default();
        assert!(!git_words.contains("tok-9f8e7d"), "{error}");
        assert!(
            git_words.contains("[redacted secret git-app/token]"),
            "{error}"
        );
    }
}
