//! Real git servers on 127.0.0.1, for tests that clone and push the way a
//! run does against a forge: over the network, through git's own transports
//! and (for HTTP) past a login, not by `file://` path.
//!
//! - [`GitDaemon`]: `git daemon`, the `git://` protocol, no auth, pushes on.
//! - [`GitHttp`]: `git http-backend` behind lighttpd with HTTP basic auth,
//!   so every fetch and push needs the test's username and password.
//!
//! Each serves bare repos from a temp dir of its own, on a free port, and is
//! killed (its dir removed) when dropped. Each repo is made with
//! `create_repo`; `branch` and `log` read what a push left there.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A bare repo just made on a server.
#[derive(Debug, Clone)]
pub struct BareRepo {
    /// Its URL on the server (for [`GitHttp`], without credentials).
    pub url: String,
    /// The one commit on `main` (a README saying `hello`).
    pub commit: String,
    /// The bare repo on disk, for hooks or a look around.
    pub path: PathBuf,
}

/// The methods [`GitDaemon`] and [`GitHttp`] share: both keep their repos
/// in a [`Server`] and name them by their own `url`.
macro_rules! repo_methods {
    () => {
        /// The port it listens on.
        pub fn port(&self) -> u16 {
            self.server.port
        }

        /// Makes the bare repo `name` with one commit on `main`.
        ///
        /// # Panics
        /// When git fails (the message has its stderr).
        pub fn create_repo(&self, name: &str) -> BareRepo {
            self.server.create_repo(name, self.url(name))
        }

        /// The commit `branch` of the repo `name` points to, if it is there.
        pub fn branch(&self, name: &str, branch: &str) -> Option<String> {
            self.server.branch(name, branch)
        }

        /// `git log --format=FORMAT` of `branch` of the repo `name`, trimmed.
        ///
        /// # Panics
        /// When git fails, e.g. there is no such branch.
        pub fn log(&self, name: &str, branch: &str, format: &str) -> String {
            self.server.log(name, branch, format)
        }
    };
}

/// `git daemon` serving `git://127.0.0.1:PORT/NAME.git` with pushes enabled
/// (`--enable=receive-pack`, no auth: the git protocol has none).
pub struct GitDaemon {
    server: Server,
}

impl GitDaemon {
    /// Starts the daemon on a free port and waits until it accepts
    /// connections.
    pub fn start() -> io::Result<GitDaemon> {
        // git-daemon itself: `git daemon` would run it as a child of its
        // own, which killing `git` leaves serving.
        let program = git_program("git-daemon")?;
        let server = Server::start("git daemon", |dir, port| {
            let mut command = Command::new(&program);
            command
                .arg("--listen=127.0.0.1")
                .arg(format!("--port={port}"))
                .arg("--export-all")
                .arg("--enable=receive-pack")
                .arg(format!("--base-path={}", dir.join("repos").display()))
                .arg("--reuseaddr")
                .arg("--informative-errors");
            Ok(command)
        })?;
        Ok(GitDaemon { server })
    }

    /// The URL of the repo `name`, made or not.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}.git", self.server.port)
    }

    repo_methods!();
}

/// `git http-backend` (CGI) behind lighttpd, serving
/// `http://127.0.0.1:PORT/git/NAME.git` to one user with HTTP basic auth:
/// without the right username and password nothing is fetched or pushed.
/// lighttpd sets `REMOTE_USER` for the user, which is what makes
/// http-backend accept pushes.
///
/// lighttpd is Debian's `lighttpd` package (`.ci/run` installs it); where
/// it is missing, [`GitHttp::start`] fails saying so: tests that need it
/// fail rather than skip.
pub struct GitHttp {
    server: Server,
}

impl GitHttp {
    /// Starts lighttpd on a free port, letting in only `username` with
    /// `password`, and waits until it accepts connections.
    pub fn start(username: &str, password: &str) -> io::Result<GitHttp> {
        if username.is_empty() || username.contains([':', '\n']) || password.contains('\n') {
            return Err(io::Error::other(
                "the username must be non-empty without `:`, neither may hold a line break",
            ));
        }
        let lighttpd = find_lighttpd()?;
        let backend = git_program("git-http-backend")?;
        let server = Server::start("lighttpd", |dir, port| {
            // The plain user file: `username:password` a line.
            let users = dir.join("users");
            std::fs::write(&users, format!("{username}:{password}\n"))?;
            let www = dir.join("www");
            std::fs::create_dir_all(&www)?;
            let config = dir.join("lighttpd.conf");
            std::fs::write(&config, lighttpd_config(dir, port, &www, &users, &backend)?)?;
            let mut command = Command::new(&lighttpd);
            command.arg("-D").arg("-f").arg(&config);
            Ok(command)
        })?;
        Ok(GitHttp { server })
    }

    /// The URL of the repo `name`, made or not, without credentials.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/git/{name}.git", self.server.port)
    }

    repo_methods!();
}

