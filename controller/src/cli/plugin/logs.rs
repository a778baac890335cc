//! `logs RUN [STEP] [-f]`: what script steps printed, from their pods
//! (`kubectl logs -c step` of each attempt's pod) while the pods are there,
//! else the last lines of stderr each attempt's status keeps (`log`). Only
//! pods whose Job the Run owns (by uid) are read: labels are anyone's to
//! write. `-f` follows the pods as they start, until the steps end.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::cluster::{Cluster, uid};
use super::error::PluginError;
use coxswain_core::api::{Run, RunStatus, StepPhase};
use coxswain_kube::names;

/// The container running the script in a step's pod.
const CONTAINER: &str = "step";

/// How long followed logs may go on once their steps ended.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// What `logs` was asked for.
pub struct Ask<'a> {
    /// The run.
    pub run: &'a str,
    /// One step, or every step.
    pub step: Option<&'a str>,
    /// Follow until the steps end.
    pub follow: bool,
}

/// The step (and part) a Job ran, from its `coxswain.dev/work`
/// annotation (`RUNUID/STEP[/ROUND.PART][/pPASS]/aATTEMPT`).
#[derive(Debug, Clone, PartialEq)]
struct Work {
    step: String,
    part: Option<String>,
}

impl Work {
    fn parse(text: &str) -> Option<Work> {
        let mut pieces = text.split('/').skip(1);
        let step = pieces.next()?.to_string();
        let part = pieces
            .find_map(|piece| piece.split_once('.'))
            .map(|(_, part)| part.to_string());
        Some(Work { step, part })
    }

    /// `step`, or `step[part]` for a parallel step's part.
    fn label(&self) -> String {
        match &self.part {
            Some(part) => format!("{}[{part}]", self.step),
            None => self.step.clone(),
        }
    }
}

