-- Delivery engine v2 (docs/channels.md, ARCHITECTURE.md "The outbox").
-- Due times are unix milliseconds from now on: a retry never comes earlier than its backoff.
UPDATE deliveries SET next_attempt_at = next_attempt_at * 1000;
-- The destination a row is sent to (deliver: Address::destination_key), so the rows of a
-- paused destination are not claimed and hold no worker.
ALTER TABLE deliveries ADD COLUMN destination TEXT NOT NULL DEFAULT '';
-- A claim is a token and an expiry: a reaper returns expired claims to the queue, and a
-- settle that does not carry the row's current token changes nothing (fencing).
ALTER TABLE deliveries ADD COLUMN claim_token TEXT;
ALTER TABLE deliveries ADD COLUMN claim_expires_at BIGINT;
CREATE INDEX deliveries_claims ON deliveries (status, claim_expires_at);
CREATE INDEX deliveries_destination ON deliveries (channel, destination, status);
-- Per-destination state shared by every worker: paused until (a 429's Retry-After, a
-- Telegram flood-wait). The key '*' pauses the whole channel (an outage of its relay).
CREATE TABLE destinations (
    channel      TEXT   NOT NULL,
    key          TEXT   NOT NULL,
    paused_until BIGINT NOT NULL,  -- unix milliseconds
    reason       TEXT   NOT NULL,
    PRIMARY KEY (channel, key)
);
