//! What a storm answers: [`Survived`], how many stories passed, or [`Caught`], the shortest
//! story that fails, written to a file, with the command that replays it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::super::{Story, Violations};
use super::STORY_VAR;

/// Every story a [`Storm`](super::Storm) played kept toolgate's promises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survived {
    stories: u32,
    source: Source,
}

/// What a storm that survived played.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Its draws, from this seed.
    Drawn { seed: u64 },
    /// The story of this file, in place of its draws.
    Replayed(PathBuf),
}

impl Survived {
    pub(super) fn drawn(stories: u32, seed: u64) -> Survived {
        Survived {
            stories,
            source: Source::Drawn { seed },
        }
    }

    pub(super) fn replayed(path: PathBuf) -> Survived {
        Survived {
            stories: 1,
            source: Source::Replayed(path),
        }
    }

    /// How many stories were played (1 when a story file was replayed).
    pub fn stories(&self) -> u32 {
        self.stories
    }

    /// The story file played in place of the draws, when `TOOLGATE_STORY` named one.
    pub fn replayed_file(&self) -> Option<&Path> {
        match &self.source {
            Source::Replayed(path) => Some(path),
            Source::Drawn { .. } => None,
        }
    }
}

impl fmt::Display for Survived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Replayed(path) => {
                write!(f, "the story of {} kept every promise", path.display())
            }
            Source::Drawn { seed } => write!(
                f,
                "{} drawn stories kept every promise (seed {seed:#x})",
                self.stories
            ),
        }
    }
}

/// Where a failing story came from in the draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Draw {
    /// Its number among the draws, from 1.
    pub(super) number: u32,
    /// How many were to be drawn.
    pub(super) stories: u32,
    pub(super) seed: u64,
    /// Its length as drawn.
    pub(super) drawn: usize,
    /// How many shorter stories were played to shrink it.
    pub(super) shrinks: u32,
}

/// A story that broke toolgate's promises: the shortest a [`Storm`](super::Storm) found that
/// fails the way the first failing draw did, its violations, the file it was written to and
/// the command that replays it alone. As text (and as `Debug`, which `unwrap_err` and
/// `expect` print), all of that, the story line by line.
#[derive(Clone)]
pub struct Caught {
    story: Story,
    violations: Violations,
    draw: Option<Draw>,
    file: Option<PathBuf>,
    command: String,
}

impl Caught {
    pub(super) fn drawn(story: Story, violations: Violations, draw: Draw) -> Caught {
        let path = file_for(&story, &draw);
        // A story that cannot be written is still printed whole; the command then names no
        // file, and says so.
        let file = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .and_then(|()| std::fs::write(&path, story.to_jsonl()))
            .map(|()| path)
            .ok();
        let command = command(file.as_deref());
        Caught {
            story,
            violations,
            draw: Some(draw),
            file,
            command,
        }
    }

    pub(super) fn replayed(story: Story, violations: Violations, path: PathBuf) -> Caught {
        Caught {
            command: command(Some(&path)),
            story,
            violations,
            draw: None,
            file: Some(path),
        }
    }

    /// The story.
    pub fn story(&self) -> &Story {
        &self.story
    }

    /// What it broke.
    pub fn violations(&self) -> &Violations {
        &self.violations
    }

    /// The file the story was written to (or replayed from), as JSON Lines.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The command that replays the story alone: the test, run again with `TOOLGATE_STORY`
    /// set to the file.
    pub fn replay_command(&self) -> &str {
        &self.command
    }
}

impl fmt::Display for Caught {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = self.story.len();
        match &self.draw {
            Some(draw) => writeln!(
                f,
                "a story of {lines} lines breaks toolgate's promises: story {} of {} drawn \
                 (seed {:#x}), shrunk from {} lines in {} plays",
                draw.number, draw.stories, draw.seed, draw.drawn, draw.shrinks
            )?,
            None => writeln!(
                f,
                "the replayed story of {lines} lines breaks toolgate's promises"
            )?,
        }
        writeln!(f)?;
        f.write_str(&self.story.to_jsonl())?;
        writeln!(f)?;
        write!(f, "{}", self.violations)?;
        writeln!(f)?;
        match &self.file {
            Some(_) => writeln!(f, "replay it alone:\n    {}", self.command),
            None => writeln!(
                f,
                "the story could not be written to a file: save the lines above as story.jsonl \
                 and replay it alone:\n    {}",
                self.command
            ),
        }
    }
}

impl fmt::Debug for Caught {
    /// As [`Display`](fmt::Display): what `unwrap_err` prints is what a person reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Caught {}

/// The story in the file at `path`.
pub(super) fn read(path: &Path) -> Story {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
        panic!(
            "{STORY_VAR}={}: the story cannot be read: {err}",
            path.display()
        )
    });
    Story::from_jsonl(&text).unwrap_or_else(|err| {
        panic!("{STORY_VAR}={}: {err}", path.display());
    })
}

/// The running test's name, as libtest names its thread (none on the main thread).
fn test_name() -> Option<String> {
    std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map(str::to_owned)
}

/// Where a failing story is written: `storms/` beside the test binary's `deps/` (in the
/// target directory), or the system's temporary directory; named by the test, else by the
/// draw.
fn file_for(story: &Story, draw: &Draw) -> PathBuf {
    let exe = std::env::current_exe().ok();
    let dir = exe
        .as_deref()
        .and_then(Path::parent)
        .filter(|deps| deps.ends_with("deps"))
        .and_then(Path::parent)
        .map_or_else(
            || std::env::temp_dir().join("toolgate-storms"),
            |profile| profile.join("storms"),
        );
    let name = match test_name() {
        Some(test) => test.replace("::", "-"),
        None => format!("story-{:x}-{}-{}", draw.seed, draw.number, story.len()),
    };
    dir.join(format!("{name}.jsonl"))
}

/// The command that runs this test again on the story at `file`: `cargo test` of the package
/// and test target the test binary belongs to, the test alone by its exact name.
fn command(file: Option<&Path>) -> String {
    let file = file.map_or_else(
        || "story.jsonl".to_owned(),
        |path| path.display().to_string(),
    );
    let mut command = format!("{STORY_VAR}={} cargo test", shell_word(&file));
    if let Ok(package) = std::env::var("CARGO_PKG_NAME") {
        command.push_str(&format!(" -p {package} --all-features"));
    }
    let target = std::env::current_exe().ok().and_then(|exe| {
        let stem = exe.file_stem()?.to_str()?.to_owned();
        // `kit-0123456789abcdef`: the target's name and cargo's hash.
        let (name, hash) = stem.rsplit_once('-')?;
        hash.chars()
            .all(|c| c.is_ascii_hexdigit())
            .then(|| name.to_owned())
    });
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    match target {
        // A library's own tests are built under the crate's name.
        Some(target) if target == package.replace('-', "_") => command.push_str(" --lib"),
        Some(target) => command.push_str(&format!(" --test {target}")),
        None => {}
    }
    if let Some(test) = test_name() {
        command.push_str(&format!(" -- --exact {test}"));
    }
    command
}

/// `word` as one word of a POSIX shell: quoted when it holds anything but the safe characters.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:=,@".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
