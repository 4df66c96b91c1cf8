-- Email addresses are compared without case from now on (one mailbox, one subscriber):
-- lower-case the stored ones, except where that would merge two existing rows (those stay
-- as they are and are reported by `kdigest subscribers list` as two).
UPDATE subscribers
SET address = lower(address)
WHERE channel = 'email'
  AND address <> lower(address)
  AND NOT EXISTS (
      SELECT 1 FROM subscribers other
      WHERE other.address = lower(subscribers.address) AND other.id <> subscribers.id
  );
