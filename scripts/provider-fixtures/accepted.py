"""What the official client libraries accept: toolgate's catalogs and results, validated with the
libraries' own request types.

OpenAI's and Anthropic's request parameters are TypedDicts, which the libraries send without
checking at run time; they are validated here with pydantic in strict mode (no coercion, as a
type checker reads them) and with unknown keys forbidden, so that a key the library's types do
not have is a rejection. Google's request types are pydantic models that forbid unknown keys
themselves; they are validated as the library validates them when a request is built (lax mode).
`strictness_proofs` records, for every type used, one render with an unknown key injected and the
library's rejection of it.

Each render gets a verdict:
- "accepted": the library validated it and its own dump of the result keeps every value sent;
- "changed": validated, but the dump differs from what was sent (`differences`);
- "rejected": the library refused it (`errors`).

Runs inside the virtual environment record.py builds; record.py calls `record(samples)`.
"""

import copy
from typing import List

import pydantic
from pydantic import ConfigDict, TypeAdapter

# The key injected to prove that a type rejects keys it does not have.
UNKNOWN_KEY = "toolgate_unknown_key"
# How many of a rejection's errors are recorded.
MAX_ERRORS = 5


def _pointer(path):
    return "/" + "/".join(str(step).replace("~", "~0").replace("/", "~1") for step in path)


class Rejection(Exception):
    """A library's refusal: its validation errors, each at a path from the render's root."""

    def __init__(self, errors):
        super().__init__(f"{len(errors)} validation error(s)")
        self.errors = errors

    @classmethod
    def of(cls, err, prefix=(), skip=0):
        """The errors of pydantic's `err`, whose paths start after `skip` steps of their own
        (a wrapper the render was validated in), under `prefix` (where a lazily validated
        iterable sits in the render)."""
        return cls(
            [
                {"type": e["type"], "loc": tuple(prefix) + tuple(e["loc"][skip:]), "msg": e["msg"]}
                for e in err.errors(include_url=False, include_input=False)
            ]
        )


