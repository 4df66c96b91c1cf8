-- The claim reads due rows in (next_attempt_at, id) order; with id in the index a claim
-- stops after its batch instead of sorting every due row (see the SQLite twin).
DROP INDEX IF EXISTS deliveries_due;
CREATE INDEX deliveries_due ON deliveries (channel, next_attempt_at, id) WHERE status = 'pending';
