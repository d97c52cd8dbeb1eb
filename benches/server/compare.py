#!/usr/bin/env python3
"""`graph serve` beside `langgraph dev`, in one run (see README.md for what it needs).

Each round starts each server fresh (ours over a new folder store, the peer in a new app folder),
drives the same phases with the same load driver (a child process: `load_driver`, built from
driver.rs, by default; load.py with `--driver python`), reads the server's CPU time and memory
from /proc and the driver's CPU time from its rusage, and stops the server; rounds alternate
which server goes first. Prints one JSON line per phase to stdout (and to --out), then a Markdown
table of the medians over rounds with the ratios.

    target/serve-bench-venv/bin/python benches/server/compare.py --rounds 3
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the repo

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def tree(pid):
    """pid and every process descended from it."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory_kb(pid, parts=None):
    """(VmRSS, VmHWM) summed over the process tree, in KiB. The sum of peaks is an upper bound of
    the tree's peak (the processes may not peak at once); langgraph dev --no-reload is one process.
    With `parts` (a dict), also adds up RssAnon (heaps, stacks) and RssFile (the program's and
    its libraries' pages mapped from disk) into it."""
    rss = hwm = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
                    elif line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
                    elif parts is not None and line.startswith(("RssAnon:", "RssFile:")):
                        key = line.split(":")[0]
                        parts[key] = parts.get(key, 0) + int(line.split()[1])
        except OSError:
            pass
    return rss, hwm


