//! The environment a script starts with, built from nothing: a script gets
//! what the contract promises and what its step gives it, never the
//! runner's own variables (API keys, tokens, secrets for other steps).

use std::ffi::OsString;
use std::path::Path;

use coxswain_core::engine::Work;

/// Used when the runner itself has no `PATH`.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables taken over from the runner: where programs are found, and the
/// language and time zone the person running the flow uses. `PATH` is the
/// runner's so that a flow tried on a laptop finds the same tools its
/// author does (in a cluster the image decides).
const PASSED_ON: [&str; 4] = ["PATH", "LANG", "LC_ALL", "TZ"];

/// The runner variables a script may see ([`PASSED_ON`]), taken once from
/// some environment.
#[derive(Debug, Clone)]
pub struct HostEnv(Vec<(String, OsString)>);

impl HostEnv {
    /// From this process's environment.
    pub fn current() -> Self {
        Self::from_vars(std::env::vars_os())
    }

    /// From the given variables; anything not in [`PASSED_ON`] is dropped
    /// here, so it can never reach a script.
    pub fn from_vars<K: Into<OsString>, V: Into<OsString>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut kept = Vec::new();
        for (name, value) in vars {
            let name = name.into();
            if let Some(name) = name.to_str()
                && PASSED_ON.contains(&name)
            {
                kept.push((name.to_string(), value.into()));
            }
        }
        if !kept.iter().any(|(name, _)| name == "PATH") {
            kept.push(("PATH".to_string(), DEFAULT_PATH.into()));
        }
        HostEnv(kept)
    }
}

/// The attempt's private folders, as the script sees them.
#[derive(Debug)]
pub struct Folders<'a> {
    /// `$INPUTS`.
    pub inputs: &'a Path,
    /// `$OUTPUTS`.
    pub outputs: &'a Path,
    /// `$WORKSPACE`, also the current directory.
    pub workspace: &'a Path,
    /// `$HOME`.
    pub home: &'a Path,
    /// `$TMPDIR`.
    pub tmp: &'a Path,
}

/// Which attempt of which run a script is, for `$RUN_NAME`, `$STEP_KEY`,
/// `$ATTEMPT`, `$SINCE` and `$LAST_RUN`: all a script learns of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attempt {
    /// The run's name.
    pub run_name: String,
    /// The step's key.
    pub step_key: String,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// For scheduled runs, the start of the last successful one.
    pub since: Option<String>,
    /// For a part of a parallel step, the part's key (`$PART_KEY`).
    pub part_key: Option<String>,
    /// For a part of a parallel step, which start of the step it belongs
    /// to (its attempts count from 1 in each), so its kept files have a
    /// place of their own.
    pub part_round: Option<u32>,
}

impl Attempt {
    /// The attempt `work` is.
    pub fn of(work: &Work) -> Self {
        Attempt {
            run_name: work.run.name.clone(),
            step_key: work.step.clone(),
            attempt: work.attempt,
            since: work.run.since.clone(),
            part_key: work.part.as_ref().map(|p| p.key.clone()),
            part_round: work.part.as_ref().map(|p| p.round),
        }
    }
}

/// Every variable of the contract except the step's own `env`, which the
/// caller adds last (so it may override any of these).
pub fn contract_vars(
    host: &HostEnv,
    folders: &Folders<'_>,
    attempt: &Attempt,
) -> Vec<(String, OsString)> {
    let since = attempt.since.clone().unwrap_or_default();
    let mut vars = host.0.clone();
    vars.extend([
        ("HOME".to_string(), folders.home.into()),
        ("TMPDIR".to_string(), folders.tmp.into()),
        ("INPUTS".to_string(), folders.inputs.into()),
        ("OUTPUTS".to_string(), folders.outputs.into()),
        ("WORKSPACE".to_string(), folders.workspace.into()),
        ("RUN_NAME".to_string(), attempt.run_name.clone().into()),
        ("STEP_KEY".to_string(), attempt.step_key.clone().into()),
        ("ATTEMPT".to_string(), attempt.attempt.to_string().into()),
        (
            "PART_KEY".to_string(),
            attempt.part_key.clone().unwrap_or_default().into(),
        ),
        ("SINCE".to_string(), since.clone().into()),
        ("LAST_RUN".to_string(), since.into()),
    ]);
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_path_language_and_time_zone_pass() {
        let host = HostEnv::from_vars([
            ("PATH", "/opt/bin"),
            ("TZ", "Europe/Paris"),
            ("COXSWAIN_AGENT_API_KEY", "sk-1"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("HOME", "/home/me"),
        ]);
        let names: Vec<&str> = host.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "TZ"]);
    }

    #[test]
    fn a_runner_without_path_gives_the_default() {
        let host = HostEnv::from_vars([("LANG", "C.UTF-8")]);
        assert!(
            host.0
                .iter()
                .any(|(n, v)| n == "PATH" && v.to_str() == Some(DEFAULT_PATH))
        );
    }
}
