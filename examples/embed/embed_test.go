package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store/storetest"
)

// A Go program outside this module embeds the engine: this program, copied
// into a module of its own (its own go.mod, requiring this repository
// through a replace directive, resolved as any module's requirements are),
// built with the engine's packages alone, and run against a fresh database
// that already has its own schema_migrations and queues. The message
// arrives, and the database's own tables are as they were.
func TestEmbedOutsideTheModule(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)

	ctx := context.Background()
	url := storetest.EmptyURL(t)
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	_, err = db.Exec(ctx, `
		CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO schema_migrations VALUES (20260101, false);
		CREATE TABLE queues (id bigserial PRIMARY KEY, name text NOT NULL, state text NOT NULL DEFAULT 'ok');
		INSERT INTO queues (name) VALUES ('mine')`)
	require.NoError(t, err)

	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte(`module example.com/embedder

go 1.26.0

require github.com/switchboard/notify v0.0.0-00010101000000-000000000000

replace github.com/switchboard/notify => `+root+"\n"), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))
	program, err := os.ReadFile("main.go")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "main.go"), program, 0o644))

	// The embedder's module graph is not pruned as this module's is: it
	// reads the go.mod of every module its requirements name, old ones
	// (testify v1.3.0, through pgpassfile) included, which building this
	// module never needs. They come from the module cache, or through
	// the machine's GOPROXY on a machine that has not fetched them yet
	// (a fresh CI machine: GOPROXY=off failed there).
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	deps := goCmd("list", "-deps", ".")
	require.Contains(t, deps, "github.com/switchboard/notify/engine\n")
	for _, line := range strings.Split(deps, "\n") {
		if strings.HasPrefix(line, "github.com/switchboard/notify/") {
			for _, banned := range []string{"/host", "/store/storetest", "/api", "/engine/enginetest"} {
				require.NotContains(t, line, "github.com/switchboard/notify"+banned, "the embedder needs only the engine's packages")
			}
		}
	}
	bin := filepath.Join(mod, "embedder")
	goCmd("build", "-o", bin, ".")

	run := exec.Command(bin)
	run.Env = append(os.Environ(), "DATABASE_URL="+url)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	require.NoError(t, run.Run(), "stderr:\n%s", stderr.String())
	require.Equal(t, "delivered: Queue stuck: builds -> https://example.net/queues/2\n", stdout.String(),
		"the program's own event type, in its own words, linking its own page")

	var version int64
	require.NoError(t, db.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&version))
	require.Equal(t, int64(20260101), version, "the database's own history is untouched")
	var names []string
	rows, err := db.Query(ctx, `SELECT name FROM queues ORDER BY id`)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"mine", "builds"}, names, "the program's own queues, with the row its transaction added")
	rows, err = db.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"queues", "schema_migrations"}, names, "the engine added no table beside them")
}
