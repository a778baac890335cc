//! The Runs this controller wrote, until its watch brings them back.
//!
//! A status write returns the Run as the API server now has it, but the
//! watch delivers it a moment later; an in-controller call that ends in
//! between queues a reconcile that would read the Run as it was before the
//! write. That stale read either proves nothing new and, finding work
//! "running" that was already forgotten, has to ask the API server whether
//! it is current and wait (a GET and a requeue), or it acts again on what
//! was already written and fails with a 409 Conflict (a wasted write and a
//! requeue) — both between one step's end and the next step's start.
//!
//! So each write is remembered with the resource version it replaced (and
//! those its predecessors replaced, when writes follow each other faster
//! than the watch). A reconcile handed one of those versions knows the
//! watch is behind, and uses
//! the Run that was written instead: the API server's own answer to the
//! write, newer than the read. Resource versions are only compared for
//! equality, as the API asks. Nothing here is the truth about a run: the
//! entry is dropped as soon as the watch shows a version this controller
//! did not write, and a restarted controller simply starts without it.
//! While the watch shows the last write itself, the entry says the Run read
//! is this controller's own ([`Written::is_ours`]), which lets a reconcile
//! start in-controller work before its status is written (`trailing`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;

use coxswain_core::api::Run;

/// Run uid → what was written last for it.
#[derive(Default)]
pub struct Written(Mutex<HashMap<String, Entry>>);

/// The last write of a run and the versions it (and the writes before it
/// that the watch has not brought yet) replaced.
struct Entry {
    replaced: Vec<String>,
    written: Arc<Run>,
}

/// Most replaced versions kept per run; a watch this far behind is rare,
/// and the reconcile then falls back on its usual check.
const CHAIN_MAX: usize = 16;

impl Written {
    /// Remembers that `read` was replaced by `written`; gives it back.
    pub fn wrote(&self, read: &Run, written: Run) -> Arc<Run> {
        let written = Arc::new(written);
        let (Some(uid), Some(version)) = (read.uid(), read.resource_version()) else {
            return written;
        };
        let mut map = self.lock();
        // Written on top of our own last write: the versions that one
        // replaced are still behind the new write.
        let mut replaced = match map.remove(&uid) {
            Some(entry) if entry.written.resource_version().as_ref() == Some(&version) => {
                entry.replaced
            }
            _ => Vec::new(),
        };
        if replaced.len() >= CHAIN_MAX {
            replaced.remove(0);
        }
        replaced.push(version);
        map.insert(
            uid,
            Entry {
                replaced,
                written: written.clone(),
            },
        );
        written
    }

    /// The newest Run known for `read`: the one this controller wrote when
    /// `read` is the version that write replaced, else `read` (and the
    /// entry is dropped, unless `read` is that write itself).
    pub fn newest(&self, read: Arc<Run>) -> Arc<Run> {
        let Some(uid) = read.uid() else {
            return read;
        };
        let mut map = self.lock();
        let version = read.resource_version().unwrap_or_default();
        match map.get(&uid) {
            Some(entry) if entry.replaced.contains(&version) => entry.written.clone(),
            // The watch brought the write back: kept, so `is_ours` still
            // knows the Run read is this controller's last write.
            Some(entry)
                if entry.written.resource_version().as_deref() == Some(version.as_str()) =>
            {
                read
            }
            Some(_) => {
                map.remove(&uid);
                read
            }
            None => read,
        }
    }

    /// Whether `run` is the Run this controller wrote last for it: nobody
    /// else changed it since, as far as this process knows.
    pub fn is_ours(&self, run: &Run) -> bool {
        let Some(uid) = run.uid() else {
            return false;
        };
        self.lock()
            .get(&uid)
            .is_some_and(|entry| entry.written.resource_version() == run.resource_version())
    }

