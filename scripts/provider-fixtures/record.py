#!/usr/bin/env python3
"""Records the provider wire fixtures in tests/fixtures/providers/ from the official OpenAI,
Anthropic and Google client libraries.

To refresh them, from the repository's root, with Python 3.10 or later, cargo, and access to the
Python package index:

    python3 scripts/provider-fixtures/record.py

then review `git diff tests/fixtures/providers` and run `cargo test -p toolgate --test toolgate provider_fixtures`.
To move to newer libraries, change the pins in requirements.txt first (README.md says how).

What it does:
1. creates a virtual environment in a temporary directory and installs requirements.txt there
   (exact versions; nothing is installed outside that directory, which is removed at the end);
2. runs `cargo run --example wire_samples`, which prints toolgate's catalogs and rendered results
   for the sample tools of `toolgate_demo::wire_samples`, in every format;
3. inside the environment, writes for each provider (openai, anthropic, gemini):
   - `produced.json`: model turns holding tool calls as each library produces them, from
     representative API responses turned into the library's response types and dumped the ways
     applications do (produced.py);
   - `accepted.json`: toolgate's catalogs and results validated with the library's request types,
     with the library's verdict and its own round-trip dump of each (accepted.py).

The Rust test tests/toolgate/provider_fixtures.rs reads these files; it needs neither Python nor network.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "providers"
REFRESH = "python3 scripts/provider-fixtures/record.py"

# The packages whose versions each provider's fixtures note.
LIBRARIES = {"openai": "openai", "anthropic": "anthropic", "gemini": "google-genai"}

# Lines of the fixtures are at most this wide where a value fits on one.
WIDTH = 100


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--in-venv",
        metavar="SAMPLES",
        help="(used by the script itself) record from the wire samples in SAMPLES, "
        "inside the environment it built",
    )
    args = parser.parse_args()
    if args.in_venv:
        write_fixtures(json.loads(Path(args.in_venv).read_text()))
        return
    try:
        bootstrap()
    except subprocess.CalledProcessError as err:
        command = " ".join(str(part) for part in err.cmd)
        sys.exit(f"record.py: `{command}` failed with exit status {err.returncode}")


def run(command, **kwargs):
    print("+", " ".join(str(part) for part in command), file=sys.stderr, flush=True)
    return subprocess.run(command, check=True, **kwargs)


def bootstrap():
    """Builds the environment, gets the wire samples from cargo, and re-runs this script inside
    the environment to record."""
    if sys.version_info < (3, 10):
        sys.exit("record.py needs Python 3.10 or later (google-genai does)")
    with tempfile.TemporaryDirectory(prefix="toolgate-provider-fixtures-") as temp:
        venv = Path(temp) / "venv"
        run([sys.executable, "-m", "venv", venv])
        python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        pip = [python, "-m", "pip", "--disable-pip-version-check", "--no-input"]
        run(pip + ["install", "--quiet", "-r", HERE / "requirements.txt"])
        run(pip + ["check"])
        samples = Path(temp) / "wire_samples.json"
        with samples.open("w") as out:
            run(["cargo", "run", "--quiet", "--example", "wire_samples"], cwd=ROOT, stdout=out)
        run([python, Path(__file__).resolve(), "--in-venv", samples])


def write_fixtures(samples):
    """Records every provider's fixtures (inside the environment)."""
    sys.path.insert(0, str(HERE))
    import accepted
    import produced

    turns = produced.record()
    verdicts = accepted.record(samples)
    for provider, package in LIBRARIES.items():
        note = {
            "recorded_with": {
                package: metadata.version(package),
                "pydantic": metadata.version("pydantic"),
                "python": platform.python_version(),
            },
            "refresh": REFRESH,
        }
        write(
            FIXTURES / provider / "produced.json",
            {
                **note,
                "about": "Model turns holding tool calls, as the client library produces them: "
                "each case is an API response turned into the library's response types, dumped "
                "the ways applications do; `expect` holds the calls read from the library's typed "
                "objects (an id of null: the provider sent none).",
                "formats": turns[provider],
            },
        )
        write(
            FIXTURES / provider / "accepted.json",
            {
                **note,
                "about": "toolgate's catalogs and rendered results for the wire samples "
                "(cargo run --example wire_samples), validated with the client library's "
                "request types: the verdict (accepted, changed or rejected), the library's "
                "round-trip dump, and proofs that the validation rejects an unknown key.",
                **verdicts[provider],
            },
        )


def write(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(value) + "\n")
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


def dumps(value, indent=0, lead=0):
    """Pretty JSON that keeps a value on one line where it fits in WIDTH columns (`indent` is the
    line's indentation, `lead` what precedes the value on its first line)."""
    flat = json.dumps(value, ensure_ascii=False)
    if indent + lead + len(flat) <= WIDTH or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = " " * (indent + 2)
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            key = json.dumps(key, ensure_ascii=False) + ": "
            items.append(inner + key + dumps(item, indent + 2, len(key)))
    else:
        items = [inner + dumps(item, indent + 2) for item in value]
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opening + "\n" + ",\n".join(items) + "\n" + " " * indent + closing


if __name__ == "__main__":
    main()
