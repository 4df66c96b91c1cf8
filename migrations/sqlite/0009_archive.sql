-- The archive: one row per event of each stored digest (its JSON, for the search, layer
-- and permalink pages), its layers, and a full-text index over its words in every reader
-- language. Derived from digests.data: written with each digest, rebuilt for digests whose
-- search_version is older than the code's (Store::reindex_archive).
ALTER TABLE digests ADD COLUMN search_version INTEGER NOT NULL DEFAULT 0;

CREATE TABLE digest_events (
    digest_date TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    n           INTEGER NOT NULL,
    score       REAL    NOT NULL,
    title       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    PRIMARY KEY (digest_date, event_id)
);
CREATE INDEX digest_events_by_event ON digest_events (event_id);

CREATE TABLE digest_event_layers (
    digest_date TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    layer       TEXT NOT NULL,
    PRIMARY KEY (digest_date, event_id, layer)
);
CREATE INDEX digest_event_layers_by_layer ON digest_event_layers (layer, digest_date);

-- Trigram tokens: substring matching that needs no word boundaries, so Chinese terms are
-- found as well as English ones (terms of three characters or more; shorter ones are
-- matched with LIKE over the candidates).
CREATE VIRTUAL TABLE event_search USING fts5(
    body, content='digest_events', content_rowid='rowid', tokenize='trigram'
);
CREATE TRIGGER digest_events_ai AFTER INSERT ON digest_events BEGIN
    INSERT INTO event_search (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER digest_events_ad AFTER DELETE ON digest_events BEGIN
    INSERT INTO event_search (event_search, rowid, body) VALUES ('delete', old.rowid, old.body);
END;
