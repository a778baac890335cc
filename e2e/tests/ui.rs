//! The run viewer (`coxswain ui`) in a real headless Chromium against the
//! e2e cluster, as people use it: open a run, click an arrow and read the
//! value that moved along it, click a failed step and read its error and
//! its log, answer an Approval as its approver (taken, stamped with their
//! name) and as someone else (the webhook's refusal shown as it came).
//! With `--auth kubeconfig` the viewer is the kubeconfig's user (here a
//! kubeconfig impersonating each person); with `--auth token` each person
//! signs in with a ServiceAccount token, and one who may not read the
//! namespace sees nothing of it. The screenshots it takes are the book's
//! (`docs/src/screenshots/`), so each run of it keeps them current.

mod admission;

use std::path::{Path, PathBuf};
use std::time::Duration;

use admission::{ALICE, Admission, BOUND, setup};
use coxswain_e2e::{coxswain_bin, wait_for};
use coxswain_test_support::browser::Browser;
use coxswain_test_support::viewer::Viewer;
use serde_json::{Value, json};

/// Longest wait for the page to show something.
const SHOWN: Duration = Duration::from_secs(30);

const PIPELINE: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: pipeline}
spec:
  steps:
    - key: bulk
      script:
        source: |
          printf '{"lines": "'; head -c 20000 /dev/zero | tr '\0' a; printf '"}'
    - key: fetch
      script:
        source: |
          echo '{"title": "Disk full on db-3", "id": 7}'
    - key: draft
      input: {title: $steps.fetch.output.title}
      script:
        source: |
          echo "drafting from $(cat "$INPUTS/title")" >&2
          echo '{"text": "A draft"}'
    - key: check
      script:
        source: |
          echo "checking: the disk is still full" >&2
          exit 3
    - key: report
      script: {source: "echo '{}'"}
"#;

const REVIEW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: review}
spec:
  steps:
    - key: draft
      script: {source: "echo '{\"notes\": \"the release notes, v1\"}'"}
    - key: review
      approval:
        show: [draft]
        instructions: Check the notes before they go out.
        decisions: [approve, changes]
        approvers: {users: [bob]}
"#;

