#!/usr/bin/env bash
# Keyless demo of what stategraph is for, on the 13-stage memo pipeline: a run is killed with
# SIGKILL in the middle of a stage, resumes at that stage without redoing the finished ones, and
# a second run pauses for a person's review and is approved.
#
#   bash examples/pause_kill_resume.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# GRAPH_BIN: a `graph` already built (the tests run this script with theirs).
graph="${GRAPH_BIN:-}"
if [ -z "$graph" ]; then
    cargo build --release -q --bin graph || exit 1
    graph=target/release/graph
fi
tmp="$(mktemp -d)"
pid=
# The store, the artifacts and the logs go with the script, however it ends (Ctrl+C too).
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export GRAPH_DB="$tmp/store"
export GRAPH_OUT="$tmp/output"   # where the artifacts go (default: ./output)
thread="memo-$$"

echo "== 1. run the memo; each stage waits 400 ms, so there is time to kill it"
$graph run memo --thread "$thread" --input Fernstone --yes --set stage_ms=400 \
    >/dev/null 2>"$tmp/run.log" &
pid=$!
sleep 3
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
grep "^stage " "$tmp/run.log"
echo "killed with SIGKILL in the middle of the next stage (exit code 137)"

echo; echo "== 2. the thread is stopped; its finished stages are saved"
$graph threads
$graph history "$thread" --limit 3

echo; echo "== 3. resume: only the stages that had not finished run"
$graph resume "$thread" --set stage_ms=0 >"$tmp/memo.md" 2>"$tmp/resume.log"
echo "exit code: $?"
grep "^stage " "$tmp/resume.log"
echo "--- the memo's first lines:"
head -12 "$tmp/memo.md"

echo; echo "== 4. a stricter reviewer: below 9.5 the memo waits for a person (exit code 3)"
$graph run memo --thread "$thread-review" --input Fernstone --set review_below=9.5 \
    >/dev/null 2>"$tmp/review.log"
echo "exit code: $?"
grep -E "^stage 1[2-3] |asks:|The memo scores|graph resume" "$tmp/review.log"
$graph resume "$thread-review" --resume approve >/dev/null 2>&1
echo "approved; exit code: $?"

if [ -d "$GRAPH_OUT" ]; then
    echo; echo "== 5. the artifacts, one version folder per run"
    (cd "$GRAPH_OUT" && find . -type f | sort)
fi
