//! Conversation commands on a real Matrix homeserver (`e2e/chat`) and the
//! real API server: people type `!review …` in a room, the controller
//! starts the flow's Run, answers in the message's thread, and posts the
//! outcome there when the run ends; someone not allowed is told no and
//! starts nothing; a controller killed while messages arrive starts each
//! Run exactly once and answers each message once.
//!
//! Flows and the connection Secret go through kubectl, as people send them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use coxswain_core::api::Run;
use coxswain_e2e::chat::thread_root;
use coxswain_e2e::{ControllerProcess, Kubectl, MatrixUser, Synapse, TestNamespace, wait_for};
use coxswain_k8s::names;
use kube::api::ListParams;
use serde_json::Value;

const BOUND: Duration = Duration::from_secs(120);

/// A room with alice and bob in it and the bot invited, a namespace with
/// the connection Secret and a `review` flow that alice may start.
struct Room {
    synapse: Synapse,
    alice: MatrixUser,
    bob: MatrixUser,
    room: String,
    ns: TestNamespace,
    kubectl: Kubectl,
}

async fn setup(allowed: &str) -> Room {
    let synapse = Synapse::start().await.expect("synapse");
    let (alice, bob, bot) = (
        synapse.user("alice").expect("alice"),
        synapse.user("bob").expect("bob"),
        synapse.user("coxswain").expect("the bot"),
    );
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let room = synapse
        .new_room(&alice, &format!("reviews {}", ns.name()), &[&bob])
        .await
        .expect("room");
    synapse
        .invite(&alice, &room, &bot.id)
        .await
        .expect("invite the bot");
    let secret = synapse.connection_secret("team-chat", &bot);
    kubectl
        .apply(ns.name(), &secret.to_string())
        .expect("the connection Secret");
    let allowed = if allowed == "alice" {
        alice.id.clone()
    } else {
        allowed.to_string()
    };
    let flow = coxswain_e2e::chat::review_flow("team-chat", &room, &allowed);
    kubectl.apply(ns.name(), &flow).expect("the flow");
    Room {
        synapse,
        alice,
        bob,
        room,
        ns,
        kubectl,
    }
}

impl Room {
    /// A controller for the test's namespace, once it follows the room.
    async fn start_following(&self) -> ControllerProcess {
        let controller = ControllerProcess::for_namespace(self.ns.name(), &[])
            .await
            .expect("controller");
        self.following(&controller).await;
        controller
    }

    /// Waits until the controller follows the connection (its position is
    /// stored): messages from then on are news.
    async fn following(&self, controller: &ControllerProcess) {
        let name = names::chat_position("team-chat");
        wait_for("the controller follows the room", BOUND, || async {
            Ok(self
                .kubectl
                .run(&[
                    "get",
                    "configmap",
                    &name,
                    "-n",
                    self.ns.name(),
                    "-o",
                    "json",
                ])
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .filter(|map| {
                    map["data"]["rooms"]
                        .as_str()
                        .is_some_and(|r| r.contains(&self.room))
                }))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    }

    /// The bot's answers in the thread of `root`, oldest first.
    async fn answers(&self, root: &str) -> Vec<String> {
        let events = self
            .synapse
            .events(&self.alice, &self.room)
            .await
            .expect("events");
        bodies_in_thread(&events, root)
    }

    async fn wait_answers(
        &self,
        root: &str,
        count: usize,
        controller: &ControllerProcess,
    ) -> Vec<String> {
        wait_for(&format!("{count} answers to {root}"), BOUND, || async {
            let answers = self.answers(root).await;
            Ok((answers.len() >= count).then_some(answers))
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}\nthe room:\n{}\n{}",
                futures_transcript(self),
                controller.log_text()
            )
        })
    }

    async fn runs(&self) -> Vec<Run> {
        self.ns
            .api::<Run>()
            .list(&ListParams::default().labels(names::CHAT_LABEL))
            .await
            .expect("runs")
            .items
    }
}

fn futures_transcript(setup: &Room) -> String {
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        handle.block_on(setup.synapse.transcript(&setup.alice, &setup.room))
    })
    .unwrap_or_default()
}

