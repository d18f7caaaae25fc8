# Switchboard Notify. `make run` starts the server on a local database;
# `make test` runs every test against a real PostgreSQL.

GO        ?= go
BIN       := bin/switchboard-notify
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 2s
# TEST_TIMEOUT: go test's -timeout in make test. A package's tests run their waits until 90 s
# before it (properties/waits_test.go), so a busy machine gets time, not failures
TEST_TIMEOUT ?= 30m

.PHONY: all build run test lint bench bench-go bench-short bench-drivers clean faults faults-short faults-fuzz mutants mutants-fast

all: lint test build

## build: compile the binary into bin/
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/switchboard-notify

## run: build, find or start a local PostgreSQL (scripts/devdb.sh), serve the demo
run: build
	@if [ -z "$$DATABASE_URL" ]; then DATABASE_URL=$$(scripts/devdb.sh) || exit 1; fi; \
	[ -s .devkey ] || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > .devkey; \
	export DATABASE_URL; export SWITCHBOARD_SECRET_KEY=$${SWITCHBOARD_SECRET_KEY:-$$(cat .devkey)}; \
	export SWITCHBOARD_DEMO=$${SWITCHBOARD_DEMO:-1}; exec ./$(BIN) serve

## test: vet, then every test with the race detector (PostgreSQL required); the
## reliability suite's short version (faults/) runs after the rest, so its
## processes and loads do not compete with the other packages for the cores;
## then examples/migrationtools (a module of its own: golang-migrate and goose) and
## examples/jobs (an outside service embedding the engine: its own event, uuid owners). The rule
## workers' limit tests (host/rulesandbox) run without -race: they are what the race
## detector's shadow memory and slowdown would change
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/faults')
	$(GO) test -count=1 -timeout 10m ./host/rulesandbox/
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./faults/...
	@if [ -f bench/go.mod ]; then echo "cd bench && $(GO) vet ./..."; cd bench && $(GO) vet ./...; fi
	cd examples/migrationtools && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/jobs && $(GO) vet ./... && $(GO) test -count=1 ./...

## faults: the full reliability and security suite (issue 11), then its table
## (docs/RELIABILITY.md): 10,000-row crash run, every fuzz target FAULTS_FUZZTIME
## Its packages run one at a time (-p 1): the rows with time bounds (6d, 7c, 7d) measure the
## server on a machine they have to themselves, not beside another package's faults.
FAULTS_REPORT   ?= $(CURDIR)/bin/faults-report.jsonl
FAULTS_FUZZTIME ?= 60s
# FAULTS_FUZZERS: empty runs every target of faults.FuzzTargets; or name some
FAULTS_FUZZERS  ?=
faults:
	@mkdir -p bin && rm -f $(FAULTS_REPORT)
	@export SWITCHBOARD_FAULTS_CANARY=cnry$$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n'); \
	SWITCHBOARD_FAULTS_FULL=1 SWITCHBOARD_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test -p 1 -count=1 -timeout 30m ./faults/...; st=$$?; \
	SWITCHBOARD_FAULTS_REPORT=$(FAULTS_REPORT) $(MAKE) --no-print-directory faults-fuzz FAULTS_FUZZTIME=$(FAULTS_FUZZTIME) || st=1; \
	$(GO) run ./faults/cmd/faults-table $(FAULTS_REPORT) || st=1; exit $$st

## faults-short: the suite's short version and 5 s per fuzz target, then the table
## (CI runs the short suite inside `make test` and adds faults-fuzz: .ci/run)
faults-short:
	@mkdir -p bin && rm -f $(FAULTS_REPORT)
	@SWITCHBOARD_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test -count=1 -timeout 10m ./faults/...; st=$$?; \
	SWITCHBOARD_FAULTS_REPORT=$(FAULTS_REPORT) $(MAKE) --no-print-directory faults-fuzz FAULTS_FUZZTIME=5s || st=1; \
	$(GO) run ./faults/cmd/faults-table $(FAULTS_REPORT) || st=1; exit $$st

## faults-fuzz: every fuzz target of the module (faults.FuzzTargets: faults/surface's,
## the schedule parser's, the rule save path's, Apprise's) for FAULTS_FUZZTIME each, in
## its own package; their inputs are row 6b of the table when SWITCHBOARD_FAULTS_REPORT is set
faults-fuzz:
	$(GO) run ./faults/cmd/faults-fuzz -go=$(GO) -fuzztime=$(FAULTS_FUZZTIME) $(FAULTS_FUZZERS)

## mutants: remove each guard of the delivery core from a scratch copy and run the tests
## named to kill it (faults/mutants/list.go, docs/RELIABILITY.md "Mutants"); fails when one
## survives. MUTANTS_J mutants at once; MUTANTS=fast (or make mutants-fast) runs the subset CI runs
MUTANTS_J     ?= 2
MUTANTS_FLAGS ?=
mutants:
	$(GO) run ./faults/cmd/mutants -j $(MUTANTS_J) $(if $(filter fast,$(MUTANTS)),-fast,-baseline) $(MUTANTS_FLAGS)

## mutants-fast: the mutants whose tests take seconds (CI runs it after make test)
mutants-fast:
	$(GO) run ./faults/cmd/mutants -j $(MUTANTS_J) -fast $(MUTANTS_FLAGS)

## bench: the full mode of the benchmarks: the testing.B benchmarks, then every driver (~20 min)
bench: bench-go bench-drivers

## bench-go: the testing.B benchmarks of the bench module (BENCHTIME=2s by default)
bench-go:
	@[ -f bench/go.mod ] || { echo "no bench/ module yet"; exit 1; }
	cd bench && $(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./...

## bench-drivers: the full figures of docs/BENCHMARKS.md, one driver after another (~15 min)
BENCHBIN ?= $(CURDIR)/bin/bench
bench-drivers:
	cd bench && $(GO) build -o $(BENCHBIN)/ ./cmd/...
	$(BENCHBIN)/emitratio
	$(BENCHBIN)/drainratio
	$(BENCHBIN)/latency
	$(BENCHBIN)/scale
	$(BENCHBIN)/storm

## bench-short: every bench driver in its short mode (seconds each), so that none rots; .ci/run runs it
bench-short:
	cd bench && $(GO) build -o $(BENCHBIN)/ ./cmd/...
	@for d in emitratio drainratio latency scale storm; do \
		echo "== $$d -short"; start=$$(date +%s); \
		$(BENCHBIN)/$$d -short > $(BENCHBIN)/$$d.short.log 2>&1 || { cat $(BENCHBIN)/$$d.short.log; exit 1; }; \
		tail -n 4 $(BENCHBIN)/$$d.short.log; echo "($$d: $$(( $$(date +%s) - start ))s)"; \
	done
	@echo "== drainratio -short -open-pools -fanned-out"; \
	$(BENCHBIN)/drainratio -short -open-pools -fanned-out > $(BENCHBIN)/drainratio.open.short.log 2>&1 || { cat $(BENCHBIN)/drainratio.open.short.log; exit 1; }; \
	tail -n 4 $(BENCHBIN)/drainratio.open.short.log

## lint: fail on unformatted files, then go vet
lint:
	@files=$$(find . \( -path ./.git -o -path ./.pgdata \) -prune -o -name '*.go' -print | xargs gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	@if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi
	cd examples/migrationtools && $(GO) vet ./...
	cd examples/jobs && $(GO) vet ./...

clean:
	rm -rf bin
