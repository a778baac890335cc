//! The crash test of `crash.rs` with every script step a pod on the real
//! node (kubelet, containerd, runc; images built here, the step runner the
//! image's static executable): the controller SIGKILLed at random moments
//! while real containers run, and still one pod per attempt, nothing lost,
//! no status going backwards. Smaller by default than on the stand-in
//! node, whose pods start in a tenth of the time: 6 runs, 8 kills
//! (`CRASH_RUNS`, `CRASH_KILLS`, `CRASH_SEED` as there).

mod survival;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_a_controller_sigkilled_while_real_pods_run() {
    coxswain_e2e::use_real_node();
    tokio::task::spawn_blocking(coxswain_e2e::real_node_images)
        .await
        .expect("image loading ran")
        .unwrap_or_else(|e| panic!("{e}"));
    survival::crash_test(6, 8).await;
}
