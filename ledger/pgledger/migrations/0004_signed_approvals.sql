-- connhost ledger schema, version 4: approvals carry the reviewer's
-- signature (ledger.Approval.Signature), a field of the record column's
-- encoding that a release of schema version 3 cannot decode. No table
-- changes; the version makes such a release refuse the database at Open
-- instead of failing on the first signed approval.
COMMENT ON COLUMN connhost_executions.record IS 'the record in the ledger''s binary encoding, approval signatures included (schema version 4)';
