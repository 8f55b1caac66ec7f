package daemon

import (
	"context"
	"log"
	"os"

	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/door"
	"github.com/kaimon/kaimon/internal/session"
)

// startDoor opens the MCP door on a free loopback port, records it in
// <sock_dir>/door.json, and hands it to the manager, so that every agent
// opened from now on gets an MCP config naming it. It returns the door's
// URL ("" if it could not listen: the daemon then runs without it, and an
// agent under only that names MCP tools is refused) and a stop function
// that waits for the door to close (ctx ends it) and removes door.json.
func startDoor(ctx context.Context, mgr *session.Manager, paths config.Paths) (string, func()) {
	d := door.New(mgr)
	if err := d.Listen("127.0.0.1:0"); err != nil {
		log.Printf("running without the MCP door: %v", err)
		return "", func() {}
	}
	info := paths.DoorFile()
	if err := d.WriteInfo(info); err != nil {
		log.Printf("recording the MCP door in %s: %v", info, err)
	}
	mgr.SetDoor(d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Serve(ctx); err != nil {
			log.Printf("MCP door: %v", err)
		}
	}()
	log.Printf("MCP door on %s", d.URL())
	return d.URL(), func() {
		<-done
		os.Remove(info)
	}
}
