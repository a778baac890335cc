//! Work as something launched, observed and cancelled in separate acts.
//!
//! An [`Executor`](super::Executor) runs one attempt as a single future:
//! the caller must stay alive until it ends, and cancelling means dropping
//! it. A controller cannot work that way: it may be killed at any moment and
//! must, after a restart, find out what became of the work it started. A
//! [`Launcher`] splits the life of an attempt into acts a reconciler can
//! perform again and again with the same outcome: launch it (once, however
//! often asked), observe it, cancel it, forget it. Each attempt is named by
//! a [`WorkId`] built from the work alone, so a restarted driver names the
//! same attempt the same way.

use std::fmt;
use std::future::Future;

use sha2::{Digest, Sha256};

use coxswain_core::engine::{Event, PartRef, Work, WorkResult};

/// Which attempt of which step (and part, and loop pass) of which run: the
/// identity of one piece of work, the same after a restart because it is
/// built only from what the engine puts in the [`Work`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkId {
    /// The run's uid.
    pub run: String,
    /// The step's key (for a parallel part, the parallel step's key).
    pub step: String,
    /// The part of a parallel step.
    pub part: Option<PartRef>,
    /// The loop pass, inside a loop: a parallel step's parts count their
    /// attempts from 1 again on every pass.
    pub iteration: Option<u32>,
    /// The attempt number.
    pub attempt: u32,
}

/// Longest [`WorkId::name`]: a Kubernetes label value or DNS label.
pub const NAME_MAX: usize = 63;

/// Hex digits of the digest at the end of [`WorkId::name`].
const NAME_HASH_LEN: usize = 10;

impl WorkId {
    /// The id of `work`.
    pub fn of(work: &Work) -> Self {
        WorkId {
            run: work.run.uid.clone(),
            step: work.step.clone(),
            part: work.part.clone(),
            iteration: work.iteration,
            attempt: work.attempt,
        }
    }

    /// The part's index, as the engine's [`Event::Finished`] and
    /// `Action::Stop` name it.
    pub fn part_index(&self) -> Option<usize> {
        self.part.as_ref().map(|p| p.index)
    }

    /// The event that tells the engine this work ended with `result`.
    pub fn finished(&self, result: WorkResult) -> Event {
        Event::Finished {
            step: self.step.clone(),
            part: self.part_index(),
            attempt: self.attempt,
            result,
        }
    }

    /// A name for things made for this work (a Job, a Pod, a label value):
    /// lowercase letters, digits and `-`, at most [`NAME_MAX`] characters,
    /// starting and ending with a letter or digit. It reads as
    /// `step[-part][-pN]-aN` (cut short when too long) and ends with a
    /// digest of the whole id, run uid included, so two different ids never
    /// share a name even when the readable part is cut or `_` became `-`.
    pub fn name(&self) -> String {
        let mut readable = self.step.replace('_', "-");
        if let Some(part) = &self.part {
            readable.push_str(&format!("-{}", part.key));
            if part.round > 1 {
                readable.push_str(&format!("-r{}", part.round));
            }
        }
        if let Some(pass) = self.iteration {
            readable.push_str(&format!("-p{pass}"));
        }
        readable.push_str(&format!("-a{}", self.attempt));
        readable.truncate(NAME_MAX - NAME_HASH_LEN - 1);
        let readable = readable.trim_end_matches('-');
        let digest = Sha256::digest(self.to_string().as_bytes());
        let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{readable}-{}", &hash[..NAME_HASH_LEN])
    }
}

/// The exact form, `run/step[/round.part]/[pN/]aN`: one id, one text, and back.
impl fmt::Display for WorkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.run, self.step)?;
        if let Some(part) = &self.part {
            write!(f, "/{}.{}", part.round, part.key)?;
        }
        if let Some(pass) = self.iteration {
            write!(f, "/p{pass}")?;
        }
        write!(f, "/a{}", self.attempt)
    }
}

/// What a launcher knows of one piece of work.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// Launched and not finished.
    Running,
    /// Finished with this result (kept until [`Launcher::forget`]).
    Finished(WorkResult),
    /// Nothing is known: never launched here, cancelled, forgotten, or lost
    /// with the process that ran it (an in-process task after a restart).
    /// A driver whose status says the work runs launches it again, with the
    /// same id and so the same idempotency key.
    Unknown,
}

/// Why a launcher could not do what it was asked. Nothing here says the
/// work failed: the same act may be tried again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LauncherError {
    /// The place work runs could not be reached or refused for now (the
    /// API server, for Jobs).
    #[error("work `{id}` could not be {act}: {reason}")]
    Unavailable {
        /// The work ([`WorkId`]'s exact form).
        id: String,
        /// `launched`, `observed`, `cancelled` or `forgotten`.
        act: &'static str,
        /// What failed.
        reason: String,
    },
}

