//! [`Storm`]: stories drawn from a registry's tools with proptest, each played by the
//! application, and the first that breaks a promise shrunk to the shortest story that still
//! breaks it the same way, written to a file and printed with the one command that replays it.

mod arguments;
mod caught;
mod steps;

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;
use toolgate_core::Registry;
use toolgate_core::tool::Delivery;

pub use caught::{Caught, Survived};

use super::{Route, Story, Violations};

/// The variable that names how many stories a storm draws, over what the test says.
pub const STORIES_VAR: &str = "TOOLGATE_STORIES";
/// The variable that names the seed of a storm's draws, over what the test says.
pub const SEED_VAR: &str = "TOOLGATE_STORM_SEED";
/// The variable that names a story file: a storm then plays that story alone, in place of its
/// draws. What [`Caught`]'s replay command sets.
pub const STORY_VAR: &str = "TOOLGATE_STORY";

/// The seed a storm draws with unless told otherwise: the same stories in every run.
const SEED: u64 = 0x746f_6f6c_6761_7465;

/// How many shrinking steps a failure gets at most: each plays a story.
const SHRINKS: u32 = 512;

/// A tool the storm calls: its name and its input schema.
#[derive(Debug, Clone)]
struct Target {
    name: &'static str,
    schema: Value,
}

/// Stories drawn from a registry's tools: turns in every wire format calling them with
/// arguments drawn from their schemas (valid ones, from a small pool so that operations are
/// asked for again, and invalid ones: a required field left out, a stray field, a wrong type,
/// no object, no JSON), parallel batches, faults on the provider's routes, restarts, a second
/// process, new runs, reconcile passes, and, where the tools have them, approvals and outbox
/// deliveries.
///
/// [`Storm::check`] plays each story through the application's closure (which sets up a
/// fresh stage, plays the story and checks it) and shrinks the first failure to the shortest
/// story that fails the same way: [`Caught`] prints it, writes it to a file, and says the
/// command that replays it alone (the test's own, with `TOOLGATE_STORY` set to the file).
///
/// The draws are the same in every run: the seed is fixed ([`Storm::seed`]) unless
/// `TOOLGATE_STORM_SEED` names another, and the count is [`Storm::stories`]' unless
/// `TOOLGATE_STORIES` names another (a few dozen in CI; hundreds when you have the time).
///
/// # Examples
///
/// ```no_run
/// use toolgate::prelude::*;
/// use toolgate_test::chaos::{Route, Storm, Story, Violations};
///
/// # async fn play_on_a_fresh_stage(story: Story) -> Result<(), Violations> { Ok(()) }
/// # async fn run(registry: Registry) {
/// let storm = Storm::new(&registry)
///     .session("acme", "agent", ["refund:create"])
///     .faults_on(Route::post("/refunds"))
///     .stories(64);
/// if let Err(caught) = storm.check(play_on_a_fresh_stage).await {
///     panic!("{caught}");
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Storm {
    tools: Vec<Target>,
    session: (String, String, Vec<String>),
    routes: Vec<Route>,
    stories: u32,
    max_lines: usize,
    seed: u64,
    /// The permissions an approver needs, when a tool has an approval threshold.
    approvals: Option<Vec<String>>,
    /// Whether a tool delivers through the outbox.
    deliveries: bool,
}

impl Storm {
    /// A storm on `registry`'s tools: 64 stories of at most 8 lines, as tenant `acme`, user
    /// `agent` holding every permission the tools require, faults on any route.
    ///
    /// # Panics
    ///
    /// When `registry` has no tool.
    pub fn new(registry: &Registry) -> Storm {
        assert!(!registry.is_empty(), "a storm needs a tool to call");
        let descriptors = || registry.iter().map(|tool| tool.descriptor());
        let permissions: BTreeSet<String> = descriptors()
            .filter_map(|descriptor| descriptor.permission.map(str::to_owned))
            .collect();
        let approvers: BTreeSet<String> = descriptors()
            .filter_map(|d| d.approval.map(|policy| policy.approver_permission(d.name)))
            .collect();
        Storm {
            tools: registry
                .iter()
                .map(|tool| Target {
                    name: tool.descriptor().name,
                    schema: tool.schema().clone(),
                })
                .collect(),
            session: (
                "acme".to_owned(),
                "agent".to_owned(),
                permissions.into_iter().collect(),
            ),
            routes: Vec::new(),
            stories: 64,
            max_lines: 8,
            seed: SEED,
            approvals: (!approvers.is_empty()).then(|| approvers.into_iter().collect()),
            deliveries: descriptors().any(|d| d.delivery == Delivery::Outbox),
        }
    }

    /// Who calls: the story's first line is this `session`.
    pub fn session<P: Into<String>>(
        mut self,
        tenant: impl Into<String>,
        user: impl Into<String>,
        permissions: impl IntoIterator<Item = P>,
    ) -> Storm {
        let permissions = permissions.into_iter().map(Into::into).collect();
        self.session = (tenant.into(), user.into(), permissions);
        self
    }

