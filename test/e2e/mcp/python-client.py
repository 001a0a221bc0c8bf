"""The official Python MCP SDK as a client of Tether's /mcp (run by python-client.test.ts).

Usage: python-client.py <mcp url> <bearer token> <mode: auto | legacy> <device id> [scenario] [other device id]

Scenarios (the last stdout line is always one JSON object, the outcome):
- basic: the negotiated revision, the tool names, a read tool's result and a mutate tool's structured result.
- approve: a client with an elicitation callback (the SDK then declares URL-mode elicitation) calls
  write_file. Whenever there is a URL for the owner (an elicitation at 2026-07-28; the error -32042 at
  2025-11-25, after which the call is retried; for a client without either, the proposal's link, followed
  with proposal_status), it prints {"url": ...} and waits for a line on stdin: the test has the owner
  decide in Chromium meanwhile.
- grants: tools/list, list_devices and a stat naming another device, for a token limited to chosen devices.
- forged (2026-07-28): write_file retried with a made-up requestState, and with the server's own one altered
  (the first round taken by hand, `allow_input_required=True`): the JSON-RPC error codes.
"""

import asyncio
import json
import sys

import anyio
from mcp import types
from mcp.types import URL_ELICITATION_REQUIRED
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp.shared._httpx_utils import create_mcp_http_client


async def show_to_owner(url: str) -> None:
    """What a client does with an approval URL: shows it to its user and waits until they are done."""
    print(json.dumps({"url": url}), flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)


def outcome(result: types.CallToolResult) -> dict:
    return {"isError": result.is_error, "structured": result.structured_content}


async def basic(client: Client, device: str, _other: str) -> dict:
    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    stat = await client.call_tool("stat", {"device": device, "path": "notes.txt"})
    write = None
    if "write_file" in names:
        write = outcome(await client.call_tool("write_file", {"device": device, "path": "notes.txt", "content": "from python\n"}))
    return {"tools": names, "stat": outcome(stat), "write": write}


elicited: list[str] = []


async def on_elicit(_context, params):
    elicited.append(getattr(params, "mode", None) or "form")
    await show_to_owner(params.url)
    # "I am done": Tether's retry then answers with the owner's decision (an accept approves nothing).
    return types.ElicitResult(action="accept")


async def call_with_url_elicitation(client: Client, name: str, args: dict) -> types.CallToolResult:
    """At 2025-11-25 the URL comes as the error -32042: show it, then retry the same call (at most 3 times)."""
    for _ in range(3):
        try:
            return await client.call_tool(name, args)
        except MCPError as error:
            if error.code != URL_ELICITATION_REQUIRED:
                raise
            for elicitation in UrlElicitationRequiredError.from_error(error.error).elicitations:
                elicited.append("-32042")
                await show_to_owner(elicitation.url)
    return await client.call_tool(name, args)


async def approve(client: Client, device: str, _other: str) -> dict:
    result = await call_with_url_elicitation(client, "write_file", {"device": device, "path": "notes.txt", "content": "approved through python\n"})
    first = outcome(result)
    structured = result.structured_content or {}
    if structured.get("status") == "pending":
        await show_to_owner(structured["approveAt"])
        result = await client.call_tool("proposal_status", {"proposalId": structured["proposalId"]})
    return {"first": first, "result": outcome(result), "elicited": elicited}


async def grants(client: Client, device: str, other: str) -> dict:
    tools = await client.list_tools()
    devices = await client.call_tool("list_devices", {})
    refused = await client.call_tool("stat", {"device": other, "path": "notes.txt"})
    mine = await client.call_tool("stat", {"device": device, "path": "notes.txt"})
    return {
        "tools": [tool.name for tool in tools.tools],
        "catalog": json.dumps([tool.model_dump(mode="json") for tool in tools.tools]),
        "devices": [d["id"] for d in (devices.structured_content or {}).get("devices", [])],
        "refused": outcome(refused),
        "mine": outcome(mine),
    }


async def refusal(client: Client, device: str, state: str) -> int | str:
    try:
        result = await client.call_tool("write_file", {"device": device, "path": "notes.txt", "content": "forged\n"}, request_state=state)
        return json.dumps(outcome(result))
    except MCPError as error:
        return error.error.code


async def forged(client: Client, device: str, _other: str) -> dict:
    args = {"device": device, "path": "notes.txt", "content": "forged\n"}
    first = await client.session.call_tool("write_file", args, allow_input_required=True)
    state = first.request_state
    altered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
    return {
        "firstRound": type(first).__name__,
        "forged": await refusal(client, device, "eyJ1IjoieCJ9.forged"),
        "altered": await refusal(client, device, altered),
        "elicited": elicited,
    }


SCENARIOS = {"basic": basic, "approve": approve, "grants": grants, "forged": forged}


async def main(url: str, token: str, mode: str, device: str, scenario: str = "basic", other: str = "") -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    callback = on_elicit if scenario in ("approve", "forged") else None
    async with Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=callback) as client:
        result = await SCENARIOS[scenario](client, device, other)
        print(json.dumps({"protocolVersion": client.protocol_version, **result}), flush=True)


asyncio.run(main(*sys.argv[1:]))
