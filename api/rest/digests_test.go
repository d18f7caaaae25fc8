package rest_test

import (
	"crypto/rand"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// digest creates a digest sending to sink through the API and returns its
// id.
func (b *bundle) digest(t *testing.T, token string, sink int64) int64 {
	t.Helper()
	return idOf(t, b.ok(t, http.StatusCreated, token, "POST", "/api/v1/digests",
		map[string]any{"name": "digest-" + rand.Text()[:8], "schedule": "TZ=Europe/Berlin Mon-Fri 09:00", "sink_ids": []int64{sink}}))
}

func digestPath(id int64, rest string) string {
	return "/api/v1/digests/" + strconv.FormatInt(id, 10) + rest
}

// TestDigestLifecycle creates, reads, lists, changes, previews, sends and
// deletes a digest through the API.
func TestDigestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	a, tok := b.human(t)
	sink := b.sink(t, tok, "", b.connection(t, tok, "", g.URL))

	r := b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/digests", map[string]any{
		"name": "morning", "schedule": "TZ=America/Los_Angeles Mon-Fri 09:00,17:00", "sink_ids": []int64{sink},
	})
	requireHeaders(t, r)
	var d struct {
		ID                    int64   `json:"id"`
		Owner                 string  `json:"owner"`
		Schedule              string  `json:"schedule"`
		QueueIDs              []int64 `json:"queue_ids"`
		SkipWhenQuiet         bool    `json:"skip_when_quiet"`
		QuietThresholdSeconds int     `json:"quiet_threshold_seconds"`
		NextSendAt            string  `json:"next_send_at"`
	}
	r.into(t, &d)
	require.Equal(t, human(a), d.Owner)
	require.Equal(t, []int64{}, d.QueueIDs, "every queue of the scope")
	require.True(t, d.SkipWhenQuiet)
	require.Equal(t, 3600, d.QuietThresholdSeconds)
	require.NotEmpty(t, d.NextSendAt)

	var listed struct {
		Digests []struct {
			ID int64 `json:"id"`
		} `json:"digests"`
	}
	b.ok(t, http.StatusOK, tok, "GET", "/api/v1/digests", nil).into(t, &listed)
	require.Len(t, listed.Digests, 1)

	b.ok(t, http.StatusOK, tok, "PATCH", digestPath(d.ID, ""), map[string]any{"skip_when_quiet": false, "quiet_threshold_seconds": 600}).into(t, &d)
	require.False(t, d.SkipWhenQuiet)
	require.Equal(t, 600, d.QuietThresholdSeconds)
	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "PATCH", digestPath(d.ID, ""), map[string]any{"quiet_threshold_seconds": 5})
	require.Equal(t, "quiet_threshold_seconds", e.Field)

	var pv struct {
		Quiet       bool     `json:"quiet"`
		Unavailable []string `json:"unavailable"`
		Text        string   `json:"text"`
	}
	b.ok(t, http.StatusOK, tok, "POST", digestPath(d.ID, "/preview"), nil).into(t, &pv)
	require.False(t, pv.Quiet)
	require.Contains(t, pv.Unavailable, "unheard doorbells")
	require.Contains(t, pv.Text, "Unavailable (not measured on this instance): ", "unmeasured sections read as such, never as zero")

	var run struct {
		Outcome     string `json:"outcome"`
		SinksQueued int    `json:"sinks_queued"`
	}
	b.ok(t, http.StatusOK, tok, "POST", digestPath(d.ID, "/send"), nil).into(t, &run)
	require.Equal(t, "sent", run.Outcome)
	require.Equal(t, 1, run.SinksQueued)

	b.ok(t, http.StatusNoContent, tok, "DELETE", digestPath(d.ID, ""), nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", digestPath(d.ID, ""), nil)
}

func TestDigestInvalidScheduleOverTheAPI(t *testing.T) {
	t.Parallel()
	// Scenario: Invalid schedule
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tok := b.human(t)
	sink := b.sink(t, tok, "", b.connection(t, tok, "", g.URL))
	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", "/api/v1/digests",
		map[string]any{"name": "bad", "schedule": "Mon-Fri 25:00", "sink_ids": []int64{sink}})
	require.Equal(t, "schedule", e.Field)
	require.Zero(t, b.count(t, "digests"))
}

func TestAnotherOwnersDigestIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tokA := b.human(t)
	_, tokB := b.human(t)
	d := b.digest(t, tokA, b.sink(t, tokA, "", b.connection(t, tokA, "", g.URL)))
	for _, op := range []struct{ method, path string }{
		{"GET", digestPath(d, "")}, {"PATCH", digestPath(d, "")}, {"DELETE", digestPath(d, "")},
		{"POST", digestPath(d, "/preview")}, {"POST", digestPath(d, "/send")},
	} {
		var body any
		if op.method == "PATCH" {
			body = map[string]any{"name": "mine"}
		}
		b.refused(t, http.StatusNotFound, "not_found", tokB, op.method, op.path, body)
	}
	// B naming A's sink in a digest of B's own is refused.
	sinkA := b.sink(t, tokA, "", b.connection(t, tokA, "", g.URL))
	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tokB, "POST", "/api/v1/digests",
		map[string]any{"name": "x", "schedule": "* 09:00", "sink_ids": []int64{sinkA}})
	require.Equal(t, "sink_ids", e.Field)
}
