-- Reader feedback (crate::feedback): one vote per event and reader, replaced when the
-- reader votes again. `reader` says who: telegram:<user id>, discord:<user id>,
-- email:<subscriber id> (a signed link), web:<cookie id>. `subscriber_id` is the
-- subscription the vote came through, when there is one (a chat's or an email's), for the
-- reader's layer boost.
CREATE TABLE votes (
    event_id      TEXT    NOT NULL,
    reader        TEXT    NOT NULL,
    subscriber_id BIGINT,
    vote          BIGINT  NOT NULL,  -- 1 or -1
    voted_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (event_id, reader)
);
CREATE INDEX votes_by_subscriber ON votes (subscriber_id);

-- The layer boost a subscriber opted into: NULL when off, else the JSON array of layers
-- their votes say they consistently like (recomputed after each of their votes).
ALTER TABLE subscribers ADD COLUMN boost_layers TEXT;
