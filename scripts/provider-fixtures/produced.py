"""What the official client libraries produce: model turns holding tool calls.

Each case is a response as the provider's API sends it (written here as the API documents it),
turned into the library's own response types, then serialised the ways applications do it before
handing the turn to toolgate. The calls each case must parse to are read from the library's typed
objects, not from the dumps, so a dump that toolgate misreads cannot also be the expectation.

Runs inside the virtual environment record.py builds; record.py calls `record()`.
"""

import json

# The calls of the cases, as the model would send their arguments.
FIND_PAID = {"customer_id": "CUS-7", "status": "paid"}
FIND_ALL = {"customer_id": "CUS-7", "status": None, "limit": 5}
SHIP = {
    "order_id": "ORD-1001",
    "reason": "damaged",
    "quantity": 2,
    "weight_grams": 1200,
    "adjustment_cents": -250,
    "address": {"street": "1 Main St", "city": "Springfield", "postal_code": None},
    "gift_note": None,
}
TAG = {"order_id": "ORD-1003", "tags": {"priority": "high", "channel": "email"}}

# The four shapes every provider's cases cover.
CASES = ("one-call", "parallel-calls", "text-and-calls", "no-calls")


def _case(name, expect, dumps):
    """One case: its name, the calls it must parse to, and the library's dumps of it."""
    return {"case": name, "expect": expect, "dumps": dumps}


def _call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


# OpenAI ---------------------------------------------------------------------------------------


def _chat_completion(message, finish_reason):
    return {
        "id": "chatcmpl-fixture",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-5-mini-2025-08-07",
        "choices": [
            {"index": 0, "finish_reason": finish_reason, "logprobs": None, "message": message}
        ],
        "usage": {"prompt_tokens": 412, "completion_tokens": 58, "total_tokens": 470},
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _chat_tool_call(call_id, name, arguments):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, separators=(",", ":"))},
    }


def _chat_message(content, calls):
    message = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = [_chat_tool_call(*call) for call in calls]
    return message


CHAT_TURNS = {
    "one-call": (None, [("call_Fq1", "find_orders", FIND_PAID)]),
    "parallel-calls": (
        None,
        [
            ("call_Fq1", "find_orders", FIND_ALL),
            ("call_Sh2", "ship_replacement", SHIP),
            ("call_Tg3", "tag_order", TAG),
        ],
    ),
    "text-and-calls": (
        "Let me look that order up first.",
        [("call_Fq1", "find_orders", FIND_PAID)],
    ),
    "no-calls": ("Your replacement is on its way.", []),
}


def openai_chat():
    """Chat Completions: the assistant message of each case, dumped as applications do."""
    from openai.types.chat import ChatCompletion

    cases = []
    for name in CASES:
        content, calls = CHAT_TURNS[name]
        completion = ChatCompletion.model_validate(
            _chat_completion(_chat_message(content, calls), "tool_calls" if calls else "stop")
        )
        message = completion.choices[0].message
        expect = [
            _call(call.id, call.function.name, json.loads(call.function.arguments))
            for call in message.tool_calls or []
        ]
        dumps = {
            "message.model_dump()": message.model_dump(),
            "message.model_dump(exclude_none=True)": message.model_dump(exclude_none=True),
            "completion.model_dump()": completion.model_dump(),
        }
        cases.append(_case(name, expect, dumps))
    return cases


def _responses_response(output):
    return {
        "id": "resp_fixture",
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _responses_call(item_id, call_id, name, arguments):
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments, separators=(",", ":")),
        "status": "completed",
    }


def _responses_text(text):
    return {
        "type": "message",
        "id": "msg_fixture",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


REASONING = {"type": "reasoning", "id": "rs_fixture", "summary": []}

RESPONSES_OUTPUTS = {
    "one-call": [_responses_call("fc_1", "call_Fq1", "find_orders", FIND_PAID)],
    "parallel-calls": [
        REASONING,
        _responses_call("fc_1", "call_Fq1", "find_orders", FIND_ALL),
        _responses_call("fc_2", "call_Sh2", "ship_replacement", SHIP),
        _responses_call("fc_3", "call_Tg3", "tag_order", TAG),
    ],
    "text-and-calls": [
        _responses_text("Let me look that order up first."),
        _responses_call("fc_1", "call_Fq1", "find_orders", FIND_PAID),
    ],
    "no-calls": [REASONING, _responses_text("Your replacement is on its way.")],
}


def openai_responses():
    """The Responses API: the output items of each case, dumped as applications do."""
    from openai.types.responses import Response

    cases = []
    for name in CASES:
        response = Response.model_validate(_responses_response(RESPONSES_OUTPUTS[name]))
        expect = [
            _call(item.call_id, item.name, json.loads(item.arguments))
            for item in response.output
            if item.type == "function_call"
        ]
        dumps = {
            "[item.model_dump() for item in response.output]": [
                item.model_dump() for item in response.output
            ],
            "[item.model_dump(exclude_none=True) for item in response.output]": [
                item.model_dump(exclude_none=True) for item in response.output
            ],
        }
        cases.append(_case(name, expect, dumps))
    return cases


# Anthropic ------------------------------------------------------------------------------------


def _anthropic_message(content, stop_reason):
    return {
        "id": "msg_fixture",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 512, "output_tokens": 64},
    }


def _tool_use(block_id, name, arguments):
    return {"type": "tool_use", "id": block_id, "name": name, "input": arguments}