def cpu_s(pid):
    """User + system CPU seconds of the process tree so far."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def wait_ok(url, proc, log, limit=90):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode} before answering; its log: {log}")
        try:
            with urllib.request.urlopen(url + "/ok", timeout=2) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            time.sleep(0.1)
    sys.exit(f"no answer on {url}/ok after {limit} s; its log: {log}")


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total


class Server:
    def __init__(self, name, cmd, cwd, env, port, work, store=None):
        self.name, self.port, self.work, self.store = name, port, work, store
        self.url = f"http://127.0.0.1:{port}"
        self.log = os.path.join(work, f"{name}.log")
        logf = open(self.log, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_ok(self.url, self.proc, self.log)
        self.startup_s = time.perf_counter() - t0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# The glibc malloc settings `graph` (and examples/serve_bench.rs) make first thing in main
# (`stategraph_cli::tune_process`), given to both servers alike so neither gains from them: blocks
# of 1 MiB or more in their own mappings, given back when freed; one arena per core; an arena's
# top given back once 64 KiB of it is free, with no padding. (The once-a-second `malloc_trim`
# thread tune_process also starts cannot be given to the peer from outside.)
MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 20),
    "MALLOC_ARENA_MAX": str(max(2, os.cpu_count() or 2)),
    "MALLOC_TRIM_THRESHOLD_": str(64 << 10),
    "MALLOC_TOP_PAD_": "0",
}


def start_ours(a, work, port):
    db = os.path.join(work, "ours-db")
    cmd = [a.ours, "serve", "--addr", f"127.0.0.1:{port}", "--db", db]
    return Server("ours", cmd, work, dict(os.environ, **MALLOC), port, work, store=db)


def start_peer(a, work, port):
    app = os.path.join(work, "peer-app")
    os.makedirs(app)
    for f in ("graphs.py", "langgraph.json"):
        shutil.copy(os.path.join(HERE, "peer", f), app)
    env = dict(os.environ, LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false",
               LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_API_KEY="", LANGCHAIN_API_KEY="", **MALLOC)
    cmd = [os.path.join(a.venv, "bin", "langgraph"), "dev", "--no-browser", "--no-reload",
           "--port", str(port), "--n-jobs-per-worker", str(a.peer_jobs)]
    s = Server("peer", cmd, app, env, port, work, store=os.path.join(app, ".langgraph_api"))
    return s


def drive(a, url, graph, mode, clients, runs):
    """One phase: runs the load driver as a child process and returns its JSON line, with the
    driver's whole CPU time (start-up included) from the kernel's rusage of the child added as
    `driver_process_cpu_s`; `driver_cpu_s` is the driver's own count over the phase alone."""
    args = ["--url", url, "--graph", graph, "--mode", mode, "--clients", str(clients), "--runs", str(runs),
            "--cap", str(a.cap)]
    cmd = [a.driver_bin] + args if a.driver == "rust" else [sys.executable, os.path.join(HERE, "load.py")] + args
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        # wait4 rather than Popen.wait: it hands back the child's rusage, reaped with it.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    try:
        row = json.loads(text.strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.exit(f"the load driver ({' '.join(cmd)}) exited with {proc.returncode} and no result: {errors[-2000:]}")
    row["driver_process_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
    return row


PHASES = [  # (graph, mode, clients: None for --clients, 1 for one client and --single-runs)
    ("chain10", "wait", None),
    ("chain10", "stream", None),
    ("chain10", "stream", 1),
    ("fanout", "wait", None),
    ("fanout", "stream", None),
    ("fanout", "stream", 1),
]


def one_round(a, rnd, which, out):
    work = tempfile.mkdtemp(prefix=f"serve-bench-{which}-", dir=a.tmp)
    port = a.port + (0 if which == "ours" else 1)
    server = (start_ours if which == "ours" else start_peer)(a, work, port)
    rows = []
    try:
        time.sleep(1)  # let start-up work settle before reading idle memory
        idle_parts = {}
        idle_rss, _ = memory_kb(server.proc.pid, idle_parts)
        for graph, mode, clients in PHASES:
            runs = a.runs if clients is None else a.single_runs
            clients = clients or a.clients
            cpu0 = cpu_s(server.proc.pid)
            row = drive(a, server.url, graph, mode, clients, runs)
            cpu1 = cpu_s(server.proc.pid)
            wall = row["seconds"] or None
            parts = {}
            rss, hwm = memory_kb(server.proc.pid, parts)
            row.update(server=which, round=rnd, startup_s=round(server.startup_s, 2),
                       idle_rss_mb=round(idle_rss / 1024, 1), rss_mb=round(rss / 1024, 1),
                       idle_rss_anon_mb=round(idle_parts.get("RssAnon", 0) / 1024, 1),
                       idle_rss_file_mb=round(idle_parts.get("RssFile", 0) / 1024, 1),
                       rss_anon_mb=round(parts.get("RssAnon", 0) / 1024, 1),
                       rss_file_mb=round(parts.get("RssFile", 0) / 1024, 1),
                       peak_rss_mb=round(hwm / 1024, 1), server_cpu_s=round(cpu1 - cpu0, 2),
                       server_cpu_ms_per_run=round((cpu1 - cpu0) * 1000 / max(1, row["runs"]), 2),
                       driver_cpu_ms_per_run=round(row["driver_cpu_s"] * 1000 / max(1, row["runs"]), 2),
                       # Cores each kept busy over the phase's wall time (2 = the whole machine here).
                       server_cores=round((cpu1 - cpu0) / wall, 2) if wall else None,
                       driver_cores=round(row["driver_cpu_s"] / wall, 2) if wall else None,
                       processes=len(tree(server.proc.pid)))
            line = json.dumps(row)
            print(line, flush=True)
            out.write(line + "\n")
            out.flush()
            rows.append(row)
            if row["errors"]:
                sys.exit(f"{which} failed: {row['errors']}; its log: {server.log}")
    finally:
        server.stop()
    store_bytes = du(server.store) if server.store and os.path.exists(server.store) else 0
    for row in rows:
        row["store_mb_after_round"] = round(store_bytes / 2**20, 1)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def med(rows, key, digits=1):
    xs = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(xs), digits) if xs else None


def table(rows, default_clients):
    lines = [
        "| graph | phase | ours runs/s | peer runs/s | ratio | ours first event p50 / p95 ms | "
        "peer first event p50 / p95 ms | ours CPU ms/run | peer CPU ms/run | driver CPU ms/run, ours / peer | "
        "cores, server + driver: ours / peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for graph, mode, clients in PHASES:
        n = clients or default_clients

        def sel(who):
            return [r for r in rows if (r["server"], r["graph"], r["mode"], r["clients"]) == (who, graph, mode, n)]

        def first(rs):
            if mode != "stream":
                return ""
            return f"{med(rs, 'first_event_ms_p50')} / {med(rs, 'first_event_ms_p95')}"

        o, p = sel("ours"), sel("peer")
        if not o or not p:
            continue
        ro, rp = med(o, "runs_per_s"), med(p, "runs_per_s")
        lines.append(f"| {graph} | {mode}, {n} client(s) | {ro} | {rp} | **{ro / rp:.1f}×** | {first(o)} | {first(p)} | "
                     f"{med(o, 'server_cpu_ms_per_run')} | {med(p, 'server_cpu_ms_per_run')} | "
                     f"{med(o, 'driver_cpu_ms_per_run')} / {med(p, 'driver_cpu_ms_per_run')} | "
                     f"{med(o, 'server_cores', 2)} + {med(o, 'driver_cores', 2)} / "
                     f"{med(p, 'server_cores', 2)} + {med(p, 'driver_cores', 2)} |")
    peak = {}
    for w in ("ours", "peer"):
        rounds = sorted({r["round"] for r in rows if r["server"] == w})
        per_round = [max(r["peak_rss_mb"] for r in rows if r["server"] == w and r["round"] == k) for k in rounds]
        idle = [r["idle_rss_mb"] for r in rows if r["server"] == w]
        peak[w] = (round(statistics.median(per_round), 1), min(per_round), max(per_round),
                   round(statistics.median(idle), 1))
    o, p = peak["ours"], peak["peer"]
    lines.append("")
    lines.append(f"Peak RSS over a round (median, range): ours {o[0]} MB ({o[1]}-{o[2]}), peer {p[0]} MB "
                 f"({p[1]}-{p[2]}): ours is {o[0] / p[0]:.3f} of the peer's. Idle after start-up: ours {o[3]} MB, "
                 f"peer {p[3]} MB.")
    for w in ("ours", "peer"):
        last = [r for r in rows if r["server"] == w and (r["graph"], r["mode"], r["clients"]) == ("fanout", "stream", 1)]
        if last:
            lines.append(f"{w}: RSS idle {med(last, 'idle_rss_anon_mb')} MB anonymous + {med(last, 'idle_rss_file_mb')} MB "
                         f"mapped from files; at the round's end {med(last, 'rss_anon_mb')} + {med(last, 'rss_file_mb')} MB.")
    return "\n".join(lines)


def about(a):
    """What the figures were taken with: when, the machine's load, both servers' versions."""
    from importlib import metadata  # noqa: PLC0415

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    def built(path):
        if not os.path.exists(path):
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(path)))

    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "meta": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nproc": os.cpu_count(),
        "loadavg": open("/proc/loadavg").read().split()[:3],
        "ours": a.ours,
        "ours_built": built(a.ours),
        "driver": a.driver,
        "driver_bin": a.driver_bin if a.driver == "rust" else os.path.join(HERE, "load.py"),
        "driver_built": built(a.driver_bin) if a.driver == "rust" else None,
        "git_head": head.stdout.strip(),
        "peer": {p: version(p) for p in ("langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph",
                                         "langgraph-checkpoint", "uvicorn", "httpx")},
        "python": sys.version.split()[0],
        "rounds": a.rounds, "runs": a.runs, "single_runs": a.single_runs, "clients": a.clients,
        "peer_jobs": a.peer_jobs,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", default=os.path.join(ROOT, "target", "dist", "examples", "serve_bench"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "target", "serve-bench-venv"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=400, help="runs per 20-client phase")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--single-runs", type=int, default=30, help="runs of the one-client stream phases")
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per phase at most")
    ap.add_argument("--peer-jobs", type=int, default=20, help="langgraph dev --n-jobs-per-worker")
    ap.add_argument("--port", type=int, default=18123, help="ours on PORT, the peer on PORT+1")
    ap.add_argument("--only", choices=["ours", "peer"])
    ap.add_argument("--tmp", default=os.path.join(ROOT, "target", "tmp"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "serve-bench-results.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep each round's store, app folder and logs")
    ap.add_argument("--driver", choices=["rust", "python"], default="rust",
                    help="the load driver for both servers: load_driver (driver.rs) or load.py (needs httpx)")
    ap.add_argument("--driver-bin", default=os.path.join(ROOT, "target", "release", "examples", "load_driver"),
                    help="the Rust driver; built with cargo when missing")
    a = ap.parse_args()
    a.ours, a.venv, a.tmp, a.driver_bin = (os.path.abspath(p) for p in (a.ours, a.venv, a.tmp, a.driver_bin))
    if a.driver == "rust" and not os.path.exists(a.driver_bin):
        build = ["cargo", "build", "--release", "-p", "stategraph-server", "--example", "load_driver"]
        print(f"{a.driver_bin} is missing: {' '.join(build)}", file=sys.stderr, flush=True)
        if subprocess.run(build, cwd=ROOT).returncode != 0 or not os.path.exists(a.driver_bin):
            sys.exit(f"could not build the load driver: {' '.join(build)}")
    if a.only != "peer" and not os.path.exists(a.ours):
        sys.exit(f"{a.ours} is missing: cargo build --profile dist -p stategraph-cli --example serve_bench")
    if not a.only and not os.path.exists(os.path.join(a.venv, "bin", "langgraph")):
        sys.exit(f"no langgraph in {a.venv}: see benches/server/README.md")
    os.makedirs(a.tmp, exist_ok=True)
    rows = []
    with open(a.out, "a") as out:
        meta = json.dumps(about(a))
        print(meta, flush=True)
        out.write(meta + "\n")
        for rnd in range(a.rounds):
            order = ["ours", "peer"] if rnd % 2 == 0 else ["peer", "ours"]
            for which in order:
                if a.only in (None, which):
                    rows += one_round(a, rnd, which, out)
    if not a.only:
        print()
        print(table(rows, a.clients))


if __name__ == "__main__":
    main()
