-- 0015: the writes of a delivery record.
--
-- delivery_records_budget (0001) served the sliding-window budget that
-- the GCRA state of 0002 replaced: no statement reads it any more, and
-- every record written paid an entry in it.
DROP INDEX delivery_records_budget;

-- A record is written "sending" and finished moments later, in groups of
-- hundreds: the finished versions of a page's records are written while
-- the versions they replace are still visible to the group's own
-- statement, so a page needs room for both for the finish to stay a
-- heap-only update (one WAL record, no index entry) rather than a new
-- entry in each of the table's indexes. 85 % (0013) left room for a few.
ALTER TABLE delivery_records SET (fillfactor = 50);
