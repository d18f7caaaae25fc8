package mutants

// List is every mutant, in the order of docs/RELIABILITY.md.
var List = []Mutant{
	// The claim token: every statement on a row this instance holds names
	// the claim that handed it over, so a late statement of an old claim
	// changes nothing once the row was claimed again.
	{
		ID:    "token-finish-rows",
		Guard: "claim token in the statement that writes an attempt's outcome (finishRowsSQL): a late outcome of an old claim would overwrite the row's new claim",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $6 AND outbox.claim_token = u.token",
			New: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $6"}},
		Package: "./store/", Run: "^TestAnOldClaimsStatementsChangeNothing$", Fast: true,
	},
	{
		ID:    "token-release-rows",
		Guard: "claim token in the release of queued rows on stop (releaseRowsSQL)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3 AND outbox.claim_token = u.token`",
			New: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3`"}},
		Package: "./store/", Run: "^TestAnOldClaimsStatementsChangeNothing$",
	},
	{
		ID:    "token-hold-rows",
		Guard: "claim token in the statement that parks rows until their sink's next token (holdRowsSQL)",
		Edits: []Edit{{File: "store/reserve.go",
			Old: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3 AND outbox.claim_token = u.token`",
			New: "WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3`"}},
		Package: "./store/", Run: "^TestAnOldClaimsStatementsChangeNothing$",
	},
	{
		ID:    "token-start-attempts",
		Guard: "claim token in the statement that starts attempts (startAttemptsSQL): an old claim would start an attempt on a row claimed again",
		Edits: []Edit{{File: "store/reserve.go",
			Old: "o.claimed_by = $3 AND o.claim_token = u.token AND o.attempts < $7",
			New: "o.claimed_by = $3 AND o.attempts < $7"}},
		Package: "./store/", Run: "^TestAnOldClaimsStatementsChangeNothing$", Fast: true,
	},
	{
		ID:    "token-close-abandoned",
		Guard: "claim token in the statement that closes abandoned attempts (closeAbandonedSQL): an old claim would close the new claim's attempt in flight",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "WHERE o.claimed_by = $3 AND o.claim_token = u.token\n\t\t), targets",
			New: "WHERE o.claimed_by = $3\n\t\t), targets"}},
		Package: "./store/", Run: "^TestAnOldClaimsStatementsChangeNothing$",
	},

	// The cap of 7 attempts, in every statement that starts one.
	{
		ID:    "cap-start-attempts",
		Guard: "cap of 7 in the group reservation's statement that starts attempts (startAttemptsSQL)",
		Edits: []Edit{{File: "store/reserve.go",
			Old: "o.claim_token = u.token AND o.attempts < $7",
			New: "o.claim_token = u.token"}},
		Package: "./store/", Run: "^TestAnAttemptPastTheCapDoesNotStart$", Fast: true,
	},
	{
		ID:    "cap-start-attempt",
		Guard: "cap of 7 in the single-row StartAttempt",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "AND claim_token = $5 AND attempts < $6",
			New: "AND claim_token = $5"}},
		Package: "./store/", Run: "^TestAnAttemptPastTheCapDoesNotStart$",
	},

	// Budgets: the sink's row is locked while its tokens are counted and
	// spent, and the budget is read after the lock.
	{
		ID:    "lock-reserve-sink",
		Guard: "sink row lock of the group reservation (FOR NO KEY UPDATE ... SKIP LOCKED): two instances would count and spend one sink's tokens at once",
		Edits: []Edit{{File: "store/reserve.go",
			Old: "\t\tORDER BY k.id\n\t\tFOR NO KEY UPDATE OF k SKIP LOCKED`",
			New: "\t\tORDER BY k.id`"}},
		Package: "./engine/", Run: "^TestASinkLockedElsewhereHoldsUpOnlyItself$", Fast: true,
	},
	{
		ID:    "lock-flush-sink",
		Guard: "sink row lock of a coalesced message's reservation (LockSinkForDelivery's FOR UPDATE)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "\t\tWHERE k.id = $1\n\t\tFOR UPDATE OF k`, sinkID)",
			New: "\t\tWHERE k.id = $1`, sinkID)"}},
		Package: "./engine/", Run: "^TestACoalescedMessageReadsTheBudgetAfterItsLock$",
	},
	{
		ID: "budget-reread-flush",
		Guard: "budget read after the sink's lock in a coalesced message's reservation: read before it, " +
			"a reservation that committed while this one waited for the lock is missed and its token spent twice",
		Edits: []Edit{
			{File: "engine/delivery.go",
				Old: "\t\ts, err := store.LockSinkForDelivery(ctx, tx, sinkID)\n",
				New: "\t\ttatBefore, err := store.BudgetTAT(ctx, tx, sinkID)\n\t\tif err != nil {\n\t\t\treturn err\n\t\t}\n" +
					"\t\ts, err := store.LockSinkForDelivery(ctx, tx, sinkID)\n"},
			{File: "engine/delivery.go",
				Old: "tat, err := store.BudgetTAT(ctx, tx, s.ID)",
				New: "tat, err := tatBefore, error(nil)"},
		},
		Package: "./engine/", Run: "^TestACoalescedMessageReadsTheBudgetAfterItsLock$",
	},

	// One instance at a time per sink, and the heartbeats' takeover.
	{
		ID:    "one-instance-per-sink",
		Guard: "the claim's filter leaving a sink whose rows another live instance holds (elsewhere)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "\t\t      AND sink_id NOT IN (SELECT sink_id FROM elsewhere)\n",
			New: ""}},
		Package: "./store/", Run: "^TestOneInstancePerSinkIsBestEffortWithinOneClaim$", Fast: true,
	},
	{
		ID:    "takeover-before-lapse",
		Guard: "takeover condition of heartbeats: an instance is dead only once its heartbeat lapsed (a live one's rows would be taken, and sent twice)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "WHERE alive_until <= $2 AND name <> $1",
			New: "WHERE alive_until <= $2 + interval '1 minute' AND name <> $1"}},
		Package: "./store/", Run: "^TestADeadInstancesRowsAreClaimedAtOnce$", Fast: true,
	},
	{
		ID:    "takeover-dead-rows",
		Guard: "takeover of a dead instance's rows at once (not after their claims expire)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "AND (claim_expires_at <= $2 OR claimed_by IN (SELECT name FROM dead))\n\t\t      AND NOT",
			New: "AND claim_expires_at <= $2\n\t\t      AND NOT"}},
		Package: "./store/", Run: "^TestADeadInstancesRowsAreClaimedAtOnce$",
	},

	// Order.
	{
		ID:    "claim-order-per-sink",
		Guard: "the claim takes a sink's rows in the order they fell due (row_number() OVER (PARTITION BY sink_id ORDER BY due_at, id))",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "row_number() OVER (PARTITION BY sink_id ORDER BY due_at, id)",
			New: "row_number() OVER (PARTITION BY sink_id ORDER BY due_at DESC, id DESC)"}},
		Package: "./store/", Run: "^TestAClaimTakesASinksRowsInTheOrderTheyFellDue$", Fast: true,
	},

	// Repeats of a key.
	{
		ID:    "absorb-repeats",
		Guard: "absorbRepeats: a row going back to pending or held takes in the open row a repeat of its key opened meanwhile (else 23505, or two open rows)",
		Edits: []Edit{{File: "store/delivery.go",
			Old: "\t\t      AND x.id <> r.id\n",
			New: "\t\t      AND x.id <> r.id AND false\n"}},
		Package: "./store/", Run: "^TestARowGoingBackTakesInTheRepeatOfItsKey$", Fast: true,
	},
	{
		ID:    "open-key-unique",
		Guard: "one open row per sink and key (the unique index outbox_open_key, and the fan-out's ON CONFLICT that counts a repeat into it)",
		Edits: []Edit{
			{File: "store/schema/engine/0021_engine_baseline.up.sql",
				Old: "CREATE UNIQUE INDEX outbox_open_key ON",
				New: "CREATE INDEX outbox_open_key ON"},
			{File: "store/outbox.go",
				Old: "ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held') DO UPDATE SET",
				New: "/* ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held') DO UPDATE SET"},
			{File: "store/outbox.go",
				Old: "include_excerpt = outbox.include_excerpt OR excluded.include_excerpt\n",
				New: "include_excerpt = outbox.include_excerpt OR excluded.include_excerpt */\n"},
		},
		Package: "./engine/", Run: "^TestARepeatFannedOutLaterJoinsTheOpenRowOfItsKey$",
	},

	// Stops.
	{
		ID:    "release-on-stop",
		Guard: "release on stop: a stopping engine gives back the rows queued in its actors' mailboxes (else they wait out their claims)",
		Edits: []Edit{{File: "engine/delivery.go",
			Old: "n, err := store.ReleaseRows(ctx, w.e.cfg.Pool, store.Claims(rows), w.e.instance)",
			New: "n, err := 0, error(nil)"}},
		Package: "./engine/", Run: "^TestDeliveryGracefulStopReleasesQueuedRows$",
	},
}
