-- stategraph-postgres schema, version 1: threads with their leases, checkpoints, pending writes,
-- the journal, the pieces of large records, and the two functions every write goes through.
--
-- Every key is fixed-size: `thread_key` is the first 16 bytes of the BLAKE3 hash of the thread
-- id, `key_hash` of a journal key, so ids and keys of any length fit a btree (an entry holds at
-- most ~2.7 KB). Records are the codec's checksummed frames, stored as they are.

-- Fencing tokens: a lease that changes hands takes the next value, never one handed out before.
CREATE SEQUENCE stategraph_lease_epochs;

-- One row per thread or subgraph namespace ever written or leased. A root thread's row is the
-- lock of its whole tree: writes hold it shared, sweeps and deletes exclusively, lease swaps for
-- update. `epoch` changes whenever the lease passes to another owner.
CREATE TABLE stategraph_threads (
    thread_key  BYTEA PRIMARY KEY,
    thread      TEXT NOT NULL,
    root_key    BYTEA NOT NULL,
    lease       BYTEA,
    lease_owner TEXT,
    epoch       BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX stategraph_threads_by_root ON stategraph_threads (root_key);

CREATE TABLE stategraph_checkpoints (
    thread_key   BYTEA NOT NULL,
    id           UUID NOT NULL,
    -- Whether the record names pieces, so a sweep reads only the records that do.
    names_pieces BOOLEAN NOT NULL,
    record       BYTEA NOT NULL,
    PRIMARY KEY (thread_key, id)
);

CREATE TABLE stategraph_writes (
    thread_key   BYTEA NOT NULL,
    checkpoint   UUID NOT NULL,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    names_pieces BOOLEAN NOT NULL,
    record       BYTEA NOT NULL,
    PRIMARY KEY (thread_key, checkpoint, seq)
);

-- `key` is kept as bytes: a key is the caller's text, and TEXT cannot hold a NUL character.
-- `checkpoint` is set for the keys of node calls (`{checkpoint id}/...`), which go with it.
CREATE TABLE stategraph_journal (
    thread_key BYTEA NOT NULL,
    key_hash   BYTEA NOT NULL,
    key        BYTEA NOT NULL,
    checkpoint UUID,
    value      BYTEA NOT NULL,
    PRIMARY KEY (thread_key, key_hash)
);
CREATE INDEX stategraph_journal_by_checkpoint ON stategraph_journal (thread_key, checkpoint)
    WHERE checkpoint IS NOT NULL;

-- Pieces of large records, named by their content (16 bytes of BLAKE3), shared by every record
-- of the thread that holds them.
CREATE TABLE stategraph_pieces (
    thread_key BYTEA NOT NULL,
    hash       BYTEA NOT NULL,
    bytes      BYTEA NOT NULL,
    PRIMARY KEY (thread_key, hash)
);

-- A few rows that `flush` updates: a commit that wrote something waits for the log up to it,
-- so it makes every earlier commit durable too.
CREATE TABLE stategraph_flushes (
    slot    INTEGER PRIMARY KEY,
    flushes BIGINT NOT NULL
);

-- The fence, first statement of every write transaction of a thread: locks the root thread's row
-- (shared, or exclusive for a sweep or a delete) and, when the writer holds a lease, refuses the
-- transaction unless the lease is still at the writer's epoch. The error aborts the transaction,
-- so nothing sent after it in the same pipeline is committed.
CREATE FUNCTION stategraph_fence(p_root BYTEA, p_held BIGINT, p_exclusive BOOLEAN)
RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    v_epoch BIGINT;
BEGIN
    IF p_exclusive THEN
        SELECT t.epoch INTO v_epoch FROM stategraph_threads t WHERE t.thread_key = p_root FOR UPDATE;
    ELSE
        SELECT t.epoch INTO v_epoch FROM stategraph_threads t WHERE t.thread_key = p_root FOR SHARE;
    END IF;
    IF p_held IS NOT NULL AND v_epoch IS DISTINCT FROM p_held THEN
        RAISE EXCEPTION 'stategraph: the lease of this thread changed hands (epoch % held, % now)',
            p_held, coalesce(v_epoch::text, 'none')
            USING ERRCODE = 'SG409';
    END IF;
END
$$;

-- Replaces a thread's lease with `p_new` if it is now `p_expected` (as stored bytes), and says
-- what it found otherwise. A lease passing to another owner takes a new epoch.
CREATE FUNCTION stategraph_swap_lease(
    p_key BYTEA, p_thread TEXT, p_root BYTEA, p_expected BYTEA, p_new BYTEA, p_new_owner TEXT
) RETURNS TABLE (swapped BOOLEAN, found BYTEA, fencing_epoch BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    v_lease BYTEA;
    v_owner TEXT;
    v_epoch BIGINT;
BEGIN
    -- An epoch must be on disk before its holder writes with it: a sequence value lost in a
    -- crash could be handed out again, to a second holder.
    PERFORM set_config('synchronous_commit', 'on', true);
    INSERT INTO stategraph_threads (thread_key, thread, root_key)
        VALUES (p_key, p_thread, p_root) ON CONFLICT (thread_key) DO NOTHING;
    SELECT t.lease, t.lease_owner, t.epoch INTO v_lease, v_owner, v_epoch
        FROM stategraph_threads t WHERE t.thread_key = p_key FOR UPDATE;
    IF v_lease IS DISTINCT FROM p_expected THEN
        RETURN QUERY SELECT false, v_lease, v_epoch;
        RETURN;
    END IF;
    IF p_new IS NOT NULL AND p_new_owner IS DISTINCT FROM v_owner THEN
        v_epoch := nextval('stategraph_lease_epochs');
    END IF;
    UPDATE stategraph_threads t SET lease = p_new, lease_owner = p_new_owner, epoch = v_epoch
        WHERE t.thread_key = p_key;
    RETURN QUERY SELECT true, p_new, v_epoch;
END
$$;
