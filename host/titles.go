package host

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/host/hoststore"
)

// ItemTitles reads the titles of the board items that notification links
// name ("/board/todos/12", "/board/webhooks/3/deliveries/9",
// "/board/digests/4"), for the items of owners only, keyed by link path. A
// finished notification keeps no title (REQ-1: nothing beyond its delivery
// record), so the board reads it from the item itself, which still has it
// (issue 25: a delivered notification keeps its title on the board). Paths
// it does not know, and items gone or of other owners, are left out.
func ItemTitles(ctx context.Context, db hoststore.DBTX, owners []string, paths []string) (map[string]string, error) {
	var todos, deliveries, digests []int64
	for _, p := range paths {
		parts := strings.Split(strings.Trim(p, "/"), "/")
		if len(parts) < 3 || parts[0] != "board" {
			continue
		}
		id, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		if err != nil {
			continue
		}
		switch {
		case len(parts) == 3 && parts[1] == "todos":
			todos = append(todos, id)
		case len(parts) == 5 && parts[1] == "webhooks" && parts[3] == "deliveries":
			deliveries = append(deliveries, id)
		case len(parts) == 3 && parts[1] == "digests":
			digests = append(digests, id)
		}
	}
	out := map[string]string{}
	if len(todos)+len(deliveries)+len(digests) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, `
		SELECT '/board/todos/' || id, title FROM todos WHERE id = ANY($2) AND owner = ANY($1)
		UNION ALL
		SELECT '/board/webhooks/' || webhook_id || '/deliveries/' || id, title FROM webhook_deliveries
			WHERE id = ANY($3) AND owner = ANY($1) AND coalesce(title, '') <> ''
		UNION ALL
		SELECT '/board/digests/' || id, name FROM switchboard.digests WHERE id = ANY($4) AND owner = ANY($1)`,
		owners, todos, deliveries, digests)
	if err != nil {
		return nil, fmt.Errorf("error reading item titles: %w", err)
	}
	var path, title string
	_, err = pgx.ForEachRow(rows, []any{&path, &title}, func() error {
		out[path] = title
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading item titles: %w", err)
	}
	return out, nil
}
