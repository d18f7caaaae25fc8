package hoststore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RecordBaseURL records that a serving process answers at baseURL
// (served_base_urls, migration 0020).
func RecordBaseURL(ctx context.Context, db DBTX, baseURL string) error {
	if _, err := db.Exec(ctx, `INSERT INTO served_base_urls (base_url) VALUES ($1)
		ON CONFLICT (base_url) DO UPDATE SET seen_at = now()`, baseURL); err != nil {
		return fmt.Errorf("error recording the base URL served: %w", err)
	}
	return nil
}

// LastBaseURL returns the base URL a serving process recorded last, or ""
// when none has.
func LastBaseURL(ctx context.Context, db DBTX) (string, error) {
	var u string
	err := db.QueryRow(ctx, `SELECT base_url FROM served_base_urls ORDER BY seen_at DESC LIMIT 1`).Scan(&u)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading the base URL served: %w", err)
	}
	return u, nil
}
