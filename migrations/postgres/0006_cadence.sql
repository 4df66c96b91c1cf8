-- A reader's cadence: daily (every digest), weekly:<day> (only the weekly roll-up, on that
-- day) or both:<day>. See subscriber::Cadence.
ALTER TABLE subscribers ADD COLUMN cadence TEXT NOT NULL DEFAULT 'daily';

-- A delivery carries one edition of its date: the daily, or the weekly roll-up of the
-- seven days ending that date. A reader with both gets two rows on their roll-up day, so
-- the outbox key becomes (subscriber, date, edition).
ALTER TABLE deliveries ADD COLUMN edition TEXT NOT NULL DEFAULT 'daily';
ALTER TABLE deliveries DROP CONSTRAINT deliveries_subscriber_id_digest_date_key;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_subscriber_edition
    UNIQUE (subscriber_id, digest_date, edition);
