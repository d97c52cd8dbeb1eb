-- stategraph-postgres schema, version 2: the run queue (`src/queue/`).
--
-- One row per submitted run. A run is claimed by a worker under a lease that lapses at
-- `lease_expires_at` (the database's clock, so workers' clocks never matter) unless renewed, and
-- carries an `epoch` from `stategraph_lease_epochs` (the threads' fencing tokens) that changes
-- with every claim: a worker's heartbeat, outcome or release is applied only at its own epoch,
-- so a worker whose run was taken over changes nothing of it.
--
-- Inputs, answers and metadata are JSON kept as text: JSONB refuses a NUL character
-- (LangGraph #1878), and the queue never looks inside them.
CREATE TABLE stategraph_runs (
    -- Submission order: a thread's runs go in this order, and the queue's.
    seq              BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id               UUID PRIMARY KEY,
    thread           TEXT NOT NULL,
    -- 16 bytes of BLAKE3 of the thread id, as `stategraph_threads` keys it.
    thread_key       BYTEA NOT NULL,
    graph            TEXT NOT NULL,
    -- `KEY=VALUE` overrides of the graph file.
    overrides        TEXT[] NOT NULL DEFAULT '{}',
    -- 'input' (a run on `payload` as input) or 'resume' (the thread's continuation, `payload`
    -- the answer to what it waits for, or NULL).
    kind             TEXT NOT NULL CHECK (kind IN ('input', 'resume')),
    payload          TEXT,
    metadata         TEXT NOT NULL DEFAULT '{}',
    strategy         TEXT NOT NULL CHECK (strategy IN ('reject', 'enqueue', 'interrupt', 'rollback')),
    status           TEXT NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'paused', 'done', 'failed', 'cancelled')),
    -- A stop asked of a running run, which it obeys at its next step boundary.
    stop             TEXT CHECK (stop IN ('cancel', 'interrupt', 'rollback')),
    -- Why it failed, or why it was cancelled.
    message          TEXT,
    worker           TEXT,
    epoch            BIGINT NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ,
    claims           INTEGER NOT NULL DEFAULT 0,
    -- Set when a worker first starts the run: the thread's newest checkpoint then (NULL for a
    -- thread without one). A takeover resumes when the thread moved on since; a rollback drops
    -- the checkpoints after it.
    started          BOOLEAN NOT NULL DEFAULT false,
    base_checkpoint  UUID,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- When `status` last changed.
    since            TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- What a claim scans: runs that are queued, or running under a lease that may have lapsed.
CREATE INDEX stategraph_runs_active ON stategraph_runs (seq) WHERE status IN ('queued', 'running');
CREATE INDEX stategraph_runs_by_thread ON stategraph_runs (thread_key, seq);
