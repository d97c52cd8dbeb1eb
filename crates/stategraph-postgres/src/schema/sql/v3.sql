-- stategraph-postgres schema, version 3: the node cache (`src/cache.rs`).
--
-- One row per cached node result, shared by every thread, run and process of the database.
-- A key computed from a node's input has no length limit, and a btree entry holds at most
-- ~2.7 KB, so rows are keyed by 16 bytes of BLAKE3 of the key (as `keys.rs` keys threads) with
-- the text beside it, unindexed. The entry is the codec's checksummed bytes, as every record:
-- damage is found, never read as another value.
CREATE TABLE stategraph_node_cache (
    graph      TEXT NOT NULL,
    node       TEXT NOT NULL,
    key_hash   BYTEA NOT NULL,
    key        TEXT NOT NULL,
    entry      BYTEA NOT NULL,
    stored_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (graph, node, key_hash)
);
