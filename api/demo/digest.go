package demo

import (
	"context"
	"fmt"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// The demo digest's names.
const (
	cairnName  = "demo-cairn"
	digestName = "demo-morning"
	// digestSchedule sends the demo digest every morning; the board page
	// of the digest sends one now.
	digestSchedule = "daily 09:00"
)

// setupDigest gives the demo human a morning digest of every queue to the
// demo sinks and to a local Cairn stand-in (replacing those of an earlier
// run, whose ports are gone), and returns its id.
func setupDigest(ctx context.Context, d httpx.Deps, rec *Receivers, humanID int64) (int64, error) {
	p, owner := engine.HumanPrincipal(hostid.String(humanID)), hostid.Human(humanID)
	existing, err := d.Digests.List(ctx, p, owner)
	if err != nil {
		return 0, fmt.Errorf("error listing demo digests: %w", err)
	}
	for _, dg := range existing {
		if dg.Name == digestName {
			if err := d.Digests.Delete(ctx, p, dg.ID); err != nil {
				return 0, fmt.Errorf("error replacing the demo digest: %w", err)
			}
		}
	}
	conns, err := d.Engine.ListConnections(ctx, p, owner)
	if err != nil {
		return 0, fmt.Errorf("error listing demo connections: %w", err)
	}
	for _, c := range conns {
		if c.Name == cairnName {
			if err := d.Engine.DeleteConnection(ctx, p, c.ID); err != nil {
				return 0, fmt.Errorf("error replacing the demo Cairn connection: %w", err)
			}
		}
	}
	cairnURL, err := rec.StartCairn()
	if err != nil {
		return 0, fmt.Errorf("error starting the demo Cairn stand-in: %w", err)
	}
	conn, err := d.Engine.CreateConnection(ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindCairn, Name: cairnName, BaseURL: cairnURL, Secret: notifytype.NewSecret(cairnToken),
	})
	if err != nil {
		return 0, fmt.Errorf("error creating the demo Cairn connection: %w", err)
	}
	sinks, err := d.Engine.ListSinks(ctx, p, owner)
	if err != nil {
		return 0, fmt.Errorf("error listing demo sinks: %w", err)
	}
	var sinkIDs []int64
	for _, s := range sinks {
		if s.Name == gotifyName || s.Name == appriseName {
			sinkIDs = append(sinkIDs, s.ID)
		}
	}
	dg, err := d.Digests.Create(ctx, p, digests.Input{
		Owner: owner, Name: digestName, Schedule: digestSchedule, SinkIDs: sinkIDs, CairnConnectionID: conn.ID,
	})
	if err != nil {
		return 0, fmt.Errorf("error creating the demo digest: %w", err)
	}
	return dg.ID, nil
}
