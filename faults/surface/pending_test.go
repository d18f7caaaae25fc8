package surface_test

import "strings"

// pendingBelongs tells which scenario's row a pending note goes on.
func pendingBelongs(scenario, note string) bool {
	switch {
	case strings.Contains(note, "surface/hooks"):
		return strings.HasPrefix(scenario, "7.")
	case strings.Contains(note, "surface/fuzz"), strings.Contains(note, "surface/hostile"):
		return strings.HasPrefix(scenario, "6.")
	default:
		return strings.HasPrefix(scenario, "5.")
	}
}
