//! Survival: runs of a flow with every kind of work the controller drives —
//! script steps as Jobs, in-controller http calls, a loop, a parallel
//! fan-out of scripts and a person's approval — finish right while the
//! controller is SIGKILLed again and again (`crash`), or while the leader
//! of two replicas is killed and the standby takes over (`failover`).
//!
//! Both check the same things: every run Succeeded with the outputs the
//! test computes on its own; exactly one Job per (run, step, part,
//! attempt); no Run's status ever went backwards (a watch checks every
//! event against the one before, see [`forward`]); and the local http
//! server saw each logical request at most twice, a repeat always with the
//! same `Idempotency-Key`.
//!
//! `CRASH_SEED` replays the kill moments of a run (the seed is printed);
//! `CRASH_RUNS` and `CRASH_KILLS` change the sizes (20 and 20).

mod survival;

use std::time::{Duration, Instant};

use coxswain_e2e::ControllerProcess;
use survival::{Rng, Scene, env_number, seed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about 5 minutes: CI runs it in its --ignored step"]
async fn runs_survive_a_controller_sigkilled_at_random_moments() {
    let seed = seed();
    let (count, kills) = (
        env_number("CRASH_RUNS", 20) as i64,
        env_number("CRASH_KILLS", 20),
    );
    eprintln!("crash test: seed {seed} (rerun with CRASH_SEED={seed}), {count} runs, {kills} kills");
    let mut rng = Rng(seed);
    let mut scene = Scene::new().await;
    let mut controller =
        ControllerProcess::for_namespace(scene.ns.name(), &["--leader-election=false"])
            .await
            .expect("controller");
    let started = Instant::now();
    scene.start_runs(count);

    let mut killed = 0;
    while killed < kills && scene.unfinished() > 0 {
        tokio::time::sleep(rng.between(Duration::from_millis(300), Duration::from_millis(4000)))
            .await;
        if scene.unfinished() == 0 {
            break;
        }
        controller.restart().expect("controller restarted");
        killed += 1;
    }
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
