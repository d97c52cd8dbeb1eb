"""LangGraph's Python client (langgraph-sdk) against a stategraph server, unchanged.

Run by tests/api/sdk.rs with the venv's python: `python sdk_compat.py URL`. The server has the
test graphs `approval` (pauses to ask for a verdict), `steps` (four steps) and `gated` (four
steps that wait for the Rust test's permits, which this script never gives) registered, and a
long-term store.
Any failed assertion exits non-zero with its traceback.
"""

import asyncio
import sys

from langgraph_sdk import get_client
from langgraph_sdk.schema import Command


async def main(url: str) -> None:
    client = get_client(url=url)

    assistants = await client.assistants.search()
    assert {"approval", "steps"} <= {a["graph_id"] for a in assistants}, assistants
    assistant = await client.assistants.get("steps")
    assert assistant["assistant_id"] == "steps", assistant
    versions = await client.assistants.get_versions("steps")
    assert [v["version"] for v in versions] == [1], versions
    graph = await client.assistants.get_graph("steps")
    assert [n["id"] for n in graph["nodes"]][:2] == ["__start__", "__end__"], graph

    # A run streamed in two modes at once.
    thread = await client.threads.create(metadata={"owner": "sdk-test"})
    steps_id = thread["thread_id"]
    parts = [
        part
        async for part in client.runs.stream(
            steps_id, "steps", input={"topic": "sdk"}, stream_mode=["values", "updates"]
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-1] == "end", events
    assert events.count("updates") == 4 and events.count("values") == 5, events
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates[0] == {"one": {"log": ["one"]}}, updates
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["log"] == ["one", "two", "three", "four"], final

    # A pause, answered with Command(resume=...).
    thread = await client.threads.create(metadata={"owner": "sdk-test", "kind": "review"})
    review_id = thread["thread_id"]
    parts = [
        part
        async for part in client.runs.stream(
            review_id, "approval", input={"item": "the memo"}, stream_mode="updates"
        )
    ]
    asked = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert asked and asked[0][0]["value"] == {"approve": "the memo looks fine"}, parts
    state = await client.threads.get_state(review_id)
    assert state["next"] == ["ask"], state
    assert state["interrupts"][0]["id"] == asked[0][0]["id"], state
    found = await client.threads.get(review_id)
    assert found["status"] == "interrupted", found

    parts = [
        part
        async for part in client.runs.stream(
            review_id, "approval", command=Command(resume="approved"), stream_mode="values"
        )
    ]
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["verdict"] == "approved" and final["done"] is True, final
    assert (await client.threads.get(review_id))["status"] == "idle"

    # Command(update=..., goto=...): paused before `three`, an update merged before the step
    # and `four` run beside `three` in it (then again after it, by its edge).
    thread = await client.threads.create()
    paused = await client.runs.wait(
        thread["thread_id"], "steps", input={"topic": "goto"}, interrupt_before=["three"]
    )
    assert paused["log"] == ["one", "two"], paused
    final = [
        part.data
        async for part in client.runs.stream(
            thread["thread_id"],
            "steps",
            command=Command(update={"log": ["by hand"]}, goto="four"),
            stream_mode="values",
        )
        if part.event == "values"
    ][-1]
    assert final["log"] == ["one", "two", "by hand", "three", "four", "four"], final
    # A goto to a node the graph lacks is refused, naming the field.
    try:
        await client.runs.wait(thread["thread_id"], "steps", command=Command(goto="nope"))
        raise AssertionError("a goto to an unknown node was taken")
    except Exception as e:  # langgraph-sdk raises httpx's HTTPStatusError
        text = e.response.text if hasattr(e, "response") else str(e)
        assert "command.goto" in text, text

    # History, newest first, paged with `before`.
    history = await client.threads.get_history(review_id, limit=2)
    assert len(history) == 2, history
    assert history[0]["checkpoint"]["checkpoint_id"] == (await client.threads.get_state(review_id))["checkpoint"]["checkpoint_id"]
    older = await client.threads.get_history(review_id, limit=10, before=history[-1]["checkpoint"])
    assert older and all(h["created_at"] <= history[-1]["created_at"] for h in older), older

    # Threads searched by metadata, and by status.
    mine = await client.threads.search(metadata={"owner": "sdk-test"})
    assert {t["thread_id"] for t in mine} == {steps_id, review_id}, mine
    reviews = await client.threads.search(metadata={"kind": "review"}, status="idle")
    assert [t["thread_id"] for t in reviews] == [review_id], reviews

    # A background run, joined; a wait; runs listed.
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "steps", input={"topic": "bg"})
    assert run["status"] in ("pending", "running", "success"), run
    result = await client.runs.join(thread["thread_id"], run["run_id"])
    assert result["log"] == ["one", "two", "three", "four"], result
    waited = await client.runs.wait(thread["thread_id"], "steps", input={"topic": "again"})
    assert len(waited["log"]) == 8, waited
    runs = await client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success", "success"], runs

    # Runs cancelled together: a run waiting at its gate (`gated` never goes on by itself).
    thread = await client.threads.create()
    stuck = await client.runs.create(thread["thread_id"], "gated", input={"topic": "stuck"})
    await client.runs.cancel_many(thread_id=thread["thread_id"], run_ids=[stuck["run_id"]])
    await client.runs.join(thread["thread_id"], stuck["run_id"])
    stuck = await client.runs.get(thread["thread_id"], stuck["run_id"])
    assert stuck["status"] == "interrupted", stuck

    # Threads pruned: cut to their newest checkpoint, or deleted.
    pruned = await client.threads.prune([steps_id], strategy="keep_latest")
    assert pruned == {"pruned_count": 1}, pruned
    assert len(await client.threads.get_history(steps_id, limit=10)) == 1
    assert (await client.threads.prune([steps_id]))["pruned_count"] == 1
    assert steps_id not in {t["thread_id"] for t in await client.threads.search(limit=100)}

    # A batch: a stateless run and one on a thread, started together.
    thread = await client.threads.create()
    batch = await client.runs.create_batch([
        {"assistant_id": "steps", "input": {"topic": "batch"}, "on_completion": "keep"},
        {"assistant_id": "steps", "input": {"topic": "mine"}, "thread_id": thread["thread_id"]},
    ])
    assert [r["thread_id"] == thread["thread_id"] for r in batch] == [False, True], batch
    joined = await client.runs.join(thread["thread_id"], batch[1]["run_id"])
    assert joined["topic"] == "mine", joined

    # A stateless run.
    waited = await client.runs.wait(None, "steps", input={"topic": "stateless"})
    assert waited["log"] == ["one", "two", "three", "four"], waited

    # The long-term store: items put, got, searched, listed and deleted.
    await client.store.put_item(["prefs", "sdk"], "tone", {"tone": "brief", "stars": 4})
    await client.store.put_item(["prefs", "sdk"], "lang", {"lang": "Rust", "stars": 2}, ttl=60)
    item = await client.store.get_item(["prefs", "sdk"], "tone")
    assert item["value"] == {"tone": "brief", "stars": 4} and item["namespace"] == ["prefs", "sdk"], item
    found = await client.store.search_items(["prefs"], filter={"stars": {"$gt": 3}})
    assert [i["key"] for i in found["items"]] == ["tone"], found
    spaces = await client.store.list_namespaces(prefix=["prefs"])
    assert spaces["namespaces"] == [["prefs", "sdk"]], spaces
    await client.store.delete_item(["prefs", "sdk"], "tone")
    assert await client.store.get_item(["prefs", "sdk"], "tone") is None

    print("sdk compatibility: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
