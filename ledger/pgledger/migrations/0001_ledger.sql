-- connhost ledger schema, version 1: executions, their append-only events,
-- the session classification and the fleet's node leases.
--
-- Identifiers (execution id, namespace, session, tool call, args digest) are
-- BYTEA: a Go string may hold any bytes, NUL and invalid UTF-8 included,
-- which TEXT refuses, and BYTEA orders bytewise as the Pebble ledger does.
-- Times the ledger compares are BIGINT Unix nanoseconds, exact like the
-- record's own times (TIMESTAMPTZ keeps microseconds).

-- One row per execution ever created. The record column holds the record in
-- the ledger's binary encoding (version byte first), the single source of
-- truth for its value; the other columns are what SQL filters, orders and
-- compares on, written in the same statement as the record.
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
    record       BYTEA,
    CHECK ((pruned_ns IS NULL) = (record IS NOT NULL)),
    CHECK (pruned_ns IS NULL OR terminal_ns IS NOT NULL),
    CHECK ((owner_node IS NULL) = (owner_epoch IS NULL))
);

-- The pending index: recovery reads only the executions that are not
-- terminal, so its cost follows pending work, not history.
CREATE INDEX connhost_executions_pending ON connhost_executions (id) WHERE terminal_ns IS NULL;

-- The fence index: a session's recovery_required executions.
CREATE INDEX connhost_executions_fenced ON connhost_executions (namespace, session_id, id)
    WHERE state = 'recovery_required';

-- The retention index: terminal, not yet pruned executions in the order
-- they became terminal.
CREATE INDEX connhost_executions_retention ON connhost_executions (terminal_ns, id)
    WHERE terminal_ns IS NOT NULL AND pruned_ns IS NULL;

-- The audit trail. Rows are only ever inserted (one per change, in the
-- change's statement) and deleted by retention with their execution; the
-- primary key refuses a second event with the same number.
CREATE TABLE connhost_events (
    execution_id BYTEA  NOT NULL,
    seq          BIGINT NOT NULL,
    event        BYTEA  NOT NULL,
    PRIMARY KEY (execution_id, seq)
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
