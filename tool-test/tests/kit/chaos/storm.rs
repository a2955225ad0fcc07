//! Generated stories on the refund tools of `stories`, each on a fresh scene (its own provider,
//! proxy and store), checked against the provider's ledger: the tool done right survives them
//! on a SQLite file and on PostgreSQL; the tool that sends no key, and the one whose reconcile
//! hook answers without asking, are caught, and the shortest story printed for each, replayed
//! from its file, fails the same way in under ten lines.
//!
//! The counts here are CI's. For more: `TOOLGATE_STORIES=500 cargo test -p toolgate-test
//! --all-features --test kit -- chaos::storm`.

use std::collections::BTreeMap;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::Value;
use toolgate::prelude::*;
use toolgate_test::chaos::{
    Caught, Route, STORIES_VAR, STORY_VAR, Storm, Story, Survived, Violations,
};

use super::stories::{APPROVED, GUESSING, KEYLESS, QUEUED, RIGHT, Scene, Store, outbox_scene};

/// The storm on the tool `registry` holds, its faults on the provider's refunds.
fn storm(registry: fn() -> Registry, stories: u32) -> Storm {
    Storm::new(&registry())
        .faults_on(Route::post("/refunds"))
        .stories(stories)
}

/// Plays `story` on a fresh scene of `registry` on `store`, and checks it against the
/// provider's ledger.
async fn on_a_fresh_scene(
    store: Store,
    registry: fn() -> Registry,
    story: Story,
) -> Result<(), Violations> {
    let scene = Scene::on(store, registry).await;
    let played = scene.play(&story).await;
    played.check(|| scene.payments.applied())
}

/// The storm on `registry`'s tool, `stories` drawn, each on a fresh scene on `store`.
async fn weather(
    store: Store,
    registry: fn() -> Registry,
    stories: u32,
) -> Result<Survived, Caught> {
    storm(registry, stories)
        .check(|story| on_a_fresh_scene(store, registry, story))
        .await
}

/// How many stories a storm asked for `stories` plays: `TOOLGATE_STORIES` wins, and a story
/// file named by `TOOLGATE_STORY` is played alone.
fn drawn(stories: u32) -> u32 {
    if std::env::var_os(STORY_VAR).is_some() {
        return 1;
    }
    std::env::var(STORIES_VAR)
        .ok()
        .map_or(stories, |count| count.parse().unwrap())
}

