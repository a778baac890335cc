//! The run's workspace as work of the engine: a run whose flow declares
//! `workspace` waits, `Pending`, for its checkout; once the driver says the
//! workspace was made the steps start; when the run ends in a way the flow
//! pushes, the run is held `Running` while the branch is pushed, and takes
//! the phase it ended with once the push is done.
//!
//! Like every attempt, what the workspace needs is read from the status
//! alone ([`RunMachine::workspace_work`]): a driver that restarted does the
//! same as one that saw every event.

use crate::api::{KeepPolicy, PushedBranch, RunPhase, RunStatus, StepError, WorkspaceStatus};

use super::RunMachine;
use crate::engine::work::{codes, step_error};

/// The workspace work a run's status asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkspaceWork {
    /// Make the run's workspace (its volume, its checkouts and branch):
    /// the run has not started and no workspace is recorded.
    CheckOut,
    /// Push the run's branch: the run ended and is held for the push.
    Push,
}

/// What the driver learned of the workspace work it ran.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkspaceEnded {
    /// The workspace was made: the status keeps these facts and the steps
    /// start.
    Made(WorkspaceStatus),
    /// It could not be made: the run fails with `error` before its first
    /// step; `workspace` is what was made of it, if anything (the volume to
    /// keep or release).
    NotMade {
        /// Why, for the person reading the status.
        error: StepError,
        /// What exists of the workspace.
        workspace: Option<WorkspaceStatus>,
    },
    /// The push ran: the branches pushed and, when one failed, why.
    Pushed {
        /// The repos the branch reached, with the commit pushed.
        pushed: Vec<PushedBranch>,
        /// Why a push failed.
        error: Option<StepError>,
    },
}

impl RunMachine<'_> {
    /// The workspace work the status says is due: the checkout of a run
    /// that has not started, or the push of a run held for it.
    pub fn workspace_work(&self) -> Option<WorkspaceWork> {
        workspace_work(self.flow.spec.workspace.is_some(), &self.state)
    }

    /// Whether the run may start: a flow with a workspace starts once the
    /// workspace is recorded.
    pub(in crate::engine) fn workspace_ready(&self) -> bool {
        self.flow.spec.workspace.is_none() || self.state.workspace.is_some()
    }

    /// Takes in what the driver's workspace work did. An answer for work no
    /// longer due (the run was cancelled meanwhile) changes nothing.
    pub(in crate::engine) fn workspace_ended(&mut self, ended: WorkspaceEnded) {
        let due = self.workspace_work();
        match ended {
            WorkspaceEnded::Made(made) if due == Some(WorkspaceWork::CheckOut) => {
                self.state.workspace = Some(made);
                self.start();
            }
            WorkspaceEnded::NotMade { error, workspace }
                if due == Some(WorkspaceWork::CheckOut) =>
            {
                self.stop(RunPhase::Failed, error);
                self.state.workspace = workspace;
            }
            WorkspaceEnded::Pushed { pushed, error } if due == Some(WorkspaceWork::Push) => {
                let Some(ending) = self.state.workspace.as_mut().and_then(|w| w.pushing.take())
                else {
                    return;
                };
                self.state.phase = ending;
                self.state.finished_at = Some(self.now_text.clone());
                self.state.workspace_pushed(pushed, error);
            }
            _ => {}
        }
    }

    /// A cancel while the branch is pushed: a run that ended cancelled
    /// pushes all the same (`push: always`); any other is stopped and
    /// ends `Cancelled`, with nothing pushed. Says whether the cancel was
    /// taken here.
    pub(in crate::engine) fn cancel_push(&mut self) -> bool {
        let Some(ws) = self.state.workspace.as_mut() else {
            return false;
        };
        match ws.pushing {
            None => false,
            Some(RunPhase::Cancelled) => true,
            Some(_) => {
                ws.pushing = None;
                self.state.phase = RunPhase::Cancelled;
                self.state.finished_at = Some(self.now_text.clone());
                self.state.workspace_pushed(Vec::new(), None);
                self.state.error = Some(step_error(
                    codes::CANCELLED,
                    "the run was cancelled while its branch was being pushed",
                ));
                true
            }
        }
    }

    /// Holds a run that just ended for the push of its branch, when its
    /// flow pushes a run that ended this way and the workspace was made.
    /// The phase it ended with is kept in `workspace.pushing`, and the run
    /// stays `Running`, without an end time, until the push is done.
    pub(in crate::engine) fn hold_for_push(&mut self) {
        let flow = self.flow;
        let Some(declared) = flow.spec.workspace.as_ref() else {
            return;
        };
        let phase = self.state.phase;
        let Some(ws) = self.state.workspace.as_mut() else {
            return;
        };
        if !phase.is_over()
            || ws.pushing.is_some()
            || !declared.pushes(phase == RunPhase::Succeeded)
        {
            return;
        }
        ws.pushing = Some(phase);
        self.state.phase = RunPhase::Running;
        self.state.finished_at = None;
    }
}

/// [`RunMachine::workspace_work`] from a status alone, for a flow that has
/// a workspace (`declared`) or not.
pub fn workspace_work(declared: bool, record: &RunStatus) -> Option<WorkspaceWork> {
    if !declared {
        return None;
    }
    match &record.workspace {
        None if record.phase == RunPhase::Pending => Some(WorkspaceWork::CheckOut),
        Some(ws) if ws.pushing.is_some() && !record.phase.is_over() => Some(WorkspaceWork::Push),
        _ => None,
    }
}

/// Whether the workspace of an ended run goes now: the run is over, a
/// volume was made for it, and its `keep` lets it go.
pub fn releases(record: &RunStatus) -> bool {
    let Some(ws) = record.workspace.as_ref() else {
        return false;
    };
    let keep = match ws.keep.unwrap_or_default() {
        KeepPolicy::Never => false,
        KeepPolicy::OnFailure => record.phase != RunPhase::Succeeded,
        KeepPolicy::Always => true,
    };
    record.phase.is_over() && ws.volume.is_some() && !keep
}
