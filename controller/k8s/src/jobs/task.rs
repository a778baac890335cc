//! What `coxswain step-exec run` is told about the attempt it runs, and
//! where things are in a step's pod.

use serde::{Deserialize, Serialize};

use coxswain_core::api::{ScriptStep, StepError};
use coxswain_steps::script::Attempt;

/// Where things are in a step's pod. Every folder of the script contract is
/// a volume of its own, so nothing depends on the image's file system.
pub mod paths {
    /// The emptyDir the init container copies `coxswain` into.
    pub const BIN_DIR: &str = "/coxswain/bin";
    /// The copied executable the step's container runs.
    pub const EXECUTABLE: &str = "/coxswain/bin/coxswain";
    /// The folder holding the [`PodTask`](super::PodTask) file.
    pub const TASK_DIR: &str = "/coxswain/task";
    /// The [`PodTask`](super::PodTask) file.
    pub const TASK_FILE: &str = "/coxswain/task/step.json";
    /// `$INPUTS`: the inputs ConfigMap, read-only.
    pub const INPUTS: &str = "/coxswain/inputs";
    /// `$INPUTS` when the inputs ride in the Job: a folder `step-exec`
    /// makes in the task's emptyDir, fills, then makes read-only.
    pub const INLINE_INPUTS: &str = "/coxswain/task/inputs";
    /// `$OUTPUTS`.
    pub const OUTPUTS: &str = "/coxswain/outputs";
    /// `$WORKSPACE`, also the working directory.
    pub const WORKSPACE: &str = "/coxswain/workspace";
    /// `$HOME`.
    pub const HOME: &str = "/coxswain/home";
    /// `$TMPDIR`.
    pub const TMP: &str = "/coxswain/tmp";
    /// Where the container's termination message is written.
    pub const TERMINATION_LOG: &str = "/dev/termination-log";
}

/// Everything the pod needs to know of its attempt besides its inputs and
/// its secrets: kept in the inputs ConfigMap under [`TASK_KEY`](super::TASK_KEY)
/// as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTask {
    /// The step as written in the flow.
    pub step: ScriptStep,
    /// The step's key (`$STEP_KEY`).
    pub step_key: String,
    /// The run's name (`$RUN_NAME`).
    pub run_name: String,
    /// The attempt number (`$ATTEMPT`).
    pub attempt: u32,
    /// The part's key, for a part of a parallel step (`$PART_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_key: Option<String>,
    /// `$SINCE` and `$LAST_RUN`, for scheduled runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The attempt's timeout, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The most bytes the script may print on stdout.
    pub max_output: usize,
    /// The run's branch (`$BRANCH`), in a run with a workspace: its volume
    /// is then mounted at `$WORKSPACE` and what the attempt leaves in
    /// `$OUTPUTS` is kept there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The round of a parallel step's part (its kept files' folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_round: Option<u32>,
    /// A failure found when the Job was made (inputs that cannot become
    /// files): the pod reports it as the attempt's result without running
    /// anything, so it reaches the run the way every result does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
}

impl PodTask {
    /// The facts of the attempt the script's environment is built from.
    pub fn attempt(&self) -> Attempt {
        Attempt {
            run_name: self.run_name.clone(),
            step_key: self.step_key.clone(),
            attempt: self.attempt,
            since: self.since.clone(),
            part_key: self.part_key.clone(),
            part_round: self.part_round,
        }
    }

    /// The timeout as a duration.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout_ms.map(std::time::Duration::from_millis)
    }
}

/// [`inputs_digest`] of an attempt's keys and values as text (what
/// [`attempt_entries`](super::attempt_entries) makes, or what rode in the
/// Job).
pub fn entries_digest(entries: &std::collections::BTreeMap<String, String>) -> String {
    inputs_digest(entries.iter().map(|(k, v)| (k.as_str(), v.as_bytes())))
}

/// The digest of an attempt's inputs ConfigMap as the pod sees it: every key
/// (the [`TASK_KEY`](super::TASK_KEY) and each input file's) with its
/// value, in key order, each length-prefixed so no two maps share one.
///
/// The controller puts it on the step's command line; `step-exec` computes
/// it again from the files Kubernetes mounted and runs nothing when they
/// differ. Anyone who may create ConfigMaps can make one under the name a
/// Job will mount (the name follows from the Run's uid); this is what keeps
/// such a ConfigMap from choosing the script that runs.
pub fn inputs_digest<'a>(entries: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<(&str, &[u8])> = entries.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut hasher = Sha256::new();
    for (key, value) in sorted {
        hasher.update((key.len() as u64).to_le_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.len() as u64).to_le_bytes());
        hasher.update(value);
    }
    format!("sha256:{}", crate::names::hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::inputs_digest;

    #[test]
    fn the_inputs_digest_sees_every_key_and_byte_and_not_the_order() {
        let a = inputs_digest([("step.json", &b"{}"[..]), ("input.x", b"1")]);
        assert_eq!(
            a,
            inputs_digest([("input.x", &b"1"[..]), ("step.json", b"{}")])
        );
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
        assert_ne!(
            a,
            inputs_digest([("step.json", &b"{}"[..]), ("input.x", b"2")])
        );
        assert_ne!(
            a,
            inputs_digest([("step.json", &b"{}"[..]), ("input.y", b"1")])
        );
        assert_ne!(a, inputs_digest([("step.json", &b"{}"[..])]));
        // Length prefixes: moving a byte from a key to its value changes it.
        assert_ne!(
            inputs_digest([("ab", &b"c"[..])]),
            inputs_digest([("a", &b"bc"[..])])
        );
    }
}
