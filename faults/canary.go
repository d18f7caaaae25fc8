package faults

import (
	"crypto/rand"
	"os"
	"strings"
	"sync"
)

// CanaryEnv is SWITCHBOARD_FAULTS_CANARY: the secret planted for a whole
// run of the suite (make faults sets one for every package). Unset, each
// test binary makes its own.
const CanaryEnv = "SWITCHBOARD_FAULTS_CANARY"

var (
	canaryOnce sync.Once
	canary     string
)

// Canary returns the run's canary: a random token that a scenario plants
// as a Gotify token, an Apprise URL and an authorization value, and then
// searches for everywhere it can look. It is long and random enough that
// it appears nowhere by chance.
func Canary() string {
	canaryOnce.Do(func() {
		canary = strings.TrimSpace(os.Getenv(CanaryEnv))
		if len(canary) < 16 {
			canary = "cnry" + strings.ToLower(rand.Text())
		}
	})
	return canary
}

// Secrets are the values a scenario plants, all built around the canary.
type Secrets struct {
	// GotifyToken is a Gotify application token.
	GotifyToken string
	// AppriseURL is an Apprise notification URL carrying the canary in
	// its credentials.
	AppriseURL string
	// Authorization is an Apprise API authorization header value.
	Authorization string
}

// PlantedSecrets returns the run's secrets.
func PlantedSecrets() Secrets {
	c := Canary()
	return Secrets{
		GotifyToken:   "gtfya." + c,
		AppriseURL:    "tgram://" + c + "bot/12345",
		Authorization: "Bearer " + c + "auth",
	}
}

// CountCanary counts the occurrences of the canary in each text.
func CountCanary(texts ...string) int {
	c, n := Canary(), 0
	for _, s := range texts {
		n += strings.Count(s, c)
	}
	return n
}