fn bodies_in_thread(events: &[Value], root: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| thread_root(e) == Some(root))
        .filter(|e| {
            e["sender"]
                .as_str()
                .is_some_and(|s| s.starts_with("@coxswain:"))
        })
        .filter_map(|e| e["content"]["body"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_starts_a_run_and_its_outcome_is_posted_in_the_thread() {
    let setup = setup("alice").await;
    let controller = setup.start_following().await;

    let asked = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "!review the intro, please")
        .await
        .expect("alice asks");
    let run_name = names::command_run("review", &asked);
    let answers = setup.wait_answers(&asked, 2, &controller).await;
    assert!(
        answers[0].starts_with(&format!("Started run `{run_name}` of flow `review`")),
        "{answers:?}"
    );
    let run = setup
        .kubectl
        .wait_run(setup.ns.name(), &run_name, &["Succeeded"], BOUND)
        .await
        .expect("the run succeeds");
    assert_eq!(run["spec"]["input"]["text"], "!review the intro, please");
    assert_eq!(run["spec"]["input"]["prompt"], "the intro, please");
    assert_eq!(run["spec"]["input"]["sender"], setup.alice.id.as_str());
    assert_eq!(run["spec"]["input"]["room"], setup.room.as_str());
    assert!(
        answers[1].starts_with(&format!("Run `{run_name}` succeeded. Output:")),
        "{answers:?}"
    );
    assert!(
        answers[1].contains("\"reviewed\": \"the intro, please\""),
        "{}",
        answers[1]
    );
    assert!(answers[1].contains("\"asked\": true"), "{}", answers[1]);
    let answered =
        coxswain_e2e::chat::wait_answered(&setup.kubectl, setup.ns.name(), &run_name, BOUND).await;
    assert!(
        answered.starts_with('$'),
        "the outcome's event id: {answered}"
    );

    // bob is not allowed: a polite no in his thread, and no Run.
    let refused = setup
        .synapse
        .send_text(&setup.bob, &setup.room, "!review mine too")
        .await
        .expect("bob asks");
    let answers = setup.wait_answers(&refused, 1, &controller).await;
    assert!(
        answers[0].starts_with(&format!(
            "Sorry {}, you may not start `!review` here",
            setup.bob.id
        )),
        "{answers:?}"
    );
    // `!help` lists the room's commands, and tells bob which are not his.
    let help = setup
        .synapse
        .send_text(&setup.bob, &setup.room, "!help")
        .await
        .expect("bob asks for help");
    let answers = setup.wait_answers(&help, 1, &controller).await;
    assert!(
        answers[0].ends_with("`!review …` starts the flow `review` (not by you)"),
        "{answers:?}"
    );
    // Plain talk and other commands get no answer and start nothing.
    let chatter = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "thanks! !review is neat")
        .await
        .expect("chatter");
    let last = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "!review last one")
        .await
        .expect("alice asks again");
    setup.wait_answers(&last, 1, &controller).await;
    assert!(setup.answers(&chatter).await.is_empty());
    let runs: BTreeSet<String> = setup
        .runs()
        .await
        .iter()
        .map(|r| r.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        runs,
        BTreeSet::from([run_name, names::command_run("review", &last)]),
        "bob's command started nothing"
    );
    // How long people wait, by the homeserver's own clock (printed, never
    // asserted): from the command to the bot's first and second answer.
    let events = setup
        .synapse
        .events(&setup.alice, &setup.room)
        .await
        .expect("events");
    let at = |e: &Value| e["origin_server_ts"].as_i64().unwrap_or_default();
    for root in [&asked, &last] {
        let Some(command) = events.iter().find(|e| e["event_id"] == root.as_str()) else {
            continue;
        };
        let answers: Vec<i64> = events
            .iter()
            .filter(|e| thread_root(e) == Some(root.as_str()))
            .map(|e| at(e) - at(command))
            .collect();
        println!("answered {root} after {answers:?} ms (started, outcome)");
    }
    println!(
        "the room:\n{}",
        setup
            .synapse
            .transcript(&setup.alice, &setup.room)
            .await
            .expect("transcript")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_killed_while_commands_arrive_starts_each_run_once() {
    const COMMANDS: usize = 12;
    let setup = setup("*").await;
    let mut controller = setup.start_following().await;

    let mut asked = Vec::new();
    for i in 0..COMMANDS {
        let who = if i % 2 == 0 { &setup.alice } else { &setup.bob };
        let event = setup
            .synapse
            .send_text(who, &setup.room, &format!("!review part {i}"))
            .await
            .expect("a command");
        asked.push(event);
        if i % 4 == 1 {
            // Killed with answers half written, and down while messages come.
            tokio::time::sleep(Duration::from_millis(150 * (i as u64 % 3 + 1))).await;
            controller.kill();
            let event = setup
                .synapse
                .send_text(&setup.alice, &setup.room, "while it is down: hello")
                .await
                .expect("chatter");
            assert!(!event.is_empty());
            controller.restart().expect("restart");
        }
    }
    for root in &asked {
        setup.wait_answers(root, 2, &controller).await;
    }
    let events = setup
        .synapse
        .events(&setup.alice, &setup.room)
        .await
        .expect("events");
    let mut names_seen = BTreeMap::new();
    for (i, root) in asked.iter().enumerate() {
        let answers = bodies_in_thread(&events, root);
        let run_name = names::command_run("review", root);
        let started = answers
            .iter()
            .filter(|a| a.starts_with("Started run"))
            .count();
        let ended = answers
            .iter()
            .filter(|a| a.starts_with(&format!("Run `{run_name}` succeeded")))
            .count();
        assert_eq!(
            (started, ended),
            (1, 1),
            "command {i} answered once each: {answers:?}"
        );
        names_seen.insert(run_name, i);
    }
    let runs = setup.runs().await;
    assert_eq!(runs.len(), COMMANDS, "one Run per command");
    for run in &runs {
        let name = run.metadata.name.clone().unwrap_or_default();
        let i = names_seen
            .get(&name)
            .unwrap_or_else(|| panic!("unexpected run {name}"));
        assert_eq!(
            run.spec.input.as_ref().map(|v| v["prompt"].clone()),
            Some(Value::from(format!("part {i}")))
        );
    }
    println!(
        "the room:\n{}",
        setup
            .synapse
            .transcript(&setup.alice, &setup.room)
            .await
            .expect("transcript")
    );
}

/// The notes of the Events on the Flow `flow` with `reason`.
async fn flow_events(ns: &TestNamespace, flow: &str, reason: &str) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = ns.api();
    events
        .list(&ListParams::default().fields(&format!("regarding.name={flow},reason={reason}")))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Flow"))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_connection_is_told_on_the_flow_and_a_working_one_too() {
    let setup = setup("alice").await;
    // The connection loses its token: the flow's owner reads why in its Events.
    let broken = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "team-chat"},
        "type": "Opaque",
        "stringData": {"type": "matrix", "url": setup.synapse.url()},
    });
    setup
        .kubectl
        .run(&["delete", "secret", "team-chat", "-n", setup.ns.name()])
        .expect("delete the secret");
    setup
        .kubectl
        .apply(setup.ns.name(), &broken.to_string())
        .expect("a secret without a token");
    let controller = ControllerProcess::for_namespace(setup.ns.name(), &[])
        .await
        .expect("controller");
    let notes = wait_for("a ChatFailed event on the flow", BOUND, || async {
        let notes = flow_events(&setup.ns, "review", "ChatFailed").await;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(
        notes[0],
        format!(
            "chat connection {}/team-chat: the Secret has no `token` (the bot's access token)",
            setup.ns.name()
        )
    );
    // Mended, it follows the room and says so.
    let bot = setup.synapse.user("coxswain").expect("bot");
    setup
        .kubectl
        .apply(
            setup.ns.name(),
            &setup
                .synapse
                .connection_secret("team-chat", &bot)
                .to_string(),
        )
        .expect("the token back");
    setup.following(&controller).await;
    let notes = wait_for("a ChatFollowing event on the flow", BOUND, || async {
        let notes = flow_events(&setup.ns, "review", "ChatFollowing").await;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert!(
        notes[0].contains(&setup.room) && notes[0].contains(&bot.id),
        "{notes:?}"
    );
}

/// A room the bot may not post in (it was never invited): the outcome of a
/// run that ended a day and more ago is given up at once, the Run marked
/// with the homeserver's reason; one that just ended is tried again later,
/// not in seconds. A Run with the same chat marks that the controller did
/// not create is never posted for.
#[tokio::test]
async fn an_outcome_the_room_refuses_is_given_up_a_day_after_the_run_ended() {
    let synapse = Synapse::start().await.expect("synapse");
    let (alice, bot) = (
        synapse.user("alice").expect("alice"),
        synapse.user("coxswain").expect("the bot"),
    );
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let room = synapse
        .new_room(&alice, &format!("closed {}", ns.name()), &[])
        .await
        .expect("room");
    let secret = synapse.connection_secret("team-chat", &bot);
    kubectl
        .apply(ns.name(), &secret.to_string())
        .expect("the connection Secret");
    let flow = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: plain}\n\
                spec:\n  steps:\n    - {key: a, condition: {when: \"true\"}}\n";
    kubectl.apply(ns.name(), flow).expect("the flow");
    // Two command Runs that ended, as the status says, before any
    // controller runs: two days ago, and now. Each is what the controller
    // makes for a command (named after its event, created by the
    // controller's user); a third carries the same chat marks but was made
    // by someone else, to aim the bot at the room: it gets nothing.
    let me = coxswain_k8s::admission::whoami(&ns.client())
        .await
        .expect("who the controller will be");
    let two_days_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(48);
    let ended = |event: &str, creator: &str, at: jiff::Timestamp| -> String {
        let name = names::command_run("plain", event);
        let run = serde_json::json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {
                "name": name,
                "labels": {names::CHAT_LABEL: "team-chat"},
                "annotations": {
                    names::CHAT_CONNECTION_ANNOTATION: "team-chat",
                    names::CHAT_ROOM_ANNOTATION: room,
                    names::CHAT_EVENT_ANNOTATION: event,
                    names::CHAT_THREAD_ANNOTATION: "$root",
                    names::CREATED_BY_ANNOTATION: creator,
                },
            },
            "spec": {"flowRef": {"name": "plain"}, "input": {}},
        });
        kubectl
            .run_with_stdin(
                &["create", "-n", ns.name(), "-f", "-"],
                Some(&run.to_string()),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let status = serde_json::json!({"status": {
            "phase": "Succeeded", "startedAt": at.to_string(), "finishedAt": at.to_string(),
        }});
        kubectl
            .run(&[
                "patch",
                "run",
                &name,
                "-n",
                ns.name(),
                "--subresource=status",
                "--type",
                "merge",
                "-p",
                &status.to_string(),
            ])
            .unwrap_or_else(|e| panic!("{e}"));
        name
    };
    let old = ended("$old", &me, two_days_ago);
    let new = ended("$new", &me, jiff::Timestamp::now());
    let forged = ended("$forged", "mallory", two_days_ago);

    let controller = ControllerProcess::for_namespace(ns.name(), &[])
        .await
        .expect("controller");
    let annotation = |run: &str, key: &str| -> Option<String> {
        let run = kubectl.json(&["get", "run", run, "-n", ns.name(), "-o", "json"]);
        run["metadata"]["annotations"][key]
            .as_str()
            .map(str::to_string)
    };
    let reason = wait_for("the old run marked unanswered", BOUND, || async {
        Ok(annotation(&old, names::CHAT_UNANSWERED_ANNOTATION))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert!(reason.contains("M_FORBIDDEN"), "{reason}");
    assert!(!reason.contains(&bot.token), "{reason}");
    // The new one was tried and refused too, and waits before the next try.
    wait_for("the new run's outcome tried", BOUND, || async {
        let log = controller.log_text();
        Ok(log
            .lines()
            .any(|l| l.contains(&format!("run={new}")) && l.contains("retry_in=30s"))
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(annotation(&new, names::CHAT_UNANSWERED_ANNOTATION), None);
    assert_eq!(annotation(&new, names::CHAT_ANSWERED_ANNOTATION), None);
    // The forged one ended as long ago as the old one, and the bot never
    // tried to speak for it: nothing posted, nothing given up.
    assert_eq!(annotation(&forged, names::CHAT_UNANSWERED_ANNOTATION), None);
    assert_eq!(annotation(&forged, names::CHAT_ANSWERED_ANNOTATION), None);
}

/// A flow started from chat talks in the command's thread: its message
/// step's `thread` is the run's `input.thread`, so the room sees the run's
/// own words between the start and the outcome, in one thread.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_step_answers_in_the_commands_thread() {
    let setup = setup("alice").await;
    let talk = format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: talk}}
spec:
  command: {{name: talk, chat: team-chat, rooms: ["{room}"], allowedUsers: ["{alice}"]}}
  steps:
    - key: say
      message:
        text: "Working on: {{{{input.json.prompt}}}}"
        matrix:
          homeserver: "{url}"
          room: "{room}"
          tokenSecretRef: {{name: team-chat, key: token}}
          thread: "{{{{input.json.thread}}}}"
"#,
        room = setup.room,
        alice = setup.alice.id,
        url = setup.synapse.url(),
    );
    setup
        .kubectl
        .apply(setup.ns.name(), &talk)
        .expect("the flow");
    let controller = setup.start_following().await;

    let asked = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "!talk the release notes")
        .await
        .expect("alice asks");
    let run_name = names::command_run("talk", &asked);
    let run = setup
        .kubectl
        .wait_run(setup.ns.name(), &run_name, &["Succeeded", "Failed"], BOUND)
        .await
        .expect("the run ends");
    assert_eq!(run["status"]["phase"], "Succeeded", "{:#}", run["status"]);
    assert_eq!(run["spec"]["input"]["thread"], asked.as_str());
    let answers = setup.wait_answers(&asked, 3, &controller).await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    let said = run["status"]["steps"]["say"]["output"]["messageId"]
        .as_str()
        .expect("the message's event id")
        .to_string();
    let event = setup
        .synapse
        .event(&setup.alice, &setup.room, &said)
        .await
        .expect("the flow's message");
    assert_eq!(event["content"]["body"], "Working on: the release notes");
    assert_eq!(thread_root(&event), Some(asked.as_str()));
    assert!(
        answers.iter().any(|a| a.starts_with("Started run")),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a.starts_with(&format!("Run `{run_name}` succeeded"))),
        "{answers:?}"
    );
}

/// A flow applied while the controller follows, listing a room the bot is
/// already in: a command typed right after it is applied starts its Run,
/// although no join of the bot's marks where the room's news begins.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_typed_right_after_a_flow_adds_a_room_the_bot_is_in_starts_its_run() {
    let setup = setup("alice").await;
    let bot = setup.synapse.user("coxswain").expect("the bot");
    let second = setup
        .synapse
        .new_room(
            &setup.alice,
            &format!("second {}", setup.ns.name()),
            &[&bot],
        )
        .await
        .expect("a room the bot is in");
    let controller = setup.start_following().await;

    let flow = format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: second}}
