-- A reader's cadence: daily (every digest), weekly:<day> (only the weekly roll-up, on that
-- day) or both:<day>. See subscriber::Cadence.
ALTER TABLE subscribers ADD COLUMN cadence TEXT NOT NULL DEFAULT 'daily';

-- A delivery carries one edition of its date: the daily, or the weekly roll-up of the
-- seven days ending that date. A reader with both gets two rows on their roll-up day, so
-- the outbox key becomes (date, subscriber, edition). SQLite cannot change a table's
-- constraints in place: the table is rebuilt with every row.
CREATE TABLE deliveries_v3 (
    id               TEXT    PRIMARY KEY,
    digest_date      TEXT    NOT NULL,
    subscriber_id    INTEGER NOT NULL REFERENCES subscribers (id) ON DELETE CASCADE,
    channel          TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    parts_sent       INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT  NOT NULL,
    last_error       TEXT,
    created_at       TEXT    NOT NULL,
    sent_at          TEXT,
    destination      TEXT    NOT NULL DEFAULT '',
    claim_token      TEXT,
    claim_expires_at BIGINT,
    edition          TEXT    NOT NULL DEFAULT 'daily',
    UNIQUE (digest_date, subscriber_id, edition)
);
INSERT INTO deliveries_v3 (id, digest_date, subscriber_id, channel, status, attempts, parts_sent,
                           next_attempt_at, last_error, created_at, sent_at, destination,
                           claim_token, claim_expires_at)
    SELECT id, digest_date, subscriber_id, channel, status, attempts, parts_sent,
           next_attempt_at, last_error, created_at, sent_at, destination,
           claim_token, claim_expires_at
    FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_v3 RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (status, channel, next_attempt_at);
CREATE INDEX deliveries_claims ON deliveries (status, claim_expires_at);
CREATE INDEX deliveries_destination ON deliveries (channel, destination, status);
