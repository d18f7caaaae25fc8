package digests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/cairn"
	"github.com/switchboard/notify/store"
)

// buildReport builds a digest's report at the database instant at, over
// the time since prevSent (the previous digest), or the last 24 hours for
// the first. Each section comes from its source under its own timeout, all
// at once; a section whose source is absent, fails or times out is
// unavailable with its reason, never zero (REQ-13).
func (s *Service) buildReport(ctx context.Context, d store.Digest, prevSent *time.Time, at time.Time) digest.Report {
	r := digest.Report{
		DigestID: d.ID, Name: d.Name, At: at, Since: at.Add(-24 * time.Hour), First: prevSent == nil,
		Threshold: time.Duration(d.QuietThresholdSecs) * time.Second,
	}
	if prevSent != nil {
		r.Since = *prevSent
	}
	src := s.cfg.Sources
	log := s.log.With("digest_id", d.ID, "owner", d.Owner.String())

	// The queues first: every queue section needs them.
	var queuesWhy string
	if src == nil {
		queuesWhy = digest.NotMeasured
	} else {
		qs, err := section(ctx, s.cfg.SectionTimeout, func(ctx context.Context) ([]digest.Queue, error) {
			return src.Queues(ctx, d.Owner)
		})
		if queuesWhy = s.unavailable(log, "queues", err); queuesWhy == "" {
			if len(d.QueueIDs) > 0 {
				qs = slices.DeleteFunc(qs, func(q digest.Queue) bool { return !slices.Contains(d.QueueIDs, q.ID) })
			}
			r.Queues = qs
		}
	}
	r.QueuesUnavailable = queuesWhy
	q := Query{Owner: d.Owner, QueueIDs: digest.QueueIDs(r.Queues), Since: r.Since}

	var wg sync.WaitGroup
	wg.Go(func() {
		r.Pending = fetch(ctx, s, log, "pending", src == nil, queuesWhy, func(ctx context.Context) (map[int64]digest.Pending, error) { return src.Pending(ctx, q) })
	})
	wg.Go(func() {
		r.Claimed = fetch(ctx, s, log, "claimed", src == nil, queuesWhy, func(ctx context.Context) (map[int64]int, error) { return src.Claimed(ctx, q) })
	})
	wg.Go(func() {
		r.StalledLeases = fetch(ctx, s, log, "stalled leases", src == nil, queuesWhy, func(ctx context.Context) (map[int64]int, error) { return src.StalledLeases(ctx, q) })
	})
	wg.Go(func() {
		r.DeadLetters = fetch(ctx, s, log, "dead letters", src == nil, queuesWhy, func(ctx context.Context) (map[int64]digest.DeadLetters, error) { return src.DeadLetters(ctx, q) })
	})
	wg.Go(func() {
		r.AdmissionDeferred = fetch(ctx, s, log, "admission", src == nil, queuesWhy, func(ctx context.Context) (map[int64]int, error) { return src.AdmissionDeferred(ctx, q) })
	})
	wg.Go(func() {
		r.Quarantined = fetch(ctx, s, log, "quarantined", src == nil, "", func(ctx context.Context) ([]digest.NamedCount, error) { return src.Quarantined(ctx, q) })
	})
	wg.Go(func() {
		r.UnheardDoorbells = fetch(ctx, s, log, "unheard doorbells", src == nil, "", func(ctx context.Context) ([]digest.NamedCount, error) { return src.UnheardDoorbells(ctx, q) })
	})
	wg.Go(func() {
		r.ClockedOut = fetch(ctx, s, log, "clocked out", src == nil, "", func(ctx context.Context) ([]string, error) { return src.ClockedOut(ctx, q) })
	})
	// Notifications recorded undeliverable are the engine's own figure.
	wg.Go(func() {
		n, err := section(ctx, s.cfg.SectionTimeout, func(ctx context.Context) (int, error) {
			return store.CountUndeliverable(ctx, s.core.Pool, d.Owner, r.Since)
		})
		if why := s.unavailable(log, "undeliverable", err); why != "" {
			r.Undeliverable = digest.Section[int]{Unavailable: why}
			return
		}
		r.Undeliverable.Data = n
	})
	wg.Wait()

	// A source must answer only for the digest's queues; drop anything else
	// it returned, so another scope's figures can never show.
	keep := func(id int64) bool { return slices.Contains(q.QueueIDs, id) }
	for id := range r.Pending.Data {
		if !keep(id) {
			delete(r.Pending.Data, id)
		}
	}
	for _, m := range []map[int64]int{r.Claimed.Data, r.StalledLeases.Data, r.AdmissionDeferred.Data} {
		for id := range m {
			if !keep(id) {
				delete(m, id)
			}
		}
	}
	for id := range r.DeadLetters.Data {
		if !keep(id) {
			delete(r.DeadLetters.Data, id)
		}
	}
	r.Quarantined.Data = digest.SortNamed(r.Quarantined.Data)
	r.UnheardDoorbells.Data = digest.SortNamed(r.UnheardDoorbells.Data)
	return r
}

