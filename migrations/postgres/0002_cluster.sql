-- Several instances on one database (the same tables exist on SQLite so that
-- `kdigest store copy` moves everything and one process behaves the same).

-- Live processes: each heartbeats its row; `kdigest status` lists the recent ones.
CREATE TABLE instances (
    id           TEXT   PRIMARY KEY,  -- host:pid
    roles        TEXT   NOT NULL,     -- scheduler,deliver,web
    started_at   BIGINT NOT NULL,     -- unix seconds
    heartbeat_at BIGINT NOT NULL      -- unix seconds
);

-- Platform-wide send budgets shared by every instance (Telegram 30/s per bot, Discord's
-- global limit, a relay's rate): the next free slot, unix milliseconds.
CREATE TABLE budgets (
    name    TEXT   PRIMARY KEY,
    next_at BIGINT NOT NULL
);

-- Bot updates and interactions already handled, so one delivered to two instances (a
-- retry after a timeout) is answered once.
CREATE TABLE handled_updates (
    source     TEXT   NOT NULL,  -- telegram | discord
    update_id  TEXT   NOT NULL,
    handled_at BIGINT NOT NULL,  -- unix seconds
    PRIMARY KEY (source, update_id)
);

-- Fixed-window counters for the web's sign-up limits (per client, per mailbox).
CREATE TABLE rate_counts (
    key          TEXT   PRIMARY KEY,
    window_start BIGINT NOT NULL,  -- unix seconds
    hits         BIGINT NOT NULL
);