spec:
  command: {{name: second, chat: team-chat, rooms: ["{second}"], allowedUsers: ["{alice}"]}}
  steps:
    - {{key: a, condition: {{when: "true"}}}}
"#,
        alice = setup.alice.id,
    );
    setup
        .kubectl
        .apply(setup.ns.name(), &flow)
        .expect("the flow");
    let asked = setup
        .synapse
        .send_text(&setup.alice, &second, "!second right away")
        .await
        .expect("alice asks");
    let run_name = names::command_run("second", &asked);
    let run = setup
        .kubectl
        .wait_run(setup.ns.name(), &run_name, &["Succeeded", "Failed"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(run["spec"]["input"]["prompt"], "right away");
    assert_eq!(run["spec"]["input"]["room"], second.as_str());
}

/// The chat position is a ConfigMap anyone in the namespace may edit.
/// Moved back, it would replay old commands (and start again a Run someone
/// deleted); the follower checks its signature, refuses it with a Tampered
/// Event on the flow, and goes on from now.
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_position_moved_back_by_hand_replays_nothing() {
    let setup = setup("*").await;
    let mut controller = setup.start_following().await;
    let name = names::chat_position("team-chat");
    let before: Value = setup.kubectl.json(&[
        "get",
        "configmap",
        &name,
        "-n",
        setup.ns.name(),
        "-o",
        "json",
    ]);
    let asked = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "!review once only")
        .await
        .expect("a command");
    let run_name = names::command_run("review", &asked);
    setup.wait_answers(&asked, 2, &controller).await;
    controller.kill();
    setup
        .kubectl
        .run(&["delete", "run", &run_name, "-n", setup.ns.name(), "--wait"])
        .unwrap_or_else(|e| panic!("{e}"));
    // The position from before the command, written back by hand.
    let since = before["data"]["since"].as_str().expect("since");
    let patch = serde_json::json!({"data": {"since": since}}).to_string();
    setup
        .kubectl
        .run(&[
            "patch",
            "configmap",
            &name,
            "-n",
            setup.ns.name(),
            "--type",
            "merge",
            "-p",
            &patch,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    controller.restart().expect("restart");
    let told = wait_for("a Tampered event on the flow", BOUND, || async {
        let notes = flow_events(&setup.ns, "review", "Tampered").await;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert!(told[0].contains(&name), "{told:?}");
    // A command typed now is answered: the follower goes on from now.
    let later = setup
        .synapse
        .send_text(&setup.alice, &setup.room, "!review after the edit")
        .await
        .expect("a command");
    setup.wait_answers(&later, 2, &controller).await;
    let runs: Vec<String> = setup
        .runs()
        .await
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    assert!(
        !runs.contains(&run_name),
        "the old command was replayed: {runs:?}\n{}",
        controller.log_text()
    );
    assert!(
        runs.contains(&names::command_run("review", &later)),
        "{runs:?}"
    );
}
