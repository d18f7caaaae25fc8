package hoststore

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// ids is v, or an empty array for nil (a NULL array matches nothing).
func ids(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// isUniqueViolation reports a unique violation of constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == constraint
}
