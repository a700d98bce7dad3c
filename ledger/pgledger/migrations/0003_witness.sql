-- connhost ledger schema, version 3: the ledger's identity, generation and
-- commit position, which every node keeps in a witness file outside the
-- database, so that a node refuses a database that is another ledger or
-- behind what it acknowledged: an older dump restored, a replica promoted
-- without the last commits, tables emptied or dropped.
--
-- One row. identity is random, written when this migration is applied (in
-- Go). position is the commit position: a node advances it (one UPDATE) at
-- most once a witness interval, and only after writes of its own, and puts
-- the value in its witness once the UPDATE has committed; every write
-- acknowledged before the UPDATE began is in any state of the database that
-- holds it. The writes themselves touch no shared row. probe_id and
-- probe_events name an execution and its number of events as a write
-- before the last advance left it: a witness that holds them sees a table
-- emptied or rolled back under an intact position. generation counts the
-- restores an operator accepted, each recorded in connhost_restores.
CREATE TABLE connhost_ledger (
    singleton    BOOL        PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    identity     TEXT        NOT NULL,
    generation   BIGINT      NOT NULL DEFAULT 0,
    position     BIGINT      NOT NULL DEFAULT 0,
    probe_id     BYTEA,
    probe_events BIGINT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Accepted restores (connhost ledger accept-restore): the generation each
-- started, what the restored ledger held and the witness had seen, who
-- accepted it and what was fenced.
CREATE TABLE connhost_restores (
    generation         BIGINT      PRIMARY KEY,
    restored_position  BIGINT      NOT NULL,
    witnessed_position BIGINT      NOT NULL,
    accepted_by        TEXT        NOT NULL,
    reason             TEXT        NOT NULL,
    accepted_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    executions         BIGINT      NOT NULL,
    sessions           BIGINT      NOT NULL,
    unnamed_sessions   BOOL        NOT NULL
);