def _text(text):
    return {"type": "text", "text": text}


THINKING = {
    "type": "thinking",
    "thinking": "The customer wants the order checked before a replacement ships.",
    "signature": "EqQBCkYIBxgCKkA0fixture",
}

ANTHROPIC_CONTENT = {
    "one-call": [_tool_use("toolu_01Fq", "find_orders", FIND_PAID)],
    "parallel-calls": [
        _tool_use("toolu_01Fq", "find_orders", FIND_ALL),
        _tool_use("toolu_02Sh", "ship_replacement", SHIP),
        _tool_use("toolu_03Tg", "tag_order", TAG),
    ],
    "text-and-calls": [
        THINKING,
        _text("Let me look that order up first."),
        _tool_use("toolu_01Fq", "find_orders", FIND_PAID),
    ],
    "no-calls": [_text("Your replacement is on its way.")],
}


def anthropic():
    """Messages: the response of each case, and its content blocks, dumped as applications do."""
    from anthropic.types import Message

    cases = []
    for name in CASES:
        content = ANTHROPIC_CONTENT[name]
        has_calls = any(block["type"] == "tool_use" for block in content)
        message = Message.model_validate(
            _anthropic_message(content, "tool_use" if has_calls else "end_turn")
        )
        expect = [
            _call(block.id, block.name, block.input)
            for block in message.content
            if block.type == "tool_use"
        ]
        dumps = {
            "message.model_dump()": message.model_dump(),
            "message.model_dump(exclude_none=True)": message.model_dump(exclude_none=True),
            '{"role": "assistant", "content": [block.model_dump() for block in message.content]}': {
                "role": "assistant",
                "content": [block.model_dump() for block in message.content],
            },
        }
        cases.append(_case(name, expect, dumps))
    return cases


# Google ---------------------------------------------------------------------------------------

# Gemini 3 signs the first function call of a turn (base64 in the API's JSON, bytes in the
# library's `Part.thought_signature`).
SIGNATURE = "Q2lRQnl4Rml4dHVyZVNpZ25hdHVyZQ=="


def _function_call(call_id, name, arguments, signed=False):
    call = {"name": name, "args": arguments}
    if call_id is not None:
        call["id"] = call_id
    part = {"functionCall": call}
    if signed:
        part["thoughtSignature"] = SIGNATURE
    return part


def _gemini_response(parts):
    has_calls = any("functionCall" in part for part in parts)
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 380,
            "candidatesTokenCount": 40 if has_calls else 12,
            "totalTokenCount": 420 if has_calls else 392,
        },
        "modelVersion": "gemini-3-pro-preview",
        "responseId": "fixture-response",
    }


GEMINI_PARTS = {
    "one-call": [_function_call("fc_1", "find_orders", FIND_PAID, signed=True)],
    "parallel-calls": [
        _function_call("fc_1", "find_orders", FIND_ALL, signed=True),
        _function_call("fc_2", "ship_replacement", SHIP),
        _function_call("fc_3", "tag_order", TAG),
    ],
    "text-and-calls": [
        {"text": "Let me look that order up first."},
        _function_call("fc_1", "find_orders", FIND_PAID, signed=True),
    ],
    "no-calls": [{"text": "Your replacement is on its way."}],
    # Models before Gemini 3 send calls without ids, and no signatures.
    "calls-without-ids": [
        {"text": "Checking the order and tagging it."},
        _function_call(None, "find_orders", FIND_PAID),
        _function_call(None, "tag_order", TAG),
    ],
}


# The ways applications dump a Content: snake_case (the default) or camelCase (`by_alias`), each
# with nulls for absent fields (the default) or without.
DUMPS = [
    ('mode="json"', {"mode": "json"}),
    ('mode="json", exclude_none=True', {"mode": "json", "exclude_none": True}),
    ('mode="json", by_alias=True', {"mode": "json", "by_alias": True}),
    (
        'mode="json", by_alias=True, exclude_none=True',
        {"mode": "json", "by_alias": True, "exclude_none": True},
    ),
]


def gemini():
    """generateContent: the model content of each case, and the whole response, dumped as
    applications do. `model_dump()` itself holds the signature as bytes, which JSON cannot
    hold: applications write it with `mode="json"` (base64), as recorded here."""
    from google.genai import types

    cases = []
    for name in CASES + ("calls-without-ids",):
        response = types.GenerateContentResponse.model_validate(
            _gemini_response(GEMINI_PARTS[name])
        )
        content = response.candidates[0].content
        # A call without an id is expected with `id: null`: toolgate gives it one of its own.
        expect = [
            _call(part.function_call.id, part.function_call.name, part.function_call.args)
            for part in content.parts
            if part.function_call is not None
        ]
        dumps = {
            f"content.model_dump({options})": content.model_dump(**kwargs)
            for options, kwargs in DUMPS
        }
        whole = 'response.model_dump(mode="json", by_alias=True, exclude_none=True)'
        dumps[whole] = response.model_dump(mode="json", by_alias=True, exclude_none=True)
        cases.append(_case(name, expect, dumps))
    return cases


def record():
    """Every provider's cases, keyed by the toolgate format that reads them."""
    return {
        "openai": {"openai": openai_chat(), "openai-responses": openai_responses()},
        "anthropic": {"anthropic": anthropic()},
        "gemini": {"gemini": gemini()},
    }
