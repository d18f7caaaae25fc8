-- 0014: a row is claimed exactly when it names the instance holding it.
--
-- The delivery path's statements find the rows an instance holds by id and
-- claimed_by alone (see store/delivery.go, "Rows an instance holds"): with
-- state = 'claimed' in their conditions the planner, believing from stale
-- statistics that almost no row is claimed, read every row the instance
-- held through outbox_claimed_sink on each statement instead of the few it
-- names through the primary key. This constraint is what makes claimed_by
-- alone mean the same.
ALTER TABLE outbox ADD CONSTRAINT outbox_claimed_by_claimed
    CHECK ((state = 'claimed') = (claimed_by IS NOT NULL)) NOT VALID;
ALTER TABLE outbox VALIDATE CONSTRAINT outbox_claimed_by_claimed;
