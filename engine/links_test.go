package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/engine/notifytest"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/notifytype"
)

// jobsDirectory is an embedder's directory: one owner (engine.SoleOwner),
// who owns every object it is asked about.
type jobsDirectory struct{}

func (jobsDirectory) TeamRole(context.Context, string, string) (engine.Role, error) {
	return engine.RoleNone, nil
}

func (jobsDirectory) MemberTeams(context.Context, string) ([]string, error) { return nil, nil }

func (jobsDirectory) KnownActor(context.Context, string, int64) (bool, error) { return true, nil }

func (jobsDirectory) Owned(_ context.Context, _ notifytype.OwnerScope, _ engine.Resource, ids []int64) ([]int64, error) {
	return ids, nil
}

// An agent's page about one of the embedder's objects links where the
// embedder's Links.Item says, in its words (Links.Text); with no Links it
// links nothing, and no message names the reference host's /board.
func TestNotifyOwnerLinksTheEmbeddersPages(t *testing.T) {
	t.Parallel()
	for name, links := range map[string]engine.Links{
		"embedder's links": {
			Item: func(_ notifytype.OwnerScope, kind engine.Resource, id int64) string {
				return "/jobs/" + string(kind) + "/" + strconv.FormatInt(id, 10)
			},
			Text: "See the job",
		},
		"no links": {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := enginetest.New(t) // the engine's tables alone
			w.Embed = func(_ *pgxpool.Pool, cfg *engine.Config) {
				cfg.Directory, cfg.Links = jobsDirectory{}, links
			}
			g := notifytest.NewGotify(t)
			eng, _ := w.Start()
			_, p, owner := w.Human()
			w.Sink(eng, p, owner, enginetest.SinkOpts{BaseURL: g.URL, Secret: g.Token,
				Events: []notifytype.EventType{engine.EventAgentNotify}})
			agent := engine.EndpointPrincipal(5, p.HumanID, owner, notifytype.GrantNotifyOwner)
			require.NoError(t, pages.NotifyOwner(w.Ctx, eng, agent, pages.NotifyOwnerInput{Title: "nightly export stuck", TodoID: 7}))
			w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })

			msgs := g.Messages()
			require.Len(t, msgs, 1)
			text := msgs[0].Title + "\n" + msgs[0].Message
			require.NotContains(t, text, "/board")
			require.NotContains(t, text, "on the board")
			if links.Item != nil {
				require.Contains(t, text, "https://switchboard.example.net/jobs/todo/7")
			} else {
				require.NotContains(t, text, "https://")
			}
		})
	}
}

// A digest's dead letters link the embedder's pages of them, and its
// Markdown ends with a link to its own page in the embedder's words; with
// no links, the lines carry none and no /board appears.
func TestDigestLinesLinkTheEmbeddersPages(t *testing.T) {
	t.Parallel()
	r := digest.Report{
		DigestID: 3, Name: "morning", At: time.Now(), Since: time.Now().Add(-time.Hour),
		Queues:      []digest.Queue{{ID: 1, Name: "exports"}},
		DeadLetters: digest.Section[map[int64]digest.DeadLetters]{Data: map[int64]digest.DeadLetters{1: {Count: 1, Recent: []digest.TodoRef{{ID: 7, Title: "nightly"}}}}},
	}
	links := digest.Links{
		Todo:   func(id int64) string { return "/jobs/" + strconv.FormatInt(id, 10) },
		Digest: "https://jobs.example.net/digests/3", DigestText: "See the digest",
	}
	for _, f := range []digest.Format{digest.Plain, digest.Markdown} {
		with := r.Text(f, "https://jobs.example.net", links)
		require.Contains(t, with, "https://jobs.example.net/jobs/7")
		if f == digest.Markdown {
			require.Contains(t, with, "[See the digest](https://jobs.example.net/digests/3)")
		}
		without := r.Text(f, "https://jobs.example.net", digest.Links{})
		require.Contains(t, without, "Dead letter: nightly")
		for _, text := range []string{with, without} {
			require.NotContains(t, text, "/board")
			require.NotContains(t, text, "on the board")
		}
		require.NotContains(t, without, "https://")
	}
}
