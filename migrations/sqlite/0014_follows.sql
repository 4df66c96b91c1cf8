-- Projects and phrases a reader follows (issue 32): a JSON array of strings, NULL for none.
ALTER TABLE subscribers ADD COLUMN follows TEXT;
