// Package apisurface holds the tests that keep the packages an embedder
// imports free of what they must not touch (issue 27): no type of store,
// actors or an internal package in their exported API, no struct that
// mixes exported fields with hidden ones (a Config a test writes behind
// the embedder's back), and an Engine whose methods are the lean set.
package apisurface

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/switchboard/notify"

// embedded are the packages an embedder imports: the engine, its
// vocabulary, test kit and migrations, and the product features built on
// it that an embedder may use.
var embedded = []string{
	module + "/engine",
	module + "/notifytype",
	module + "/engine/notifytest",
	module + "/engine/enginemigrate",
	module + "/engine/digests",
	module + "/engine/pages",
	module + "/engine/warnings",
	module + "/engine/history",
	module + "/engine/clocks",
}

// leanEngine is every exported method of *engine.Engine. A method added to
// the engine must be part of what every embedder needs (lifecycle, Emit,
// connections, sinks, subscriptions, status, events and configuration);
// a product feature belongs in a package of its own (engine/digests, ...).
var leanEngine = []string{
	// Lifecycle.
	"Start", "Stop", "Serve", "Config", "CleanUp", "OutcomesDropped",
	// Events.
	"Emit", "QueueEmit", "EmitToSink", "EventKinds",
	// Connections.
	"CreateConnection", "ListConnections", "UpdateConnection", "DeleteConnection",
	// Sinks.
	"CreateSink", "GetSink", "ListSinks", "UpdateSink", "SetSinkEnabled", "DeleteSink",
	"SendTestMessage", "TrySinkSettings", "ListDeliveries",
	// Subscriptions.
	"SetSubscriptions", "AddSubscription", "ListSubscriptions", "DeleteSubscription",
	// Status.
	"SinkStatuses", "AllSinkStatuses",
}

// load type-checks pkgs from the compiler's export data (go list -export),
// which carries exactly their exported API.
func load(t *testing.T, pkgs ...string) map[string]*types.Package {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	loaded := map[string]*types.Package{}
	for _, p := range pkgs {
		pkg, err := imp.Import(p)
		if err != nil {
			t.Fatalf("importing %s: %v", p, err)
		}
		loaded[p] = pkg
	}
	return loaded
}

