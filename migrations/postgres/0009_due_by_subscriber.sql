-- The claim reads due rows in (next_attempt_at, subscriber_id) order. 0008 put the id in
-- the due index so a claim stops after its batch; but the id is a hash, so every planned
-- row landed on a random page of that index (a million rows: 15.3 s of server time against
-- 9.9 s without it). Planning writes subscribers in ascending pages, so with the
-- subscriber id the index grows at its right edge and the claim still stops early.
DROP INDEX IF EXISTS deliveries_due;
CREATE INDEX deliveries_due ON deliveries (channel, next_attempt_at, subscriber_id) WHERE status = 'pending';
