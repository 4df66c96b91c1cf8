-- kdigest schema. Portable SQL: types and statements that SQLite and Postgres both accept.

-- Per-source fetch state: validators for conditional GET and failure bookkeeping.
CREATE TABLE source_state (
    source               TEXT PRIMARY KEY,
    etag                 TEXT,
    last_modified        TEXT,
    last_success_at      TEXT,
    last_attempt_at      TEXT,
    last_error           TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0
);

-- Every item ever seen, so a 304 or a failed fetch still finds earlier items in the window.
CREATE TABLE items (
    source        TEXT    NOT NULL,
    item_key      TEXT    NOT NULL,
    published_ts  BIGINT  NOT NULL,
    first_seen_at TEXT    NOT NULL,
    data          TEXT    NOT NULL,
    PRIMARY KEY (source, item_key)
);
CREATE INDEX items_by_time ON items (published_ts);

-- One digest per date, stored as data (the JSON of model::Digest).
CREATE TABLE digests (
    digest_date     TEXT PRIMARY KEY,
    generated_at    TEXT NOT NULL,
    generation_mode TEXT NOT NULL,
    window_start    TEXT NOT NULL,
    window_end      TEXT NOT NULL,
    data            TEXT NOT NULL
);

-- Validated LLM replies by (model, prompt hash): re-running a day costs nothing.
CREATE TABLE llm_cache (
    model       TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    reply       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (model, prompt_hash)
);