def _materialize(value, path=()):
    """The validated value with every lazy iterable read out: pydantic validates an `Iterable`
    field lazily, item by item as it is read, so every item is validated here, and its errors
    placed at their path in the render."""
    if isinstance(value, dict):
        return {key: _materialize(item, path + (key,)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialize(item, path + (index,)) for index, item in enumerate(value)]
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    try:
        items = list(value)
    except pydantic.ValidationError as err:
        raise Rejection.of(err, prefix=path) from err
    return [_materialize(item, path + (index,)) for index, item in enumerate(items)]


def _errors(rejection):
    """The most telling errors of a rejection, first: the injected key's where its object
    otherwise matched (a union reports every member's errors; the member the object is meant
    for has the fewest), then other unknown keys, then the deepest."""
    errors = rejection.errors
    siblings = {}
    for e in errors:
        siblings[e["loc"][:-1]] = siblings.get(e["loc"][:-1], 0) + 1
    ranked = sorted(
        errors,
        key=lambda e: (
            e["loc"][-1:] != (UNKNOWN_KEY,),
            siblings[e["loc"][:-1]],
            e["type"] != "extra_forbidden",
            -len(e["loc"]),
        ),
    )
    return {
        "error_count": len(errors),
        "errors": [
            {"type": e["type"], "at": _pointer(e["loc"]), "msg": e["msg"]}
            for e in ranked[:MAX_ERRORS]
        ],
    }


def _differences(sent, kept, path, case_insensitive_keys):
    """Where `kept` (the library's dump) differs from `sent`, as JSON pointers. Numbers compare
    by value, exactly (1 and 1.0 are the same number; 2**64 - 1 and 1.8446744073709552e19 are
    not); strings under a key in `case_insensitive_keys` compare without case."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        found = []
        for key in sent.keys() | kept.keys():
            step = path + [key]
            if key not in kept:
                found.append({"at": _pointer(step), "sent": sent[key], "kept": "(dropped)"})
            elif key not in sent:
                found.append({"at": _pointer(step), "sent": "(absent)", "kept": kept[key]})
            elif (
                key in case_insensitive_keys
                and isinstance(sent[key], str)
                and isinstance(kept[key], str)
            ):
                if sent[key].lower() != kept[key].lower():
                    found.append({"at": _pointer(step), "sent": sent[key], "kept": kept[key]})
            else:
                found.extend(_differences(sent[key], kept[key], step, case_insensitive_keys))
        return sorted(found, key=lambda d: d["at"])
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        found = []
        for index, (a, b) in enumerate(zip(sent, kept)):
            found.extend(_differences(a, b, path + [index], case_insensitive_keys))
        return found
    numbers = (int, float)
    if isinstance(sent, bool) or isinstance(kept, bool):
        same = sent is kept
    elif isinstance(sent, numbers) and isinstance(kept, numbers):
        same = sent == kept  # Python compares an int and a float exactly
    else:
        same = type(sent) is type(kept) and sent == kept
    return [] if same else [{"at": _pointer(path), "sent": sent, "kept": kept}]


class TypedDictCheck:
    """A TypedDict of the library, validated strictly with unknown keys forbidden. `many` says
    whether a render is a list of them (a catalog, OpenAI's result messages) or one."""

    validation = "pydantic TypeAdapter, strict=True, extra='forbid'"

    def __init__(self, type_name, typed_dict, many):
        self.type_name = type_name
        # The config cannot go on a TypedDict itself; on a list of them it reaches every
        # TypedDict inside that has no config of its own.
        self.adapter = TypeAdapter(List[typed_dict], config=ConfigDict(extra="forbid"))
        self.many = many

    def round_trip(self, render):
        if self.many:
            try:
                return _materialize(self.adapter.validate_python(render, strict=True))
            except pydantic.ValidationError as err:
                raise Rejection.of(err) from err
        try:
            validated = self.adapter.validate_python([render], strict=True)[0]
        except pydantic.ValidationError as err:
            raise Rejection.of(err, skip=1) from err
        return _materialize(validated)

    def differences(self, render, kept):
        return _differences(render, kept, [], set())


class ModelCheck:
    """A pydantic model of the library (which forbids unknown keys itself), validated as the
    library validates a request, and dumped in the API's spelling. `field` names the model's
    field a render fills (a catalog is the `functionDeclarations` of one `Tool`), or None when
    the render is the whole model."""

    validation = (
        "pydantic model_validate (lax, as the library validates requests); "
        "the model forbids unknown keys"
    )

    def __init__(self, type_name, model, field=None):
        self.type_name = type_name
        self.model = model
        self.field = field

    def round_trip(self, render):
        value = render if self.field is None else {self.field: render}
        try:
            model = self.model.model_validate(value)
        except pydantic.ValidationError as err:
            raise Rejection.of(err, skip=0 if self.field is None else 1) from err
        dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped if self.field is None else dumped.get(self.field)

    def differences(self, render, kept):
        # Schema types are an enum the library spells in capitals ("object" is kept as "OBJECT").
        return _differences(render, kept, [], {"type"})


def verdict(check, render):
    """The library's verdict on one render and what backs it (its errors, or the differences),
    then the type and the validation that gave it, the render, and the library's round-trip
    dump of it."""
    about = {"library_type": check.type_name, "validation": check.validation, "render": render}
    try:
        kept = check.round_trip(render)
    except Rejection as rejection:
        return {"verdict": "rejected", **_errors(rejection), **about, "round_trip": None}
    differences = check.differences(render, kept)
    if differences:
        return {"verdict": "changed", "differences": differences, **about, "round_trip": kept}
    return {"verdict": "accepted", **about, "round_trip": kept}


def _inject(render, pointer):
    """A copy of `render` with the unknown key added to the object at `pointer` (a list of
    steps)."""
    render = copy.deepcopy(render)
    target = render
    for step in pointer:
        target = target[step]
    target[UNKNOWN_KEY] = True
    return render


def strictness_proof(check, render, pointer):
    """The library's verdict on `render` with an unknown key injected at `pointer`: it must be
    a rejection naming that key."""
    injected = _inject(render, pointer)
    entry = verdict(check, injected)
    return {
        "library_type": entry["library_type"],
        "injected_at": _pointer(pointer + [UNKNOWN_KEY]),
        **{
            key: entry[key]
            for key in ("verdict", "error_count", "errors", "differences")
            if key in entry
        },
    }


# The providers --------------------------------------------------------------------------------


def _anthropic_strict_stand_in(samples):
    """The strict Anthropic tool shape built from toolgate's openai-strict lowering, for a
    toolgate that has no anthropic-strict format yet: `{"name", "description", "input_schema",
    "strict"}` as Anthropic's strict tool use documents it."""
    return [
        {
            "name": tool["function"]["name"],
            "description": tool["function"]["description"],
            "input_schema": tool["function"]["parameters"],
            "strict": tool["function"]["strict"],
        }
        for tool in samples["catalogs"]["openai-strict"]
    ]


def _provider(samples, catalog_checks, result_checks, proofs, stand_ins=None):
    stand_ins = stand_ins or {}
    catalogs, results = [], []
    for name, check in catalog_checks.items():
        if name in samples["catalogs"]:
            source, render = "toolgate", samples["catalogs"][name]
        elif name in stand_ins:
            source, render = stand_ins[name]
        else:
            raise SystemExit(f"the wire samples have no format {name!r}: {samples['formats']}")
        catalogs.append({"format": name, "render_source": source, **verdict(check, render)})
    for name, check in result_checks.items():
        if name not in samples["results"]:
            continue
        for case, render in samples["results"][name].items():
            entry = {"format": name, "case": case, "render_source": "toolgate"}
            results.append({**entry, **verdict(check, render)})
    strictness = [strictness_proof(check, render, pointer) for check, render, pointer in proofs]
    return {"strictness_proofs": strictness, "catalogs": catalogs, "results": results}


def openai(samples):
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolMessageParam
    from openai.types.responses import FunctionToolParam
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    chat_tool = TypedDictCheck(
        "openai.types.chat.ChatCompletionFunctionToolParam",
        ChatCompletionFunctionToolParam,
        many=True,
    )
    responses_tool = TypedDictCheck(
        "openai.types.responses.FunctionToolParam", FunctionToolParam, many=True
    )
    tool_message = TypedDictCheck(
        "openai.types.chat.ChatCompletionToolMessageParam",
        ChatCompletionToolMessageParam,
        many=True,
    )
    call_output = TypedDictCheck(
        "openai.types.responses.response_input_item_param.FunctionCallOutput",
        FunctionCallOutput,
        many=True,
    )
    catalog = samples["catalogs"]
    results = samples["results"]
    return _provider(
        samples,
        {"openai": chat_tool, "openai-strict": chat_tool, "openai-responses": responses_tool},
        {"openai": tool_message, "openai-strict": tool_message, "openai-responses": call_output},
        [
            (chat_tool, catalog["openai"], [0]),
            (chat_tool, catalog["openai-strict"], [0, "function"]),
            (responses_tool, catalog["openai-responses"], [0]),
            (tool_message, results["openai"]["success"], [0]),
            (call_output, results["openai-responses"]["success"], [0]),
        ],
    )


def anthropic(samples):
    from anthropic.types import MessageParam, ToolParam

    tool = TypedDictCheck("anthropic.types.ToolParam", ToolParam, many=True)
    message = TypedDictCheck("anthropic.types.MessageParam", MessageParam, many=False)
    stand_ins = {}
    if "anthropic-strict" not in samples["catalogs"]:
        stand_ins["anthropic-strict"] = (
            "stand-in: built by record.py from the openai-strict catalog, as toolgate had no "
            "anthropic-strict format when this was recorded",
            _anthropic_strict_stand_in(samples),
        )
    return _provider(
        samples,
        {"anthropic": tool, "anthropic-strict": tool},
        {"anthropic": message, "anthropic-strict": message},
        [
            (tool, samples["catalogs"]["anthropic"], [0]),
            (message, samples["results"]["anthropic"]["success"], []),
            (message, samples["results"]["anthropic"]["success"], ["content", 0]),
        ],
        stand_ins,
    )


def gemini(samples):
    from google.genai import types

    tool = ModelCheck("google.genai.types.Tool", types.Tool, field="functionDeclarations")
    content = ModelCheck("google.genai.types.Content", types.Content)
    return _provider(
        samples,
        {"gemini": tool},
        {"gemini": content},
        [
            (tool, samples["catalogs"]["gemini"], [0]),
            (tool, samples["catalogs"]["gemini"], [0, "parameters"]),
            (content, samples["results"]["gemini"]["success"], ["parts", 0, "functionResponse"]),
        ],
    )


def record(samples):
    """Every provider's verdicts on toolgate's renders in `samples` (what the wire_samples
    example printed)."""
    return {"openai": openai(samples), "anthropic": anthropic(samples), "gemini": gemini(samples)}
