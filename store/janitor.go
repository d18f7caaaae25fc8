package store

import (
	"context"
	"fmt"
	"time"
)

// Pruned counts what PruneSpent removed.
type Pruned struct {
	AgentPages int64
	Sessions   int64
	LoginLinks int64
}

// PruneSpent removes what is of no more use: agent pages paged before
// pagesBefore (past the window they are counted in), sessions expired at
// now, and login links used or expired at now.
func PruneSpent(ctx context.Context, db DBTX, now, pagesBefore time.Time) (Pruned, error) {
	var p Pruned
	for _, s := range []struct {
		n    *int64
		what string
		sql  string
		arg  time.Time
	}{
		{&p.AgentPages, "agent pages", `DELETE FROM agent_pages WHERE paged_at < $1`, pagesBefore},
		{&p.Sessions, "expired sessions", `DELETE FROM sessions WHERE expires_at <= $1`, now},
		{&p.LoginLinks, "spent login links", `DELETE FROM login_links WHERE used_at IS NOT NULL OR expires_at <= $1`, now},
	} {
		tag, err := db.Exec(ctx, s.sql, s.arg)
		if err != nil {
			return p, fmt.Errorf("error deleting %s: %w", s.what, err)
		}
		*s.n = tag.RowsAffected()
	}
	return p, nil
}
