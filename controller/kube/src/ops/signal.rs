//! Graceful shutdown: SIGTERM (what the kubelet sends before killing a pod)
//! or SIGINT (Ctrl-C) ends the controller's main loop, so it can release the
//! Lease and let a standby take over at once.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};

use super::OpsError;

/// Installs handlers for SIGTERM and SIGINT now (so a signal that comes
/// before the future is polled is not lost) and returns a future that
/// resolves with the first signal's name.
pub fn shutdown_signal() -> Result<impl Future<Output = &'static str> + Send + 'static, OpsError> {
    let install = |kind: SignalKind, name: &'static str| {
        signal(kind).map_err(|source| OpsError::Signal {
            signal: name,
            source,
        })
    };
    let mut term = install(SignalKind::terminate(), "SIGTERM")?;
    let mut int = install(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigterm_ends_the_wait_with_its_name() {
        let signalled = shutdown_signal().expect("handlers install");
        // Once tokio handles SIGTERM, it no longer ends this test process.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        assert_eq!(signalled.await, "SIGTERM");
    }
}
