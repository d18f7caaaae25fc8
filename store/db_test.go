package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// The server's pool is of a fixed size: it opens its connections in the
// background and keeps them, so that a burst of requests never waits for
// a connection to be opened (a backend forked and started, 196 ms beside
// eight hostile dry runs in faults row 6d). A URL's own pool_max_conns
// and pool_min_conns still decide.
func TestTheServersPoolOpensEveryConnectionBeforeItIsAskedFor(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	for _, c := range []struct {
		query    string
		max, min int32
	}{
		{"", store.PoolMaxConnsDefault, store.PoolMaxConnsDefault},
		{"pool_max_conns=3", 3, 3},
		{"pool_max_conns=5&pool_min_conns=1", 5, 1},
	} {
		u := url
		if c.query != "" {
			u += sep(url) + c.query
		}
		pc, err := pgxpool.ParseConfig(u)
		require.NoError(t, err)
		store.ApplyPoolDefaults(pc, u)
		assert.Equal(t, c.max, pc.MaxConns, "MaxConns for %q", c.query)
		assert.Equal(t, c.min, pc.MinConns, "MinConns for %q", c.query)
	}

	// A pool opened so holds all its connections without being asked.
	u := url + sep(url) + "pool_max_conns=3"
	pc, err := pgxpool.ParseConfig(u)
	require.NoError(t, err)
	store.ApplyPoolDefaults(pc, u)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool { return pool.Stat().IdleConns() == 3 }, 30*time.Second, 5*time.Millisecond,
		"the pool opens its 3 connections without a request (it holds %d)", pool.Stat().TotalConns())
	require.Zero(t, pool.Stat().AcquireCount(), "nothing asked for a connection")
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}
