-- Attempt errors keep every character a tool wrote, NUL (\u0000) included, which jsonb refuses.
-- The column becomes json: the JSON text exactly as written, checked to be an array. Appends
-- splice the new element into that text in one UPDATE (see store.rs), so they stay atomic.
ALTER TABLE toolgate_operations DROP CONSTRAINT toolgate_operations_errors_check;
ALTER TABLE toolgate_operations ALTER COLUMN errors DROP DEFAULT;
ALTER TABLE toolgate_operations ALTER COLUMN errors TYPE json USING errors::json;
ALTER TABLE toolgate_operations ALTER COLUMN errors SET DEFAULT '[]'::json;
ALTER TABLE toolgate_operations
    ADD CONSTRAINT toolgate_operations_errors_check CHECK (json_typeof(errors) = 'array');
