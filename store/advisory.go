package store

// The engine's advisory locks. Each takes PostgreSQL's two-key form,
// (family, key): that key space does not overlap the one-key (bigint)
// form that most programs' own advisory locks use, and the families are
// numbers of the engine's own namespace ("sb" in their high half), so an
// embedder's two-key locks meet them only if it picks one of these first
// keys. README, "Operating the engine", lists them.
const advisoryNamespace int32 = 0x73620000

// Advisory lock families, the first key of each lock.
const (
	// LockFamilyMigrate: migrating either set (transaction-level, key 0).
	LockFamilyMigrate = advisoryNamespace + 1
	// LockFamilyJanitor: one instance at a time cleans up (session-level,
	// key 0).
	LockFamilyJanitor = advisoryNamespace + 2
	// LockFamilyOwner: count-then-insert ceilings of an owner scope
	// (transaction-level, key hashtext of the scope).
	LockFamilyOwner = advisoryNamespace + 3
	// LockFamilyAgentPage: an endpoint's page count (transaction-level,
	// key hashtext of the endpoint id). Two endpoints whose ids hash alike
	// only wait for each other; neither counts wrong.
	LockFamilyAgentPage = advisoryNamespace + 4
	// LockFamilyFanOut: one fan-out at a time across instances
	// (transaction-level, key 0, tried: an instance that finds it taken
	// skips its fan-out; fanOutSQL).
	LockFamilyFanOut = advisoryNamespace + 5
	// LockFamilyClaim: an instance's claims against its own flushes
	// (transaction-level, key hashtext of the instance's name). A claim
	// holds it alone from just before its statement to its commit; a flush
	// takes it shared before it claims held rows (ClaimHeld), so that the
	// flush's statement sees every row a claim of the same instance took,
	// and the rows queued here go out first. Two instances whose names
	// hash alike only wait for each other.
	LockFamilyClaim = advisoryNamespace + 6
)

// legacyMigrateLockKey is the one-key lock builds before the families
// took while migrating ("sbnotify" in ASCII). Migrating takes it too, so
// an older build migrating at the same moment (a rolling upgrade) waits.
const legacyMigrateLockKey int64 = 0x73626e6f74696679