/// lighttpd's config: CGI for everything under `/git/` (aliased to the
/// http-backend program, the rest of the path its `PATH_INFO`), basic auth
/// on every URL.
fn lighttpd_config(
    dir: &Path,
    port: u16,
    www: &Path,
    users: &Path,
    backend: &Path,
) -> io::Result<String> {
    let quoted = |path: &Path| {
        let text = path.display().to_string();
        if text.contains(['"', '\\', '\n']) {
            Err(io::Error::other(format!(
                "{text}: a path lighttpd's config cannot quote"
            )))
        } else {
            Ok(format!("\"{text}\""))
        }
    };
    let repos = quoted(&dir.join("repos"))?;
    Ok(format!(
        r#"server.modules = ("mod_alias", "mod_auth", "mod_authn_file", "mod_setenv", "mod_cgi")
server.bind = "127.0.0.1"
server.port = {port}
server.document-root = {www}
server.upload-dirs = ({tmp})
server.errorlog = {errorlog}
auth.backend = "plain"
auth.backend.plain.userfile = {users}
auth.require = ("/" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
alias.url = ("/git/" => {backend})
$HTTP["url"] =~ "^/git/" {{
  cgi.assign = ("" => "")
  setenv.set-environment = ("GIT_PROJECT_ROOT" => {repos}, "GIT_HTTP_EXPORT_ALL" => "1")
}}
"#,
        www = quoted(www)?,
        tmp = quoted(dir)?,
        errorlog = quoted(&dir.join("error.log"))?,
        users = quoted(users)?,
        backend = quoted(&PathBuf::from(format!("{}/", backend.display())))?,
    ))
}

/// lighttpd on `PATH`, else in `/usr/sbin` (which a non-root `PATH` lacks).
fn find_lighttpd() -> io::Result<PathBuf> {
    // Installed here when missing; if that fails, the search below says so.
    let _ = crate::packages::ensure("git-http");
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>());
    on_path
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("lighttpd"))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            io::Error::other(
                "lighttpd is not installed (looked on PATH and in /usr/sbin); the git-over-HTTP tests need it: `e2e/packages @git-http` installs it (as root)",
            )
        })
}

/// `$(git --exec-path)/NAME`: a program of git's own.
fn git_program(name: &str) -> io::Result<PathBuf> {
    let out = Command::new("git").arg("--exec-path").output()?;
    let exec_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let program = Path::new(&exec_path).join(name);
    if out.status.success() && program.is_file() {
        Ok(program)
    } else {
        Err(io::Error::other(format!(
            "git's {name} is not at {}",
            program.display()
        )))
    }
}

