CREATE TABLE users (
    id uuid PRIMARY KEY,
    name text NOT NULL
);

CREATE TABLE jobs (
    id uuid PRIMARY KEY,
    owner_id uuid NOT NULL REFERENCES users (id),
    name text NOT NULL,
    state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'failed', 'done')),
    runs integer NOT NULL DEFAULT 0,
    last_error text
);
