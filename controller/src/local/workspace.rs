//! The workspace of a `coxswain run`: a private folder of the run's own
//! (or the user's `--workspace DIR`) where the engine's workspace work is
//! done when its plan asks: the checkout before the first step, the push
//! of the run's branch at the end, and the folder removed once the run is
//! over, unless `--keep-workspace`.
//!
//! A folder given by the user holds its checkouts already: nothing is
//! cloned into it, pushed from it or removed.

use std::path::{Path, PathBuf};

use coxswain_core::api::{StepError, Workspace, WorkspaceStatus};
use coxswain_core::engine::{RunInfo, WorkspaceEnded};
use coxswain_steps::script::SharedWorkspace;
use coxswain_steps::secrets::EnvSecrets;
use coxswain_steps::workspace::{Repos, WorkspaceError, temp_folder};
use tempfile::TempDir;

use super::Progress;

/// A local run's workspace: the flow's `workspace`, the run's branch and
/// its folder.
#[derive(Debug)]
pub struct LocalWorkspace {
    spec: Workspace,
    branch: String,
    folder: Folder,
    /// `--keep-workspace`: the run's own folder stays, and where it is is said.
    keep: bool,
}

/// Where the workspace is, or why there is no folder for it.
#[derive(Debug)]
enum Folder {
    /// A private folder of the run's own (0700), removed with the value.
    Own(TempDir),
    /// The user's `--workspace DIR`, made absolute.
    Given(PathBuf),
    /// None could be made or found; the checkout fails with this.
    Missing(Option<WorkspaceError>),
    /// Removed, or kept, once the run was over.
    Released,
}

impl LocalWorkspace {
    /// The workspace of run `run` for the flow's `spec`: in `given` when
    /// the user named a folder, else in a new private one.
    pub fn new(spec: &Workspace, run: &RunInfo, given: Option<&Path>, keep: bool) -> Self {
        let folder = match given {
            // Made absolute: scripts run in it, and the status's paths must
            // read the same from anywhere.
            Some(dir) => match std::fs::canonicalize(dir) {
                Ok(dir) => Folder::Given(dir),
                Err(source) => Folder::Missing(Some(WorkspaceError::Folder {
                    path: dir.to_path_buf(),
                    source,
                })),
            },
            None => match temp_folder() {
                Ok(temp) => Folder::Own(temp),
                Err(e) => Folder::Missing(Some(e)),
            },
        };
        LocalWorkspace {
            spec: spec.clone(),
            branch: spec.branch_for(&run.name),
            folder,
            keep,
        }
    }

    /// What every script of the run gets: the folder as `$WORKSPACE`, the
    /// branch as `$BRANCH`.
    pub fn shared(&self) -> SharedWorkspace {
        SharedWorkspace {
            dir: self.dir().map(Path::to_path_buf),
            branch: self.branch.clone(),
        }
    }

    fn dir(&self) -> Option<&Path> {
        match &self.folder {
            Folder::Own(temp) => Some(temp.path()),
            Folder::Given(dir) => Some(dir),
            Folder::Missing(_) | Folder::Released => None,
        }
    }

    /// Makes the workspace: each repo checked out on the run's branch (or,
    /// in a folder given, the checkouts found there).
    pub async fn check_out(&mut self, progress: &mut Progress) -> WorkspaceEnded {
        let not_made = |error: StepError, workspace| WorkspaceEnded::NotMade { error, workspace };
        let Some(dir) = self.dir().map(Path::to_path_buf) else {
            let error = match &mut self.folder {
                Folder::Missing(error) => error.take().map(Into::into),
                _ => None,
            };
            return not_made(error.unwrap_or_else(gone), None);
        };
        let secrets = EnvSecrets::new();
        let repos = match Repos::read(&self.spec, &secrets).await {
            Ok(repos) => repos,
            Err(e) => return not_made(e.into(), None),
        };
        let given = matches!(self.folder, Folder::Given(_));
        let made = if given {
            repos.existing(&dir, &self.branch).await
        } else {
            repos.check_out(&dir, &self.branch).await
        };
        match made {
            Ok(status) => {
                let verb = if given { "using" } else { "checked out" };
                for repo in &status.repos {
                    let at = repo.ref_.as_deref().unwrap_or("HEAD");
                    progress.info(&format!(
                        "{verb} {} ({at}) at {} on {} in {}",
                        repo.name,
                        short(&repo.commit),
                        self.branch,
                        dir.display()
                    ));
                }
                WorkspaceEnded::Made(status)
            }
            Err(e) => {
                let partial = WorkspaceStatus {
                    branch: self.branch.clone(),
                    volume: Some(dir.display().to_string()),
                    ..WorkspaceStatus::default()
                };
                not_made(e.into(), Some(partial))
            }
        }
    }

    /// Pushes the run's branch from each checkout; a folder given by the
    /// user is never pushed from.
    pub async fn push(&mut self, progress: &mut Progress) -> WorkspaceEnded {
        let Folder::Own(temp) = &self.folder else {
            return WorkspaceEnded::Pushed {
                pushed: Vec::new(),
                error: None,
            };
        };
        let secrets = EnvSecrets::new();
        let (pushed, failure) = match Repos::read(&self.spec, &secrets).await {
            Ok(repos) => repos.push(temp.path(), &self.branch).await,
            Err(e) => (Vec::new(), Some(e)),
        };
        for p in &pushed {
            progress.info(&format!(
                "pushed {} to {} at {}",
                self.branch,
                p.name,
                short(&p.commit)
            ));
        }
        if let Some(e) = &failure {
            progress.note(&e.to_string());
        }
        WorkspaceEnded::Pushed {
            pushed,
            error: failure.map(Into::into),
        }
    }

    /// Lets the run's own folder go once the run is over: removed, or with
    /// `--keep-workspace` kept and its place said. A folder given by the
    /// user stays as it is.
    pub fn release(&mut self) {
        let Folder::Own(temp) = std::mem::replace(&mut self.folder, Folder::Released) else {
            return;
        };
        if self.keep {
            let kept = temp.keep();
            eprintln!("workspace kept at {}", kept.display());
            return;
        }
        let path = temp.path().to_path_buf();
        if let Err(e) = temp.close() {
            eprintln!(
                "warning: cannot remove the workspace {}: {e}",
                path.display()
            );
        }
    }
}

fn gone() -> StepError {
    coxswain_core::engine::step_error(
        coxswain_core::engine::codes::WORKSPACE,
        "the run's workspace folder was already let go",
    )
}

/// A commit's first 12 hex digits, as people read them.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