// forbidden reports whether an embedder must not see a type of package path.
func forbidden(path string) bool {
	return path == module+"/store" || strings.HasPrefix(path, module+"/store/") ||
		path == module+"/actors" || strings.HasPrefix(path, module+"/actors/") ||
		strings.HasPrefix(path, module+"/internal/") ||
		strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// walker visits the types an exported identifier of pkg reaches, through
// the types of pkg itself, and names every forbidden one it meets.
type walker struct {
	pkg  *types.Package
	seen map[types.Type]bool
	bad  map[string][]string // identifier -> forbidden types it mentions
}

func (w *walker) visit(where string, t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	switch t := t.(type) {
	case *types.Alias:
		w.visit(where, types.Unalias(t))
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && forbidden(obj.Pkg().Path()) {
			w.bad[where] = append(w.bad[where], obj.Pkg().Path()+"."+obj.Name())
			return
		}
		for i := range t.TypeArgs().Len() {
			w.visit(where, t.TypeArgs().At(i))
		}
		if obj.Pkg() != w.pkg {
			return // another package's API: its own test's concern
		}
		w.seen[t] = true
		w.visit(where, t.Underlying())
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				w.visit(where+"."+m.Name(), m.Type())
			}
		}
	case *types.Pointer:
		w.visit(where, t.Elem())
	case *types.Slice:
		w.visit(where, t.Elem())
	case *types.Array:
		w.visit(where, t.Elem())
	case *types.Map:
		w.visit(where, t.Key())
		w.visit(where, t.Elem())
	case *types.Chan:
		w.visit(where, t.Elem())
	case *types.Signature:
		for i := range t.Params().Len() {
			w.visit(where, t.Params().At(i).Type())
		}
		for i := range t.Results().Len() {
			w.visit(where, t.Results().At(i).Type())
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() {
				w.visit(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			w.visit(where+"."+t.Method(i).Name(), t.Method(i).Type())
		}
	}
}

// valueInputs are pkg's struct types that its exported functions and
// methods take by value (Config, Event, SinkInput, ...): values an
// embedder builds field by field.
func valueInputs(pkg *types.Package) []*types.Named {
	var sigs []*types.Signature
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func:
			sigs = append(sigs, obj.Type().(*types.Signature))
		case *types.TypeName:
			ms := types.NewMethodSet(types.NewPointer(obj.Type()))
			for i := range ms.Len() {
				if m := ms.At(i).Obj(); m.Exported() {
					sigs = append(sigs, m.Type().(*types.Signature))
				}
			}
		}
	}
	var out []*types.Named
	for _, sig := range sigs {
		for i := range sig.Params().Len() {
			n, ok := types.Unalias(sig.Params().At(i).Type()).(*types.Named)
			if !ok || n.Obj().Pkg() != pkg || slices.Contains(out, n) {
				continue
			}
			if _, ok := n.Underlying().(*types.Struct); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestEmbeddedAPIExposesNoInternalTypes walks every exported identifier
// of the packages an embedder imports and fails naming each that mentions
// a type of store, actors or an internal package, and each struct an
// embedder passes by value (a Config, an input) that mixes exported fields
// with hidden ones.
func TestEmbeddedAPIExposesNoInternalTypes(t *testing.T) {
	for path, pkg := range load(t, embedded...) {
		w := &walker{pkg: pkg, seen: map[types.Type]bool{}, bad: map[string][]string{}}
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			if obj := scope.Lookup(name); obj.Exported() {
				w.visit(name, obj.Type())
			}
		}
		var hidden []string
		for _, st := range valueInputs(pkg) {
			exported, unexported := 0, 0
			s := st.Underlying().(*types.Struct)
			for i := range s.NumFields() {
				if s.Field(i).Exported() {
					exported++
				} else {
					unexported++
				}
			}
			if exported > 0 && unexported > 0 {
				hidden = append(hidden, st.Obj().Name())
			}
		}
		for _, where := range slices.Sorted(func(yield func(string) bool) {
			for k := range w.bad {
				if !yield(k) {
					return
				}
			}
		}) {
			t.Errorf("%s: %s mentions %s, which an embedder must not touch", path, where, strings.Join(slices.Compact(slices.Sorted(slices.Values(w.bad[where]))), ", "))
		}
		for _, name := range hidden {
			t.Errorf("%s: %s has exported fields and hidden ones (go doc: \"Has unexported fields\"): an embedder's value must hold all of it", path, name)
		}
	}
}

// TestEngineMethodsAreTheLeanSet lists *engine.Engine's exported methods
// and fails on any outside leanEngine (a product feature belongs in a
// package of its own), and on any of leanEngine gone (keep the list true).
func TestEngineMethodsAreTheLeanSet(t *testing.T) {
	pkg := load(t, module+"/engine")[module+"/engine"]
	eng := pkg.Scope().Lookup("Engine")
	if eng == nil {
		t.Fatal("package engine has no Engine")
	}
	ms := types.NewMethodSet(types.NewPointer(eng.Type()))
	var have []string
	for i := range ms.Len() {
		if m := ms.At(i).Obj(); m.Exported() {
			have = append(have, m.Name())
		}
	}
	for _, m := range have {
		if !slices.Contains(leanEngine, m) {
			t.Errorf("engine.Engine has method %s, outside the lean set: put a product feature in a package of its own, or add it to leanEngine if every embedder needs it", m)
		}
	}
	for _, m := range leanEngine {
		if !slices.Contains(have, m) {
			t.Errorf("engine.Engine has no method %s any more: drop it from leanEngine", m)
		}
	}
}

// contentFields are engine.Content's fields, each with its JSON key: what
// any event says (item, place, summary, subject, link, a report's lines,
// the body for the opt-in excerpt) and the embedder's own values (Data).
// Nothing of the reference product: the host's todo values (cause,
// attempts, the last attempt's summary, ...) are its Data entries.
var contentFields = []string{
	"Title title", "Place place", "Summary summary", "Subject subject", "LinkPath link_path",
	"Lines lines", "Data data", "Body body",
}

// TestContentIsGeneric lists engine.Content's fields (go doc's) and fails
// on any outside contentFields, and on any gone: a field of one embedder's
// product belongs in Data (issue 27 item 1).
func TestContentIsGeneric(t *testing.T) {
	pkg := load(t, module+"/engine")[module+"/engine"]
	obj := pkg.Scope().Lookup("Content")
	if obj == nil {
		t.Fatal("package engine has no Content")
	}
	s, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		t.Fatalf("engine.Content is %s, not a struct", obj.Type())
	}
	var have []string
	for i := range s.NumFields() {
		f := s.Field(i)
		key, _, _ := strings.Cut(reflect.StructTag(s.Tag(i)).Get("json"), ",")
		have = append(have, f.Name()+" "+key)
	}
	if !slices.Equal(have, contentFields) {
		t.Errorf("engine.Content's fields are %q, want %q: put a product's own values in Data", have, contentFields)
	}
	if ms := types.NewMethodSet(types.NewPointer(obj.Type())); ms.Len() != 0 {
		t.Errorf("engine.Content has %d methods, want none (an old row's shape is read by the engine's decode)", ms.Len())
	}
}

