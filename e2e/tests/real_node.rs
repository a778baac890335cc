//! Script steps on the real node: a kubelet with containerd and runc
//! (`harness --node real`), so the image, its libc, the pod's user, the
//! runtime's seccomp, the kubelet's volumes and its termination messages all
//! take part, as on a user's cluster. Every namespace enforces the
//! "restricted" Pod Security Standard, and each test's controller runs step
//! pods as a random non-root uid that no image has a passwd entry for.
//!
//! The images are built here (`e2e/image/build`, `e2e/image/test-images`)
//! and imported into the node's containerd; the step pods' init container
//! copies the image's static `coxswain` into images with musl, with no libc
//! or with no shell.

use std::time::Duration;

use coxswain_e2e::{
    BUSYBOX_IMAGE, DEBIAN_IMAGE, MUSL_IMAGE, STATIC_IMAGE, Setup, real_node_images, use_real_node,
    wait_for,
};
use serde_json::{Value, json};

/// How long a run may take: pods on the real node take about 2 s each.
const BOUND: Duration = Duration::from_secs(240);

/// A namespace enforcing the restricted standard, the images loaded, and a
/// controller whose step pods run as a random uid (returned) and are kept
/// once finished, so their logs can be read.
async fn setup() -> (Setup, i64) {
    use_real_node();
    tokio::task::spawn_blocking(real_node_images)
        .await
        .expect("image loading ran")
        .unwrap_or_else(|e| panic!("{e}"));
    let uid = 10_000 + i64::from(coxswain_test_support::random_u32() % 2_000_000_000);
    let uid_flag = uid.to_string();
    let s = Setup::new(&[
        "--job-run-as-user",
        &uid_flag,
        "--job-ttl-after-finished",
        "never",
    ])
    .await;
    s.kubectl
        .run(&[
            "label",
            "namespace",
            s.ns(),
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    (s, uid)
}

fn create_run(s: &Setup, flow: &str, input: Value) -> String {
    s.kubectl
        .create_run(s.ns(), flow, &input)
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn wait_phase(s: &Setup, run: &str, phases: &[&str]) -> Value {
    match s.kubectl.wait_run(s.ns(), run, phases, BOUND).await {
        Ok(object) => object,
        Err(e) => panic!(
            "{e}\nrun: {}\npods: {}\ncontroller log:\n{}",
            s.get("run", run)["status"],
            pods_wide(s),
            s.logs()
        ),
    }
}

fn pods_wide(s: &Setup) -> String {
    s.kubectl
        .run(&["get", "pods", "-n", s.ns(), "-o", "wide"])
        .unwrap_or_else(|e| e)
}

/// The step container's log of `step`'s pod in `run`, through the API
/// server and the kubelet (`kubectl logs`).
fn step_log(s: &Setup, run: &str, step: &str) -> String {
    let selector = format!("coxswain.dev/run={run},coxswain.dev/step={step}");
    s.kubectl
        .run(&["logs", "-n", s.ns(), "-l", &selector, "-c", "step"])
        .unwrap_or_else(|e| panic!("{e}"))
}

const IMAGES_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: images}
spec:
  input:
    type: object
    properties: {name: {type: string}}
  steps:
    - key: busybox
      input: {name: $input.name}
      script:
        image: IMAGE_BUSYBOX
        source: |
          set -eu
          echo "busybox step as $(id -u)" >&2
          echo home > "$HOME/h" && echo tmp > "$TMPDIR/t" && echo out > "$OUTPUTS/o.txt"
          if touch /not-here 2>/dev/null; then root=true; else root=false; fi
          if touch "$INPUTS/new" 2>/dev/null; then inputs=true; else inputs=false; fi
          if [ -e /lib/libc.so.6 ] || [ -e /lib64/ld-linux-x86-64.so.2 ]; then glibc=true; else glibc=false; fi
          printf '{"got": %s, "uid": %s, "root_writable": %s, "inputs_writable": %s, "glibc": %s, "home": "%s"}\n' \
            "$(cat "$INPUTS/name")" "$(id -u)" "$root" "$inputs" "$glibc" "$HOME"
    - key: musl
      input: {name: $steps.busybox.output}
      script:
        image: IMAGE_MUSL
        source: greet
    - key: static
      input: {name: $steps.musl.output}
      script:
        image: IMAGE_STATIC
        command: [/greet]
    - key: debian
      input: {name: $input.name}
      script:
        image: IMAGE_DEBIAN
        source: |
          printf '{"got": %s, "uid": %s, "libc": "%s"}\n' \
            "$(cat "$INPUTS/name")" "$(id -u)" "$(getconf GNU_LIBC_VERSION)"
"#;

/// One flow through four images (no libc, musl, no shell, Debian), each
/// step reading the one before it (or the run input): every step succeeds
/// as the random uid, the data arrives whole, and the four run as one
/// chain, each in a container of its own image in one pod on the real
/// node (the runner waiting for its turn in each of them).
#[tokio::test]
async fn script_steps_run_in_any_image_as_a_random_user() {
    let (s, uid) = setup().await;
    let flow = IMAGES_FLOW
        .replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE)
        .replace("IMAGE_MUSL", MUSL_IMAGE)
        .replace("IMAGE_STATIC", STATIC_IMAGE)
        .replace("IMAGE_DEBIAN", DEBIAN_IMAGE);
    s.apply(&flow);
    let run = create_run(&s, "images", json!({"name": "Ada"}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    let steps = &done["status"]["steps"];
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);

    let busybox = &steps["busybox"]["output"];
    assert_eq!(
        busybox,
        &json!({"got": {"data": "Ada"}, "uid": uid, "root_writable": false,
                "inputs_writable": false, "glibc": false, "home": "/coxswain/home",
                "files": ["o.txt"]}),
        "busybox: no libc, the random uid, / and $INPUTS read-only to it, $HOME on a volume"
    );
    let musl = &steps["musl"]["output"];
    assert_eq!(
        musl,
        &json!({"got": busybox, "uid": uid, "libc": "musl", "files": ["note.txt"]})
    );
    let static_ = &steps["static"]["output"];
    assert_eq!(
        static_,
        &json!({"got": musl, "uid": uid, "libc": "static musl", "files": ["note.txt"]}),
        "a command in an image with no shell"
    );
    let debian = &steps["debian"]["output"];
    assert_eq!(debian["got"], json!({"data": "Ada"}));
    assert_eq!(debian["uid"], json!(uid));
    assert!(
        debian["libc"]
            .as_str()
            .unwrap_or_default()
            .starts_with("glibc 2."),
        "{debian}"
    );

    // What each script said on stderr is in its status and in kubectl logs.
    assert_eq!(
        steps["busybox"]["attempts"][0]["log"]["text"],
        format!("busybox step as {uid}\n")
    );
    assert!(step_log(&s, &run, "busybox").contains(&format!("busybox step as {uid}")));
    let jobs = jobs_of(&s, &run);
    assert_eq!(jobs.len(), 1, "the four steps chain: {jobs:#?}");
    assert_eq!(
        jobs[0]["metadata"]["annotations"]["coxswain.dev/chain"],
        "musl,static,debian"
    );
    let static_log = s
        .kubectl
        .run(&[
            "logs",
            "-n",
            s.ns(),
            "-l",
            &format!("coxswain.dev/run={run}"),
            "-c",
            "next-2",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(static_log.contains("greet: read "), "{static_log}");

    // The chain's pod ran each step's image on the real node, as that
    // user. The run reads a step's result as soon as its container ends,
    // so the pod may be told Succeeded a little after the run.
    let selector = format!("coxswain.dev/run={run}");
    let pods = wait_for("every step's pod to be Succeeded", BOUND, || async {
        let pods = s
            .kubectl
            .json(&["get", "pods", "-n", s.ns(), "-l", &selector, "-o", "json"]);
        let pods = pods["items"].as_array().cloned().unwrap_or_default();
        Ok(pods
            .iter()
            .all(|p| p["status"]["phase"] == "Succeeded")
            .then_some(pods))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", pods_wide(&s)));
    assert_eq!(pods.len(), 1, "one pod for the chain: {}", pods_wide(&s));
    let pod = &pods[0];
    assert_eq!(pod["spec"]["securityContext"]["runAsUser"], json!(uid));
    let images: Vec<(&str, &str)> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["image"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        images,
        [
            ("step", BUSYBOX_IMAGE),
            ("next-1", MUSL_IMAGE),
            ("next-2", STATIC_IMAGE),
            ("next-3", DEBIAN_IMAGE)
        ]
    );
    let ran = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(ran.len(), 4, "{ran:#?}");
    for step in &ran {
        let image_id = step["imageID"].as_str().unwrap_or_default();
        assert!(
            image_id.contains("sha256:"),
            "the runtime names the image it ran by digest: {step}"
        );
        assert_eq!(step["state"]["terminated"]["exitCode"], 0, "{step}");
    }
    let init = &pod["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
    println!("{}", pods_wide(&s));
}

const CONTRACT_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: contract}
spec:
  steps:
    - key: big
      script:
        image: IMAGE_BUSYBOX
        source: |
          printf '{"blob": "%s"}' "$(head -c 307200 /dev/zero | tr '\0' a)"
    - key: made
      script:
        image: IMAGE_BUSYBOX
        source: |
          echo report > "$OUTPUTS/report.txt"
          mkdir "$OUTPUTS/more" && echo x > "$OUTPUTS/more/x.txt"
          echo '{"made": 2}'
    - key: size
      input: {blob: $steps.big.output.blob}
      script:
        image: IMAGE_BUSYBOX
        source: |
          echo "{\"bytes\": $(wc -c < "$INPUTS/blob")}"
"#;

/// The output contract through a real kubelet: a 300 KiB result through the
/// pod's log (more than a termination message holds) reaching the next
/// step's `$INPUTS`, and the files left in `$OUTPUTS` listed.
#[tokio::test]
async fn large_results_and_outputs_through_a_real_kubelet() {
    let (s, _uid) = setup().await;
    s.apply(&CONTRACT_FLOW.replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE));
    let run = create_run(&s, "contract", json!({}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    // The status keeps large values elsewhere; the next step read it whole.
    let steps = &done["status"]["steps"];
    let bytes = steps["size"]["output"]["bytes"]
        .as_u64()
        .unwrap_or_default();
    // {"data":"aaa…"} around the 307,200 characters.
    assert_eq!(
        bytes,
        307_200 + r#"{"data":""}"#.len() as u64,
        "{}",
        steps["size"]
    );
    assert_eq!(
        steps["made"]["output"],
        json!({"made": 2, "files": ["more/x.txt", "report.txt"]}),
        "what the script left in $OUTPUTS is listed"
    );
}

const FAILING_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: failing}
spec:
  input:
    type: object
    properties: {mode: {type: string}}
  steps:
    - key: work
      timeout: 15s
      input: {mode: $input.mode}
      script:
        image: IMAGE_BUSYBOX
        source: |
          echo "working as $(id -u)" >&2
          case "$(cat "$INPUTS/mode")" in
            *fail*) echo 'compile error: line 3' >&2; exit 3 ;;
            *) sleep 300 ;;
          esac
"#;

const SLEEPY_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: sleepy}
spec:
  steps:
    - key: work
      script:
        image: IMAGE_BUSYBOX
        source: |
          echo "working as $(id -u)" >&2
          sleep 300
"#;

/// A failing script's stderr in the status and in kubectl logs; a timeout
/// as the Job's activeDeadlineSeconds, which the kubelet enforces (it
/// counts from the Job's start, pod start-up included: 15 s leaves room for
/// a loaded node); a cancel removing the running Job and its pod.
#[tokio::test]
async fn failure_timeout_and_cancel_on_a_real_kubelet() {
    let (s, uid) = setup().await;
    s.apply(&FAILING_FLOW.replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE));
    s.apply(&SLEEPY_FLOW.replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE));

    let failed = create_run(&s, "failing", json!({"mode": "fail"}));
    let slow = create_run(&s, "failing", json!({"mode": "slow"}));
    let cancelled = create_run(&s, "sleepy", json!({}));

    let done = wait_phase(&s, &failed, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Failed");
    let attempt = &done["status"]["steps"]["work"]["attempts"][0];
    assert_eq!(
        attempt["log"]["text"],
        format!("working as {uid}\ncompile error: line 3\n"),
        "{attempt:#}"
    );
    let message = attempt["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("3"), "the exit code is named: {attempt:#}");
    assert!(step_log(&s, &failed, "work").contains("compile error: line 3"));

    let done = wait_phase(&s, &slow, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Failed");
    let attempt = &done["status"]["steps"]["work"]["attempts"][0];
    assert_eq!(attempt["error"]["code"], "workflow.timeout", "{attempt:#}");
    let jobs = s.kubectl.json(&[
        "get",
        "jobs",
        "-n",
        s.ns(),
        "-l",
        &format!("coxswain.dev/run={slow}"),
        "-o",
        "json",
    ]);
    assert_eq!(
        jobs["items"][0]["spec"]["activeDeadlineSeconds"], 15,
        "{jobs:#}"
    );

    // Cancel once the script runs (its line is in the pod's log).
    wait_for("the script's line in kubectl logs", BOUND, || async {
        let selector = format!("coxswain.dev/run={cancelled},coxswain.dev/step=work");
        let logs = s
            .kubectl
            .run(&["logs", "-n", s.ns(), "-l", &selector, "-c", "step"])
            .unwrap_or_default();
        Ok(logs.contains("working as").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", pods_wide(&s)));
    s.kubectl
        .run(&[
            "patch",
            "run",
            &cancelled,
            "-n",
            s.ns(),
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"cancel":true}}"#,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let done = wait_phase(&s, &cancelled, &["Cancelled", "Failed", "Succeeded"]).await;
    assert_eq!(done["status"]["phase"], "Cancelled", "{}", done["status"]);
    let selector = format!("coxswain.dev/run={cancelled}");
    wait_for("the cancelled run's Job and pod to go", BOUND, || async {
        let left = s
            .kubectl
            .run(&[
                "get",
                "jobs,pods",
                "-n",
                s.ns(),
                "-l",
                &selector,
                "-o",
                "name",
            ])
            .unwrap_or_else(|e| e);
        Ok(left.trim().is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

const WORKSPACE_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: shared}
spec:
  workspace: {}
  steps:
    - key: write
      script:
        image: IMAGE_BUSYBOX
        source: |
          set -eu
          echo "first $(id -u)" > "$WORKSPACE/shared.txt"
          echo "the report" > "$OUTPUTS/report.txt"
          mounted=$(grep -c " $WORKSPACE " /proc/mounts)
          printf '{"report": "report.txt", "mounted": %s}' "$mounted"
        output: {fields: [{name: report, type: file}, {name: mounted, type: integer}]}
    - key: read
      input: {report: $steps.write.output.report}
      script:
        image: IMAGE_DEBIAN
        source: |
          set -eu
          echo "second $(id -u)" >> "$WORKSPACE/shared.txt"
          path=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/report")
          printf '{"shared": "%s", "report": "%s", "path": "%s"}' \
            "$(tr '\n' '|' < "$WORKSPACE/shared.txt")" "$(cat "$path")" "$path"
"#;

/// A run's workspace on the real node: the claim is a real mount in each
/// pod, a file the first pod (busybox) left is read and extended by the
/// second (Debian) as the same random uid, and the file kept from the
/// first's `$OUTPUTS` reaches the second through its input.
#[tokio::test]
async fn a_workspace_claim_is_shared_by_the_pods_of_a_run() {
    let (s, uid) = setup().await;
    s.apply(
        &WORKSPACE_FLOW
            .replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE)
            .replace("IMAGE_DEBIAN", DEBIAN_IMAGE),
    );
    let run = create_run(&s, "shared", json!({}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let steps = &done["status"]["steps"];
    assert_eq!(steps["write"]["output"]["mounted"], 1, "{}", steps["write"]);
    let kept = steps["write"]["output"]["report"]
        .as_str()
        .unwrap_or_default();
    assert!(
        kept.ends_with(".coxswain/outputs/write/1/report.txt"),
        "the kept path: {kept}"
    );
    assert_eq!(
        steps["read"]["output"],
        json!({"shared": format!("first {uid}|second {uid}|"), "report": "the report", "path": kept})
    );
}

/// Four script steps, each taking the default input (the run input and the
/// step before's output): a chain, run in one pod.
const CHAIN_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: chain}
spec:
  input:
    type: object
    properties: {trail: {type: string}}
  steps:
    - key: first
      script: {image: IMAGE_BUSYBOX, source: STEP}
    - key: second
      script: {image: IMAGE_BUSYBOX, source: STEP}
    - key: third
      input: {trail: $steps.second.output.trail, from: $input.trail}
      script: {image: IMAGE_BUSYBOX, source: STEP}
    - key: fourth
      input: {trail: $previous.output.trail}
      script: {image: IMAGE_BUSYBOX, source: STEP}
"#;

/// Each chain member adds its key to the trail it was given.
const TRAIL_STEP: &str = r#"'echo "$STEP_KEY as $(id -u)" >&2; t=$(sed "s/.*\"data\":\"\([^\"]*\)\".*/\1/" "$INPUTS/trail"); printf "{\"trail\": \"%s>%s\"}" "$t" "$STEP_KEY"'"#;

/// The Jobs of `run`, as `kubectl` lists them.
fn jobs_of(s: &Setup, run: &str) -> Vec<Value> {
    let selector = format!("coxswain.dev/run={run}");
    let jobs = s
        .kubectl
        .json(&["get", "jobs", "-n", s.ns(), "-l", &selector, "-o", "json"]);
    jobs["items"].as_array().cloned().unwrap_or_default()
}

/// Each container of the chain's pod and how it ended, once all have.
async fn chain_containers(s: &Setup, job: &str) -> Vec<(String, Value)> {
    let selector = format!("job-name={job}");
    wait_for("the chain's pod to end", BOUND, || async {
        let pods = s
            .kubectl
            .json(&["get", "pods", "-n", s.ns(), "-l", &selector, "-o", "json"]);
        Ok(ended_containers(&pods))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", pods_wide(s)))
}

/// The containers of the first pod in `pods` and how each ended, when all
/// have.
fn ended_containers(pods: &Value) -> Option<Vec<(String, Value)>> {
    let statuses = pods["items"].get(0)?["status"]["containerStatuses"].as_array()?;
    statuses
        .iter()
        .map(|c| {
            let terminated = c["state"]["terminated"].clone();
            (!terminated.is_null()).then(|| {
                (
                    c["name"].as_str().unwrap_or_default().to_string(),
                    terminated,
                )
            })
        })
        .collect()
}

/// Consecutive script steps run in one pod, one container each, the
/// outputs passed on whole; one Job for the four steps.
#[tokio::test]
async fn consecutive_script_steps_run_in_one_pod() {
    let (s, uid) = setup().await;
    s.apply(
        &CHAIN_FLOW
            .replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE)
            .replace("STEP", TRAIL_STEP),
    );
    let run = create_run(&s, "chain", json!({"trail": "start"}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let steps = &done["status"]["steps"];
    assert_eq!(
        steps["fourth"]["output"]["trail"], "start>first>second>third>fourth",
        "{:#}",
        steps
    );
    assert_eq!(
        steps["third"]["attempts"][0]["log"]["text"],
        format!("third as {uid}\n"),
        "a later member's stderr is its own"
    );
    let jobs = jobs_of(&s, &run);
    assert_eq!(jobs.len(), 1, "one Job for the chain: {jobs:#?}");
    let job = &jobs[0];
    assert_eq!(
        job["metadata"]["annotations"]["coxswain.dev/chain"],
        "second,third,fourth"
    );
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let containers = chain_containers(&s, name).await;
    let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["next-1", "next-2", "next-3", "step"]);
    for (name, ended) in &containers {
        assert_eq!(ended["exitCode"], 0, "{name}: {ended}");
    }
}

/// A member's script cannot choose what the next member receives: not by
/// writing in the hand-over folder while it runs, nor from a process it
/// leaves behind (in a session of its own) that keeps writing there; it
/// cannot read the hand-over name from its wrapper either.
const FORGING_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: forging}
spec:
  steps:
    - key: first
      script:
        image: IMAGE_BUSYBOX
        source: |
          forge() {
            while true; do
              for f in /coxswain/handoff/out/*; do
                echo '{"output": {"trail": "forged"}}' > "$f" 2>/dev/null
              done
              echo '{"output": {"trail": "forged"}}' > /coxswain/handoff/out/guessed.json
              sleep 0.02
            done
          }
          forge &
          setsid sh -c "$(declare -f forge 2>/dev/null || type forge | tail -n +2); forge" </dev/null >/dev/null 2>&1 &
          if cat /proc/1/environ >/dev/null 2>&1; then environ=readable; else environ=unreadable; fi
          named=$(env | grep -c COXSWAIN_HAND_TO_NAME || true)
          sleep 0.5
          printf '{"trail": "first", "environ": "%s", "named": %s}' "$environ" "$named"
    - key: second
      script:
        image: IMAGE_BUSYBOX
        source: |
          sleep 1
          sed 's/.*"data":"\([^"]*\)".*/\1/' "$INPUTS/trail"
"#;

#[tokio::test]
async fn a_members_script_cannot_forge_what_the_next_one_receives() {
    let (s, _uid) = setup().await;
    s.apply(&FORGING_FLOW.replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE));
    let run = create_run(&s, "forging", json!({}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let steps = &done["status"]["steps"];
    assert_eq!(
        steps["first"]["output"],
        json!({"trail": "first", "environ": "unreadable", "named": 0})
    );
    assert_eq!(steps["second"]["text"], "first", "{:#}", steps);
    assert_eq!(jobs_of(&s, &run).len(), 1, "the two steps shared a pod");
}

/// A member that fails in the pod is tried again alone; the next member's
/// container runs nothing, and the next member runs alone after it.
const RETRIED_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: retried}
spec:
  input:
    type: object
    properties: {trail: {type: string}}
  steps:
    - key: first
      attempts: 2
      backoff: 1s
      script:
        image: IMAGE_BUSYBOX
        source: |
          if [ "$ATTEMPT" = 1 ]; then echo 'not yet' >&2; exit 3; fi
          printf '{"trail": "first%s"}' "$ATTEMPT"
    - key: second
      script: {image: IMAGE_BUSYBOX, source: STEP}
"#;

#[tokio::test]
async fn a_member_that_fails_in_the_pod_is_tried_again_and_the_next_runs_alone() {
    let (s, _uid) = setup().await;
    s.apply(
        &RETRIED_FLOW
            .replace("IMAGE_BUSYBOX", BUSYBOX_IMAGE)
            .replace("STEP", TRAIL_STEP),
    );
    let run = create_run(&s, "retried", json!({"trail": "start"}));
    let done = wait_phase(&s, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let steps = &done["status"]["steps"];
    assert_eq!(steps["second"]["output"]["trail"], "first2>second");
    assert_eq!(steps["first"]["attempts"][0]["log"]["text"], "not yet\n");
    let mut jobs: Vec<String> = jobs_of(&s, &run)
        .iter()
        .map(|j| {
            j["metadata"]["annotations"]["coxswain.dev/work"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    jobs.sort();
    assert_eq!(
        jobs.len(),
        3,
        "the chain, first's second attempt, second alone: {jobs:?}"
    );
    let chain = jobs_of(&s, &run)
        .into_iter()
        .find(|j| !j["metadata"]["annotations"]["coxswain.dev/chain"].is_null())
        .expect("the chain's Job");
    let name = chain["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let containers = chain_containers(&s, &name).await;
    let next = containers
        .iter()
        .find(|(n, _)| n == "next-1")
        .map(|(_, ended)| ended.clone())
        .expect("next-1");
    assert!(
        next["message"]
            .as_str()
            .unwrap_or_default()
            .contains("notRun"),
        "the second member's container ran nothing: {next}"
    );
}
