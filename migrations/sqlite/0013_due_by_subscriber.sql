-- The claim reads due rows in (next_attempt_at, subscriber_id) order, as on Postgres
-- (0009 there): planning writes subscribers in ascending order, so the index grows at its
-- right edge instead of at the random place of a hashed id, and the claim still stops
-- after its batch.
DROP INDEX IF EXISTS deliveries_due;
CREATE INDEX deliveries_due ON deliveries (status, channel, next_attempt_at, subscriber_id);
