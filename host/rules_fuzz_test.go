package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// FuzzRuleSave drives the rule save path (set_webhook_rules, then
// update_webhook_rule) with arbitrary rules. Whatever the input, a save
// either stores exactly the rule given (trimmed) or is refused with
// invalid_argument naming a field of that rule and stores nothing; no input
// makes it fail any other way. The seed corpus is in testdata/fuzz.
func FuzzRuleSave(f *testing.F) {
	f.Add("bots", `.sender.login == "dependabot"`, "phone", "", true, false)
	f.Add("route", `.issue.number > 3`, "", "", false, true)
	f.Add("", `true`, "", "", true, false)
	f.Add("loop", `def f: f; f`, "phone", "high", false, false)
	f.Add("bad", `.a |`, "phone", "", true, false)
	f.Add("theirs", `true`, "their-phone", "", false, false)
	f.Add("sev", `true`, "", "urgent", false, false)
	f.Add("env", `env.HOME`, "", "", true, false)
	f.Add("grow", `"x" * 1000000000`, "", "", true, false)
	f.Add("setpath", `setpath([536870912]; 1)`, "", "", true, false)
	f.Add("assign", `.[536870912] = 1`, "", "", true, false)
	f.Add("doubling", `(.s + .s) as $a | ($a + $a) as $b | $b`, "", "", true, false)
	f.Add("bidi\u202e", `true`, "", "", true, false)

	pool := hosttest.New(f)
	w := newHookWorldOn(f, pool, 0)
	ctx := context.Background()
	hook, _, p := w.hook(f, ctx)
	w.f.Sink(storetest.SinkOpts{Owner: hook.Owner, Name: "phone"})
	w.f.Sink(storetest.SinkOpts{Owner: hostid.Human(w.f.Human("")), Name: "their-phone"})
	queue := w.f.Queue(hook.Owner, "forge")
	seed, err := w.hooks.SetRules(ctx, p, hook.ID, []host.RuleInput{{Name: "seed", Expr: "true", Action: host.RuleAction{Drop: true}}})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, name, expr, notify, severity string, drop, toQueue bool) {
		in := host.RuleInput{Name: name, Expr: expr, Action: host.RuleAction{
			Drop: drop, Notify: notify, NotifySeverity: notifytype.Severity(severity),
		}}
		if toQueue {
			in.Action.Queue = queue
		}
		before, err := w.hooks.Rules(ctx, p, hook.ID)
		require.NoError(t, err)

		_, err = w.hooks.UpdateRule(ctx, p, hook.ID, seed[0].ID, in)
		check(t, err, "")
		saved, err2 := w.hooks.SetRules(ctx, p, hook.ID, []host.RuleInput{in})
		check(t, err2, "rules[0].")
		require.Equal(t, err == nil, err2 == nil, "update and set agree: %v / %v", err, err2)

		after, err3 := w.hooks.Rules(ctx, p, hook.ID)
		require.NoError(t, err3)
		if err2 != nil {
			require.Equal(t, before, after, "a refused save changes nothing")
			return
		}
		require.Len(t, saved, 1)
		require.Equal(t, saved, after)
		require.Equal(t, strings.TrimSpace(name), after[0].Name)
		require.Equal(t, expr, after[0].Expr)
		seed = saved
	})
}

func check(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil {
		return
	}
	e, ok := notifytype.AsError(err)
	require.True(t, ok, "an uncoded error: %v", err)
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code, err.Error())
	require.True(t, strings.HasPrefix(e.Field, prefix), "field %q names the rule's field", e.Field)
	require.Contains(t, e.Message, "rule ", "the message names the rule")
}
