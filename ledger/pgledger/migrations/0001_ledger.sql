-- connhost ledger schema, version 1: executions with their append-only
-- events, the pending ones, the session classification, the fleet's node leases,
-- the ledger's identity and commit position, and accepted restores.
--
-- Identifiers (execution id, namespace, session, tool call, args digest) are
-- BYTEA: a Go string may hold any bytes, NUL and invalid UTF-8 included,
-- which TEXT refuses, and BYTEA orders bytewise as the Pebble ledger does.
-- Times the ledger compares are BIGINT Unix nanoseconds, exact like the
-- record's own times (TIMESTAMPTZ keeps microseconds).

-- One row per execution ever created, its audit trail included. The record
-- column holds the record in the ledger's binary encoding (version byte
-- first), the single source of truth for its value; trail holds its events
-- in order (the ledger's binary encoding of each), appended in the
-- statement that changes the record. The other columns are what SQL
-- filters, orders and compares on, written in the same statement.
--
-- Only columns that never change once the row is created are indexed here
-- (id, created_ns, intent_key, and pruned_ns, which only retention sets):
-- an execution's changes, its outcome above all, are then HOT updates,
-- which write no index entry. What a recovery pass looks up by state or due
-- time lives in connhost_pending instead. fillfactor leaves room on each
-- page for the new version of the rows inserted there.
CREATE TABLE connhost_executions (
    id           BYTEA  PRIMARY KEY,
    namespace    BYTEA  NOT NULL,
    session_id   BYTEA  NOT NULL,
    tool_call_id BYTEA  NOT NULL,
    args_digest  BYTEA  NOT NULL,
    state        TEXT   NOT NULL CHECK (state IN ('awaiting_approval', 'approved', 'dispatched', 'retry_wait',
                                                  'recovery_required', 'succeeded', 'failed', 'rejected',
                                                  'expired', 'abandoned', 'cancelled')),
    attempt      INT    NOT NULL,
    -- The number of events: the record's version. Every change is a
    -- compare-and-set on (events, state, attempt).
    events       BIGINT NOT NULL,
    -- When the record became terminal (Unix ns); NULL while it is pending.
    terminal_ns  BIGINT,
    -- When retention pruned it (Unix ns). A pruned row keeps its id and the
    -- columns above (its tombstone) and loses its record and events.
    pruned_ns    BIGINT,
    -- Fleet ownership: the node that dispatched or claimed the execution
    -- and the lease epoch it held then (its fencing token). NULL when no
    -- node owns it.
    owner_node   TEXT,
    owner_epoch  BIGINT,
    -- The record's CreatedAt (Unix ns), fixed at Create, for List in
    -- creation order (ledger.OrderNewest) and for retention.
    created_ns   BIGINT NOT NULL,
    -- ledger.IntentKey of an execution the duplicate-intent guard covers
    -- (ledger.Record.DuplicateWindow: the sha256 of namespace, session,
    -- connector, operation and argument digest); NULL for every other.
    intent_key   BYTEA,
    record       BYTEA,
    trail        BYTEA[],
    CHECK ((pruned_ns IS NULL) = (record IS NOT NULL)),
    CHECK ((pruned_ns IS NULL) = (trail IS NOT NULL)),
    CHECK (pruned_ns IS NULL OR terminal_ns IS NOT NULL),
    CHECK ((owner_node IS NULL) = (owner_epoch IS NULL))
) WITH (fillfactor = 70);

-- The creation index, newest first, as `connhost ls` and the API list.
-- Retention walks it oldest first: an execution became terminal after it
-- was created.
CREATE INDEX connhost_executions_newest ON connhost_executions (created_ns DESC, id DESC) WHERE pruned_ns IS NULL;

-- The duplicate-intent index: a guarded Create finds the recent executions
-- of its intent through it, and a pruned row leaves it.
CREATE INDEX connhost_executions_intent ON connhost_executions (intent_key, created_ns)
    WHERE intent_key IS NOT NULL AND pruned_ns IS NULL;

-- One row per execution that is not terminal: recovery reads only these,
-- so its cost follows pending work, not history. The row is inserted with
-- the execution's, changed with its state or due time, and deleted in the
-- statement that makes it terminal (a delete writes no index entry). state
-- repeats the execution's, for the indexes below.
CREATE TABLE connhost_pending (
    id         BYTEA  PRIMARY KEY,
    namespace  BYTEA  NOT NULL,
    session_id BYTEA  NOT NULL,
    state      TEXT   NOT NULL,
    -- When a recovery pass must look at the execution next (ledger.DueAt,
    -- Unix ns); NULL when no pass needs to (recovery_required).
    due_ns     BIGINT
);

-- The due index a recovery pass reads.
CREATE INDEX connhost_pending_due ON connhost_pending (due_ns, id) WHERE due_ns IS NOT NULL;

-- The fence index: a session's recovery_required executions.
CREATE INDEX connhost_pending_fenced ON connhost_pending (namespace, session_id, id)
    WHERE state = 'recovery_required';

-- The approval index: a namespace's executions awaiting approval, counted
-- by a per-principal limit before a new approval request is recorded.
CREATE INDEX connhost_pending_awaiting ON connhost_pending (namespace) WHERE state = 'awaiting_approval';

-- One row per intent while a guarded Create of it runs: the Create inserts
-- it first and deletes it before it commits, so a concurrent guarded Create
-- of the same intent waits on the row (its insert meets the uncommitted
-- one) until the first has committed, and then finds the first's
-- execution. Rows never outlive their transaction.
CREATE TABLE connhost_intent_locks (
    intent_key BYTEA PRIMARY KEY
);

-- A session is classified by its first record: legacy when that record was
-- a resumed call the ledger had no record of. Rows are never updated.
CREATE TABLE connhost_sessions (
    namespace  BYTEA NOT NULL,
    session_id BYTEA NOT NULL,
    legacy     BOOL  NOT NULL,
    PRIMARY KEY (namespace, session_id)
);

-- Fleet nodes: each holds a lease, renewed in the background, that expires
-- by the database's clock. Registering again starts a new epoch, which
-- fences out the writes of every earlier incarnation of the node.
CREATE TABLE connhost_nodes (
    node_id    TEXT        PRIMARY KEY,
    epoch      BIGINT      NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- The ledger's identity, generation and commit position, which every node
-- keeps in a witness file outside the database, so that a node refuses a
-- database that is another ledger or behind what it acknowledged: an older
-- dump restored, a replica promoted without the last commits, tables
-- emptied or dropped.
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
