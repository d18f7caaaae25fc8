package store

import "strings"

// ExpirySelectsForTest returns, for each kind of row PruneExpired prunes,
// the SELECT that finds one batch of old rows ($1 the cut-off, $2 the
// batch), so a test can check that an index serves each.
func ExpirySelectsForTest() map[string]string {
	out := map[string]string{}
	for _, e := range expiries {
		_, sel, _ := strings.Cut(e.sql, "IN (")
		out[e.what] = strings.TrimSuffix(sel, ")")
	}
	return out
}
