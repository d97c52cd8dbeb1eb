-- stategraph-postgres schema, version 6: a write of a thread in one statement
-- (`src/transaction.rs`, `fenced!`).
--
-- A write of a record was BEGIN, the fence (`stategraph_fence`), the thread's row, the record and
-- COMMIT: five statements, with a PL/pgSQL call on every one. It is now one statement committed on
-- its own: the fence is a row lock taken in a subquery (`FOR SHARE`, which waits for a lease swap
-- in flight and then reads the epoch it committed), and only when the epochs differ does it call
-- this function, whose error aborts the statement and so the whole write. Same SQLSTATE and text
-- as `stategraph_fence`, which stays for the writes that still run in a transaction of several
-- statements (deletes, prunes, records with new pieces).
-- OR REPLACE: a database whose migrations table was rolled back by hand migrates again.
CREATE OR REPLACE FUNCTION stategraph_refuse(p_held BIGINT, p_now BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'stategraph: the lease of this thread changed hands (epoch % held, % now)',
        p_held, coalesce(p_now::text, 'none')
        USING ERRCODE = 'SG409';
END
$$;
