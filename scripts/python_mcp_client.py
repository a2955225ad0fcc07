#!/usr/bin/env python3
"""Drives the demo shop's MCP server over streamable HTTP with the official Python `mcp` client.

In both protocol eras (the initialize handshake, and 2026-07-28's stateless requests), as each
of two tokens: the clerk (every tool) and the reader (`orders:read` only). Checks what a
deployment meets: each session is listed what its token may call; a tool it was not listed is an
unknown tool; a refund asked twice is applied once; a request without a known token is refused
with 401 before any session is made; and the client logs no warning, its session's close
included (it warns on any answer to its DELETE but 200 and 204).

    python3 -m venv /tmp/pyvenv && /tmp/pyvenv/bin/pip install mcp
    cargo build -p toolgate-demo --example mcp_server
    /tmp/pyvenv/bin/python scripts/python_mcp_client.py target/debug/examples/mcp_server

Exit status 0 when every check holds. It is not part of the test command (it needs Python and
the `mcp` package); `examples/tests/demo/mcp_http.rs` holds the same behaviour with rmcp's client.
"""

import asyncio
import json
import logging
import subprocess
import sys
import tempfile

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

TOKENS = [
    "--token", "clerk=acme:clerk:orders:read,refund:create,crm:write",
    "--token", "reader=acme:reader:orders:read",
]


class Warnings(logging.Handler):
    """Every warning or error a logger of the client says."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.said = []

    def emit(self, record):
        self.said.append(f"{record.name}: {record.getMessage()}")


def start(server: str, db: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [server, "--http", "127.0.0.1:0", "--db", db, *TOKENS],
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in process.stderr:
        if line.startswith("mcp_server: listening on "):
            url = line.removeprefix("mcp_server: listening on ").split(";")[0].strip()
            return process, url
    raise RuntimeError("mcp_server never said where it listens")


def client(url: str, token: str | None, mode: str) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def result(answer) -> dict:
    return json.loads(answer.content[0].text)


async def checks(url: str, mode: str, order: str) -> list[str]:
    failed = []
    async with client(url, "reader", mode) as reader:
        names = [tool.name for tool in (await reader.list_tools()).tools]
        if names != ["get_order"]:
            failed.append(f"{mode}: the reader is listed {names}")
        try:
            hidden = await reader.call_tool("issue_refund", {"order_id": order, "amount": 5})
            failed.append(f"{mode}: a tool the reader was not listed answered {hidden}")
        except Exception as err:
            if "Unknown tool: issue_refund" not in str(err):
                failed.append(f"{mode}: a hidden tool is not an unknown tool: {err!r}")
        read = result(await reader.call_tool("get_order", {"order_id": order}))
        if read.get("status") != "succeeded":
            failed.append(f"{mode}: the reader's read after it: {read}")
    async with client(url, "clerk", mode) as clerk:
        names = [tool.name for tool in (await clerk.list_tools()).tools]
        if len(names) != 3:
            failed.append(f"{mode}: the clerk is listed {names}")
        refund = {"order_id": order, "amount": 5}
        first = result(await clerk.call_tool("issue_refund", refund))
        second = result(await clerk.call_tool("issue_refund", refund))
        if (first.get("replayed"), second.get("replayed")) != (False, True):
            failed.append(f"{mode}: a refund asked twice: {first} then {second}")
    try:
        async with client(url, "not-a-token", mode) as stranger:
            await stranger.list_tools()
        failed.append(f"{mode}: a client with an unknown token was served")
    except Exception as err:
        if "401" not in repr(err) and "Refused" not in repr(err):
            failed.append(f"{mode}: an unknown token is refused oddly: {err!r}")
    return failed


async def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    failed = []
    with tempfile.TemporaryDirectory() as dir:
        process, url = start(sys.argv[1], f"{dir}/shop.db")
        try:
            # "auto" probes server/discover and speaks 2026-07-28, stateless.
            for mode, order in [("legacy", "ORD-1003"), ("auto", "ORD-1004")]:
                found = await checks(url, mode, order)
                failed += found
                print(f"{mode}: {'ok' if not found else 'failed'}")
        finally:
            process.terminate()
            process.wait()
    # The stranger's refusal is the one warning the client may log.
    said = [w for w in warnings.said if "401" not in w and "Unauthorized" not in w]
    if said:
        failed.append(f"the client warned: {said}")
    for failure in failed:
        print(failure, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
