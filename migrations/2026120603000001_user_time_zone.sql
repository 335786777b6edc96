-- The zone a user reads times in (an IANA name, checked by the manager); NULL: the
-- browser's own zone.
ALTER TABLE users ADD COLUMN time_zone text;
