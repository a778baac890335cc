//! Status writes that trail a run's in-controller progress.
//!
//! An http, agent, message or save step ends inside this process; waiting
//! for the status write that records it before starting the next such step
//! puts one API round trip (tens of milliseconds on a busy API server)
//! between every two steps. When what follows needs nothing but more
//! in-controller work, the reconcile starts that work at once and hands the
//! status to a writer that runs behind it, one write at a time per run: a
//! status computed while a write is in flight waits behind it, and a newer
//! one replaces it (so a busy API server sees fewer, larger writes, never
//! more than before).
//!
//! What this gives up is bounded. A controller killed before a trailing
//! write lands does again, from the last status written, the calls made
//! since, under the same idempotency keys, as it already does for a call
//! whose result was not written yet. Nothing finished is forgotten before
//! the status that records it is written, so a write that fails loses
//! nothing: the next reconcile reads the Run afresh and finds the results
//! still held.
//!
//! This table only says which status a reconcile steps from and what
//! waits to be written; the writer itself is the run reconciler's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::events::Event;

use coxswain_core::api::{Run, RunStatus};
use coxswain_core::engine::Work;

/// Run uid → the writer running behind it.
#[derive(Default)]
pub struct Trailing(Mutex<HashMap<String, Slot>>);

/// A status to write and what follows once it is written.
pub struct Queued {
    /// The status, with its conditions set.
    pub status: RunStatus,
    /// Events about the change besides its story (which is told from the
    /// status written before it).
    pub told: Vec<Event>,
    /// Finished in-controller attempts whose results the status records:
    /// let go of once it is written.
    pub forget: Vec<Work>,
}

impl Queued {
    /// `newer` waiting in place of `self`: its status, and both changes'
    /// Events and attempts to let go of.
    fn then(mut self, newer: Queued) -> Queued {
        self.status = newer.status;
        self.told.extend(newer.told);
        self.forget.extend(newer.forget);
        self
    }
}

/// One run's writer.
struct Slot {
    /// The Run the write in flight replaces (the last one written once it
    /// lands): a read of any other version was written by someone else.
    confirmed: Arc<Run>,
    /// The newest status, written or not: what the run's next reconcile
    /// steps from.
    newest: RunStatus,
    /// What waits behind the write in flight.
    queued: Option<Queued>,
    /// A write failed: nothing more is written, and the next reconcile
    /// reads the Run afresh.
    failed: bool,
    /// A reconcile had to wait for the writer: the run is queued again
    /// when it stops.
    wanted: bool,
}

impl Slot {
    /// Nothing more is written; what waited is dropped.
    fn fail(&mut self) {
        self.failed = true;
        self.queued = None;
    }
}

/// What a reconcile steps from.
#[derive(Debug)]
pub enum Base {
    /// The Run as read: no writer runs behind it.
    Read,
    /// The newest status, not all of it written yet.
    Trailing(Box<RunStatus>),
    /// A writer runs, but the Run read is a version it did not write
    /// (someone else changed the Run): wait for the writer, then read again.
    Foreign,
}

/// Where a status handed to [`Trailing::push`] went.
pub enum Pushed {
    /// Behind the write in flight.
    Queued,
    /// No writer ran: this is the first write of a new one, on `base`.
    Start(Box<Queued>),
    /// The writer failed meanwhile: the status was computed from one that
    /// was never written, and is dropped; read the Run again.
    Stale,
}

impl Trailing {
    /// What the reconcile of `run` (the newest Run known) steps from. A
    /// failed writer is cleared here: the Run read is the truth again.
    pub fn base(&self, run: &Run) -> Base {
        let Some(uid) = run.uid() else {
            return Base::Read;
        };
        let mut map = self.lock();
        let Some(slot) = map.get(&uid) else {
            return Base::Read;
        };
        if slot.failed {
            map.remove(&uid);
            return Base::Read;
        }
        if slot.confirmed.resource_version() == run.resource_version() {
            Base::Trailing(Box::new(slot.newest.clone()))
        } else {
            Base::Foreign
        }
    }

