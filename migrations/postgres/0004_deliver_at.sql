-- A reader's own delivery time, "HH:MM Zone" (e.g. "09:30 Europe/Berlin"); NULL: at once.
ALTER TABLE subscribers ADD COLUMN deliver_at TEXT;