/// Launch, observe, cancel and forget work, each act on its own, each safe
/// to repeat. A driver (the local runner, the controller's Run reconciler)
/// turns the engine's actions into these acts: `Action::Run` into
/// [`launch`](Launcher::launch), `Action::Stop` into
/// [`cancel`](Launcher::cancel); when told that work finished it
/// [`observe`](Launcher::observe)s it, hands the result to the engine, and
/// once the result is safely recorded [`forget`](Launcher::forget)s it.
///
/// Being told that work finished is each launcher's own business, so that
/// nothing polls: [`InProcess`](super::in_process::InProcess) hands out a
/// stream of finished ids; a Job launcher relies on the controller's watch of
/// the Jobs its Runs own, which queues the Run again when a Job changes.
///
/// How a Kubernetes Job launcher fits (it comes with the controller):
/// - `launch` creates a Job named from [`WorkId::name`] (with the Run's
///   name in front, cut to fit), owned by the Run. "Already exists" counts
///   as launched, so launching twice starts the work once.
/// - `observe` reads that Job: active means [`Observation::Running`], a
///   `Complete` or `Failed` condition means [`Observation::Finished`] (the
///   result read from the Pod), no Job means [`Observation::Unknown`].
/// - `cancel` deletes the Job with background propagation (the Pods go with
///   it); a Job already gone counts as cancelled.
/// - `forget` deletes the Job's inputs; the finished Job stays (so
///   `kubectl logs` works) until its `ttlSecondsAfterFinished` or its Run
///   is deleted.
pub trait Launcher: Send + Sync {
    /// Starts `work` unless work with the same [`WorkId`] is already known
    /// here (running, or finished and not forgotten): launching twice runs
    /// it once.
    fn launch(&self, work: &Work) -> impl Future<Output = Result<(), LauncherError>> + Send;

    /// What is known of the work `id`. Observing does not change it: a
    /// finished result is returned every time until it is forgotten.
    fn observe(
        &self,
        id: &WorkId,
    ) -> impl Future<Output = Result<Observation, LauncherError>> + Send;

    /// Stops the work `id` and forgets it (observe then says
    /// [`Observation::Unknown`]). Work unknown here is left alone. Returns
    /// once the work is stopped: for a script, its process group killed.
    fn cancel(&self, id: &WorkId) -> impl Future<Output = Result<(), LauncherError>> + Send;

    /// Drops a finished result once the driver has recorded it. Running
    /// work is left alone (that is [`cancel`](Launcher::cancel)'s job).
    fn forget(&self, id: &WorkId) -> impl Future<Output = Result<(), LauncherError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(step: &str, part: Option<&str>, iteration: Option<u32>, attempt: u32) -> WorkId {
        WorkId {
            run: "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11".into(),
            step: step.into(),
            part: part.map(|key| PartRef {
                index: 0,
                key: key.into(),
                round: 1,
            }),
            iteration,
            attempt,
        }
    }

    fn is_dns_label(name: &str) -> bool {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        name.len() <= NAME_MAX
            && name.chars().all(|c| ok(c) || c == '-')
            && name.starts_with(ok)
            && name.ends_with(ok)
    }

    #[test]
    fn the_exact_form_names_every_field() {
        assert_eq!(
            id("fan_out", Some("eu-west"), Some(2), 3).to_string(),
            "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11/fan_out/1.eu-west/p2/a3"
        );
        assert_eq!(
            id("build", None, None, 1).to_string(),
            "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11/build/a1"
        );
    }

    #[test]
    fn names_are_dns_labels_that_read_as_the_work() {
        let name = id("fan_out", Some("eu-west"), Some(2), 3).name();
        assert!(is_dns_label(&name), "{name}");
        assert!(name.starts_with("fan-out-eu-west-p2-a3-"), "{name}");
        let long = id(&"s".repeat(40), Some(&"k".repeat(40)), Some(9), 12).name();
        assert!(is_dns_label(&long), "{long}");
        // A part started again (a later round) reads and hashes differently.
        let mut again = id("fan_out", Some("eu-west"), Some(2), 3);
        if let Some(part) = again.part.as_mut() {
            part.round = 2;
        }
        assert!(
            again.name().starts_with("fan-out-eu-west-r2-p2-a3-"),
            "{}",
            again.name()
        );
        assert_ne!(again.name(), name);
    }

    #[test]
    fn ids_that_read_alike_get_different_names() {
        // `_` becomes `-` in names, and long keys are cut: the digest tells them apart.
        let a = id("a_b", Some("c"), None, 1);
        let b = id("a", Some("b-c"), None, 1);
        assert_ne!(a.name(), b.name());
        let long_a = id(
            &"s".repeat(40),
            Some(&format!("{}x", "k".repeat(39))),
            None,
            1,
        );
        let long_b = id(
            &"s".repeat(40),
            Some(&format!("{}y", "k".repeat(39))),
            None,
            1,
        );
        assert_ne!(long_a.name(), long_b.name());
        let mut other_run = a.clone();
        other_run.run = "another".into();
        assert_ne!(a.name(), other_run.name());
        // The same id always gets the same name (a restart finds its Job).
        assert_eq!(a.name(), a.clone().name());
    }
}
