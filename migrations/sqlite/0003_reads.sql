-- Read counts for the blog's digest pages.
ALTER TABLE digests ADD COLUMN reads BIGINT NOT NULL DEFAULT 0;
