-- 0018: claims the database can tell apart, and instances it knows alive.
--
-- Each claim of outbox rows takes a token (claim_token, one value of
-- outbox_claim_token per claim statement). Every statement that changes a
-- row its instance holds (hold, start, finish, release, closing abandoned
-- attempts) names the token it was handed with the row and changes the row
-- only while it still carries it: an outcome written late, or by a copy of
-- a row whose claim expired and was taken again (by another instance or by
-- the same one), can never overwrite a newer claim. "claimed_by" alone
-- could not tell an instance's old claim of a row from its new one.
CREATE SEQUENCE outbox_claim_token;
ALTER TABLE outbox ADD COLUMN claim_token bigint;

-- An instance's heartbeat: alive_until is pushed forward every few seconds
-- while it runs. A claim takes the claimed rows of an instance whose
-- heartbeat lapsed at once, instead of waiting out each row's claim (two
-- minutes): the rows a crashed instance had only queued are sent again
-- within seconds. Rows are still taken only once their instance stopped
-- beating, so an instance that is alive keeps what it holds (at least once,
-- as before). A graceful stop deletes its row; the janitor removes the rows
-- of instances gone for a day.
CREATE TABLE outbox_instances (
    name         text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    alive_until  timestamptz NOT NULL
);
