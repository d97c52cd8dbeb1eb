#!/usr/bin/env python3
"""The load driver of the server benchmark in Python, kept as a cross-check of the Rust one
(driver.rs, `load_driver`), which does the same requests at a fraction of the CPU; compare.py
runs this one with `--driver python` (see README.md).

Speaks LangGraph's Agent Server API over plain HTTP/1.1 (httpx), to 127.0.0.1 only:
- `wait`: CLIENTS concurrent clients, each in a loop: create a thread (POST /threads), then
  POST /threads/{id}/runs/wait and check the final state. Runs per second = runs / wall time.
- `stream`: the same with POST /threads/{id}/runs/stream (stream_mode "updates"), timing from
  sending the request to the first Server-Sent Event of any kind (both servers send `metadata`
  first) and to the first `updates` event (the first node's step), and checking the number of
  node updates.

At most RUNS runs in all and at most CAP seconds (runs in flight at the cap are finished and
counted). Every run's result is checked; a wrong one fails the measurement.

    python load.py --url http://127.0.0.1:8123 --graph chain10 --mode wait --clients 20 --runs 400
"""
import argparse
import asyncio
import json
import math
import resource
import statistics
import sys
import time

import httpx

# The input each graph starts from, what its final state must be, and how many node updates a
# stream of it carries (chain: n0..n9; fan-out: split, w0..w9, join).
GRAPHS = {
    "chain10": ({"count": 0}, lambda v: v.get("count") == 10, 10),
    "fanout": (
        {"results": []},
        lambda v: len(v.get("results", [])) == 11 and v["results"][-1] == 10,
        12,
    ),
}


class Failed(Exception):
    pass


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs, in milliseconds."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return round(s[k] * 1000, 2)


async def new_thread(http):
    r = await http.post("/threads", json={})
    if r.status_code != 200:
        raise Failed(f"POST /threads: {r.status_code} {r.text[:200]}")
    return r.json()["thread_id"]


async def one_wait(http, graph):
    start, ok, _ = GRAPHS[graph]
    tid = await new_thread(http)
    r = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": graph, "input": start})
    if r.status_code != 200 or not ok(r.json()):
        raise Failed(f"runs/wait on {graph}: {r.status_code} {r.text[:300]}")
    return {}


async def one_stream(http, graph):
    start, _, updates_expected = GRAPHS[graph]
    tid = await new_thread(http)
    body = {"assistant_id": graph, "input": start, "stream_mode": ["updates"]}
    t0 = time.perf_counter()
    first_any = first_update = None
    updates, event, kinds = 0, None, []
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as r:
        if r.status_code != 200:
            raise Failed(f"runs/stream on {graph}: {r.status_code} {(await r.aread())[:300]}")
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line == "" and event is not None:
                now = time.perf_counter()
                kinds.append(event)
                if first_any is None:
                    first_any = now - t0
                if event == "updates":
                    updates += 1
                    if first_update is None:
                        first_update = now - t0
                if event == "error":
                    raise Failed(f"runs/stream on {graph} sent an error event")
                event = None
    if updates != updates_expected:
        raise Failed(f"runs/stream on {graph}: {updates} updates, expected {updates_expected}; events {kinds}")
    return {"first_any": first_any, "first_update": first_update}


async def drive(url, graph, mode, clients, runs, cap):
    one = one_wait if mode == "wait" else one_stream
    tickets = iter(range(runs))
    results, errors = [], []
    deadline = time.perf_counter() + cap

    async def client():
        # One connection per client, kept alive across its runs.
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120, trust_env=False) as http:
            for _ in tickets:
                if time.perf_counter() > deadline:
                    return
                t = time.perf_counter()
                try:
                    out = await one(http, graph)
                except (Failed, httpx.HTTPError) as e:
                    errors.append(str(e) or type(e).__name__)
                    return
                out["latency"] = time.perf_counter() - t
                results.append(out)

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    driver_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    lat = [r["latency"] for r in results]
    out = {
        "graph": graph,
        "mode": mode,
        "clients": clients,
        "runs": len(results),
        "errors": errors[:3],
        "seconds": round(wall, 3),
        "runs_per_s": round(len(results) / wall, 1) if wall else None,
        "latency_ms_p50": pct(lat, 50),
        "latency_ms_p95": pct(lat, 95),
        "driver_cpu_s": round(driver_cpu, 3),
        "driver": "python",
    }
    if mode == "stream":
        out["first_event_ms_p50"] = pct([r["first_any"] for r in results], 50)
        out["first_event_ms_p95"] = pct([r["first_any"] for r in results], 95)
        out["first_update_ms_p50"] = pct([r["first_update"] for r in results], 50)
        out["first_update_ms_p95"] = pct([r["first_update"] for r in results], 95)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--graph", choices=sorted(GRAPHS), required=True)
    ap.add_argument("--mode", choices=["wait", "stream"], required=True)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--cap", type=float, default=60.0, help="seconds")
    a = ap.parse_args()
    if httpx.URL(a.url).host not in ("127.0.0.1", "localhost"):
        sys.exit("the benchmark only talks to 127.0.0.1")
    out = asyncio.run(drive(a.url, a.graph, a.mode, a.clients, a.runs, a.cap))
    print(json.dumps(out))
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
