package jobs

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/notifytype"
)

//go:embed migrations/*.sql
var migrations embed.FS

// JobFailedType is the service's own event type.
const JobFailedType notifytype.EventType = "job.failed"

// JobFailed declares job.failed to the engine: what the event is called,
// how urgent it is, which emits are one notification (one per run of a
// job: the occurrence key "<job>:<run>") and how a failure reads on a
// phone. The engine cleans, cuts and escapes what Message returns, adds
// "(and N more)" to a row that stands for several, and redacts the sink's
// secrets.
var JobFailed = engine.EventKind{
	Type:     JobFailedType,
	Words:    "A job failed",
	Label:    "Failed jobs",
	Help:     "A job ran out of attempts.",
	Severity: notifytype.SeverityHigh,
	Dedup:    engine.Dedup{By: engine.DedupOccurrence},
	Message: func(m engine.EventMessage) engine.Draft {
		d := engine.Draft{
			Title:    "Job failed: " + m.Content.Title,
			Lines:    []string{fmt.Sprintf("Run %s failed.", m.Content.Data["run"])},
			Link:     m.Content.LinkPath,
			LinkText: "Open the job",
		}
		if e := m.Content.Data["error"]; e != "" {
			d.Details = append(d.Details, "Error: "+e)
		}
		return d
	},
}

// BaseURL is where the service's pages are; the engine prefixes the paths
// its messages carry with it.
const BaseURL = "https://jobs.example.com"

// Config is the engine's configuration for the service on pool, with key
// sealing the sinks' secrets (32 bytes): the service's event type, its
// links (a sink's coalesced message points at the owner's failed jobs)
// and its users as the engine's directory.
func Config(pool *pgxpool.Pool, key []byte) engine.Config {
	return engine.Config{
		Pool:      pool,
		SecretKey: key,
		BaseURL:   BaseURL,
		Events:    []engine.EventKind{JobFailed},
		Links: engine.Links{
			Coalesced: func(owner notifytype.OwnerScope) string { return "/users/" + owner.ID + "/failed" },
			Text:      "Open the jobs",
		},
		Directory: Users{Pool: pool},
	}
}

// Owner is the engine's owner scope of one user: the uuid, as it is.
func Owner(userID string) notifytype.OwnerScope { return notifytype.Human(userID) }

// Users is the engine's Directory over the service's users table: a user
// is a human of the engine, by uuid. The service has no teams and no
// endpoints, and its events carry no queue, endpoint or webhook ids for
// subscriptions to filter on.
type Users struct{ Pool *pgxpool.Pool }

// KnownActor reports whether humanID is a user's uuid.
func (u Users) KnownActor(ctx context.Context, humanID string, endpointID int64) (bool, error) {
	if endpointID != 0 || !isUUID(humanID) {
		return false, nil
	}
	var ok bool
	err := u.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1::uuid)`, humanID).Scan(&ok)
	return ok, err
}

// TeamRole: the service has no teams.
func (Users) TeamRole(context.Context, string, string) (engine.Role, error) {
	return engine.RoleNone, nil
}

// Owned: nothing the engine could filter on belongs to anyone.
func (Users) Owned(context.Context, notifytype.OwnerScope, engine.Resource, []int64) ([]int64, error) {
	return nil, nil
}

// isUUID reports whether s is a uuid in its canonical text form, so that
// the database is never asked to cast anything else.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !strings.ContainsRune("0123456789abcdefABCDEF", c):
			return false
		}
	}
	return true
}

// Fail marks job failed with cause and emits job.failed for its owner, in
// tx: the notification commits, or rolls back, with the failure. A job
// failed twice in one run is one notification (the run is the occurrence).
func Fail(ctx context.Context, eng *engine.Engine, tx pgx.Tx, jobID, cause string) error {
	var owner, name string
	var run int
	err := tx.QueryRow(ctx, `
		UPDATE jobs SET state = 'failed', last_error = $2 WHERE id = $1::uuid
		RETURNING owner_id::text, name, runs`, jobID, cause).Scan(&owner, &name, &run)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("no job %s", jobID)
	}
	if err != nil {
		return fmt.Errorf("error failing job %s: %w", jobID, err)
	}
	return eng.Emit(ctx, tx, engine.Event{
		Type:          JobFailedType,
		Owner:         Owner(owner),
		OccurrenceKey: jobID + ":" + strconv.Itoa(run),
		Content: engine.Content{
			Title: name, LinkPath: "/jobs/" + jobID,
			Data: map[string]string{"run": strconv.Itoa(run), "error": cause},
		},
	})
}

// Migrate applies the service's migrations (history in
// public.schema_migrations), then the engine's from enginemigrate.FS()
// (history in public.switchboard_migrations, apart from the service's),
// both with golang-migrate. databaseURL is a postgres:// URL.
func Migrate(databaseURL string) error {
	for _, m := range []struct {
		name string
		open func() (*migrate.Migrate, error)
	}{
		{"the service's", func() (*migrate.Migrate, error) {
			src, err := iofs.New(migrations, "migrations")
			if err != nil {
				return nil, err
			}
			return migrate.NewWithSourceInstance("iofs", src, toolURL(databaseURL, "schema_migrations"))
		}},
		{"the engine's", func() (*migrate.Migrate, error) {
			src, err := iofs.New(enginemigrate.FS(), ".")
			if err != nil {
				return nil, err
			}
			return migrate.NewWithSourceInstance("iofs", src, toolURL(databaseURL, "switchboard_migrations"))
		}},
	} {
		mg, err := m.open()
		if err != nil {
			return fmt.Errorf("error opening %s migrations: %w", m.name, err)
		}
		err = mg.Up()
		srcErr, dbErr := mg.Close()
		if err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("error applying %s migrations: %w", m.name, err)
		}
		if err := errors.Join(srcErr, dbErr); err != nil {
			return fmt.Errorf("error closing %s migrations: %w", m.name, err)
		}
	}
	return nil
}

// toolURL is databaseURL as golang-migrate's pgx/v5 driver takes it, with
// its history in table.
func toolURL(databaseURL, table string) string {
	u := strings.Replace(databaseURL, "postgres://", "pgx5://", 1)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "x-migrations-table=" + table
}
