-- The archive: one row per event of each stored digest (its JSON, for the search, layer
-- and permalink pages), its layers, and its words in every reader language. Derived from
-- digests.data: written with each digest, rebuilt for digests whose search_version is
-- older than the code's (Store::reindex_archive).
ALTER TABLE digests ADD COLUMN search_version INTEGER NOT NULL DEFAULT 0;

CREATE TABLE digest_events (
    digest_date DATE             NOT NULL,
    event_id    TEXT             NOT NULL,
    n           BIGINT           NOT NULL,
    score       DOUBLE PRECISION NOT NULL,
    title       TEXT             NOT NULL,
    body        TEXT             NOT NULL,
    data        TEXT             NOT NULL,
    PRIMARY KEY (digest_date, event_id)
);
CREATE INDEX digest_events_by_event ON digest_events (event_id);

CREATE TABLE digest_event_layers (
    digest_date DATE NOT NULL,
    event_id    TEXT NOT NULL,
    layer       TEXT NOT NULL,
    PRIMARY KEY (digest_date, event_id, layer)
);
CREATE INDEX digest_event_layers_by_layer ON digest_event_layers (layer, digest_date);

-- Search matches each term as a case-insensitive substring (ILIKE), which finds Chinese
-- terms as well as English ones. A pg_trgm GIN index makes that an index scan; the
-- extension is in contrib and needs the right to create it, so without it search still
-- works, as a scan.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
    EXECUTE 'CREATE INDEX digest_events_body_trgm ON digest_events USING gin (body public.gin_trgm_ops)';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): archive search scans instead of using an index', SQLERRM;
END
$$;
