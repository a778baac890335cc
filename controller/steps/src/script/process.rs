//! Watching a script's process to its end: stdout and stderr read under
//! their caps, the whole process group killed when the script is done, and
//! no waiting on a pipe that something the script left behind holds open.
//!
//! A process that leaves the group (`setsid`) cannot be killed with it; the
//! attempt still ends, because reading stops a short grace period after the
//! script itself has exited.

use std::io::{self, Write};
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdout};

/// How long reading goes on after the script has exited, for output still
/// on its way; past it, pipes held open by escaped processes are abandoned.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(1);

/// The caps one attempt's process runs under.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// The most stdout accepted, in bytes.
    pub stdout_limit: usize,
    /// How many trailing bytes of stderr are kept.
    pub stderr_tail: usize,
    /// How long to keep reading after the script exits.
    pub drain_grace: Duration,
}

/// A process group that is killed when this value is dropped, so leaving an
/// attempt in any way (return, timeout, cancellation) stops what it started.
#[derive(Debug)]
pub struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    /// The group led by the process `leader` (spawned with `process_group(0)`).
    pub fn led_by(leader: Option<u32>) -> Self {
        ProcessGroup(
            leader
                .and_then(|id| i32::try_from(id).ok())
                .and_then(Pid::from_raw),
        )
    }

    /// Sends SIGKILL to every process in the group; a group that is already
    /// gone is fine.
    pub fn kill(&self) {
        if let Some(pgid) = self.0 {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the finished process left: how it ended and what it printed.
#[derive(Debug, Default)]
pub struct Captured {
    /// stdout, whole (it is under the cap when the attempt gets this far).
    pub stdout: Vec<u8>,
    /// The last bytes of stderr.
    pub stderr: Vec<u8>,
    /// Earlier bytes of stderr were dropped to keep only the last ones.
    pub stderr_cut: bool,
}

/// How watching the process can fail.
#[derive(Debug)]
pub enum Watch {
    /// stdout passed its cap; the group was killed.
    TooLarge,
    /// Waiting for the process failed.
    Wait(io::Error),
}

/// Where a script's stdout and stderr are copied as they come, besides what
/// the attempt keeps: the pod's own log, or the lines `coxswain run` shows.
#[derive(Default)]
pub struct Echoes {
    /// Gets stdout's bytes.
    pub stdout: Option<Box<dyn Write + Send>>,
    /// Gets stderr's bytes.
    pub stderr: Option<Box<dyn Write + Send>>,
}

/// Waits for `child` and reads its pipes into `captured`, copying them to
/// `echoes`, killing `group` once the script has exited (or stdout went
/// over its cap). Cancelling this future leaves in `captured` what had been
/// read so far.
pub async fn watch(
    child: &mut Child,
    group: &ProcessGroup,
    caps: Caps,
    captured: &mut Captured,
    echoes: Echoes,
) -> Result<ExitStatus, Watch> {
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read_out = read_capped(
        stdout,
        &mut captured.stdout,
        caps.stdout_limit,
        echoes.stdout,
    );
    let read_err = read_tail(
        stderr,
        (&mut captured.stderr, &mut captured.stderr_cut),
        caps.stderr_tail,
        echoes.stderr,
    );
    tokio::pin!(read_out, read_err);
    let mut out_done = false;
    let mut err_done = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(Watch::Wait)?,
            result = &mut read_out, if !out_done => {
                if result.is_err() {
                    group.kill();
                    return Err(Watch::TooLarge);
                }
                out_done = true;
            }
            () = &mut read_err, if !err_done => err_done = true,
        }
    };
    // Whatever the script started in its group goes with it; what is still
    // in the pipes is read, for a short while at most.
    group.kill();
    let drain = async {
        let (out, ()) = tokio::join!(
            async {
                if out_done {
                    Ok(())
                } else {
                    (&mut read_out).await
                }
            },
            async {
                if !err_done {
                    (&mut read_err).await;
                }
            }
        );
        out
    };
    match tokio::time::timeout(caps.drain_grace, drain).await {
        Ok(Err(StdoutTooLarge)) => Err(Watch::TooLarge),
        Ok(Ok(())) | Err(_) => Ok(status),
    }
}

/// stdout went over its cap.
#[derive(Debug)]
struct StdoutTooLarge;

/// Reads a pipe into `out` up to `limit` bytes; past it, gives up.
async fn read_capped(
    pipe: Option<ChildStdout>,
    out: &mut Vec<u8>,
    limit: usize,
    mut echo: Option<Box<dyn Write + Send>>,
) -> Result<(), StdoutTooLarge> {
    let Some(mut pipe) = pipe else { return Ok(()) };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => {
                copy_to(&mut echo, &buf[..n]);
                if out.len() + n > limit {
                    return Err(StdoutTooLarge);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Reads a pipe to its end into `tail`, keeping only the last `keep` bytes.
async fn read_tail(
    pipe: Option<ChildStderr>,
    tail: (&mut Vec<u8>, &mut bool),
    keep: usize,
    echo: Option<Box<dyn Write + Send>>,
) {
    let Some(pipe) = pipe else { return };
    read_tail_of(pipe, tail, keep, echo).await
}

/// Reads `pipe` to its end, keeping its last `keep` bytes in `tail.0`;
/// `tail.1` is set when earlier ones were dropped.
async fn read_tail_of(
    mut pipe: impl AsyncRead + Unpin,
    (tail, cut): (&mut Vec<u8>, &mut bool),
    keep: usize,
    mut echo: Option<Box<dyn Write + Send>>,
) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                copy_to(&mut echo, &buf[..n]);
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > keep {
                    let excess = tail.len() - keep;
                    tail.drain(..excess);
                    *cut = true;
                }
            }
        }
    }
}

/// Copies `bytes` to `echo`; an echo that fails is dropped (what the
/// attempt keeps does not depend on it).
fn copy_to(echo: &mut Option<Box<dyn Write + Send>>, bytes: &[u8]) {
    if let Some(writer) = echo
        && writer
            .write_all(bytes)
            .and_then(|()| writer.flush())
            .is_err()
    {
        *echo = None;
    }
}
