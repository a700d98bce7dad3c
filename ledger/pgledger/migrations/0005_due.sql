-- connhost ledger schema, version 5: the due index a recovery pass reads,
-- and the count of executions awaiting approval per namespace.
--
-- due_ns is when a recovery pass must look at the execution next
-- (ledger.DueAt, Unix ns), NULL when no pass needs to (recovery_required
-- and terminal executions), written in the statement that writes the
-- record. Rows written under earlier versions get it from their records when this
-- migration is applied (in Go, in the migration's transaction).
ALTER TABLE connhost_executions ADD COLUMN due_ns BIGINT;
CREATE INDEX connhost_executions_due ON connhost_executions (due_ns, id) WHERE due_ns IS NOT NULL;

-- The approval index: a namespace's executions awaiting approval, counted
-- by a per-principal limit before a new approval request is recorded.
CREATE INDEX connhost_executions_awaiting ON connhost_executions (namespace) WHERE state = 'awaiting_approval';
