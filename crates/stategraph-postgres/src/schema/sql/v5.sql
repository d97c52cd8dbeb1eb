-- stategraph-postgres schema, version 5: the claim's test of a run's earlier runs
-- (`src/queue/claim.rs`).
--
-- A run is claimable only when no earlier run of its thread is queued or running. Without this
-- index that test walked `stategraph_runs_by_thread`, every run the thread ever had, or, when the
-- planner misjudged how many runs are active (statistics lag behind a burst of submits), every
-- active run of the queue for each candidate, so a claim grew with the square of the queue's
-- depth. This one holds the active runs only, by thread: the test is one short probe.
CREATE INDEX stategraph_runs_active_by_thread ON stategraph_runs (thread_key, seq)
    WHERE status IN ('queued', 'running');
-- Runs change status all the time: statistics refreshed after 2% of the rows changed (not the
-- default 10%), so the planner knows how deep the queue is.
ALTER TABLE stategraph_runs SET (autovacuum_analyze_scale_factor = 0.02);