    /// Forgets the runs `which` picks (their buckets went to another
    /// replica, which may write them next).
    pub fn forget_where(&self, which: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| !which(uid));
    }

    /// Forgets a run (it ended or is being deleted).
    pub fn forget(&self, run: &Run) {
        if let Some(uid) = run.uid() {
            self.lock().remove(&uid);
        }
    }

    /// How many writes are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{FlowRef, RunPhase, RunSpec, RunStatus};

    fn run(version: &str, phase: RunPhase) -> Run {
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
        run.status = Some(RunStatus {
            phase,
            ..Default::default()
        });
        run
    }

    #[test]
    fn a_read_of_the_version_a_write_replaced_gets_the_written_run() {
        let written = Written::default();
        let read = run("10", RunPhase::Pending);
        written.wrote(&read, run("11", RunPhase::Running));
        // The watch has not brought version 11 yet: the store still says 10.
        let newest = written.newest(Arc::new(read.clone()));
        assert_eq!(newest.resource_version().as_deref(), Some("11"));
        assert_eq!(
            newest.status.as_ref().map(|s| s.phase),
            Some(RunPhase::Running)
        );
        // Again, as long as the watch is behind.
        let again = written.newest(Arc::new(read));
        assert_eq!(again.resource_version().as_deref(), Some("11"));
        assert_eq!(written.len(), 1);
    }

    #[test]
    fn once_the_watch_brings_any_other_version_the_read_wins_and_the_entry_goes() {
        let written = Written::default();
        written.wrote(&run("10", RunPhase::Pending), run("11", RunPhase::Running));
        assert!(!written.is_ours(&run("10", RunPhase::Pending)));
        let caught_up = written.newest(Arc::new(run("11", RunPhase::Running)));
        assert_eq!(caught_up.resource_version().as_deref(), Some("11"));
        // The watch brought our own write: still known to be ours.
        assert!(written.is_ours(&run("11", RunPhase::Running)));
        let _ = written.newest(Arc::new(run("12", RunPhase::Running)));
        assert!(written.is_empty());
        assert!(!written.is_ours(&run("12", RunPhase::Running)));

        // A version this controller did not write (someone cancelled the
        // run after our write) is newer than anything remembered.
        written.wrote(&run("20", RunPhase::Pending), run("21", RunPhase::Running));
        let other = written.newest(Arc::new(run("22", RunPhase::Running)));
        assert_eq!(other.resource_version().as_deref(), Some("22"));
        assert!(written.is_empty());
        // And the old version read later (a stale watch replay) is no
        // longer answered with a remembered write.
        let old = written.newest(Arc::new(run("20", RunPhase::Pending)));
        assert_eq!(old.resource_version().as_deref(), Some("20"));
    }

    #[test]
    fn writes_faster_than_the_watch_answer_every_version_they_replaced() {
        let written = Written::default();
        written.wrote(&run("10", RunPhase::Pending), run("11", RunPhase::Running));
        // The next reconcile read 10, got 11 from here, and wrote 12 on it.
        written.wrote(&run("11", RunPhase::Running), run("12", RunPhase::Running));
        for behind in ["10", "11"] {
            let newest = written.newest(Arc::new(run(behind, RunPhase::Pending)));
            assert_eq!(
                newest.resource_version().as_deref(),
                Some("12"),
                "read {behind}"
            );
        }
        // A write on a read that is not our last write starts afresh.
        written.wrote(&run("30", RunPhase::Running), run("31", RunPhase::Running));
        let old = written.newest(Arc::new(run("11", RunPhase::Running)));
        assert_eq!(old.resource_version().as_deref(), Some("11"));
    }

    #[test]
    fn another_run_is_left_alone_and_forget_drops_the_entry() {
        let written = Written::default();
        written.wrote(&run("10", RunPhase::Pending), run("11", RunPhase::Running));
        let mut other = run("10", RunPhase::Pending);
        other.metadata.uid = Some("uid-2".into());
        let got = written.newest(Arc::new(other));
        assert_eq!(got.uid().as_deref(), Some("uid-2"));
        assert_eq!(got.resource_version().as_deref(), Some("10"));
        assert_eq!(written.len(), 1);
        written.forget(&run("11", RunPhase::Running));
        assert!(written.is_empty());
    }
}
