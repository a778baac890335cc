//! Runs a command once this test process has ended, however it ends
//! (all tests done, a panic, a signal): for stopping a server the test
//! binary started, when the harness offers no hook at its end.
//!
//! A small watcher process reads a pipe whose only writer is this process;
//! the kernel closes it when this process exits, the read sees the end, and
//! the watcher runs the command.

use std::process::{Child, Command, Stdio};

/// The watcher; while it lives (and this process does), nothing runs.
/// Dropping it also runs the command.
pub struct WhenGone(Child);

impl WhenGone {
    /// Arranges for `program args…` to run when this process has ended.
    pub fn run(program: &str, args: &[&str]) -> std::io::Result<WhenGone> {
        Command::new("sh")
            .arg("-c")
            .arg(r#"cat >/dev/null; exec "$@""#)
            .arg("when-gone")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(WhenGone)
    }
}

impl Drop for WhenGone {
    fn drop(&mut self) {
        // Closing the pipe is what the watcher waits for.
        drop(self.0.stdin.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_runs_only_once_the_pipe_is_closed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let marker = dir.path().join("ran");
        let marker_arg = marker.display().to_string();
        let watcher = WhenGone::run("touch", &[&marker_arg]).expect("watcher starts");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!marker.exists(), "the command ran while the process lived");
        drop(watcher);
        let appeared = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(25));
            marker.exists()
        });
        assert!(appeared, "the command did not run after the pipe closed");
    }
}
