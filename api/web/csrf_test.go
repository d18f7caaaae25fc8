package web_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
)

// stateChangingRoutes are the patterns of every route the web UI
// registers (mux.Handle or mux.HandleFunc in this package's source) that
// takes a POST: a method other than GET, HEAD or OPTIONS, or none. A
// registration whose pattern is not a string literal fails the test, so
// no route escapes the list.
func stateChangingRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var routes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) != 2 {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "http" {
				return true // the default mux: not the web UI's
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			require.True(t, ok && lit.Kind == token.STRING, "%s: a route whose pattern is not a literal", fset.Position(call.Pos()))
			pattern, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			method, _, hasMethod := strings.Cut(pattern, " ")
			switch {
			case !hasMethod:
				routes = append(routes, "POST "+pattern)
			case method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions:
				routes = append(routes, pattern)
			}
			return true
		})
	}
	return routes
}

var wildcardRE = regexp.MustCompile(`\{[^}]*\}`)

// A state-changing web request that carries neither Origin nor
// Sec-Fetch-Site is refused unless its Referer is the server's own origin
// (issue 24 item 7): on every state-changing route of the router, a form
// post from a signed-in browser with only a foreign Referer, or with
// none of the three headers, is answered the styled 403 and changes
// nothing; with the server's own Referer it reaches the route.
func TestFormPostWithoutOriginNeedsOurOwnReferer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.token")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")
	sinkID := strconv.FormatInt(sink.ID, 10)

	routes := stateChangingRoutes(t)
	require.GreaterOrEqual(t, len(routes), 26, "the router's form routes were found: %v", routes)
	t.Logf("%d state-changing routes", len(routes))
	post := func(path string, header ...string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader("name=evil"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return c.do(req)
	}
	pathOf := func(route string) string {
		_, pattern, _ := strings.Cut(route, " ")
		return strings.ReplaceAll(wildcardRE.ReplaceAllStringFunc(pattern, func(w string) string {
			if w == "{$}" {
				return ""
			}
			return sinkID
		}), "//", "/")
	}
	for _, route := range routes {
		path := pathOf(route)
		for name, header := range map[string][]string{
			"a foreign Referer only":             {"Referer", "https://evil.example/sinks"},
			"a look-alike Referer":               {"Referer", b.srv.URL + ".evil.example/"},
			"another port's Referer":             {"Referer", "http://127.0.0.1:1/sinks"},
			"no Origin, Sec-Fetch-Site, Referer": nil,
		} {
			res := post(path, header...)
			require.Equal(t, http.StatusForbidden, res.status, "%s with %s", route, name)
			require.Contains(t, res.body, "posted from another site", "%s with %s", route, name)
		}
	}
	require.Equal(t, 1, b.count(t, "sinks"), "nothing changed")
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM sessions`), "still signed in")

	for _, route := range routes {
		res := post(pathOf(route), "Referer", b.srv.URL+"/sinks/"+sinkID)
		require.NotContains(t, res.body, "posted from another site", "%s with our own Referer reaches the route", route)
	}
}