/// A server process, its port and its temp dir (`repos/` served, its log
/// beside it); dropping it kills the process, then removes the dir.
struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Server {
    /// Makes a temp dir with `repos/`, then starts `command(dir, port)` on a
    /// free port until one accepts connections. The port is found by binding
    /// port 0 and letting it go, so another process may take it first: then
    /// the server exits, and another port is tried.
    fn start(
        what: &str,
        command: impl Fn(&Path, u16) -> io::Result<Command>,
    ) -> io::Result<Server> {
        let dir = tempfile::Builder::new()
            .prefix("coxswain-git-server-")
            .tempdir()?;
        std::fs::create_dir_all(dir.path().join("repos"))?;
        let mut last_error = None;
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let log = std::fs::File::create(dir.path().join("server.log"))?;
            let mut child = command(dir.path(), port)?
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .map_err(|e| io::Error::other(format!("{what} does not start: {e}")))?;
            match wait_until_listening(&mut child, port) {
                Ok(()) => return Ok(Server { child, port, dir }),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = Some(io::Error::other(format!(
                        "{what} on 127.0.0.1:{port}: {e}; its log: {}",
                        logs(dir.path())
                    )));
                }
            }
        }
        Err(last_error.expect("tried at least once"))
    }

    fn repo_path(&self, name: &str) -> PathBuf {
        self.dir.path().join("repos").join(format!("{name}.git"))
    }

    fn create_repo(&self, name: &str, url: String) -> BareRepo {
        let path = self.repo_path(name);
        let seed = self.dir.path().join(format!("seed-{name}"));
        git(
            &self.dir.path().join("repos"),
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                &format!("{name}.git"),
            ],
        );
        git(
            self.dir.path(),
            &[
                "init",
                "--quiet",
                "--initial-branch=main",
                &seed.display().to_string(),
            ],
        );
        std::fs::write(seed.join("README"), "hello\n").expect("write README");
        git(&seed, &["add", "README"]);
        git(
            &seed,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "commit.gpgsign=false",
                "commit",
                "--quiet",
                "-m",
                "first",
            ],
        );
        let bare = path.display().to_string();
        git(&seed, &["push", "--quiet", &bare, "HEAD:refs/heads/main"]);
        let commit = git(&seed, &["rev-parse", "HEAD"]);
        std::fs::remove_dir_all(&seed).expect("remove the seed checkout");
        BareRepo { url, commit, path }
    }

    fn branch(&self, name: &str, branch: &str) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.repo_path(name))
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{branch}^{{commit}}"))
            .output()
            .expect("git runs");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn log(&self, name: &str, branch: &str, format: &str) -> String {
        git(
            &self.repo_path(name),
            &[
                "log",
                &format!("--format={format}"),
                &format!("refs/heads/{branch}"),
                "--",
            ],
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `port` accepts a connection while `child` runs.
fn wait_until_listening(child: &mut Child, port: u16) -> io::Result<()> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(io::Error::other(format!("it exited with {status}")));
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            // Someone answers; it must be this process, still running.
            return match child.try_wait()? {
                Some(status) => Err(io::Error::other(format!("it exited with {status}"))),
                None => Ok(()),
            };
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(io::Error::other(format!(
                "it accepted no connection in {START_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a server process and (lighttpd) its error log said, in `dir`.
fn logs(dir: &Path) -> String {
    let mut text = String::new();
    for name in ["server.log", "error.log"] {
        if let Ok(mut file) = std::fs::File::open(dir.join(name)) {
            let _ = file.read_to_string(&mut text);
        }
    }
    text
}

/// Runs git in `dir`, which must succeed; its trimmed stdout.
///
/// # Panics
/// When git fails (the message has its arguments, `dir` and stderr).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// git in `dir` with a committer and no prompt; (success, stdout+stderr).
    fn try_git(dir: &Path, args: &[&str]) -> (bool, String) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .expect("git runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// Clones `url` into `dir/work`, commits on `topic` and pushes it; the
    /// commit.
    fn clone_commit_push(dir: &Path, url: &str) -> String {
        let (ok, text) = try_git(dir, &["clone", "--quiet", url, "work"]);
        assert!(ok, "clone {url}: {text}");
        let work = dir.join("work");
        std::fs::write(work.join("NEWS"), "news\n").expect("write NEWS");
        for args in [
            &["checkout", "--quiet", "-b", "topic"][..],
            &["add", "NEWS"],
            &["commit", "--quiet", "-m", "second"],
            &["push", "--quiet", "origin", "topic"],
        ] {
            let (ok, text) = try_git(&work, args);
            assert!(ok, "git {args:?}: {text}");
        }
        git(&work, &["rev-parse", "HEAD"])
    }

    #[test]
    fn the_daemon_serves_clones_and_takes_pushes() {
        let daemon = GitDaemon::start().expect("git daemon starts");
        let repo = daemon.create_repo("app");
        assert_eq!(
            repo.url,
            format!("git://127.0.0.1:{}/app.git", daemon.port())
        );
        assert_eq!(
            daemon.branch("app", "main").as_deref(),
            Some(repo.commit.as_str())
        );
        assert_eq!(daemon.branch("app", "topic"), None);
        let here = tempfile::tempdir().expect("temp dir");
        let pushed = clone_commit_push(here.path(), &repo.url);
        assert_eq!(
            daemon.branch("app", "topic").as_deref(),
            Some(pushed.as_str())
        );
        assert_eq!(daemon.log("app", "topic", "%s"), "second\nfirst");
        assert_eq!(daemon.log("app", "main", "%H"), repo.commit);
        // Dropped, it is gone: no one answers on its port.
        let port = daemon.port();
        let path = repo.path.clone();
        drop(daemon);
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        assert!(TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err());
        assert!(!path.exists(), "{} is left behind", path.display());
    }

    #[test]
    fn the_http_server_lets_in_only_its_user() {
        let http = GitHttp::start("ana", "pw-4a1b").expect("lighttpd starts");
        let repo = http.create_repo("app");
        assert_eq!(
            repo.url,
            format!("http://127.0.0.1:{}/git/app.git", http.port())
        );
        let here = tempfile::tempdir().expect("temp dir");
        let with = |user: &str| repo.url.replace("http://", &format!("http://{user}@"));
        for url in [repo.url.clone(), with("ana:wrong"), with("bob:pw-4a1b")] {
            let (ok, text) = try_git(here.path(), &["ls-remote", &url]);
            assert!(!ok, "{url} let git in: {text}");
            assert!(
                text.contains("Authentication failed") || text.contains("could not read Username"),
                "{url}: {text}"
            );
        }
        let (ok, text) = try_git(here.path(), &["ls-remote", &with("ana:pw-4a1b"), "main"]);
        assert!(ok && text.starts_with(&repo.commit), "{text}");
        let pushed = clone_commit_push(here.path(), &with("ana:pw-4a1b"));
        assert_eq!(
            http.branch("app", "topic").as_deref(),
            Some(pushed.as_str())
        );
        assert_eq!(http.log("app", "topic", "%s"), "second\nfirst");
    }
}
