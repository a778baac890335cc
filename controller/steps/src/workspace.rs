//! A run's workspace made with the real `git`: each repo fetched at its ref
//! into `<dir>/<name>`, the run's branch made there from that commit, and at
//! the end the branch pushed back. `coxswain run` calls it on this machine;
//! the cluster's checkout and push Jobs call the same code.
//!
//! Credentials go to the flow's URL and nowhere else. They never reach a
//! command line, a URL or `.git/config`: git asks a credential helper given
//! on its command line for that one command, which prints the values from
//! variables set for it alone, and only when git asks for the flow's own
//! protocol, host and path. The push never runs git in the checkout, whose
//! `.git` every script step may rewrite (its remote, hooks, helpers): it
//! pushes the branch's commit from a fresh bare repository of its own to
//! the URL in the flow (see `Git::push`). No hook or fsmonitor ever runs,
//! git gets none of our other variables, every git message kept is redacted
//! of the secret values anyway, and git never prompts
//! (`GIT_TERMINAL_PROMPT=0`, ssh in batch mode).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use coxswain_core::api::{PushedBranch, RepoCheckout, Workspace, WorkspaceRepo, WorkspaceStatus};
use coxswain_core::engine::{codes, step_error};
use coxswain_core::text::floor_boundary;
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
            let git = self.git(repo, dir, credentials.as_ref());
            checkouts.push(git.check_out(branch).await?);
        }
        Ok(checked_out(dir, branch, checkouts))
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
            let git = self.git(repo, dir, None);
            if !git.dir.join(".git").exists() {
                return Err(WorkspaceError::NoCheckout {
                    repo: repo.name.clone(),
                    path: git.dir,
                });
            }
            let commit = git
                .run(&git.dir, "reading its HEAD", &["rev-parse", "HEAD"])
                .await?;
            checkouts.push(RepoCheckout {
                name: repo.name.clone(),
                url: repo.url.clone(),
                ref_: repo.ref_.clone(),
                commit,
            });
        }
        Ok(checked_out(dir, branch, checkouts))
    }

    /// git for `repo`, whose checkout is `dir/<name>`.
    fn git<'a>(
        &'a self,
        repo: &'a WorkspaceRepo,
        dir: &Path,
        credentials: Option<&'a Credentials>,
    ) -> Git<'a> {
        Git {
            repo,
            dir: dir.join(&repo.name),
            credentials,
            redactor: &self.redactor,
        }
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
            let git = self.git(repo, dir, credentials.as_ref());
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

/// The status of a workspace whose repos are checked out in `dir`.
fn checked_out(dir: &Path, branch: &str, repos: Vec<RepoCheckout>) -> WorkspaceStatus {
    WorkspaceStatus {
        branch: branch.to_string(),
        repos,
        volume: Some(dir.display().to_string()),
        ..Default::default()
    }
}

/// git for one repo: in its checkout (to make it), or in a fresh bare
/// repository of our own (to push from it).
struct Git<'a> {
    repo: &'a WorkspaceRepo,
    dir: PathBuf,
    credentials: Option<&'a Credentials>,
    redactor: &'a Redactor,
}

/// The variables a git command keeps from ours: where programs are, the
/// locale, and this machine's own network settings (proxies, CA
/// certificates, the ssh agent). Everything else — the secrets
/// `coxswain run` reads from its environment first of all — is not passed.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "SSH_AUTH_SOCK",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// Settings given on every git command line, which no config file can
/// undo: no hook ever runs (`pre-push`, `post-checkout`, … planted in a
/// checkout), no fsmonitor command, no commit-graph or multi-pack index
/// read from a checkout's object store (only its objects are used).
const SAFE_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.commitGraph=false",
    "core.multiPackIndex=false",
    "gc.auto=0",
];

/// The credential helper git is given for a repo with a `secretRef`: it
/// answers `get` only when git asks for the flow's own URL — the same
/// protocol, host (with its port) and path (`credential.useHttpPath`) —
/// from the variables set for that one command, and says nothing to any
/// other request (a redirect to another host, say).
const HELPER: &str = "!f() { test \"$1\" = get || return 0; seen=0; while IFS= read -r line && test -n \"$line\"; do case \"$line\" in \"protocol=$COXSWAIN_GIT_PROTOCOL\"|\"host=$COXSWAIN_GIT_HOST\"|\"path=$COXSWAIN_GIT_PATH\") seen=$((seen + 1)) ;; protocol=*|host=*|path=*) return 0 ;; esac; done; test \"$seen\" = \"$COXSWAIN_GIT_MATCH\" || return 0; printf 'username=%s\\npassword=%s\\n' \"$COXSWAIN_GIT_USERNAME\" \"$COXSWAIN_GIT_PASSWORD\"; }; f";

