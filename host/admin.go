package host

import (
	"context"
	"strconv"
	"strings"

	"github.com/switchboard/notify/host/hoststore"
)

// HumanListing is a human with the teams they belong to, for the binary's
// admin listing.
type HumanListing struct {
	Human Human
	Teams []Membership
}

// ListHumans returns every human with their teams and roles, by id.
func (a *Accounts) ListHumans(ctx context.Context) ([]HumanListing, error) {
	humans, err := hoststore.ListHumans(ctx, a.pool)
	if err != nil {
		return nil, err
	}
	out := make([]HumanListing, len(humans))
	for i, h := range humans {
		teams, err := hoststore.TeamsOf(ctx, a.pool, h.ID)
		if err != nil {
			return nil, err
		}
		out[i] = HumanListing{Human: h, Teams: teams}
	}
	return out, nil
}

// ListTeams returns every team with its members, by id.
func (a *Accounts) ListTeams(ctx context.Context) ([]TeamListing, error) {
	return hoststore.ListTeams(ctx, a.pool)
}

// FindTeam returns the team named name, or, when no team has that name
// and name is a number, the team with that id; otherwise not_found.
func (a *Accounts) FindTeam(ctx context.Context, name string) (Team, error) {
	name = strings.TrimSpace(name)
	t, err := hoststore.TeamByName(ctx, a.pool, name)
	if err == nil {
		return t, nil
	}
	if id, perr := strconv.ParseInt(name, 10, 64); perr == nil {
		teams, lerr := hoststore.ListTeams(ctx, a.pool)
		if lerr != nil {
			return Team{}, lerr
		}
		for _, tl := range teams {
			if tl.Team.ID == id {
				return tl.Team, nil
			}
		}
	}
	return Team{}, err
}
