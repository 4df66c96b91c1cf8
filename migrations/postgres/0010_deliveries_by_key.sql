-- A delivery is addressed by its key (subscriber, date, edition): planning's ON CONFLICT
-- target, every settle's WHERE and the claim's row match. The id stays as a column (it is
-- what receivers see, derived from the key by deliver::delivery_id) but no longer has an
-- index: it is a hash, so each planned row went to a random page of that B-tree, half of
-- the server's time for a million rows (psql, INSERT ... SELECT of 1,000,000 rows: 7.1 s
-- with the id's primary key, 3.6 s with the key as the primary key).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_subscriber_edition;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_pkey PRIMARY KEY (subscriber_id, digest_date, edition);
