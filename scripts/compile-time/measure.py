#!/usr/bin/env python3
"""Measures what `#[tool]` costs at compile time, beside rmcp's `#[tool]` and a hand-written
control, on a generated crate of N tools.

From the repository's root, with Rust and Python 3.10 or later (standard library only):

    python3 scripts/compile-time/measure.py                 # 50 tools, 2 passes
    python3 scripts/compile-time/measure.py --tools 5 --passes 1 --ir

It writes one crate per form under the scratch directory (default `target/compile-time/`), each
its own Cargo workspace, all sharing one target directory so the dependencies are built once:

- `plain`: toolgate's `#[tool]` with plain parameters;
- `args`: toolgate's `#[tool]` with one `Args(p): Args<FooArgs>` parameter;
- `rmcp`: rmcp's `#[tool]` in a `#[tool_router]` impl, with `Parameters<FooArgs>`;
- `control`: the same structs and one `match name` that deserializes and calls (no framework).

Then, after a warm-up build and check of every form (not measured), for each pass, for each step
(clean build, incremental build after editing one tool's body, clean check), for each form in a
rotating order, it measures the CPU seconds (user + sys) of cargo and everything it ran. It prints
a Markdown table per pass and a summary with the ratios to rmcp on stdout, progress on stderr,
and cargo's output to `cargo.log` in the scratch directory. README.md says how to read it.
"""

import argparse
import datetime
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

FORMS = ["plain", "args", "rmcp", "control"]
STEPS = ["clean build", "incremental", "clean check"]
# The form the ratios divide by.
BASELINE = "rmcp"

# The crates.io dependencies of the generated crates, at the versions of the repository's
# Cargo.lock, with the features the repository gives them (so every form compiles the derives
# against the same serde_json map).
DEPENDENCIES = {
    "serde": '{{ version = "{v}", features = ["derive"] }}',
    "serde_json": '{{ version = "{v}", features = ["preserve_order", "raw_value"] }}',
    "schemars": (
        '{{ version = "{v}", default-features = false, '
        'features = ["derive", "std", "preserve_order"] }}'
    ),
    "rmcp": '{{ version = "{v}", default-features = false, features = ["server", "macros"] }}',
}

# What each form's crate depends on, besides toolgate for the two toolgate forms.
FORM_DEPENDENCIES = {
    "plain": ["serde"],
    "args": ["serde", "schemars"],
    "rmcp": ["rmcp", "serde", "schemars"],
    "control": ["serde", "serde_json", "schemars"],
}

# The nouns the tools act on, with the prefix of their ids.
NOUNS = [
    ("order", "ORD"), ("invoice", "INV"), ("customer", "CUS"), ("shipment", "SHP"),
    ("ticket", "TKT"), ("product", "PRD"), ("coupon", "CPN"), ("account", "ACC"),
    ("payment", "PAY"), ("subscription", "SUB"), ("warehouse", "WHS"), ("supplier", "SUP"),
    ("return", "RET"), ("review", "REV"), ("cart", "CRT"), ("address", "ADR"),
    ("employee", "EMP"), ("contract", "CTR"), ("lead", "LED"), ("campaign", "CMP"),
    ("refund", "RFD"), ("quote", "QTE"), ("dispute", "DSP"), ("payout", "PYT"),
]

# The reads' names and docs, and the writes', for a noun.
READ_TOOLS = [
    ("get_{noun}", "Look up one {noun} by its id."),
    ("list_{noun}_events", "List the events recorded on one {noun}, newest first."),
    ("find_similar_{noun}s", "Find the {noun}s most like one {noun}."),
    ("count_{noun}_entries", "Count the entries recorded against one {noun}."),
    ("check_{noun}_status", "Check whether one {noun} is in good standing."),
]
WRITE_TOOLS = [
    ("update_{noun}", "Update one {noun}. The same call again is a replay, not a second update."),
    ("cancel_{noun}", "Cancel one {noun}. Cancelling is final."),
    ("flag_{noun}", "Flag one {noun} for a person to follow up."),
]

