//! `act` lines: what the application does between turns that no other line does, played by
//! the stage's act of that name; a story naming an act the stage lacks is not played.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_test::chaos::{Answer, PlayError, Story, play};

use super::stories::tools::post_refund_to;
use super::stories::{RIGHT, Scene, Store};

#[tokio::test]
async fn an_act_runs_between_turns_and_its_answer_is_recorded() {
    let mut scene = Scene::on(Store::Sqlite, RIGHT).await;
    let provider = scene.proxy.addr();
    let given = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&given);
    scene.stage = scene
        .stage
        .clone()
        .with_act("refund_by_hand", move |args: Value| {
            seen.lock().unwrap().push(args.clone());
            async move {
                let order = args["order_id"].as_str().ok_or("no order_id")?.to_owned();
                post_refund_to(provider, Some("by-hand-1"), &order)
                    .await
                    .map_err(|err| err.to_string())
            }
        });
    let story = Story::new()
        .act("refund_by_hand", json!({"order_id": "ORD-1001"}))
        .act("refund_by_hand", json!({}));
    let played = scene.play(&story).await;

    assert_eq!(
        *given.lock().unwrap(),
        [json!({"order_id": "ORD-1001"}), json!({})]
    );
    let answers: Vec<&Answer> = played.answers.iter().map(|a| &a.answer).collect();
    let [Answer::Acted(Ok(_)), Answer::Acted(Err(why))] = answers[..] else {
        panic!("{answers:?}");
    };
    assert_eq!(
        why, "no order_id",
        "a failed act is recorded, and the story goes on"
    );
    assert_eq!(
        scene.payments.applied().len(),
        1,
        "the refund made by hand reached the provider"
    );
    // Made outside the dispatcher, it is no operation's: the check says so.
    let violations = played.check(|| scene.payments.applied()).unwrap_err();
    assert_eq!(
        violations.iter().map(|v| v.kind()).collect::<Vec<_>>(),
        ["unaccounted"]
    );
}

#[tokio::test]
async fn a_story_with_an_act_the_stage_lacks_is_not_played() {
    let scene = Scene::on(Store::Sqlite, RIGHT).await;
    let story = Story::new().reconcile().act("refund_by_hand", json!({}));
    let refused = play(&scene.stage, &story).await.unwrap_err();
    assert!(
        matches!(&refused, PlayError::NoAct { line: 2, name } if name == "refund_by_hand"),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("Stage::with_act"), "{refused}");
}