// fetch reads one section from its source under the section timeout:
// unavailable with the reason when there is no source, when the queues it
// needs could not be read (queuesWhy), or when the call fails.
func fetch[T any](ctx context.Context, s *Service, log *slog.Logger, name string, noSource bool, queuesWhy string, call func(context.Context) (T, error)) digest.Section[T] {
	switch {
	case noSource:
		return digest.Section[T]{Unavailable: digest.NotMeasured}
	case queuesWhy != "":
		return digest.Section[T]{Unavailable: "the queues could not be read: " + queuesWhy}
	}
	v, err := section(ctx, s.cfg.SectionTimeout, call)
	if why := s.unavailable(log, name, err); why != "" {
		return digest.Section[T]{Unavailable: why}
	}
	return digest.Section[T]{Data: v}
}

// section runs one source call under its own timeout. A call that
// overruns returns context.DeadlineExceeded at once, even if the source
// ignores its context; its result is then dropped.
func section[T any](ctx context.Context, timeout time.Duration, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(ctx)
		done <- result{v, err}
	}()
	select {
	case res := <-done:
		if res.err == nil && ctx.Err() != nil {
			res.err = ctx.Err()
		}
		return res.v, res.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// unavailable is the reason a section reads unavailable, "" when err is
// nil. The reason says what kind of failure it was, never the error's
// text (which may name tables or hosts); the error is logged.
func (s *Service) unavailable(log *slog.Logger, name string, err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotMeasured):
		return digest.NotMeasured
	case errors.Is(err, context.DeadlineExceeded):
		log.Warn("digest section timed out", "section", name, "timeout", s.cfg.SectionTimeout.String())
		return "timed out after " + s.cfg.SectionTimeout.String()
	default:
		log.Warn("digest section failed", "section", name, "err", err)
		return "its source failed, the instance's log says why"
	}
}

// sendReport sends a built report to the digest's targets and records the
// run (REQ-14): with a Cairn connection, the digest is published as a
// Markdown artifact and the sinks get a short message with its link and
// the headline counts; when publishing fails, the sinks get the full
// digest and the failure's class is recorded on the run. The sinks' rows
// go through the outbox (budgets, retries and records apply), written in
// the run's transaction.
func (s *Service) sendReport(ctx context.Context, d store.Digest, r digest.Report, run Run) (Run, error) {
	run.DigestID, run.Owner, run.Outcome, run.Headline = d.ID, d.Owner, "sent", r.Lead()
	log := s.log.With("digest_id", d.ID, "owner", d.Owner.String())

	// The digest's name is the message's place ("Queue digest: morning"); the
	// full text carries its own headline.
	content := sinks.Content{
		Place: d.Name, LinkPath: s.core.DigestLink(d.Owner, d.ID),
		Lines: r.Lines(digest.Plain, s.core.BaseURL, s.reportLinks(d.Owner, d.ID)),
	}
	if d.CairnConnectionID > 0 {
		artifact, err := s.publishToCairn(ctx, d, r)
		if err != nil {
			run.CairnError = string(cairn.ClassOf(err))
			if ce := (*cairn.Error)(nil); errors.As(err, &ce) && ce.Status != 0 {
				run.CairnError += " (HTTP " + strconv.Itoa(ce.Status) + ")"
			}
			log.Warn("digest not published to cairn; sinks get the full digest", "class", cairn.ClassOf(err), "err", err)
		} else {
			run.ArtifactURL = artifact.URL
			content.Summary = r.Lead()
			content.Lines = []string{
				"Full digest: " + artifact.URL,
				"Available until " + artifact.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + ".",
			}
		}
	}
	payload, err := json.Marshal(content)
	if err != nil {
		return run, fmt.Errorf("error encoding digest: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.core.Pool, func(tx pgx.Tx) error {
		queued, err := store.EnqueueDigestTx(ctx, tx, d.Owner, d.SinkIDs, payload, s.core.StatementNow())
		if err != nil {
			return err
		}
		run.SinksQueued = len(queued)
		if len(queued) == 0 && run.ArtifactURL == "" {
			run.Outcome = "no_target"
		}
		return store.InsertDigestRun(ctx, tx, runIn(run))
	})
	if err != nil {
		return run, err
	}
	log.Info("digest sent", "kind", run.Kind, "sinks", run.SinksQueued, "published", run.ArtifactURL != "")
	return run, nil
}

func (s *Service) publishToCairn(ctx context.Context, d store.Digest, r digest.Report) (cairn.Artifact, error) {
	c, secret, err := s.core.OpenConnection(ctx, s.core.Pool, d.CairnConnectionID, d.Owner, engine.KindCairn)
	if err != nil {
		return cairn.Artifact{}, &cairn.Error{Class: notifytype.ClassConfig, Err: fmt.Errorf("error opening the digest's cairn connection: %w", err)}
	}
	client := cairn.New(cairn.Config{BaseURL: c.AccountKey, Token: secret}, s.core.Client)
	name := "Switchboard digest " + sinks.Clean(d.Name, 64) + " " + r.At.UTC().Format("2006-01-02 15:04 UTC")
	return client.Publish(ctx, name, r.Text(digest.Markdown, s.core.BaseURL, s.reportLinks(d.Owner, d.ID)))
}

// reportLinks are the links of digest id's report lines: its dead
// letters' todos (Config.Links.Item) and its own page
// (Config.Links.Digest), in the embedder's words (Config.Links.Text).
func (s *Service) reportLinks(owner notifytype.OwnerScope, id int64) digest.Links {
	return digest.Links{
		Todo:       func(todo int64) string { return s.core.ItemLink(owner, string(engine.ResourceTodo), todo) },
		Digest:     s.core.DigestLink(owner, id),
		DigestText: s.core.LinkText,
	}
}