/// Prints the logs; errors when the run or the step is not there.
pub async fn logs(cluster: &Cluster, ask: &Ask<'_>) -> Result<(), PluginError> {
    let run = cluster.run(ask.run).await?;
    let status = run.status.clone().unwrap_or_default();
    if let Some(step) = ask.step
        && !status.steps.contains_key(step)
    {
        return Err(PluginError::NoStep {
            run: ask.run.to_string(),
            step: step.to_string(),
            known: status.steps.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    let prefix = match ask.step {
        None => true,
        Some(step) => status.steps.get(step).is_some_and(|r| !r.parts.is_empty()),
    };
    let mut reader = Reader {
        cluster,
        run_uid: uid(&run),
        step: ask.step.map(String::from),
        prefix,
        works: HashMap::new(),
        printed: HashSet::new(),
        had_pods: HashSet::new(),
        followers: tokio::task::JoinSet::new(),
    };
    if ask.follow && !settled(&run, ask.step) {
        reader.follow(ask.run).await?;
    }
    reader.sweep().await?;
    // The steps ended: their pods' logs end too. A stream the node never
    // closes is not waited on for ever.
    let drained = async { while reader.followers.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN, drained).await.is_err() {
        reader.followers.abort_all();
    }
    let status = status_now(cluster, ask.run).await?;
    print_tails(&status, ask.step, &reader.had_pods, prefix);
    Ok(())
}

/// The run's latest status (the steps may have ended while following).
async fn status_now(cluster: &Cluster, name: &str) -> Result<RunStatus, PluginError> {
    Ok(cluster.run(name).await?.status.unwrap_or_default())
}

/// Whether the steps asked for (every step: the run) ended.
fn settled(run: &Run, step: Option<&str>) -> bool {
    let Some(status) = &run.status else {
        return false;
    };
    if status.phase.is_over() {
        return true;
    }
    match step {
        None => false,
        Some(step) => status.steps.get(step).is_some_and(|r| {
            matches!(
                r.status,
                StepPhase::Completed | StepPhase::Failed | StepPhase::Skipped
            )
        }),
    }
}

/// Reads the step pods of one run.
struct Reader<'a> {
    cluster: &'a Cluster,
    run_uid: String,
    step: Option<String>,
    prefix: bool,
    /// The run's Jobs by uid: the attempt each ran.
    works: HashMap<String, Work>,
    /// Pods (by uid) whose log was printed or is being followed.
    printed: HashSet<String>,
    /// The steps whose pods were read: the others' logs come from the status.
    had_pods: HashSet<String>,
    followers: tokio::task::JoinSet<()>,
}

impl Reader<'_> {
    fn selector(&self) -> String {
        format!("{}={}", names::RUN_UID_LABEL, self.run_uid)
    }

    /// Lists the run's Jobs again, keeping those the Run owns.
    async fn learn_jobs(&mut self) -> Result<(), PluginError> {
        let jobs = self
            .cluster
            .api::<Job>()
            .list(&ListParams::default().labels(&self.selector()))
            .await?;
        for job in jobs {
            if !names::controlled_by(&job, &self.run_uid) {
                continue;
            }
            let work = job
                .annotations()
                .get(names::WORK_ANNOTATION)
                .and_then(|w| Work::parse(w));
            if let (Some(uid), Some(work)) = (job.uid(), work) {
                self.works.insert(uid, work);
            }
        }
        Ok(())
    }

    /// The attempt a pod ran, when its Job is the run's and the step is
    /// one asked for.
    async fn work_of(&mut self, pod: &Pod) -> Result<Option<Work>, PluginError> {
        let Some(owner) = pod
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "Job")
            .map(|o| o.uid.clone())
        else {
            return Ok(None);
        };
        if !self.works.contains_key(&owner) {
            self.learn_jobs().await?;
        }
        Ok(self
            .works
            .get(&owner)
            .filter(|w| self.step.as_ref().is_none_or(|s| *s == w.step))
            .cloned())
    }

    /// Prints the whole log of every pod not printed yet, oldest first.
    async fn sweep(&mut self) -> Result<(), PluginError> {
        self.learn_jobs().await?;
        let mut pods = self
            .cluster
            .api::<Pod>()
            .list(&ListParams::default().labels(&self.selector()))
            .await?
            .items;
        pods.sort_by_key(|p| p.creation_timestamp().map(|t| t.0));
        for pod in pods {
            let Some(work) = self.work_of(&pod).await? else {
                continue;
            };
            let uid = pod.uid().unwrap_or_default();
            if self.printed.contains(&uid) || !started(&pod) {
                continue;
            }
            let params = LogParams {
                container: Some(CONTAINER.into()),
                ..LogParams::default()
            };
            match self
                .cluster
                .api::<Pod>()
                .logs(&pod.name_any(), &params)
                .await
            {
                Ok(text) => {
                    self.printed.insert(uid);
                    self.had_pods.insert(work.step.clone());
                    let label = self.prefix.then(|| work.label());
                    for line in text.lines() {
                        print_line(label.as_deref(), line);
                    }
                }
                // Gone since it was listed: its status's tail stands in.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Follows each step pod as it starts, until the steps asked for end.
    async fn follow(&mut self, run: &str) -> Result<(), PluginError> {
        let runs = watcher(
            self.cluster.runs(),
            watcher::Config::default().fields(&format!("metadata.name={run}")),
        )
        .default_backoff();
        let pods = watcher(
            self.cluster.api::<Pod>(),
            watcher::Config::default().labels(&self.selector()),
        )
        .default_backoff()
        .applied_objects();
        let mut runs = Box::pin(runs);
        let mut pods = Box::pin(pods);
        loop {
            tokio::select! {
                event = runs.try_next() => match event {
                    Ok(Some(watcher::Event::Apply(r) | watcher::Event::InitApply(r)))
                        if settled(&r, self.step.as_deref()) => return Ok(()),
                    Ok(Some(watcher::Event::Delete(_))) => {
                        return Err(PluginError::RunDeleted(run.to_string()));
                    }
                    Ok(None) => return Ok(()),
                    _ => {}
                },
                pod = pods.try_next() => {
                    if let Ok(Some(pod)) = pod {
                        self.start_following(&pod).await?;
                    }
                }
            }
        }
    }

    async fn start_following(&mut self, pod: &Pod) -> Result<(), PluginError> {
        let uid = pod.uid().unwrap_or_default();
        if self.printed.contains(&uid) || !started(pod) {
            return Ok(());
        }
        let Some(work) = self.work_of(pod).await? else {
            return Ok(());
        };
        self.printed.insert(uid);
        self.had_pods.insert(work.step.clone());
        let api: Api<Pod> = self.cluster.api();
        let name = pod.name_any();
        let label = self.prefix.then(|| work.label());
        self.followers.spawn(async move {
            let params = LogParams {
                container: Some(CONTAINER.into()),
                follow: true,
                ..LogParams::default()
            };
            let Ok(stream) = api.log_stream(&name, &params).await else {
                return;
            };
            let mut lines = std::pin::pin!(stream.lines());
            while let Ok(Some(line)) = lines.try_next().await {
                print_line(label.as_deref(), &line);
            }
        });
        Ok(())
    }
}

/// Whether the pod's container started, so it has a log to read.
fn started(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p != "Pending")
}

fn print_line(label: Option<&str>, line: &str) {
    match label {
        Some(label) => println!("{label} │ {line}"),
        None => println!("{line}"),
    }
}

/// For each step asked for whose pods are gone, the last lines of stderr
/// its status kept of each attempt.
fn print_tails(status: &RunStatus, step: Option<&str>, shown: &HashSet<String>, prefix: bool) {
    let mut tails: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for (key, record) in &status.steps {
        if step.is_some_and(|s| s != key) || shown.contains(key) {
            continue;
        }
        let start = record.started_at.clone().unwrap_or_default();
        let whole = record.attempts.iter().map(|a| (key.clone(), a));
        let parts = record.parts.iter().flat_map(|p| {
            p.attempts
                .iter()
                .map(move |a| (format!("{key}[{}]", p.key), a))
        });
        for (label, attempt) in whole.chain(parts) {
            if let Some(log) = &attempt.log {
                tails
                    .entry((start.clone(), key.clone()))
                    .or_default()
                    .push((label, log.text.clone()));
            }
        }
    }
    for ((_, key), logs) in tails {
        eprintln!(
            "note: the pods of step {key} are gone; the last lines of stderr its record kept:"
        );
        for (label, text) in logs {
            let label = prefix.then_some(label);
            for line in text.lines() {
                print_line(label.as_deref(), line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_work_names_its_step_and_part() {
        let work = Work::parse("u-1/fan/2.ada/p3/a1").expect("parsed");
        assert_eq!(work.label(), "fan[ada]");
        let work = Work::parse("u-1/build/a2").expect("parsed");
        assert_eq!((work.label(), work.part), ("build".to_string(), None));
    }
}
