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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_a_controller_sigkilled_at_random_moments() {
    survival::crash_test(20, 20).await;
}