    /// Faults fall on `route` (and on every other route given so); with none given, on any.
    /// Give the routes of the tools' writes: a fault on a reconcile hook's lookup only makes
    /// the lookup fail, which a later pass answers.
    pub fn faults_on(mut self, route: Route) -> Storm {
        self.routes.push(route);
        self
    }

    /// How many stories to draw, unless `TOOLGATE_STORIES` names another count.
    pub fn stories(mut self, stories: u32) -> Storm {
        self.stories = stories;
        self
    }

    /// How many lines a drawn story has at most, its `session` line aside.
    ///
    /// # Panics
    ///
    /// When `lines` is 0.
    pub fn max_lines(mut self, lines: usize) -> Storm {
        assert!(lines > 0, "a story has a line at least");
        self.max_lines = lines;
        self
    }

    /// The seed of the draws, unless `TOOLGATE_STORM_SEED` names another.
    pub fn seed(mut self, seed: u64) -> Storm {
        self.seed = seed;
        self
    }

    /// The drawn stories, for a test that drives proptest itself: shrinking one leaves lines
    /// out, makes calls valid and faults milder.
    pub fn strategy(&self) -> impl Strategy<Value = Story> + use<> {
        let storm = self.with_routes();
        steps::drafts(&storm).prop_map(move |draft| draft.story(&storm))
    }

    /// The storm with the route that takes faults when none was given.
    fn with_routes(&self) -> Storm {
        let mut storm = self.clone();
        if storm.routes.is_empty() {
            storm.routes.push(Route::any("/"));
        }
        storm
    }

    /// Plays every drawn story through `play`, which sets up a fresh stage (a new store and
    /// provider: a story's checks read the provider's whole ledger), plays the story on it and
    /// checks it. With `TOOLGATE_STORY` set, plays the story of that file alone, in place of
    /// the draws: every storm of the run does, so set it for one test (as the replay command
    /// does, naming the test).
    ///
    /// # Errors
    ///
    /// [`Caught`]: the shortest story that fails the way the first failing one did (with a
    /// violation of each kind it had), with its violations and how to replay it.
    ///
    /// # Panics
    ///
    /// When `TOOLGATE_STORY` names a file that cannot be read or is no story, or a seed or
    /// count in the variables is no number.
    pub async fn check<F, Fut>(&self, mut play: F) -> Result<Survived, Caught>
    where
        F: FnMut(Story) -> Fut,
        Fut: Future<Output = Result<(), Violations>>,
    {
        if let Some(path) = std::env::var_os(STORY_VAR) {
            let story = caught::read(path.as_ref());
            return match play(story.clone()).await {
                Ok(()) => Ok(Survived::replayed(path.into())),
                Err(violations) => Err(Caught::replayed(story, violations, path.into())),
            };
        }
        let seed = number_var(SEED_VAR).unwrap_or(self.seed);
        let stories = number_var(STORIES_VAR).map_or(self.stories, |n| {
            u32::try_from(n).unwrap_or_else(|_| panic!("{STORIES_VAR}={n} is too many"))
        });
        let storm = self.with_routes();
        let drafts = steps::drafts(&storm);
        let mut rng = [0; 32];
        rng[..8].copy_from_slice(&seed.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &rng),
        );
        for number in 1..=stories {
            let mut tree = drafts
                .new_tree(&mut runner)
                .unwrap_or_else(|why| panic!("a story cannot be drawn: {why}"));
            let story = tree.current().story(&storm);
            let Err(violations) = play(story.clone()).await else {
                continue;
            };
            let drawn = story.len();
            let kinds = violations.kinds();
            let mut shortest = (story, violations);
            // What each story shrinking reached did: the same story is played once.
            let mut seen: HashMap<String, bool> = HashMap::new();
            let mut shrinks = 0;
            let mut simpler = tree.simplify();
            while simpler && shrinks < SHRINKS {
                let candidate = tree.current().story(&storm);
                let text = candidate.to_jsonl();
                let fails_alike = match seen.get(&text) {
                    Some(&fails) => fails,
                    None => {
                        shrinks += 1;
                        let fails = match play(candidate.clone()).await {
                            Err(found) if found.kinds().is_superset(&kinds) => {
                                shortest = (candidate, found);
                                true
                            }
                            _ => false,
                        };
                        seen.insert(text, fails);
                        fails
                    }
                };
                simpler = if fails_alike {
                    tree.simplify()
                } else {
                    tree.complicate()
                };
            }
            let (story, violations) = shortest;
            return Err(Caught::drawn(
                story,
                violations,
                caught::Draw {
                    number,
                    stories,
                    seed,
                    drawn,
                    shrinks,
                },
            ));
        }
        Ok(Survived::drawn(stories, seed))
    }
}

/// The number in the variable `name`, if it is set.
fn number_var(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text} is no number")))
}
