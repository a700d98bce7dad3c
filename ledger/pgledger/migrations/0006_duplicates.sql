-- connhost ledger schema, version 6: the duplicate-intent guard
-- (ledger.Record.DuplicateWindow), and records whose encoding may carry
-- the guard's fields (DuplicateWindow, DuplicateOf), which a version-5
-- release cannot read.
--
-- intent_key is ledger.IntentKey of a guarded execution (the sha256 of
-- namespace, session, connector, operation and argument digest); NULL for
-- every other execution. A guarded Create finds the recent executions of
-- its intent through the index, and a pruned row leaves it.
ALTER TABLE connhost_executions ADD COLUMN intent_key BYTEA;
CREATE INDEX connhost_executions_intent ON connhost_executions (intent_key, created_ns)
    WHERE intent_key IS NOT NULL AND pruned_ns IS NULL;

-- One row per intent while a guarded Create of it runs: the Create inserts
-- it first and deletes it before it commits, so a concurrent guarded Create
-- of the same intent waits on the row (its insert meets the uncommitted
-- one) until the first has committed, and then finds the first's
-- execution. Rows never outlive their transaction.
CREATE TABLE connhost_intent_locks (
    intent_key BYTEA PRIMARY KEY
);