/// `caught`'s story is short, its report prints it and the replay command, and the story
/// read back from its file fails the same way on a fresh scene.
async fn replays_alike(caught: &Caught, store: Store, registry: fn() -> Registry) {
    assert!(caught.story().len() < 10, "{caught}");
    let report = caught.to_string();
    assert!(report.contains(&caught.story().to_jsonl()), "{report}");
    assert!(report.contains(caught.replay_command()), "{report}");
    let file = caught.file().expect("the story was written to a file");
    assert!(
        caught
            .replay_command()
            .starts_with(&format!("TOOLGATE_STORY={} cargo test", file.display())),
        "{}",
        caught.replay_command()
    );
    let story = Story::from_jsonl(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(&story, caught.story());
    let replayed = on_a_fresh_scene(store, registry, story)
        .await
        .expect_err("the replayed story fails again");
    assert_eq!(replayed.kinds(), caught.violations().kinds(), "{caught}");
}

#[tokio::test]
async fn the_right_tool_survives_generated_stories_on_sqlite() {
    let survived = weather(Store::Sqlite, RIGHT, 48).await.unwrap();
    assert_eq!(survived.stories(), drawn(48), "{survived}");
}

#[tokio::test]
async fn the_right_tool_survives_generated_stories_on_postgres() {
    let survived = weather(Store::Postgres, RIGHT, 16).await.unwrap();
    assert_eq!(survived.stories(), drawn(16), "{survived}");
}

#[tokio::test]
async fn generated_stories_catch_a_tool_that_sends_no_key() {
    let caught = weather(Store::Sqlite, KEYLESS, 48)
        .await
        .expect_err("a tool that sends no key applies a refund twice, or unaccounted for");
    let found = caught.violations().kinds();
    assert!(
        found.contains("applied_more_than_once") || found.contains("unaccounted"),
        "{caught}"
    );
    replays_alike(&caught, Store::Sqlite, KEYLESS).await;
}

#[tokio::test]
async fn generated_stories_catch_a_tool_that_sends_no_key_on_postgres() {
    let caught = weather(Store::Postgres, KEYLESS, 16)
        .await
        .expect_err("a tool that sends no key is caught");
    replays_alike(&caught, Store::Postgres, KEYLESS).await;
}

#[tokio::test]
async fn generated_stories_catch_a_reconcile_hook_that_answers_without_asking() {
    let caught = weather(Store::Sqlite, GUESSING, 48)
        .await
        .expect_err("a hook that guesses leaves an applied refund unaccounted for");
    assert!(
        caught.violations().kinds().contains("unaccounted"),
        "{caught}"
    );
    replays_alike(&caught, Store::Sqlite, GUESSING).await;
}

#[tokio::test]
async fn a_tool_with_an_approval_threshold_survives_generated_decisions() {
    weather(Store::Sqlite, APPROVED, 24).await.unwrap();
}

#[tokio::test]
async fn an_outbox_tool_survives_generated_deliveries() {
    storm(QUEUED, 24)
        .check(|story| async move {
            let scene = outbox_scene(QUEUED).await;
            let played = scene.play(&story).await;
            played.check(|| scene.payments.applied())
        })
        .await
        .unwrap();
}

/// How many lines of each key 200 stories of `registry`'s storm hold.
fn keys_drawn(registry: fn() -> Registry) -> BTreeMap<String, usize> {
    let strategy = storm(registry, 1).strategy();
    let mut runner = TestRunner::deterministic();
    let mut counts = BTreeMap::new();
    for _ in 0..200 {
        let story = strategy.new_tree(&mut runner).unwrap().current();
        for line in story.to_jsonl().lines() {
            let object: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
            let key = object.keys().next().unwrap().clone();
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn a_storm_draws_every_kind_of_line_its_tools_call_for() {
    let plain = keys_drawn(RIGHT);
    let every_story = [
        "session",
        "openai",
        "openai_responses",
        "anthropic",
        "gemini",
        "fault",
        "reconcile",
        "restart",
        "process",
        "run",
    ];
    for key in every_story {
        assert!(plain.get(key).is_some_and(|n| *n >= 10), "{key}: {plain:?}");
    }
    for key in ["approve", "reject", "run_approved", "deliver"] {
        assert!(!plain.contains_key(key), "{key}: {plain:?}");
    }
    let held = keys_drawn(APPROVED);
    for key in ["approve", "reject", "run_approved"] {
        assert!(held.get(key).is_some_and(|n| *n >= 10), "{key}: {held:?}");
    }
    assert!(keys_drawn(QUEUED).get("deliver").is_some_and(|n| *n >= 10));
}

#[test]
fn a_story_file_named_by_the_variable_is_played_in_place_of_the_draws() {
    // A story the keyless tool keeps every promise in: nothing is asked of it. Its test,
    // replaying this file, finds no failure to catch.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calm.jsonl");
    std::fs::write(&file, "{\"reconcile\": {}}\n").unwrap();
    let test = "chaos::storm::generated_stories_catch_a_tool_that_sends_no_key";
    let replayed = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(toolgate_test::chaos::STORY_VAR, &file)
        .output()
        .unwrap();
    let output = String::from_utf8_lossy(&replayed.stderr).into_owned()
        + &String::from_utf8_lossy(&replayed.stdout);
    assert!(!replayed.status.success(), "{output}");
    assert!(
        output.contains("a tool that sends no key") && output.contains(&*file.to_string_lossy()),
        "{output}"
    );
}

#[tokio::test]
async fn generated_stories_catch_a_reconcile_hook_that_answers_without_asking_on_postgres() {
    let caught = weather(Store::Postgres, GUESSING, 16)
        .await
        .expect_err("a hook that guesses is caught");
    assert!(
        caught.violations().kinds().contains("unaccounted"),
        "{caught}"
    );
    replays_alike(&caught, Store::Postgres, GUESSING).await;
}