    /// Hands `next` to the writer of the run `base` is (the newest Run
    /// written: what a writer that starts now writes on).
    pub fn push(&self, base: Arc<Run>, next: Queued) -> Pushed {
        let Some(uid) = base.uid() else {
            return Pushed::Stale;
        };
        let mut map = self.lock();
        match map.get_mut(&uid) {
            Some(slot) if slot.failed => {
                map.remove(&uid);
                Pushed::Stale
            }
            Some(slot) => {
                slot.newest = next.status.clone();
                slot.queued = Some(match slot.queued.take() {
                    Some(waiting) => waiting.then(next),
                    None => next,
                });
                Pushed::Queued
            }
            // Stepped from a writer that has since written everything:
            // `base` is its last write. Or stepped from the Run read.
            None => {
                map.insert(
                    uid,
                    Slot {
                        confirmed: base,
                        newest: next.status.clone(),
                        queued: None,
                        failed: false,
                        wanted: false,
                    },
                );
                Pushed::Start(Box::new(next))
            }
        }
    }

    /// The writer of `uid` wrote `written`: the next status to write, or
    /// `None` when nothing waits (the writer stops); and whether the run
    /// is to be queued again (a reconcile waited for the writer to stop).
    pub fn wrote(&self, uid: &str, written: Arc<Run>) -> (Option<Queued>, bool) {
        let mut map = self.lock();
        let Some(slot) = map.get_mut(uid) else {
            return (None, false);
        };
        slot.confirmed = written;
        match slot.queued.take() {
            Some(next) => (Some(next), false),
            None => {
                let wanted = map.remove(uid).is_some_and(|slot| slot.wanted);
                (None, wanted)
            }
        }
    }

    /// Asks `uid`'s writer to queue the run again when it stops; `false`
    /// when no writer runs (it stopped already, or failed and queued the
    /// run itself).
    pub fn want(&self, uid: &str) -> bool {
        match self.lock().get_mut(uid) {
            Some(slot) if !slot.failed => {
                slot.wanted = true;
                true
            }
            _ => false,
        }
    }

    /// The writer of `uid` could not write (or may not any more): what
    /// waited is dropped and the next reconcile reads the Run afresh.
    pub fn failed(&self, uid: &str) {
        if let Some(slot) = self.lock().get_mut(uid) {
            slot.fail();
        }
    }

    /// Stops the writers of the runs `which` picks (their buckets went to
    /// another replica): whatever waits is dropped, as for a failed write.
    pub fn fail_where(&self, which: impl Fn(&str) -> bool) {
        for (uid, slot) in self.lock().iter_mut() {
            if which(uid) {
                slot.fail();
            }
        }
    }

    /// Forgets `uid`'s writer (the run ended or is being deleted): a write
    /// in flight still lands or fails, and nothing after it is written.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// How many runs have a writer (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{FlowRef, RunPhase, RunSpec};

    fn run(version: &str) -> Arc<Run> {
        let mut run = Run::new(
            "r",
            RunSpec {
                flow_ref: FlowRef { name: "f".into() },
                input: None,
                cancel: false,
                from: None,
            },
        );
        run.metadata.uid = Some("uid-1".into());
        run.metadata.resource_version = Some(version.into());
        Arc::new(run)
    }

    fn status(progress: &str) -> RunStatus {
        RunStatus {
            phase: RunPhase::Running,
            progress: Some(progress.into()),
            ..Default::default()
        }
    }

    fn queued(progress: &str) -> Queued {
        Queued {
            status: status(progress),
            told: Vec::new(),
            forget: Vec::new(),
        }
    }

    fn progress(base: Base) -> Option<String> {
        match base {
            Base::Trailing(status) => status.progress,
            _ => None,
        }
    }

    #[test]
    fn a_run_without_a_writer_steps_from_the_run_read() {
        let trailing = Trailing::default();
        assert!(matches!(trailing.base(&run("10")), Base::Read));
    }

