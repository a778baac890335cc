//! Script steps as Jobs: one Job per attempt, its inputs read-only files at
//! `$INPUTS` (up to 16 KiB carried in the Job itself, larger ones in a
//! ConfigMap mounted there), the result handed back by `coxswain step-exec`
//! through the pod's status and log.
//!
//! What one attempt becomes (all named [`names::job`](crate::names::job),
//! owned by the Run, labelled with the run's uid, the step and a role):
//!
//! - a ConfigMap (role `inputs`), when they weigh more than 16 KiB (else
//!   the same keys ride in the step container's `COXSWAIN_STEP_INPUTS_JSON`
//!   and `step-exec` writes them out): one key `input.FILE` per input file (the
//!   files [`script::input_files`](coxswain_steps::script::input_files) gives,
//!   so the names and contents are the local runner's) and the key
//!   `step.json`, the [`PodTask`]: the step as written, the attempt, the
//!   timeout and the output cap. Inputs cannot come from a Secret in the flow
//!   language (`input` reads the run input and step outputs only; Secrets
//!   reach a script only through `env`), so a ConfigMap is always enough.
//! - a Job (role `step`): `backoffLimit: 0`, `restartPolicy: Never`,
//!   `activeDeadlineSeconds` from the timeout, hardened to the "restricted"
//!   Pod Security Standard. An init container copies the `coxswain`
//!   executable from the controller's image into an emptyDir; the step's
//!   container (the step's `image`, or the controller's) runs it as
//!   `step-exec run`, which runs the script exactly as `coxswain run` does
//!   and reports the result as [`wire`] describes, needing no API
//!   credentials. The step's `env` becomes the container's own env (a
//!   `valueFrom.secretKeyRef` stays a `secretKeyRef`), so the controller never
//!   reads those Secrets.
//!
//! Consecutive script steps share one pod ([`chain`]): the first one's Job
//! gets a container for each later one, which waits for the one before it
//! to hand its result over ([`handoff`]) and makes its own input from it;
//! the launcher takes such a result only when those inputs are the
//! engine's (`chain_launch`).
//!
//! [`JobLauncher`] performs the acts a Run reconciler asks for (launch,
//! observe, cancel, forget); [`pod`] is what runs inside the pod.
//!
//! Where a Job differs from a local process, and why:
//! - The timeout is also the Job's `activeDeadlineSeconds` (rounded up to a
//!   second), which counts from the Job's start, pulling the image and
//!   copying `coxswain` included. Whichever of it and the wrapper's own
//!   timer fires first, the error is the local one (`workflow.timeout`,
//!   same words).
//! - `$INPUTS` is a ConfigMap volume: read-only, and the kubelet keeps its
//!   bookkeeping there in hidden entries (`..data`); `$INPUTS/*` lists
//!   exactly the inputs.
//! - Cancelling deletes the Job; the wrapper takes SIGTERM as "stop" and
//!   kills the script's process group at once.
//! - A pod that cannot start (an image that cannot be pulled, a Secret the
//!   step's `env` names that does not exist) fails the attempt as soon as
//!   it is observed, and `forget` then deletes the Job, which would
//!   otherwise wait forever. Nothing about such a pod changes the Job, so a
//!   reconciler that only watches Jobs should requeue a Run now and then
//!   while it has script work running.
//!
//! The controller needs, in the Runs' namespaces: Jobs create/get/delete,
//! ConfigMaps create/delete, Pods list and watch (a pod whose step ended is
//! read at once: the Job controller writes the Job's end up to a second
//! later), `pods/log` get, and `update` on
//! `runs/finalizers` (the owner references block the Run's deletion).
//! It never reads a Secret for a script.

pub mod chain;
mod chain_launch;
pub mod handoff;
mod launcher;
mod manifest;
pub mod mounted;
mod observe;
pub mod pod;
mod settings;
mod task;
pub mod wire;
pub mod workspace;

pub use launcher::{JobLauncher, delete_exactly};
pub use manifest::{
    INPUT_KEY_PREFIX, INSTALL_CONTAINER, Manifests, RunOwner, STEP_CONTAINER, TASK_KEY,
    attempt_entries, config_map_digest, manifests,
};
pub use observe::pod_ended;
pub use settings::{
    AccessMode, DEFAULT_MAX_OUTPUT, DEFAULT_RUN_AS_USER, IN_IMAGE_EXECUTABLE, JobSettings,
    WorkspaceSettings,
};
pub use task::{PodTask, inputs_digest, paths};