# The fields after the id: (Rust type, name, doc). Two of them differ for any tool.
EXTRA_FIELDS = [
    ("u32", "limit", "How many entries to return at most."),
    ("bool", "include_archived", "Whether archived entries count too."),
    ("Option<String>", "currency", "The ISO 4217 currency, such as `EUR`; the account's if absent."),
    ("f64", "amount", "The amount, in the currency's major unit."),
    ("Vec<String>", "tags", "Labels to match, such as `priority`."),
    ("u64", "since_ms", "Only what happened after this time, in milliseconds since the epoch."),
    ("i64", "offset_days", "A shift of the window, in days; negative looks back."),
    ("String", "note", "A note for the audit trail."),
]


@dataclass
class Field:
    """One argument of a tool: its name, Rust type and doc line."""

    name: str
    ty: str
    doc: str


@dataclass
class ToolSpec:
    """One generated tool, the same in every form."""

    name: str
    doc: str
    noun: str
    write: bool
    permission: str | None
    fields: list

    @property
    def camel(self):
        """The tool's name in CamelCase, the stem of its structs' names."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def key(self):
        """The argument a write's idempotency key is derived from: its id."""
        return self.fields[0].name


def make_tools(n):
    """The N tools every form declares, deterministic in N: two or three arguments each, a few
    writes keyed on their id, most reads behind a permission."""
    tools = []
    seen = set()
    for i in range(n):
        noun, prefix = NOUNS[i % len(NOUNS)]
        write = i % 6 == 5
        templates = WRITE_TOOLS if write else READ_TOOLS
        # Writes take the next verb each time; reads shift theirs on each round over the nouns,
        # so names rarely repeat.
        turn = i // 6 if write else i + 2 * (i // len(NOUNS))
        name, doc = templates[turn % len(templates)]
        name = base = name.format(noun=noun)
        suffix = 2
        while name in seen:
            name = f"{base}_{suffix}"
            suffix += 1
        seen.add(name)
        if write:
            permission = f"{noun}s:write"
        elif i % 4 == 3:
            permission = None
        else:
            permission = f"{noun}s:read"
        fields = [Field(f"{noun}_id", "String", f"The {noun}'s id, such as `{prefix}-{1001 + i}`.")]
        for j in range(1 if i % 3 == 0 else 2):
            ty, fname, fdoc = EXTRA_FIELDS[(3 * i + 5 * j + i // 8) % len(EXTRA_FIELDS)]
            fields.append(Field(fname, ty, fdoc))
        tools.append(ToolSpec(name, doc.format(noun=noun), noun, write, permission, fields))
    return tools


def edit_target(tools):
    """The tool whose body the incremental step edits: the one in the middle of the file."""
    return tools[len(tools) // 2].name


# ---------------------------------------------------------------------------------------------
# Rendering the forms


def doc_line(text, indent):
    """A `///` doc comment at the given indent."""
    return f"{indent}/// {text}\n"


def render_body(tool, indent, wrap=""):
    """The tool's body, the same in every form: its output built from its arguments, with a
    string literal the incremental step rewrites (`"<name> rev N"`); `wrap` names a wrapper of
    the output (rmcp's `Json`)."""
    first = tool.fields[0].name
    rest = " ".join(f"{f.name}={{{f.name}:?}}" for f in tool.fields[1:])
    open_, close = (f"{wrap}(", ")") if wrap else ("", "")
    return (
        f"{indent}Ok({open_}{tool.camel}Out {{\n"
        f"{indent}    {first},\n"
        f'{indent}    summary: format!("{rest}"),\n'
        f'{indent}    label: "{tool.name} rev 0".to_string(),\n'
        f"{indent}}}{close})\n"
    )


def render_out_struct(tool, derives):
    """The tool's output struct."""
    first = tool.fields[0].name
    return (
        f"/// What `{tool.name}` answers.\n"
        f"#[derive({derives})]\n"
        f"struct {tool.camel}Out {{\n"
        f"    /// The {tool.noun}'s id.\n"
        f"    {first}: String,\n"
        f"    /// The arguments it was asked with.\n"
        f"    summary: String,\n"
        f"    /// Which revision of the tool answered.\n"
        f"    label: String,\n"
        f"}}\n"
    )


def render_args_struct(tool):
    """The tool's argument struct of the `args`, `rmcp` and `control` forms."""
    out = (
        f"/// The arguments of `{tool.name}`.\n"
        f"#[derive(serde::Deserialize, schemars::JsonSchema)]\n"
        f"struct {tool.camel}Args {{\n"
    )
    for f in tool.fields:
        out += doc_line(f.doc, "    ") + f"    {f.name}: {f.ty},\n"
    return out + "}\n"


def destructure(tool, indent):
    """`let FooArgs { a, b } = p;`: the struct forms' first line, so the bodies match."""
    names = ", ".join(f.name for f in tool.fields)
    return f"{indent}let {tool.camel}Args {{ {names} }} = p;\n"


def signature(name, param, result):
    """`async fn name(param) -> Result<result> {` on one line, or broken as rustfmt breaks it
    when longer than 100 characters."""
    line = f"async fn {name}({param}) -> Result<{result}> {{\n"
    if len(line) <= 101:
        return line
    return f"async fn {name}(\n    {param},\n) -> Result<{result}> {{\n"


def toolgate_attr(tool):
    """The `#[tool(...)]` line of the toolgate forms."""
    keys = []
    if tool.write:
        keys.append('side_effect = "write"')
    if tool.permission:
        keys.append(f'permission = "{tool.permission}"')
    if tool.write:
        keys.append(f"key = [{tool.key}]")
    return f"#[tool({', '.join(keys)})]\n" if keys else "#[tool]\n"


def laid_out(tools, types, tool_fn, grouped):
    """Each tool's types (`types(tool)`) and its fn (`tool_fn(tool)`): every type first, then every
    fn, when `grouped` (the layout rmcp's form cannot avoid); else each tool's types beside it."""
    if grouped:
        return "".join(types(t) for t in tools) + "".join(tool_fn(t) for t in tools)
    return "".join(types(t) + tool_fn(t) for t in tools)


def render_plain(tools, grouped):
    """The `plain` form: toolgate's `#[tool]` with plain, documented parameters."""
    out = (
        "//! Generated by scripts/compile-time/measure.py: toolgate's `#[tool]`, plain parameters.\n\n"
        "use toolgate::prelude::*;\n\n"
    )
    return out + laid_out(tools, plain_types, plain_fn, grouped) + render_registry(tools)


def plain_types(tool):
    """The `plain` form's types of one tool: its output."""
    return render_out_struct(tool, "serde::Serialize") + "\n"


def plain_fn(tool):
    """The `plain` form's fn of one tool."""
    out = doc_line(tool.doc, "") + toolgate_attr(tool)
    out += f"async fn {tool.name}(\n"
    for f in tool.fields:
        out += doc_line(f.doc, "    ") + f"    {f.name}: {f.ty},\n"
    out += f") -> Result<{tool.camel}Out, ToolError> {{\n"
    return out + render_body(tool, "    ") + "}\n\n"


def render_args(tools, grouped):
    """The `args` form: toolgate's `#[tool]` with one `Args(p): Args<FooArgs>` parameter."""
    out = (
        "//! Generated by scripts/compile-time/measure.py: toolgate's `#[tool]`, `Args<T>`.\n\n"
        "use toolgate::prelude::*;\n\n"
    )
    return out + laid_out(tools, struct_types, args_fn, grouped) + render_registry(tools)


def struct_types(tool):
    """The types of one tool in the forms that take an arguments struct: it and the output."""
    return render_args_struct(tool) + "\n" + render_out_struct(tool, "serde::Serialize") + "\n"


def args_fn(tool):
    """The `args` form's fn of one tool."""
    out = doc_line(tool.doc, "") + toolgate_attr(tool)
    out += signature(tool.name, f"Args(p): Args<{tool.camel}Args>", f"{tool.camel}Out, ToolError")
    return out + destructure(tool, "    ") + render_body(tool, "    ") + "}\n\n"


def render_registry(tools):
    """The toolgate forms' one public item: a registry holding every tool."""
    out = "/// Every tool of this crate, registered.\npub fn registry() -> Registry {\n"
    out += "    let mut registry = Registry::new();\n"
    for tool in tools:
        out += f'    registry.register::<{tool.name}>().expect("{tool.name} registers");\n'
    return out + "    registry\n}\n"


def render_rmcp(tools, grouped):
    """The `rmcp` form: rmcp's `#[tool]` in a `#[tool_router]` impl with `Parameters<FooArgs>`,
    the `#[tool_handler]` server, and `Json<FooOut>` answers (structured content, which needs
    the output's `JsonSchema`). Grouped whatever the layout: the methods share one impl."""
    del grouped
    out = (
        "//! Generated by scripts/compile-time/measure.py: rmcp's `#[tool]` and `#[tool_router]`.\n\n"
        "use rmcp::handler::server::wrapper::Parameters;\n"
        "use rmcp::{ErrorData, Json, ServerHandler, tool, tool_handler, tool_router};\n\n"
    )
    for tool in tools:
        out += render_args_struct(tool) + "\n"
        out += render_out_struct(tool, "serde::Serialize, schemars::JsonSchema") + "\n"
    out += (
        "/// The MCP server serving every tool of this crate.\n"
        "#[derive(Debug, Clone, Default)]\n"
        "pub struct Tools;\n\n"
        "#[tool_router]\n"
        "impl Tools {\n"
    )
    for tool in tools:
        if tool.write:
            hints = "read_only_hint = false, destructive_hint = false, idempotent_hint = true"
        else:
            hints = "read_only_hint = true"
        out += doc_line(tool.doc, "    ") + f"    #[tool(annotations({hints}))]\n"
        out += (
            f"    async fn {tool.name}(\n"
            f"        &self,\n"
            f"        Parameters(p): Parameters<{tool.camel}Args>,\n"
            f"    ) -> Result<Json<{tool.camel}Out>, ErrorData> {{\n"
        )
        out += destructure(tool, "        ") + render_body(tool, "        ", "Json") + "    }\n\n"
    out = out.rstrip("\n") + "\n}\n\n"
    return out + "#[tool_handler]\nimpl ServerHandler for Tools {}\n"


def render_control(tools, grouped):
    """The `control` form: the same structs and derives, the same fns, and one `match name` that
    deserializes the arguments and calls the fn: no framework."""
    out = (
        "//! Generated by scripts/compile-time/measure.py: the hand-dispatched control.\n\n"
        "use serde_json::Value;\n\n"
    )
    out += laid_out(tools, struct_types, control_fn, grouped)
    out += (
        "/// Runs the tool called `name` on its JSON arguments and answers its output as JSON.\n"
        "pub async fn dispatch(name: &str, args: Value) -> Result<Value, String> {\n"
        "    match name {\n"
    )
    for tool in tools:
        out += (
            f'        "{tool.name}" => {{\n'
            f"            let p = serde_json::from_value(args).map_err(|e| e.to_string())?;\n"
            f"            let out = {tool.name}(p).await?;\n"
            f"            serde_json::to_value(out).map_err(|e| e.to_string())\n"
            f"        }}\n"
        )
    return out + '        _ => Err(format!("there is no tool {name}")),\n    }\n}\n'


def control_fn(tool):
    """The `control` form's fn of one tool."""
    out = doc_line(tool.doc, "")
    out += signature(tool.name, f"p: {tool.camel}Args", f"{tool.camel}Out, String")
    return out + destructure(tool, "    ") + render_body(tool, "    ") + "}\n\n"


RENDERERS = {
    "plain": render_plain,
    "args": render_args,
    "rmcp": render_rmcp,
    "control": render_control,
}


def crate_name(form):
    """The package name of a form's crate."""
    return f"ct-{form}"


def lock_versions(lock, names):
    """The version of each named package in a Cargo.lock (the highest, if it holds several)."""
    versions = {}
    for block in lock.read_text().split("[[package]]"):
        name = re.search(r'^name = "([^"]+)"', block, re.M)
        version = re.search(r'^version = "([^"]+)"', block, re.M)
        if name and version and name.group(1) in names:
            seen = versions.get(name.group(1))
            new = version.group(1)
            if seen is None or version_key(new) > version_key(seen):
                versions[name.group(1)] = new
    missing = [n for n in names if n not in versions]
    if missing:
        fail(f"{lock} holds no {', '.join(missing)}")
    return versions


def version_key(version):
    """A sortable key of a semver version's numeric part."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0]))


def render_manifest(form, versions):
    """A form's Cargo.toml: its own workspace, toolgate by path, the rest from crates.io."""
    out = (
        f'[package]\nname = "{crate_name(form)}"\nversion = "0.0.0"\nedition = "2024"\n'
        "publish = false\n\n[dependencies]\n"
    )
    if form in ("plain", "args"):
        out += f"toolgate = {{ path = {json.dumps(str(ROOT))} }}\n"
    for dep in FORM_DEPENDENCIES[form]:
        out += f"{dep} = {DEPENDENCIES[dep].format(v=versions[dep])}\n"
    return out + "\n# Its own workspace, apart from toolgate's.\n[workspace]\n"


def generate(scratch, forms, n, keep, layout):
    """Writes each form's crate under `scratch` (unless `keep` and it is there), and answers the
    name of the tool the incremental step edits, per form."""
    versions = lock_versions(ROOT / "Cargo.lock", list(DEPENDENCIES))
    tools = make_tools(n)
    targets = {}
    for form in forms:
        crate = scratch / form
        meta = crate / "generated.json"
        if keep and meta.exists():
            recorded = json.loads(meta.read_text())
            if recorded["tools"] != n or recorded.get("layout", "interleaved") != layout:
                kept = f"{recorded['tools']} tools, {recorded.get('layout', 'interleaved')}"
                progress(f"{form}: kept as generated ({kept}; asked {n}, {layout}): --keep")
            targets[form] = recorded["edit"]
            continue
        if crate.exists():
            shutil.rmtree(crate)
        (crate / "src").mkdir(parents=True)
        (crate / "Cargo.toml").write_text(render_manifest(form, versions))
        (crate / "src" / "lib.rs").write_text(RENDERERS[form](tools, layout == "grouped"))
        # The repository's lock, so the dependencies are the versions it tested; cargo adds
        # what it lacks (rmcp-macros, say) and drops what this crate does not use.
        shutil.copy(ROOT / "Cargo.lock", crate / "Cargo.lock")
        toolchain = ROOT / "rust-toolchain.toml"
        if toolchain.exists():
            shutil.copy(toolchain, crate / "rust-toolchain.toml")
        meta.write_text(
            json.dumps({"tools": n, "layout": layout, "edit": edit_target(tools)}) + "\n"
        )
        targets[form] = edit_target(tools)
    progress(f"crates in {scratch}: {', '.join(crate_name(f) for f in forms)}")
    return targets


def edit_body(crate, tool, revision):
    """Rewrites the string literal `"<tool> rev N"` in one tool's body to revision `revision`,
    always changing its length (a `+` comes and goes), as typing does: every item after it in
    the file moves, which costs rustc's incremental compilation about as much again as an edit
    that moves nothing."""
    lib = crate / "src" / "lib.rs"
    text = lib.read_text()
    found = re.findall(rf'"{re.escape(tool)} rev \d+\+?"', text)
    if len(found) != 1:
        fail(f"{lib}: the literal {tool} rev N of the edited tool is not there once")
    new = f'"{tool} rev {revision}"'
    if len(new) == len(found[0]):
        new = f'"{tool} rev {revision}+"'
    lib.write_text(text.replace(found[0], new))


# ---------------------------------------------------------------------------------------------
# Running cargo


@dataclass
class Run:
    """One cargo command's cost: CPU seconds (user + sys, its children included), wall seconds,
    and the crates it compiled or checked."""

    cpu: float
    wall: float
    compiled: list


# The dev profile as cargo has it with no configuration. The scratch crates sit under the
# repository, so its `.cargo/config.toml` (line tables only, none for dependencies) would
# otherwise reach them; a user's fresh crate has cargo's defaults, and so do the forms.
DEFAULT_DEV_PROFILE = (
    "--config=profile.dev.debug=true",
    '--config=profile.dev.package."*".debug=true',
)


class Cargo:
    """Runs cargo in the forms' crates with the shared target directory, appending its output to
    the log, and measures each command with `os.wait4`."""

    def __init__(self, scratch, target_dir):
        self.scratch = scratch
        self.target_dir = target_dir
        self.log = scratch / "cargo.log"
        self.env = dict(os.environ, CARGO_TERM_COLOR="never", CARGO_TARGET_DIR=str(target_dir))
        # The dev profile as a fresh checkout has it: no flags, wrapper or profile overrides
        # from the environment (a compiler cache would measure its hits).
        for var in list(self.env):
            if var.startswith(("CARGO_PROFILE_", "CARGO_BUILD_")) or var in (
                "CARGO_INCREMENTAL",
                "CARGO_ENCODED_RUSTFLAGS",
                "RUSTFLAGS",
                "RUSTC_WRAPPER",
                "RUSTC_WORKSPACE_WRAPPER",
            ):
                del self.env[var]

    def run(self, form, *args):
        """Runs `cargo ARGS` in a form's crate and answers its `Run`; on failure prints the tail
        of the log and exits."""
        cmd = ["cargo", *DEFAULT_DEV_PROFILE, *args]
        with tempfile.TemporaryFile("w+") as out:
            start = time.monotonic()
            proc = subprocess.Popen(
                cmd,
                cwd=self.scratch / form,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            # wait4 answers the usage of the child and of every descendant it waited for:
            # cargo waits for each rustc, build script and linker it starts.
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.monotonic() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            text = out.read()
        with self.log.open("a") as log:
            log.write(f"\n$ (cd {self.scratch / form} && {' '.join(cmd)})\n{text}")
            log.write(f"# exit {proc.returncode}, {usage.ru_utime + usage.ru_stime:.2f} s CPU\n")
        if proc.returncode != 0:
            self.fail(f"`{' '.join(cmd)}` failed in the {form} form (exit {proc.returncode})", text)
        if re.search(rf"^warning: `{crate_name(form)}` \(lib\) generated", text, re.M):
            self.fail(f"the {form} form compiles with warnings, and must not", text)
        compiled = re.findall(r"^\s+(?:Compiling|Checking) (\S+) v", text, re.M)
        return Run(usage.ru_utime + usage.ru_stime, wall, compiled)

    def fail(self, message, text):
        """Stops with a message and the end of cargo's output."""
        tail = "\n".join(text.rstrip().splitlines()[-40:])
        fail(f"{message}; the end of cargo's output (all of it is in {self.log}):\n{tail}")


def measure(cargo, form, step, revisions, edit):
    """One measurement of one step on one form; repeated (up to three times) when cargo had to
    compile something other than the form's crate, as when toolgate's sources changed under us.
    `revisions` gives the incremental step a new literal each time."""
    crate = crate_name(form)
    for _ in range(3):
        if step == "incremental":
            edit_body(cargo.scratch / form, edit, next(revisions))
            run = cargo.run(form, "build")
        else:
            cargo.run(form, "clean", "-p", crate)
            run = cargo.run(form, "check" if step == "clean check" else "build")
        others = [c for c in run.compiled if c != crate]
        if crate not in run.compiled:
            fail(f"{step} of the {form} form did not compile {crate}: see {cargo.log}")
        if not others:
            return run
        progress(f"  {form}: also compiled {', '.join(others)} (a dependency changed); again")
    fail(f"the dependencies of the {form} form keep changing (toolgate being edited?)")


def warm_up(cargo, forms):
    """Builds and checks every form once, not measured, so the dependencies are built."""
    progress("warm-up, not measured (the first time, it builds the dependencies: minutes)")
    for form in forms:
        for cmd in ("build", "check"):
            run = cargo.run(form, cmd)
            progress(f"  cargo {cmd:<5} {form:<7} {run.cpu:7.2f} s CPU {run.wall:7.2f} s wall")


def rotated(forms, k):
    """The forms in the k-th rotation, so no form is always measured first or last."""
    k %= len(forms)
    return forms[k:] + forms[:k]


def run_passes(cargo, forms, passes, targets):
    """Every measurement: results[pass][step][form] is a `Run`."""
    results = []
    # From the clock, so a literal is never one an earlier run (kept with --keep) left.
    revisions = itertools.count(time.time_ns() // 1000)
    for p in range(passes):
        by_step = {}
        for s, step in enumerate(STEPS):
            by_step[step] = {}
            for form in rotated(forms, p * len(STEPS) + s):
                run = measure(cargo, form, step, revisions, targets[form])
                by_step[step][form] = run
                progress(
                    f"[pass {p + 1}/{passes}] {step:<11} {form:<7} "
                    f"{run.cpu:7.2f} s CPU {run.wall:7.2f} s wall"
                )
        results.append(by_step)
    return results


def count_ir(cargo, forms):
    """Lines of LLVM IR of each form's own crate in the dev profile (one codegen unit, so one
    `.ll` file without repeated declarations), and the functions it defines. The files are kept
    in the scratch directory's `ir/`."""
    counts = {}
    deps = cargo.target_dir / "debug" / "deps"
    kept = cargo.scratch / "ir"
    kept.mkdir(exist_ok=True)
    for form in forms:
        stem = crate_name(form).replace("-", "_")
        for old in deps.glob(f"{stem}-*.ll"):
            old.unlink()
        progress(f"IR: cargo rustc of {form}")
        cargo.run(form, "rustc", "--lib", "--", "--emit=llvm-ir,link", "-C", "codegen-units=1")
        files = sorted(deps.glob(f"{stem}-*.ll"))
        if not files:
            fail(f"no {stem}-*.ll in {deps} after cargo rustc --emit=llvm-ir")
        lines = defines = 0
        for ll in files:
            with ll.open() as f:
                for line in f:
                    lines += 1
                    defines += line.startswith("define ")
        counts[form] = (lines, defines)
        for ll in files:
            shutil.move(ll, kept / f"{form}.ll" if len(files) == 1 else kept / ll.name)
        # The next build would otherwise reuse this one-unit build's artifacts.
        cargo.run(form, "clean", "-p", crate_name(form))
    return counts


# ---------------------------------------------------------------------------------------------
# The report


def cell(values, unit=" s", digits=2):
    """`mean (min–max)` of some values, or the value alone when there is one."""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}{unit}"
    return f"{mean:.{digits}f}{unit} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def report(results, forms, args, ir, source_lines):
    """The Markdown report: the settings, a table per pass, the summary and the ratios."""
    out = ["# Compile time of `#[tool]`: toolgate, rmcp and a hand-written control", ""]
    rustc = subprocess.run(
        ["rustc", "--version"], cwd=args.scratch / forms[0], capture_output=True, text=True
    ).stdout.strip()
    out.append(
        f"{args.tools} tools a crate, {args.passes} pass(es), {args.layout} layout, "
        f"dev profile, {rustc}, "
        f"{os.cpu_count()} CPUs ({platform.machine()}), "
        f"{datetime.date.today().isoformat()}. CPU seconds are user + sys of cargo and every "
        "process it ran; in the tables of the passes, wall seconds in brackets."
    )
    out.append("")
    out.append("| form | lines of lib.rs |\n|---|---:|")
    out += [f"| {form} | {source_lines[form]} |" for form in forms]
    for p, by_step in enumerate(results):
        out += ["", f"## Pass {p + 1}", ""]
        out.append("| form | " + " | ".join(STEPS) + " |")
        out.append("|---|" + "---:|" * len(STEPS))
        for form in forms:
            cells = [f"{by_step[s][form].cpu:.2f} s ({by_step[s][form].wall:.2f} s)" for s in STEPS]
            out.append(f"| {form} | " + " | ".join(cells) + " |")
    out += ["", "## Summary", ""]
    out.append("CPU seconds, mean (min–max) over the passes.")
    out.append("")
    out.append("| form | " + " | ".join(STEPS) + " |")
    out.append("|---|" + "---:|" * len(STEPS))
    for form in forms:
        cells = [cell([r[s][form].cpu for r in results]) for s in STEPS]
        out.append(f"| {form} | " + " | ".join(cells) + " |")
    if BASELINE in forms and len(forms) > 1:
        out += ["", f"Ratios to {BASELINE}, per pass: mean (min–max).", ""]
        out.append("| ratio | " + " | ".join(STEPS) + " |")
        out.append("|---|" + "---:|" * len(STEPS))
        for form in forms:
            if form == BASELINE:
                continue
            cells = [
                cell([r[s][form].cpu / r[s][BASELINE].cpu for r in results], unit="×")
                for s in STEPS
            ]
            out.append(f"| {form} ÷ {BASELINE} | " + " | ".join(cells) + " |")
    else:
        out += ["", f"(No ratios: the {BASELINE} form was not measured.)"]
    if ir:
        out += ["", "## LLVM IR", ""]
        out.append("Of each form's own crate, dev profile, one codegen unit.")
        out.append("")
        out.append("| form | lines | functions defined |")
        out.append("|---|---:|---:|")
        out += [f"| {form} | {ir[form][0]} | {ir[form][1]} |" for form in forms]
    return "\n".join(out) + "\n"


def progress(message):
    """A line of progress, on stderr."""
    print(message, file=sys.stderr, flush=True)


def fail(message):
    """Stops with a message and a non-zero exit."""
    print(f"measure.py: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def parse_args(argv):
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--forms", default=",".join(FORMS), help="the forms to measure, comma-separated"
    )
    parser.add_argument("--tools", type=int, default=50, metavar="N", help="tools a crate (50)")
    parser.add_argument("--passes", type=int, default=2, metavar="P", help="passes (2)")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=ROOT / "target" / "compile-time",
        metavar="DIR",
        help="where the crates and cargo.log go (target/compile-time/)",
    )
    parser.add_argument(
        "--target-dir",
        type=Path,
        metavar="DIR",
        help="the target directory the forms share (default: DIR/target of --scratch)",
    )
    parser.add_argument(
        "--layout",
        choices=["interleaved", "grouped"],
        default="interleaved",
        help="each tool's types beside its fn (interleaved), or every type first (grouped)",
    )
    parser.add_argument("--ir", action="store_true", help="also count each crate's LLVM IR")
    parser.add_argument(
        "--keep", action="store_true", help="reuse the generated crates if present"
    )
    args = parser.parse_args(argv)
    args.forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    unknown = [f for f in args.forms if f not in FORMS]
    if unknown or not args.forms:
        parser.error(f"--forms takes some of {','.join(FORMS)}, not {','.join(unknown)}")
    if len(set(args.forms)) != len(args.forms):
        parser.error("--forms names a form twice")
    if args.tools < 1 or args.passes < 1:
        parser.error("--tools and --passes take a number from 1")
    args.scratch = args.scratch.resolve()
    args.target_dir = (args.target_dir or args.scratch / "target").resolve()
    return args


def main(argv):
    """Generates, warms up, measures and reports."""
    args = parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    targets = generate(args.scratch, args.forms, args.tools, args.keep, args.layout)
    cargo = Cargo(args.scratch, args.target_dir)
    cargo.log.write_text(f"# measure.py {' '.join(argv)}\n")
    progress(f"cargo's output: {cargo.log}; target directory: {args.target_dir}")
    warm_up(cargo, args.forms)
    results = run_passes(cargo, args.forms, args.passes, targets)
    ir = count_ir(cargo, args.forms) if args.ir else None
    source_lines = {
        form: len((args.scratch / form / "src" / "lib.rs").read_text().splitlines())
        for form in args.forms
    }
    print(report(results, args.forms, args, ir, source_lines), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
