//! A `coxswain ui` process for tests: started on a free loopback port,
//! its address read from the line it prints, killed when dropped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running viewer.
pub struct Viewer {
    child: Child,
    url: String,
}

impl Viewer {
    /// Starts `bin ui --listen 127.0.0.1:0 ARGS` with `env` set; waits for
    /// the address it serves on.
    pub fn start<I, S>(bin: &Path, args: I, env: &[(&str, &OsStr)]) -> Viewer
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(bin);
        command
            .args(["ui", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("coxswain ui starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some((_, rest)) = line.split_once("serving on ") {
                        break rest.trim().trim_end_matches('/').to_string();
                    }
                }
                other => panic!("coxswain ui ended before serving: {other:?}"),
            }
        };
        // Keep reading, so a chatty viewer never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Viewer { child, url }
    }

    /// The address of `path` on the viewer (`/api/v1/…`, a page).
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
