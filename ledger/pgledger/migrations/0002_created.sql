-- connhost ledger schema, version 2: List in creation order
-- (ledger.OrderNewest, newest first, as `connhost ls` and the API list).
--
-- created_ns is the record's CreatedAt (Unix ns), fixed at Create. Rows
-- created under version 1 get it from their record when this migration is
-- applied (in Go, in the migration's transaction: SQL cannot read the
-- record's encoding); a pruned row keeps NULL, since nothing lists it.
ALTER TABLE connhost_executions ADD COLUMN created_ns BIGINT;
CREATE INDEX connhost_executions_newest ON connhost_executions (created_ns DESC, id DESC) WHERE pruned_ns IS NULL;
