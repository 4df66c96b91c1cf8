-- Subscribers, the delivery outbox and the single-instance lease. Portable SQL.

CREATE TABLE subscribers (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: ids are in delivery ids
    address        TEXT    NOT NULL UNIQUE,  -- channel:target, credentials included; never logged
    channel        TEXT    NOT NULL,         -- telegram | discord | email | webhook
    layers         TEXT    NOT NULL,         -- JSON array; empty = every layer
    min_score      INTEGER NOT NULL,         -- tenths of a point, 0..=1000
    language       TEXT    NOT NULL,
    status         TEXT    NOT NULL,         -- pending | active | paused | disabled
    status_reason  TEXT,
    notify_empty   INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT    NOT NULL,
    updated_at     TEXT    NOT NULL
);

-- One row per (digest, subscriber): the outbox. A row is claimed (status 'sending') before
-- the send and settled after it; rows left in 'sending' by a crash are re-queued at start.
-- parts_sent lets a multi-message delivery resume after the last message that went out.
CREATE TABLE deliveries (
    id              TEXT    PRIMARY KEY,      -- delivery id, also sent for idempotency
    digest_date     TEXT    NOT NULL,
    subscriber_id   INTEGER NOT NULL REFERENCES subscribers (id) ON DELETE CASCADE,
    channel         TEXT    NOT NULL,
    status          TEXT    NOT NULL,         -- pending | sending | sent | failed
    attempts        INTEGER NOT NULL DEFAULT 0,
    parts_sent      INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL,
    last_error      TEXT,
    created_at      TEXT    NOT NULL,
    sent_at         TEXT,
    UNIQUE (digest_date, subscriber_id)
);
CREATE INDEX deliveries_due ON deliveries (status, channel, next_attempt_at);

-- Named leases: the daemon holds 'scheduler' so two processes never generate or deliver.
CREATE TABLE leases (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);
