package rest_test

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/rest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
)

var (
	yamlPath   = regexp.MustCompile(`^  (/\S*):\s*$`)
	yamlMethod = regexp.MustCompile(`^    (get|put|post|delete|patch|head|options|trace):\s*$`)
)

// documentedRoutes reads the operations of an OpenAPI document written in
// block style: "paths:" at the margin, each path two spaces in, each method
// four. It returns "METHOD /path" like the mux's patterns.
func documentedRoutes(t *testing.T, doc []byte) []string {
	t.Helper()
	var out []string
	inPaths, path := false, ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
		case !inPaths || strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case !strings.HasPrefix(line, " "):
			inPaths = false
		case yamlPath.MatchString(line):
			path = yamlPath.FindStringSubmatch(line)[1]
		case yamlMethod.MatchString(line):
			require.NotEmpty(t, path, "a method outside a path: %q", line)
			out = append(out, strings.ToUpper(yamlMethod.FindStringSubmatch(line)[1])+" "+path)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestOpenAPIDocumentsEveryRoute holds the route table and openapi.yaml
// together both ways, checks the served document is the file, and sends
// every documented operation, with ids of real resources, to check the mux
// takes it (neither 404 nor 405) and answers with the standard headers.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	documented := documentedRoutes(t, file)
	require.Len(t, documented, 43)
	require.ElementsMatch(t, rest.Routes(), documented, "every route is documented, every documented operation is routed")

	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tok := b.human(t)
	served := b.ok(t, http.StatusOK, tok, "GET", "/api/v1/openapi.yaml", nil)
	require.Equal(t, file, served.body)
	require.Equal(t, rest.OpenAPI, served.body)
	require.Equal(t, "application/yaml", served.header.Get("Content-Type"))
	requireHeaders(t, served)

	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		t.Run(strings.ReplaceAll(op, "/", "_"), func(t *testing.T) {
			t.Parallel()
			// Each operation gets a human of its own with one of every
			// resource, so deletes and replaces do not disturb the others.
			hid, tok := b.human(t)
			conn := b.connection(t, tok, "", g.URL)
			spare := b.connection(t, tok, "", g.URL)
			sink := b.sink(t, tok, "", conn)
			sub := b.subscription(t, tok, sink)
			endpoint, _ := b.vend(t, tok, "", nil)
			hook, rule, delivery := b.webhook(t, tok)
			digest := b.digest(t, tok, sink)
			queue := b.w.F.Queue(hostid.Human(hid), "")
			todo, err := b.todos.Enqueue(b.w.Ctx, queue, host.TodoInput{Title: "a todo"})
			require.NoError(t, err)
			id := map[string]int64{"sinks": sink, "connections": spare, "endpoints": endpoint, "webhooks": hook,
				"digests": digest, "queues": queue, "todos": todo.ID}[strings.Split(path, "/")[3]]
			url := strings.NewReplacer("{id}", strconv.FormatInt(id, 10), "{sub}", strconv.FormatInt(sub, 10),
				"{rule}", strconv.FormatInt(rule, 10), "{delivery}", strconv.FormatInt(delivery, 10)).Replace(path)
			var body any
			if slices.Contains([]string{"POST", "PUT", "PATCH"}, method) {
				body = "{}"
			}
			r := b.do(t, tok, method, url, body)
			require.NotContains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, r.status, "%s %s: %s", method, url, r.body)
			require.Less(t, r.status, 500, "%s", r.body)
			requireHeaders(t, r)
		})
	}
}
