package bench_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// BenchmarkHookRefusal measures what POST /hooks/{id} costs to refuse a
// delivery, through host.Webhooks.Receive on the real database: unknown_id
// (no webhook has the id) against bad_signature (the webhook exists, the
// signature is wrong). Both must be refused the same way and should cost
// about the same (one lookup, one sealed-secret decryption, one HMAC of
// the body), so the time taken does not tell an attacker which ids exist.
// Run it with -count and compare the two with benchstat.
func BenchmarkHookRefusal(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, hosttest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	f := hosttest.NewFactory(b, pool)
	eng, err := engine.New(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links()})
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	svc := host.NewWebhooks(host.WebhooksConfig{Pool: pool, Emitter: eng, SecretKey: key})
	human := f.Human("")
	hook, _, err := svc.Create(ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: hostid.Human(human), Name: "forge"})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"sender":{"login":"mallory"},"issue":{"body":"` + strings.Repeat("spam ", 2000) + `"}}`)
	sig := host.Sign(notifytype.NewSecret("sbw_guess"), host.NewMessageID(), time.Now(), body)
	for _, c := range []struct {
		name   string
		id     int64
		reason string
	}{
		{"unknown_id", hook.ID + 1_000_000, host.RefusalUnknownWebhook},
		{"bad_signature", hook.ID, host.RefusalBadSignature},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_, err := svc.Receive(ctx, c.id, body, sig)
				var r *host.ReceiveRefusal
				if !errors.As(err, &r) || r.Reason != c.reason {
					b.Fatalf("want a %s refusal, got %v", c.reason, err)
				}
			}
		})
	}
}
