-- connhost ledger schema, version 2: console sessions.
--
-- One row per sign-in to the console, shared by every node: keyed by a
-- sha256 of the session's id (never the id), with the principal signed in,
-- when it was created and expires, and when it was revoked (NULL: it was
-- not). Times are Unix nanoseconds. Rows that expired before a prune's
-- retention cutoff are deleted by it.
CREATE TABLE connhost_console_sessions (
    key        BYTEA  PRIMARY KEY CHECK (length(key) = 32),
    principal  TEXT   NOT NULL,
    created_ns BIGINT NOT NULL,
    expires_ns BIGINT NOT NULL,
    revoked_ns BIGINT
);
CREATE INDEX connhost_console_sessions_principal ON connhost_console_sessions (principal);
CREATE INDEX connhost_console_sessions_expires ON connhost_console_sessions (expires_ns);
