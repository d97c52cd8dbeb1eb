"""The official Python MCP client (`mcp` from PyPI) against `graph mcp`, unchanged.

Run by tests/mcp_server.rs with the venv's python:
  python mcp_client.py stdio GRAPH_BIN DB PROJECT_DIR [CLI_THREAD]
      starts `GRAPH_BIN mcp --db DB` in PROJECT_DIR itself and talks to it over stdio;
      CLI_THREAD, a pipeline thread `graph run` left paused, is answered here.
  python mcp_client.py cancel GRAPH_BIN DB PROJECT_DIR
      as stdio, gives up on a run's call half-way and resumes its thread.
  python mcp_client.py http URL
      talks to a running `graph mcp --addr` over streamable HTTP.
The project folder's graphs/pipeline.toml makes the pipeline's steps short. Any failed
assertion exits non-zero with its traceback; the last line says what it did.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def drive(session: ClientSession, cli_thread: str | None) -> str:
    await session.initialize()

    tools = {t.name: t for t in (await session.list_tools()).tools}
    for name in ("run_pipeline", "run_memo", "resume_thread", "read_thread", "list_threads"):
        assert name in tools, sorted(tools)
    schema = tools["run_pipeline"].input_schema
    assert schema["required"] == ["topic"], schema
    assert schema["properties"]["topic"]["type"] == "string", schema

    # An input that does not fit the state: a tool error naming the field, not a crash.
    bad = await session.call_tool("run_pipeline", {"topic": 5})
    assert bad.is_error, bad
    assert "topic" in text_of(bad), text_of(bad)
    missing = await session.call_tool("run_pipeline", {})
    assert missing.is_error and "`topic`" in text_of(missing), text_of(missing)
    unknown = await session.call_tool("read_thread", {"thread_id": "no-such-thread"})
    assert unknown.is_error and "no-such-thread" in text_of(unknown), text_of(unknown)

    # A run that pauses for review: its question and its thread, with progress on the way.
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    paused = await session.call_tool(
        "run_pipeline", {"topic": "sled"}, progress_callback=on_progress
    )
    assert not paused.is_error, text_of(paused)
    run = paused.structured_content
    assert run["status"] == "paused", run
    thread = run["thread_id"]
    question = run["questions"][0]["question"]
    assert "Publish" in question, run
    assert thread in text_of(paused) and "resume_thread" in text_of(paused), text_of(paused)
    assert progress, "no progress notifications"
    assert [p for p, _ in progress] == sorted(p for p, _ in progress), progress
    assert any(m and "outline" in m for _, m in progress), progress

    # An empty answer is no answer: refused, the thread unchanged.
    empty = await session.call_tool("resume_thread", {"thread_id": thread, "answer": " "})
    assert empty.is_error and "answer" in text_of(empty), text_of(empty)

    done = await session.call_tool("resume_thread", {"thread_id": thread, "answer": "yes"})
    assert not done.is_error, text_of(done)
    result = done.structured_content
    assert result["status"] == "done", result
    assert "sled" in json.dumps(result["output"]), result

    state = await session.call_tool("read_thread", {"thread_id": thread})
    assert not state.is_error, text_of(state)
    read = state.structured_content
    assert read["status"] == "done" and read["graph"] == "pipeline", read
    assert read["values"]["topic"] == "sled", read

    listed = (await session.call_tool("list_threads", {})).structured_content["threads"]
    row = next(r for r in listed if r["thread_id"] == thread)
    assert row["status"] == "done" and row["graph"] == "pipeline", listed

    # One left paused, for `graph resume` to answer from the command line.
    left = await session.call_tool("run_pipeline", {"topic": "queues"})
    assert left.structured_content["status"] == "paused", text_of(left)
    print(f"left paused: {left.structured_content['thread_id']}")

    if cli_thread:
        # A thread `graph run` left paused, answered here.
        theirs = await session.call_tool(
            "resume_thread", {"thread_id": cli_thread, "answer": "yes"}
        )
        assert not theirs.is_error, text_of(theirs)
        assert theirs.structured_content["status"] == "done", theirs.structured_content

    return thread


async def cancel_then_resume(session: ClientSession) -> str:
    """A call the client gives up on stops its run at a step boundary; the thread keeps its
    last checkpoint, and resume_thread goes on from there without running a saved step again."""
    await session.initialize()
    try:
        await session.call_tool("run_pipeline", {"topic": "stops"}, read_timeout_seconds=0.3)
    except AssertionError:
        raise
    except Exception as e:  # the client's timeout: it sends notifications/cancelled
        print(f"gave up on the call: {type(e).__name__}")
    else:
        raise AssertionError("the call ended before the client gave up on it")
    for _ in range(100):
        rows = (await session.call_tool("list_threads", {})).structured_content["threads"]
        assert len(rows) == 1, rows
        if rows[0]["status"] != "running":
            break
        await asyncio.sleep(0.1)
    row = rows[0]
    assert row["status"] == "stopped", row
    thread = row["thread_id"]
    paused = await session.call_tool("resume_thread", {"thread_id": thread})
    assert paused.structured_content["status"] == "paused", text_of(paused)
    done = await session.call_tool("resume_thread", {"thread_id": thread, "answer": "yes"})
    assert done.structured_content["status"] == "done", text_of(done)
    values = (await session.call_tool("read_thread", {"thread_id": thread})).structured_content["values"]
    assert values["log"].count("outline") == 1, values["log"]
    return thread


async def main(argv: list[str]) -> None:
    mode = argv[1]
    if mode == "stdio":
        graph, db, project = argv[2], argv[3], argv[4]
        cli_thread = argv[5] if len(argv) > 5 else None
        params = StdioServerParameters(command=graph, args=["mcp", "--db", db], cwd=project)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                thread = await drive(session, cli_thread)
    elif mode == "cancel":
        graph, db, project = argv[2], argv[3], argv[4]
        params = StdioServerParameters(command=graph, args=["mcp", "--db", db], cwd=project)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                thread = await cancel_then_resume(session)
    elif mode == "http":
        async with streamable_http_client(argv[2]) as (read, write):
            async with ClientSession(read, write) as session:
                thread = await drive(session, None)
    else:
        raise SystemExit(f"unknown mode {mode!r}: stdio or http")
    print(f"mcp client: ok {thread}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
