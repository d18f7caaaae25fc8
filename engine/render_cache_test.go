package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// countedKind is a kind whose Message counts its calls; panics makes it
// panic after counting.
func countedKind(typ notifytype.EventType, calls *atomic.Int64, panics bool) engine.EventKind {
	k := jobFailed()
	k.Type, k.Words, k.Label = typ, "A "+string(typ), "Jobs "+string(typ)
	k.Message = func(m engine.EventMessage) sinks.Draft {
		calls.Add(1)
		if panics {
			panic("a Message that panics")
		}
		return sinks.Draft{
			Title:    string(m.Type) + ": " + m.Content.Title,
			Lines:    []string{fmt.Sprintf("Job %s, severity %s, %d of them.", m.Content.Place, m.Severity, m.Count)},
			Link:     m.Content.LinkPath,
			LinkText: "Open the job",
		}
	}
	return k
}

func payloadOf(t testing.TB, c sinks.Content) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// An event reaches each of its sinks as a row of the same content, type,
// severity and count: its kind's Message words it once, however many
// sinks it has, and each sink gets that wording. A row that differs in any
// of those, or in the excerpt opt-in, is worded afresh, in its own words.
func TestRowsOfOneEventAreWordedOnce(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	var failed, stuck atomic.Int64
	eng := w.Engine(jobsOnly(countedKind("job.failed", &failed, false), countedKind("job.stuck", &stuck, false)))

	content := sinks.Content{Title: "nightly-export", Place: "12", LinkPath: "/jobs/12", Body: "exit status 2"}
	payload := payloadOf(t, content)
	want := eng.RenderUncachedForTest("job.failed", notifytype.SeverityHigh, 1, false, payload)
	require.Equal(t, int64(1), failed.Load())
	failed.Store(0)

	for sink := range 10 {
		got := eng.RenderPayloadForTest("job.failed", notifytype.SeverityHigh, 1, false, payloadOf(t, content))
		require.Equal(t, want, got, "sink %d", sink)
	}
	require.Equal(t, int64(1), failed.Load(), "ten rows of one event, one wording")

	other := content
	other.Place = "13"
	for _, row := range []struct {
		name    string
		typ     notifytype.EventType
		sev     notifytype.Severity
		count   int
		excerpt bool
		payload []byte
		counter *atomic.Int64
	}{
		{name: "another content", typ: "job.failed", sev: notifytype.SeverityHigh, count: 1, payload: payloadOf(t, other), counter: &failed},
		{name: "another severity", typ: "job.failed", sev: notifytype.SeverityNormal, count: 1, payload: payload, counter: &failed},
		{name: "another count", typ: "job.failed", sev: notifytype.SeverityHigh, count: 3, payload: payload, counter: &failed},
		{name: "the excerpt", typ: "job.failed", sev: notifytype.SeverityHigh, count: 1, excerpt: true, payload: payload, counter: &failed},
		{name: "another type", typ: "job.stuck", sev: notifytype.SeverityHigh, count: 1, payload: payload, counter: &stuck},
	} {
		before := row.counter.Load()
		got := eng.RenderPayloadForTest(row.typ, row.sev, row.count, row.excerpt, row.payload)
		require.Equal(t, before+1, row.counter.Load(), "%s: worded afresh", row.name)
		require.Equal(t, eng.RenderUncachedForTest(row.typ, row.sev, row.count, row.excerpt, row.payload), got, row.name)
		require.NotEqual(t, want, got, row.name)
		// Its next row is worded as it was.
		after := row.counter.Load()
		require.Equal(t, got, eng.RenderPayloadForTest(row.typ, row.sev, row.count, row.excerpt, row.payload), row.name)
		require.Equal(t, after, row.counter.Load(), "%s: its second row", row.name)
	}
}

// A row whose content cannot be read is worded (and logged) each time, and
// so is a row whose Message panics: neither wording is kept for the next
// row.
func TestAWordingIsKeptOnlyWhenItsRowWasRead(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	var failed, panics atomic.Int64
	eng := w.Engine(jobsOnly(countedKind("job.failed", &failed, false), countedKind("job.panics", &panics, true)))

	unreadable := []byte(`{"title":"nightly-export","place":`)
	first := eng.RenderPayloadForTest("job.failed", notifytype.SeverityHigh, 1, false, unreadable)
	for range 2 {
		require.Equal(t, first, eng.RenderPayloadForTest("job.failed", notifytype.SeverityHigh, 1, false, unreadable))
	}
	require.Equal(t, int64(3), failed.Load(), "an unreadable row's wording is not kept")

	payload := payloadOf(t, sinks.Content{Title: "nightly-export", Place: "12"})
	plain := eng.RenderPayloadForTest("job.panics", notifytype.SeverityHigh, 1, false, payload)
	require.Contains(t, plain.Title, "nightly-export", "the engine's plain wording")
	for range 2 {
		require.Equal(t, plain, eng.RenderPayloadForTest("job.panics", notifytype.SeverityHigh, 1, false, payload))
	}
	require.Equal(t, int64(3), panics.Load(), "a panicking Message's wording is not kept")
}

// Over any sequence of rows, repeated or not, of a few contents, types,
// severities, counts and opt-ins, each row is worded exactly as it is
// without the kept wordings, even when the bytes of its content are
// overwritten after it was worded (a driver reusing its buffer), and
// however few the slots its key shares with others.
func TestAKeptWordingIsTheRowsOwn(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	var failed, stuck atomic.Int64
	eng := w.Engine(jobsOnly(countedKind("job.failed", &failed, false), countedKind("job.stuck", &stuck, false)))

	var payloads [][]byte
	for _, c := range []sinks.Content{
		{Title: "nightly-export", Place: "12", Body: "exit status 2"},
		{Title: "nightly-export", Place: "13", Body: "exit status 2"},
		{Title: "nightly-import", Place: "12", Body: "killed"},
		{Title: "nightly-import", Place: "12", Body: "killed", LinkPath: "/jobs/12"},
	} {
		payloads = append(payloads, payloadOf(t, c))
	}
	// The same length, so that one buffer can hold each in turn.
	long := 0
	for _, p := range payloads {
		long = max(long, len(p))
	}
	for i, p := range payloads {
		payloads[i] = append(p, bytes.Repeat([]byte(" "), long-len(p))...)
	}
	rapid.Check(t, func(t *rapid.T) {
		// One slot or two: the rows' keys meet in them.
		eng.SetRenderSlotsForTest(rapid.SampledFrom([]int{1, 2, 1024}).Draw(t, "slots"))
		buf := make([]byte, long)
		n := rapid.IntRange(1, 40).Draw(t, "rows")
		for i := range n {
			typ := rapid.SampledFrom([]notifytype.EventType{"job.failed", "job.stuck"}).Draw(t, "type")
			sev := rapid.SampledFrom([]notifytype.Severity{notifytype.SeverityHigh, notifytype.SeverityNormal}).Draw(t, "severity")
			count := rapid.IntRange(1, 3).Draw(t, "count")
			excerpt := rapid.Bool().Draw(t, "excerpt")
			p := payloads[rapid.IntRange(0, len(payloads)-1).Draw(t, "content")]
			row := p
			if rapid.Bool().Draw(t, "shared buffer") {
				copy(buf, p)
				row = buf
			}
			want := eng.RenderUncachedForTest(typ, sev, count, excerpt, p)
			require.Equal(t, want, eng.RenderPayloadForTest(typ, sev, count, excerpt, row), "row %d", i)
		}
	})
}
