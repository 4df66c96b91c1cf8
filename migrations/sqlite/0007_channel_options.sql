-- Per-subscriber channel options (a robot's --secret-env variable name and --keyword), as
-- JSON; NULL for none. Never a secret itself.
ALTER TABLE subscribers ADD COLUMN options TEXT;
