//! The crash test's body, shared by the binaries that run it on the
//! stand-in node (`crash.rs`) and on the real node (`crash_real_node.rs`).

use std::time::{Duration, Instant};

use coxswain_e2e::ControllerProcess;

use super::{Rng, Scene, env_number, job_executable, seed, since_start};

/// The crash test: `CRASH_RUNS` runs (default `runs`) while the controller
/// is SIGKILLed `CRASH_KILLS` times (default `kills`) at random moments
/// and restarted at once, then every check of [`Scene::check`].
pub async fn crash_test(runs: u64, kills: u64) {
    let seed = seed();
    let (count, kills) = (
        env_number("CRASH_RUNS", runs) as i64,
        env_number("CRASH_KILLS", kills),
    );
    eprintln!(
        "crash test: seed {seed} (rerun with CRASH_SEED={seed}), {count} runs, {kills} kills"
    );
    let mut rng = Rng(seed);
    since_start();
    let mut scene = Scene::new().await;
    let exe = job_executable();
    let flags = ["--leader-election=false", "--job-executable", &exe];
    let mut controller = ControllerProcess::for_namespace(scene.ns.name(), &flags)
        .await
        .expect("controller");
    let started = Instant::now();
    scene.start_runs(count);

    let mut killed = 0;
    let mut in_flight = Vec::new();
    while killed < kills && scene.unfinished() > 0 {
        // Calls the last kill cut short are made again by the restarted
        // controller; the next kill waits until those are recorded, or two
        // kills in a row could land in the same call, and a third call is
        // what the test rules out. The moment after that is random.
        scene
            .wait_recorded(&in_flight, || controller.log_text())
            .await;
        tokio::time::sleep(rng.between(Duration::from_millis(300), Duration::from_millis(3000)))
            .await;
        if scene.unfinished() == 0 {
            break;
        }
        controller.restart().expect("controller restarted");
        in_flight = scene.unrecorded_calls();
        killed += 1;
        eprintln!(
            "kill {killed} at {} ms, {} calls in flight",
            since_start(),
            in_flight.len()
        );
        // A person approves the runs over the course of the kills.
        scene.approve(count as usize * killed as usize / kills as usize);
    }
    scene.approve(usize::MAX);
    let approved = scene.wait_all_over(|| controller.log_text()).await;
    let figures = scene.check().await;
    assert!(
        killed >= kills,
        "the runs ended after {killed} kills, before the {kills} the test promises; \
         the kills must come faster (seed {seed})"
    );
    eprintln!(
        "crash test: seed {seed}: {count} runs Succeeded in {:?} with {killed} SIGKILLs mid-run; \
         {approved} approvals; {figures:?}",
        started.elapsed()
    );
}
