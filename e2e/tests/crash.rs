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
async fn runs_survive_a_controller_sigkilled_at_random_moments() {
    let seed = seed();
    let (count, kills) = (
        env_number("CRASH_RUNS", 20) as i64,
        env_number("CRASH_KILLS", 20),
    );
    eprintln!(
        "crash test: seed {seed} (rerun with CRASH_SEED={seed}), {count} runs, {kills} kills"
    );
    let mut rng = Rng(seed);
    survival::since_start();
    let mut scene = Scene::new().await;
    let exe = survival::job_executable();
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
            survival::since_start(),
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
