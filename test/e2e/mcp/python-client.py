"""The official Python MCP SDK as a client of Tether's /mcp (run by python-client.test.ts).

Usage: python-client.py <mcp url> <bearer token> <mode: auto | legacy> <device id>
Prints one JSON object: the negotiated revision, the tool names, a read tool's result and a mutate
tool's structured result.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, mode: str, device: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        tools = await client.list_tools()
        names = [tool.name for tool in tools.tools]
        stat = await client.call_tool("stat", {"device": device, "path": "notes.txt"})
        write = None
        if "write_file" in names:
            result = await client.call_tool("write_file", {"device": device, "path": "notes.txt", "content": "from python\n"})
            write = {"isError": result.is_error, "structured": result.structured_content}
        print(
            json.dumps(
                {
                    "protocolVersion": client.protocol_version,
                    "tools": names,
                    "stat": {"isError": stat.is_error, "structured": stat.structured_content},
                    "write": write,
                }
            )
        )


asyncio.run(main(*sys.argv[1:5]))
