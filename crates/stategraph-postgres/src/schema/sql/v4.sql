-- stategraph-postgres schema, version 4: the long-term store (`src/item_store.rs`).
--
-- One row per item, shared by every thread, run and process of the database. The namespace is
-- its labels joined by '/' (a label never holds one), so a namespace prefix is a range of the
-- primary key; a key has no length limit, so rows are keyed by 16 bytes of BLAKE3 of it (as
-- `keys.rs` keys threads) with the text beside it. The item is the codec's checksummed bytes,
-- as every record: damage is found, never read as another value, and a NUL character in a
-- value is data (JSONB refuses it, LangGraph #1878). Times are the writer's clock in
-- milliseconds, as every backend keeps them, so expiry can be tested with a fake clock.
CREATE TABLE stategraph_store_items (
    namespace      TEXT NOT NULL,
    key_hash       BYTEA NOT NULL,
    key            TEXT NOT NULL,
    item           BYTEA NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    expires_at_ms  BIGINT,
    PRIMARY KEY (namespace, key_hash)
);

-- The sweep of expired items reads only those with a time to live.
CREATE INDEX stategraph_store_items_expiry ON stategraph_store_items (expires_at_ms)
    WHERE expires_at_ms IS NOT NULL;