// TestSinksHasNoHostWording: the reference host's wording (its titles,
// labels, sentences and links) is the host's, not sinks' (which keeps the
// engine's rules and the adapters).
func TestSinksHasNoHostWording(t *testing.T) {
	pkg := load(t, module+"/sinks")[module+"/sinks"]
	for _, name := range []string{"HostDraft", "Render", "RenderCoalesced", "TitlePrefix", "CoalescedLabel",
		"AttemptSummaryLabel", "AgentPagePrefix", "BoardLinkText", "CoalescedLinkPath", "SubjectLabel"} {
		if pkg.Scope().Lookup(name) != nil {
			t.Errorf("sinks.%s is the reference host's wording: it belongs in host", name)
		}
	}
}

// eventTypeMethods is every exported method of notifytype.EventType: the
// name's syntax only. What a type means (its words, its severity) is its
// declaration's (engine.EventKind), not the vocabulary's.
var eventTypeMethods = []string{"Valid"}

// TestNotifytypeNamesNoProductEvents: notifytype (go doc's exports) names
// no event type of the reference product (issue 27 item 1): no Event*
// identifier but EventType itself, no constant or variable of type
// EventType (or a list of them), and EventType's methods are
// eventTypeMethods. The host's types are host's (host.EventTodoDeadLettered,
// ...), the engine's own are engine's (engine.EventAgentNotify,
// engine.EventDigest).
func TestNotifytypeNamesNoProductEvents(t *testing.T) {
	pkg := load(t, module+"/notifytype")[module+"/notifytype"]
	et := pkg.Scope().Lookup("EventType")
	if et == nil {
		t.Fatal("package notifytype has no EventType")
	}
	isEventType := func(typ types.Type) bool {
		if s, ok := typ.(*types.Slice); ok {
			typ = s.Elem()
		}
		if a, ok := typ.(*types.Array); ok {
			typ = a.Elem()
		}
		return types.Identical(typ, et.Type())
	}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() || name == "EventType" {
			continue
		}
		if strings.HasPrefix(name, "Event") {
			t.Errorf("notifytype.%s names an event type: declare it where it is emitted (host, engine)", name)
			continue
		}
		switch obj.(type) {
		case *types.Const, *types.Var:
			if isEventType(obj.Type()) {
				t.Errorf("notifytype.%s is an event type: declare it where it is emitted (host, engine)", name)
			}
		}
	}
	ms := types.NewMethodSet(et.Type())
	var have []string
	for i := range ms.Len() {
		if m := ms.At(i).Obj(); m.Exported() {
			have = append(have, m.Name())
		}
	}
	slices.Sort(have)
	if !slices.Equal(have, eventTypeMethods) {
		t.Errorf("notifytype.EventType's methods are %v, want %v: what a type means is its declaration's (engine.EventKind)", have, eventTypeMethods)
	}
}
