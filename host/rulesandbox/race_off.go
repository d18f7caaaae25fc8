//go:build !race

package rulesandbox

// raceBuild: see race_on.go.
const raceBuild = false
