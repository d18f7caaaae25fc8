-- Where `serve` answers, as each serving process last said (issue 19, item
-- 12): the operator's commands (login-link, demo) run in a shell that may
-- not carry the server's SWITCHBOARD_BASE_URL, and then print links for
-- the address the server answers at rather than the default one.
CREATE TABLE served_base_urls (
    base_url  text PRIMARY KEY,
    seen_at   timestamptz NOT NULL DEFAULT now()
);