/// What git's credential code reads from a URL (its `credential_from_url`):
/// the protocol, the host with its port as written, and the path without
/// its leading and trailing slashes, percent-decoded. `None` for a URL
/// without `://` (never one a flow may name).
fn credential_target(url: &str) -> Option<(String, String, String)> {
    let (protocol, rest) = url.split_once("://")?;
    let slash = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..slash];
    let host = authority.split_once('@').map_or(authority, |(_, h)| h);
    let path = rest[slash..].trim_matches('/');
    Some((
        protocol.to_string(),
        percent_decode(host),
        percent_decode(path),
    ))
}

/// `%XX` decoded as git's `url_decode` does (bytes, then text).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `text` is a whole object id (SHA-1 or SHA-256, lowercase hex).
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The most of a ref file or `.git/shallow` read: more is no checkout git
/// made.
const MAX_REF_FILE: u64 = 16 * 1024 * 1024;

/// Reads a file the steps may have written, at most [`MAX_REF_FILE`]
/// bytes; `None` when it is not there.
fn read_small(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    match std::fs::File::open(path) {
        Ok(file) => {
            let mut text = String::new();
            file.take(MAX_REF_FILE)
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Ok(Some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The commit `refs/heads/<branch>` names in the checkout's `.git`, read
/// from the files themselves (a loose ref, else `packed-refs`) rather than
/// by git in the checkout, which would read its config. A file's content
/// never reaches the message: a step may have made it a link to a secret.
fn branch_tip(git_dir: &Path, branch: &str) -> Result<String, String> {
    let name = format!("refs/heads/{branch}");
    let mut loose = git_dir.to_path_buf();
    loose.extend(name.split('/'));
    if let Some(text) = read_small(&loose)? {
        let id = text.trim_end();
        return if is_object_id(id) {
            Ok(id.to_string())
        } else {
            Err(format!(
                "{} does not hold a commit id (a symbolic or damaged ref is not pushed)",
                loose.display()
            ))
        };
    }
    if let Some(text) = read_small(&git_dir.join("packed-refs"))? {
        for line in text.lines() {
            if let Some((id, refname)) = line.split_once(' ')
                && refname == name
            {
                return if is_object_id(id) {
                    Ok(id.to_string())
                } else {
                    Err(format!(
                        "its line in {}/packed-refs does not hold a commit id",
                        git_dir.display()
                    ))
                };
            }
        }
    }
    Err(format!(
        "the checkout has no branch `{branch}` any more (a step deleted or renamed it)"
    ))
}

impl Git<'_> {
    async fn check_out(&self, branch: &str) -> Result<RepoCheckout, WorkspaceError> {
        let folder_failed = |source| WorkspaceError::Folder {
            path: self.dir.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(folder_failed)?;
        let here = self.dir.as_path();
        self.run(here, "making the checkout", &["init", "--quiet"])
            .await?;
        for (key, value) in [("user.name", COMMITTER.0), ("user.email", COMMITTER.1)] {
            self.run(here, "setting the committer", &["config", key, value])
                .await?;
        }
        // `origin` for the steps' own use (a `git log origin/…`, a diff);
        // the push never reads it (see `push`).
        self.run(
            here,
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
        // The flow's URL itself, and the ref after `--`: validation
        // refuses a leading `-`, and this keeps git from ever reading one
        // as an option.
        fetch.extend([self.repo.url.as_str(), "--", reference]);
        let action = match &self.repo.ref_ {
            Some(r) => format!("fetching the ref `{r}`"),
            None => "fetching the remote's HEAD".to_string(),
        };
        self.run(here, &action, &fetch).await?;
        self.run(
            here,
            &format!("making the branch `{branch}`"),
            &["checkout", "--quiet", "-b", branch, "FETCH_HEAD"],
        )
        .await?;
        let commit = self
            .run(here, "reading its HEAD", &["rev-parse", "HEAD"])
            .await?;
        Ok(RepoCheckout {
            name: self.repo.name.clone(),
            url: self.repo.url.clone(),
            ref_: self.repo.ref_.clone(),
            commit,
        })
    }

    /// Pushes the checkout's `branch` to the flow's URL.
    ///
    /// Every script step may write the checkout's `.git`: its config
    /// (`remote.origin.url`, `url.*.insteadOf`, `credential.helper`,
    /// `core.sshCommand`, `http.proxy`, `include.path`, …), its hooks and
    /// its refs. So no git command runs in the checkout once steps ran:
    /// the push reads the branch's commit from the ref files, makes a
    /// fresh bare repository in a private temporary folder (outside the
    /// workspace) that borrows the checkout's objects
    /// (`objects/info/alternates`: objects only, never config or hooks) and
    /// its shallow boundary, and pushes that commit from there to the URL
    /// the flow names. git reads no config but ours there, runs no hook
    /// (`core.hooksPath=/dev/null`, `--no-verify`), and, with a Secret,
    /// reads no system or user config and asks only our helper, which
    /// answers only for the flow's URL. (Fetching from the checkout
    /// instead would run `git upload-pack` in it, which reads its config;
    /// git itself warns that its surface is large.)
    async fn push(&self, branch: &str) -> Result<String, WorkspaceError> {
        let action = format!("pushing the branch `{branch}`");
        let git_dir = self.dir.join(".git");
        let failed = |message: String| WorkspaceError::Git {
            repo: self.repo.name.clone(),
            url: self.repo.url.clone(),
            action: action.clone(),
            message: self.redactor.text(&message),
        };
        let commit = branch_tip(&git_dir, branch).map_err(&failed)?;
        let bare = tempfile::Builder::new()
            .prefix("coxswain-push-")
            .tempdir()
            .map_err(|source| WorkspaceError::Folder {
                path: std::env::temp_dir(),
                source,
            })?;
        let here = bare.path();
        self.run(here, &action, &["init", "--quiet", "--bare"])
            .await?;
        let objects = std::path::absolute(git_dir.join("objects"))
            .map_err(|e| failed(format!("cannot find the checkout's objects: {e}")))?;
        let objects = objects
            .to_str()
            .filter(|o| !o.contains('\n'))
            .ok_or_else(|| {
                failed("the checkout's path cannot be written in objects/info/alternates".into())
            })?;
        std::fs::write(here.join("objects/info/alternates"), format!("{objects}\n"))
            .map_err(|e| failed(format!("cannot borrow the checkout's objects: {e}")))?;
        if let Some(text) = read_small(&git_dir.join("shallow")).map_err(&failed)? {
            let lines: Vec<&str> = text.lines().collect();
            if !lines.iter().all(|l| is_object_id(l)) {
                return Err(failed(
                    "the checkout's .git/shallow does not list commit ids".into(),
                ));
            }
            std::fs::write(here.join("shallow"), lines.join("\n") + "\n")
                .map_err(|e| failed(format!("cannot copy the shallow boundary: {e}")))?;
        }
        let refname = format!("refs/heads/{branch}");
        self.run(here, &action, &["update-ref", &refname, &commit])
            .await?;
        let refspec = format!("{refname}:{refname}");
        self.run(
            here,
            &action,
            &[
                "push",
                "--quiet",
                "--no-verify",
                "--no-recurse-submodules",
                &self.repo.url,
                &refspec,
            ],
        )
        .await?;
        Ok(commit)
    }

    /// Runs git with `args` in the repository at `dir`; its trimmed
    /// stdout, or an error naming `action` with git's redacted stderr.
    ///
    /// git gets none of our variables but [`PASSED_ENV`], the settings of
    /// [`SAFE_CONFIG`] on its command line, only the transport of the
    /// flow's URL (never `ext::`; `file` only for a file URL), and never
    /// prompts. With credentials, it also reads no system or user config
    /// and has our helper alone ([`HELPER`]).
    async fn run(&self, dir: &Path, action: &str, args: &[&str]) -> Result<String, WorkspaceError> {
        let mut command = Command::new("git");
        command.env_clear();
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        let protocols = if self.repo.url.starts_with("file:") {
            "file"
        } else {
            "https:http:git:ssh"
        };
        command
            .arg("-C")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ALLOW_PROTOCOL", protocols)
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
            .kill_on_drop(true);
        for setting in SAFE_CONFIG {
            command.arg("-c").arg(setting);
        }
        if let Some(credentials) = self.credentials {
            let (protocol, host, path) = credential_target(&self.repo.url).unwrap_or_default();
            let fields = if path.is_empty() { "2" } else { "3" };
            command
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .args(["-c", "credential.helper="])
                .args(["-c", &format!("credential.helper={HELPER}")])
                .args(["-c", "credential.useHttpPath=true"])
                .env("COXSWAIN_GIT_PROTOCOL", protocol)
                .env("COXSWAIN_GIT_HOST", host)
                .env("COXSWAIN_GIT_PATH", path)
                .env("COXSWAIN_GIT_MATCH", fields)
                .env("COXSWAIN_GIT_USERNAME", &credentials.username)
                .env("COXSWAIN_GIT_PASSWORD", &credentials.password);
        }
        command.args(args);
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
            message.truncate(floor_boundary(&message, MAX_GIT_MESSAGE));
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
    #[test]
    fn the_helper_is_told_the_flows_protocol_host_with_port_and_path() {
        assert_eq!(
            credential_target("https://ana@git.example:8443/team/app%20x.git/"),
            Some((
                "https".into(),
                "git.example:8443".into(),
                "team/app x.git".into()
            ))
        );
        assert_eq!(
            credential_target("http://127.0.0.1:9/"),
            Some(("http".into(), "127.0.0.1:9".into(), String::new()))
        );
        assert_eq!(credential_target("git@host:app.git"), None);
    }

    /// What git's credential machinery gets from [`HELPER`] for a request
    /// (`git credential fill`), with the repo's target given as `run` sets it.
    fn fill(target: &str, asked: &str) -> Option<String> {
        let (protocol, host, path) = credential_target(target).expect("a URL");
        let mut child = std::process::Command::new("git")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("COXSWAIN_GIT_PROTOCOL", protocol)
            .env("COXSWAIN_GIT_HOST", host)
            .env(
                "COXSWAIN_GIT_MATCH",
                if path.is_empty() { "2" } else { "3" },
            )
            .env("COXSWAIN_GIT_PATH", path)
            .env("COXSWAIN_GIT_USERNAME", "ana")
            .env("COXSWAIN_GIT_PASSWORD", "pw-1d2c")
            .args(["-c", &format!("credential.helper={HELPER}")])
            .args(["-c", "credential.useHttpPath=true", "credential", "fill"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("git runs");
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "url={asked}\n").expect("write");
        drop(stdin);
        let out = child.wait_with_output().expect("git ends");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    #[test]
    fn the_helper_answers_the_flows_url_alone() {
        let repo = "https://git.example/team/app.git";
        let answer = fill(repo, repo).expect("the flow's own URL is answered");
        assert!(answer.contains("password=pw-1d2c"), "{answer}");
        for other in [
            "https://evil.example/team/app.git",
            "http://git.example/team/app.git",
            "https://git.example:444/team/app.git",
            "https://git.example/team/other.git",
            "https://git.example.evil.example/team/app.git",
        ] {
            assert_eq!(fill(repo, other), None, "{other} got the credentials");
        }
    }

    #[test]
    fn the_branch_is_read_from_a_loose_or_packed_ref_and_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        let id = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(git_dir.join("refs/heads/coxswain")).unwrap();
        std::fs::write(
            git_dir.join("packed-refs"),
            format!("# pack-refs\n{id} refs/heads/coxswain/r\n"),
        )
        .unwrap();
        assert_eq!(branch_tip(git_dir, "coxswain/r").as_deref(), Ok(id));
        std::fs::write(git_dir.join("refs/heads/coxswain/r"), "tok-secret-77\n").unwrap();
        let error = branch_tip(git_dir, "coxswain/r").unwrap_err();
        assert!(
            !error.contains("tok-secret-77") && error.contains("commit id"),
            "{error}"
        );
        let error = branch_tip(git_dir, "coxswain/gone").unwrap_err();
        assert!(error.contains("no branch `coxswain/gone`"), "{error}");
    }
}
