#!/usr/bin/env bash
# Keyless demo of what stategraph is for: a run pauses for a person, is killed with SIGKILL in
# the middle of a step, and resumes from its last checkpoint without redoing finished work.
#
#   bash examples/pause_kill_resume.sh
set -uo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin graph || exit 1
graph=target/release/graph
export GRAPH_DB="$(mktemp -d)/store"
thread="demo-$$"

echo "== 1. run: outline, three parallel drafts, then a pause for review (exit code 3)"
$graph run pipeline --thread "$thread" --input "durable agents" --set step_ms=300
echo "exit code: $?"

echo; echo "== 2. approve, then kill -9 the process while it publishes"
$graph resume "$thread" --resume yes --set step_ms=4000 &
pid=$!
sleep 1.5
kill -9 "$pid"; wait "$pid" 2>/dev/null
echo "killed (exit code 137)"

echo; echo "== 3. the thread is stopped, its finished steps are saved"
$graph threads
$graph history "$thread" --limit 4

echo; echo "== 4. resume: only the unfinished step runs again"
$graph resume "$thread" --set step_ms=300
echo "exit code: $?"