    #[test]
    fn statuses_wait_behind_the_write_in_flight_and_the_newest_replaces_the_waiting_one() {
        let trailing = Trailing::default();
        let Pushed::Start(first) = trailing.push(run("10"), queued("1/10")) else {
            panic!("no writer ran: this starts one");
        };
        assert_eq!(first.status.progress.as_deref(), Some("1/10"));
        // The next reconcile steps from the status being written.
        assert_eq!(progress(trailing.base(&run("10"))).as_deref(), Some("1/10"));
        assert!(matches!(
            trailing.push(run("10"), queued("2/10")),
            Pushed::Queued
        ));
        assert!(matches!(
            trailing.push(run("10"), queued("3/10")),
            Pushed::Queued
        ));
        assert_eq!(progress(trailing.base(&run("10"))).as_deref(), Some("3/10"));
        // The first write lands: the newest waiting status is written next,
        // on the Run it returned; 2/10 is never written on its own.
        let (next, wanted) = trailing.wrote("uid-1", run("11"));
        let next = next.expect("one waits");
        assert!(!wanted);
        assert_eq!(next.status.progress.as_deref(), Some("3/10"));
        // Reads of the version just written step from the newest status.
        assert_eq!(progress(trailing.base(&run("11"))).as_deref(), Some("3/10"));
        // Nothing waits any more: the writer stops and the run is read again.
        let (next, wanted) = trailing.wrote("uid-1", run("12"));
        assert!(next.is_none());
        assert!(!wanted, "no reconcile waited");
        assert!(trailing.is_empty());
        assert!(matches!(trailing.base(&run("12")), Base::Read));
    }

    #[test]
    fn waiting_changes_keep_every_event_and_every_result_to_let_go_of() {
        let a = Queued {
            status: status("1/10"),
            told: Vec::new(),
            forget: vec![work("s000")],
        };
        let b = Queued {
            status: status("3/10"),
            told: Vec::new(),
            forget: vec![work("s002")],
        };
        let both = a.then(b);
        assert_eq!(both.status.progress.as_deref(), Some("3/10"));
        let steps: Vec<&str> = both.forget.iter().map(|w| w.step.as_str()).collect();
        assert_eq!(steps, ["s000", "s002"]);
    }

    #[test]
    fn a_run_someone_else_wrote_waits_for_the_writer_and_is_read_again() {
        let trailing = Trailing::default();
        let _ = trailing.push(run("10"), queued("1/10"));
        // Version 15 is not one this writer made or built on.
        assert!(matches!(trailing.base(&run("15")), Base::Foreign));
    }

    #[test]
    fn a_failed_write_drops_what_waits_and_the_next_reconcile_reads_the_run() {
        let trailing = Trailing::default();
        let _ = trailing.push(run("10"), queued("1/10"));
        let _ = trailing.push(run("10"), queued("2/10"));
        trailing.failed("uid-1");
        // A status computed from the failed one is not written.
        assert!(matches!(
            trailing.push(run("10"), queued("3/10")),
            Pushed::Stale
        ));
        let _ = trailing.push(run("10"), queued("1/10"));
        trailing.failed("uid-1");
        // A failed writer queues the run itself: nobody waits for it.
        assert!(!trailing.want("uid-1"));
        assert!(matches!(trailing.base(&run("10")), Base::Read));
        assert!(trailing.is_empty());
    }

    #[test]
    fn a_reconcile_that_waits_for_the_writer_is_queued_again_when_it_stops() {
        let trailing = Trailing::default();
        let _ = trailing.push(run("10"), queued("1/10"));
        assert!(trailing.want("uid-1"), "a write is in flight");
        let _ = trailing.push(run("10"), queued("2/10"));
        // Not before everything waiting is written.
        let (next, wanted) = trailing.wrote("uid-1", run("11"));
        assert!(next.is_some() && !wanted);
        let (next, wanted) = trailing.wrote("uid-1", run("12"));
        assert!(next.is_none() && wanted);
        // Once stopped, nobody is to wait.
        assert!(!trailing.want("uid-1"));
    }

    #[test]
    fn a_bucket_handed_over_stops_its_writers() {
        let trailing = Trailing::default();
        let _ = trailing.push(run("10"), queued("1/10"));
        trailing.fail_where(|uid| uid == "uid-1");
        assert!(matches!(trailing.base(&run("10")), Base::Read));
    }

    fn work(step: &str) -> Work {
        Work {
            step: step.into(),
            part: None,
            attempt: 1,
            iteration: None,
            task: coxswain_core::engine::Task::Script(Default::default()),
            input: serde_json::Value::Null,
            timeout: None,
            data: Default::default(),
            run: Default::default(),
            review: None,
            lookups: Vec::new(),
        }
    }
}