/// Reading Jobs, pods, their logs and ConfigMaps (where large values go), for alice.
const LOG_READER: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: log-reader}
rules:
  - {apiGroups: [batch], resources: [jobs], verbs: [get, list]}
  - {apiGroups: [""], resources: [pods, pods/log, configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-logs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: log-reader}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;

/// The viewer with `kubeconfig` and `--auth auth`, opening on `ns`.
fn viewer(kubeconfig: &Path, auth: &str, ns: &str) -> Viewer {
    let bin = coxswain_bin().expect("the coxswain binary");
    Viewer::start(
        &bin,
        ["--auth", auth, "-n", ns],
        &[("KUBECONFIG", kubeconfig.as_os_str())],
    )
}

/// A copy of the test's kubeconfig that impersonates `user` (kubectl's
/// `as`), so the viewer acts as that person with no token of their own.
fn kubeconfig_as(s: &Admission, user: &str, dir: &Path) -> PathBuf {
    let raw = s
        .kubectl
        .run(&["config", "view", "--raw", "--flatten", "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut config: Value = serde_json::from_str(&raw).expect("kubeconfig JSON");
    for entry in config["users"].as_array_mut().expect("users") {
        entry["user"]["as"] = json!(user);
    }
    let path = dir.join(format!("kubeconfig-{user}"));
    std::fs::write(&path, config.to_string()).expect("write kubeconfig");
    path
}

/// Where the book's pictures of the viewer live; this test takes them.
fn screenshots() -> PathBuf {
    let dir = coxswain_e2e::workspace_root().join("docs/src/screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

async fn wait_phase(s: &Admission, run: &str, phase: &str) {
    wait_for(&format!("run {run} {phase}"), BOUND, || async {
        let got = s
            .kubectl
            .run(&[
                "get",
                "run",
                run,
                "-n",
                s.ns(),
                "-o",
                "jsonpath={.status.phase}",
            ])
            .unwrap_or_default();
        Ok((got == phase).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
}

/// Clicks `target`, then waits until `shown` is on the page: one look of
/// a person clicking around the viewer.
async fn click_to_see(browser: &Browser, target: &str, shown: &str) {
    // As a person waits to see what they click (the page may still be
    // drawing it when a loaded machine gets here).
    browser
        .wait_for(target, SHOWN)
        .await
        .unwrap_or_else(|e| panic!("{target}, to click: {e}"));
    browser
        .click(target)
        .await
        .unwrap_or_else(|e| panic!("click {target}: {e}"));
    browser
        .wait_for(shown, SHOWN)
        .await
        .unwrap_or_else(|e| panic!("{shown} after a click on {target}: {e}"));
}

/// The text of `selector` once it is on the page.
async fn shown_text(browser: &Browser, selector: &str) -> String {
    browser
        .wait_for(selector, SHOWN)
        .await
        .unwrap_or_else(|e| panic!("{selector}: {e}"));
    browser
        .text(selector)
        .await
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
}

/// Signs in on the viewer's sign-in page (open in `browser`) with `token`.
async fn sign_in(browser: &Browser, token: &str) {
    browser
        .wait_for("textarea#token", SHOWN)
        .await
        .expect("the sign-in page");
    browser.fill("textarea#token", token).await.expect("token");
    browser
        .click("form[action='/sign-in'] button[type=submit]")
        .await
        .expect("sign in");
}

/// A run alice started, in a browser on its page through a viewer acting
/// as alice (a kubeconfig impersonating her); kept while the test reads it.
struct RunPage {
    browser: Browser,
    _viewer: Viewer,
    _dir: tempfile::TempDir,
}

/// Alice starts a run of `flow`; once its phase is `phase`, its page opens
/// until `drawn` is on it: where the tests of one run's page start.
async fn open_run_as_alice(s: &Admission, flow: &str, phase: &str, drawn: &str) -> RunPage {
    let run = s
        .create_run_as(&ALICE, flow, json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    wait_phase(s, &run, phase).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ui = viewer(&kubeconfig_as(s, "alice", dir.path()), "kubeconfig", s.ns());
    let browser = Browser::start().await.expect("chromium");
    browser
        .goto(&ui.at(&format!("/namespaces/{}/runs/{run}", s.ns())))
        .await
        .expect("open the run");
    browser
        .wait_for(drawn, SHOWN)
        .await
        .unwrap_or_else(|e| panic!("{drawn}: {e}"));
    RunPage {
        browser,
        _viewer: ui,
        _dir: dir,
    }
}

#[tokio::test]
async fn an_arrow_shows_what_moved_and_a_failed_step_its_error_and_log() {
    let s = setup().await;
    // Alice may read the step's pods and their logs, as a team's members
    // usually may.
    s.kubectl
        .apply(s.ns(), LOG_READER)
        .unwrap_or_else(|e| panic!("{e}"));
    s.apply_as(&ALICE, PIPELINE)
        .unwrap_or_else(|e| panic!("{e}"));
    let page = open_run_as_alice(
        &s,
        "pipeline",
        "Failed",
        r#"[data-step="check"][data-status="failed"]"#,
    )
    .await;
    let browser = &page.browser;
    assert_eq!(browser.text("[data-phase]").await.expect("phase"), "Failed");

    // The arrow from fetch to draft: the title moved, whole, with its size.
    click_to_see(
        browser,
        r#"[data-arrow="fetch->draft"] .handle"#,
        "[data-moved-value]",
    )
    .await;
    let moved = browser
        .text("[data-moved-value]")
        .await
        .expect("moved value");
    assert_eq!(moved, r#""Disk full on db-3""#);
    let panel = browser.text("#panel").await.expect("panel");
    assert!(panel.contains("$steps.fetch.output.title"), "{panel}");
    assert!(panel.contains("input.title"), "{panel}");
    assert!(panel.contains("19 B"), "{panel}");
    browser
        .screenshot(&screenshots().join("run-arrow.png"))
        .await
        .expect("screenshot");

    // The default input: the previous step's output.
    click_to_see(
        browser,
        r#"[data-arrow="draft->check"] .handle"#,
        r#"#panel[data-arrow-panel="draft->check"] [data-arrow-state]"#,
    )
    .await;
    let panel = browser.text("#panel").await.expect("panel");
    assert!(
        panel.contains("previous output"),
        "the default input: {panel}"
    );
    assert!(panel.contains(r#""text": "A draft""#), "{panel}");

    // An arrow nothing moved along says why.
    click_to_see(
        browser,
        r#"[data-arrow="check->report"] .handle"#,
        r#"#panel[data-arrow-panel="check->report"] [data-why]"#,
    )
    .await;
    let why = browser.text("[data-why]").await.expect("why");
    assert_eq!(why, "Why nothing moved: `check` failed");

    // The failed step: its error, and the log its script wrote.
    click_to_see(browser, r#"[data-step="check"]"#, "[data-step-error]").await;
    let error = browser.text("[data-step-error]").await.expect("error");
    assert!(error.contains('3'), "the exit status in {error}");
    let log = shown_text(browser, "[data-log-text]").await;
    assert!(log.contains("checking: the disk is still full"), "{log}");
    let source = browser.text("[data-log]").await.expect("log box");
    assert!(
        source.contains("pod pipeline-"),
        "read from the pod: {source}"
    );

    browser
        .screenshot(&screenshots().join("run-failed-step.png"))
        .await
        .expect("screenshot");

    // A value too large for the status is a preview until asked for.
    browser
        .click(r#"[data-step="bulk"]"#)
        .await
        .expect("click the step");
    let button = r#"[data-fetch-value="/steps/bulk/output"]"#;
    browser.wait_for(button, SHOWN).await.expect("a preview");
    let preview = browser
        .text(r#"[data-value="/steps/bulk/output"]"#)
        .await
        .expect("preview");
    assert!(preview.contains("moved out of the status"), "{preview}");
    browser.click(button).await.expect("fetch it");
    browser
        // Longer than the preview's 120 characters of the value, which also
        // begin with a's: only the whole value has so many.
        .wait_for_text(
            r#"[data-value="/steps/bulk/output"]"#,
            &"a".repeat(130),
            SHOWN,
        )
        .await
        .expect("the whole value");
    let whole = browser
        .eval(r#"return document.querySelector('[data-value="/steps/bulk/output"]').textContent.length"#)
        .await
        .expect("length");
    assert!(whole.as_u64().unwrap_or(0) > 20000, "{whole}");
}

#[tokio::test]
async fn an_approval_is_answered_by_its_approver_and_refused_to_anyone_else() {
    let s = setup().await;
    s.apply_as(&ALICE, REVIEW).unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "review", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let name = s.approval_name(&run, "review").await;
    let page = format!("/namespaces/{}/runs/{run}", s.ns());
    let dir = tempfile::tempdir().expect("temp dir");

    // Eve may read the run but may not decide: the webhook says so, and
    // the page shows its words.
    let eve = viewer(&kubeconfig_as(&s, "eve", dir.path()), "kubeconfig", s.ns());
    let browser = Browser::start().await.expect("chromium");
    browser.goto(&eve.at(&page)).await.expect("open the run");
    let form = format!(r#"form[data-approval="{name}"]"#);
    browser
        .wait_for(&form, SHOWN)
        .await
        .expect("the approval form");
    let shown = browser.text(&form).await.expect("form text");
    assert!(
        shown.contains("Check the notes before they go out."),
        "{shown}"
    );
    assert!(
        shown.contains("the release notes, v1"),
        "what it shows: {shown}"
    );
    assert!(shown.contains("users `bob`"), "who may decide: {shown}");
    browser
        .click(&format!(r#"{form} input[value="approve"]"#))
        .await
        .expect("pick");
    click_to_see(
        &browser,
        &format!("{form} button[type=submit]"),
        "[data-refusal]",
    )
    .await;
    let refusal = browser.text("[data-refusal]").await.expect("refusal");
    assert!(refusal.contains("admission webhook"), "{refusal}");
    assert!(
        refusal.contains("`eve` may not decide step `review`"),
        "{refusal}"
    );
    drop(browser);

    // Bob decides: the answer is his, and the run goes on.
    let bob = viewer(&kubeconfig_as(&s, "bob", dir.path()), "kubeconfig", s.ns());
    let browser = Browser::start().await.expect("chromium");
    browser.goto(&bob.at(&page)).await.expect("open the run");
    browser
        .wait_for(&form, SHOWN)
        .await
        .expect("the approval form");
    browser
        .click(&format!(r#"{form} input[value="approve"]"#))
        .await
        .expect("pick");
    browser
        .fill(&format!("{form} textarea[name=feedback]"), "Ship it.")
        .await
        .expect("feedback");
    browser
        .screenshot(&screenshots().join("approval-form.png"))
        .await
        .expect("screenshot");
    click_to_see(
        &browser,
        &format!("{form} button[type=submit]"),
        "[data-accepted]",
    )
    .await;
    let said = browser.text("[data-accepted]").await.expect("accepted");
    assert_eq!(said, "Answered as bob.");
    let stored = s.get("approval", &name);
    assert_eq!(stored["spec"]["decidedBy"]["username"], "bob", "{stored}");
    assert_eq!(stored["spec"]["feedback"], "Ship it.", "{stored}");
    wait_phase(&s, &run, "Succeeded").await;
    // The live page follows the run to its end without a reload.
    browser
        .wait_for(r#"[data-phase="Succeeded"]"#, SHOWN)
        .await
        .expect("the page shows the run succeeded");
}

/// A ServiceAccount's token, from the TokenRequest API.
fn token(s: &Admission, account: &str) -> String {
    s.kubectl
        .run(&["create", "token", account, "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn signed_in_with_a_token_a_person_sees_only_what_they_may_read() {
    let s = setup().await;
    let accounts = format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: viewer}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: outsider}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: viewer-uses-coxswain}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: coxswain-user}}
subjects:
  - {{kind: ServiceAccount, name: viewer, namespace: {ns}}}
"#,
        ns = s.ns()
    );
    s.kubectl
        .apply(s.ns(), &accounts)
        .unwrap_or_else(|e| panic!("{e}"));
    s.apply_as(&ALICE, PIPELINE)
        .unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "pipeline", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let ui = viewer(s.kubectl.kubeconfig(), "token", s.ns());

    // Without a token, the API answers 401 and uses no credentials of its own.
    let http = reqwest::Client::new();
    let runs = ui.at(&format!("/api/v1/namespaces/{}/runs", s.ns()));
    let anonymous = http.get(&runs).send().await.expect("GET");
    assert_eq!(anonymous.status().as_u16(), 401);

    // The outsider signs in and sees the API server's refusal, no run.
    let browser = Browser::start().await.expect("chromium");
    let list = format!("/namespaces/{}/runs", s.ns());
    browser.goto(&ui.at(&list)).await.expect("open");
    sign_in(&browser, &token(&s, "outsider")).await;
    browser
        .wait_for_text("[data-error]", "forbidden", SHOWN)
        .await
        .expect("a refusal");
    let error = browser.text("[data-error]").await.expect("error");
    assert!(error.contains("forbidden"), "{error}");
    assert!(
        error.contains(&format!("system:serviceaccount:{}:outsider", s.ns())),
        "{error}"
    );
    let rows = browser
        .eval("return document.querySelectorAll('[data-run]').length")
        .await
        .expect("rows");
    assert_eq!(rows, json!(0));

    // Behind an HTTPS ingress the cookie is only ever sent over HTTPS.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let viewer_token = token(&s, "viewer");
    for (proto, secure) in [(None, false), (Some("https"), true)] {
        let mut post = no_redirects
            .post(ui.at("/sign-in"))
            .form(&[("token", viewer_token.as_str()), ("next", "/")]);
        if let Some(proto) = proto {
            post = post.header("x-forwarded-proto", proto);
        }
        let signed = post.send().await.expect("POST /sign-in");
        assert_eq!(signed.status().as_u16(), 303);
        let cookie = signed.headers()["set-cookie"]
            .to_str()
            .expect("cookie")
            .to_string();
        assert!(cookie.contains("HttpOnly; SameSite=Strict"), "{cookie}");
        assert_eq!(cookie.ends_with("; Secure"), secure, "{cookie}");
    }
    // A token the API server does not take is refused, and no cookie set.
    let refused = no_redirects
        .post(ui.at("/sign-in"))
        .form(&[("token", "not-a-token")])
        .send()
        .await
        .expect("POST /sign-in");
    assert_eq!(refused.status().as_u16(), 401);
    assert!(refused.headers().get("set-cookie").is_none());
    // `next` never leads off the viewer (browsers read `/\host` as `//host`).
    for next in [
        "/\\attacker.example/",
        "//attacker.example/",
        "https://attacker.example/",
    ] {
        let signed = no_redirects
            .post(ui.at("/sign-in"))
            .form(&[("token", viewer_token.as_str()), ("next", next)])
            .send()
            .await
            .expect("POST /sign-in");
        assert_eq!(signed.status().as_u16(), 303, "{next}");
        assert_eq!(signed.headers()["location"], "/", "{next}");
    }
    // A sign-in posted from another site's page is refused, no cookie set
    // (login CSRF: the victim would type into the attacker's session).
    for (name, value) in [
        ("origin", "https://attacker.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let forged = no_redirects
            .post(ui.at("/sign-in"))
            .header(name, value)
            .form(&[("token", viewer_token.as_str()), ("next", "/")])
            .send()
            .await
            .expect("POST /sign-in");
        assert_eq!(forged.status().as_u16(), 403, "{name}: {value}");
        assert!(forged.headers().get("set-cookie").is_none());
        let why = forged.text().await.unwrap_or_default();
        assert!(why.contains("viewer's own page"), "{why}");
    }

    // The viewer's token shows the run, live.
    browser
        .goto(&ui.at("/sign-in"))
        .await
        .expect("sign-in page");
    sign_in(&browser, &token(&s, "viewer")).await;
    browser.goto(&ui.at(&list)).await.expect("open");
    browser
        .wait_for(&format!(r#"[data-run="{run}"]"#), SHOWN)
        .await
        .expect("the run listed");
    browser
        .wait_for(
            &format!(r#"[data-run="{run}"] [data-phase="Failed"]"#),
            BOUND,
        )
        .await
        .expect("it fails, live");
    assert_eq!(
        browser.text("#whoami").await.expect("whoami"),
        format!("system:serviceaccount:{}:viewer", s.ns())
    );
}

#[tokio::test]
async fn with_a_kubeconfig_it_answers_only_loopback_names_and_writes_with_its_header() {
    let s = setup().await;
    let ui = viewer(s.kubectl.kubeconfig(), "kubeconfig", s.ns());
    let http = reqwest::Client::new();
    let runs = ui.at(&format!("/api/v1/namespaces/{}/runs", s.ns()));
    let ok = http.get(&runs).send().await.expect("GET");
    assert_eq!(ok.status().as_u16(), 200);
    // A page of another site that resolved its name to 127.0.0.1.
    let rebound = http
        .get(&runs)
        .header("host", "attacker.example:8484")
        .send()
        .await
        .expect("GET");
    assert_eq!(rebound.status().as_u16(), 421);
    // A cross-site form posts without the viewer's header.
    let answer = ui.at(&format!("/api/v1/namespaces/{}/approvals/x/answer", s.ns()));
    let forged = http
        .post(&answer)
        .header("content-type", "application/json")
        .body(r#"{"decision": "approve"}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(forged.status().as_u16(), 403);
    let missing = http
        .post(&answer)
        .header("content-type", "application/json")
        .header("x-coxswain", "1")
        .body(r#"{"decision": "approve"}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(
        missing.status().as_u16(),
        404,
        "past the guard, the approval is looked up"
    );
}

#[tokio::test]
async fn a_run_of_a_thousand_steps_is_drawn_whole_and_answers_a_click() {
    let s = setup().await;
    let mut flow = String::from(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: big}\nspec:\n  steps:\n    - key: gate\n      approval: {decisions: [go], allowSelfApproval: true}\n",
    );
    for i in 1..1000 {
        flow.push_str(&format!(
            "    - {{key: s{i}, condition: {{when: \"true\"}}}}\n"
        ));
    }
    s.apply_as(&ALICE, &flow).unwrap_or_else(|e| panic!("{e}"));
    let page = open_run_as_alice(
        &s,
        "big",
        "Waiting",
        r#"[data-step="s999"][data-status="pending"]"#,
    )
    .await;
    let browser = &page.browser;
    let drawn = browser
        .eval("return document.querySelectorAll('[data-step]').length")
        .await
        .expect("count");
    assert_eq!(drawn, json!(1000));
    click_to_see(
        browser,
        r#"[data-step="s999"]"#,
        r#"#panel[data-step-panel="s999"] [data-step-status="pending"]"#,
    )
    .await;
    browser
        .click(r#"[data-arrow="gate->s1"] .handle"#)
        .await
        .expect("click an arrow");
    browser
        .wait_for_text("[data-why]", "not reached yet", SHOWN)
        .await
        .expect("why nothing moved");
}
