package rest

// Routes lists the patterns New registers ("METHOD /path"), for the test
// that holds them and openapi.yaml together.
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.pattern
	}
	return out
}
