-- An outbox event remembers whether one of its deliveries may have been applied (an answer
-- lost, a lease taken over mid-delivery), so that it is never dead-lettered as undelivered.
-- Events of earlier versions read as not.
ALTER TABLE toolgate_outbox ADD COLUMN maybe_applied BOOLEAN NOT NULL DEFAULT false;

-- The audit trail records every outbox delivery attempt (kind `delivery`) and every operator
-- action (kind `operator`).
ALTER TABLE toolgate_audit DROP CONSTRAINT toolgate_audit_kind_check;
ALTER TABLE toolgate_audit ADD CONSTRAINT toolgate_audit_kind_check
    CHECK (kind IN ('call', 'decision', 'delivery', 'operator'));
