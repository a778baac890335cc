//! The machine's limit: 16 workers merge-patching the status of custom
//! resources (Runs no controller watches) as fast as the API server takes
//! it, for a fixed time. What a controller that did nothing but write one
//! status per step could reach here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::objects::{run_object, runs};
use crate::Result;

/// What the loop reached.
#[derive(Debug, Clone)]
pub struct PlainFigures {
    /// Workers patching at once.
    pub workers: usize,
    /// Patches accepted.
    pub patches: u64,
    /// Patches refused (any error).
    pub errors: u64,
    /// How long it ran, in seconds.
    pub seconds: f64,
    /// CPU seconds the kube-apiserver used meanwhile.
    pub apiserver_cpu: Option<f64>,
}

impl PlainFigures {
    /// Accepted patches per second.
    pub fn rate(&self) -> f64 {
        self.patches as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// Runs the loop in `namespace` (no controller may watch it) with
/// `workers` workers for `duration`, each on a Run of its own.
pub async fn patch_loop(
    client: &Client,
    namespace: &str,
    workers: usize,
    duration: Duration,
) -> Result<PlainFigures> {
    let api = runs(client, namespace);
    for w in 0..workers {
        let run = run_object(namespace, &format!("plain-{w:03}"), "none");
        api.create(&PostParams::default(), &run).await?;
    }
    let apiserver = crate::kubeconfig()
        .ok()
        .and_then(|k| super::workload::apiserver_pid(&k));
    let cpu = || apiserver.and_then(|p| super::workload::cpu_seconds(p).ok());
    let cpu_before = cpu();
    let stop = Arc::new(AtomicBool::new(false));
    let patches = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (api, stop) = (api.clone(), stop.clone());
        let (patches, errors) = (patches.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let name = format!("plain-{w:03}");
            let mut i: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let body = json!({"status": {"progress": format!("{i}/0")}});
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                {
                    Ok(_) => patches.fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let apiserver_cpu = cpu().zip(cpu_before).map(|(a, b)| a - b);
    Ok(PlainFigures {
        apiserver_cpu,
        workers,
        patches: patches.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    })
}
