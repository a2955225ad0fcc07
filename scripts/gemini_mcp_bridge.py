#!/usr/bin/env python3
"""Checks that google-genai's MCP bridge can read the demo shop's tools.

google-genai turns an MCP server's tools into Gemini function declarations
(`google.genai._mcp_utils.mcp_to_gemini_tools`, what `generate_content` does with an MCP
session in `tools`). It fails on `additionalProperties: false`, which every toolgate schema
holds; `mcp_server --no-additional-properties` serves the schemas without it (validation is
unchanged). This script starts the example over stdio with the official `mcp` client, lists the
tools, converts them with the bridge, and calls a tool with an argument it does not take (still
refused). No Gemini request is made.

    python3 -m venv /tmp/gvenv && /tmp/gvenv/bin/pip install google-genai mcp
    cargo build -p toolgate-demo --example mcp_server
    /tmp/gvenv/bin/python scripts/gemini_mcp_bridge.py target/debug/examples/mcp_server

Exit status 0 when the bridge reads every tool with the option and the refusal holds; with
`--expect-failure-without-option` it also checks that the bridge fails on the default schemas.
"""

import asyncio
import json
import sys
import tempfile

from google.genai import _mcp_utils
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def tools_of(server: str, db: str, flags: list[str]):
    params = StdioServerParameters(command=server, args=["--db", db, *flags])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            extra = await session.call_tool(
                "get_order", {"order_id": "ORD-1001", "note": "unknown"}
            )
            return listed.tools, extra


def convert(tools):
    try:
        declarations = _mcp_utils.mcp_to_gemini_tools(tools)
        return declarations, None
    except Exception as err:  # the bridge's own failure, reported as it is
        return None, err


async def main() -> int:
    args = sys.argv[1:]
    expect_failure = "--expect-failure-without-option" in args
    args = [a for a in args if a != "--expect-failure-without-option"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    server = args[0]
    with tempfile.TemporaryDirectory() as dir:
        tools, extra = await tools_of(server, f"{dir}/shop.db", ["--no-additional-properties"])
        declarations, err = convert(tools)
        if err is not None:
            print(f"the bridge failed on the option's schemas: {err!r}", file=sys.stderr)
            return 1
        names = [d.name for tool in declarations for d in tool.function_declarations]
        print(f"the bridge read {len(names)} tools: {', '.join(names)}")
        answer = json.loads(extra.content[0].text)
        if answer.get("error", {}).get("kind") != "invalid_arguments":
            print(f"an unknown argument was not refused: {answer}", file=sys.stderr)
            return 1
        print(f"an unknown argument is still refused: {answer['error']['what']}")
        if expect_failure:
            tools, _ = await tools_of(server, f"{dir}/shop2.db", [])
            _, err = convert(tools)
            if err is None:
                print("the bridge read the default schemas too: the option may go", file=sys.stderr)
                return 1
            print(f"without the option the bridge fails as reported: {err!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
