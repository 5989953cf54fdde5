package fleetwrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// OpenRegistry opens (or starts) the registry persisted at path, allocating ports in
// min..max and quarantining released ones for quarantine.
func OpenRegistry(path string, min, max int, quarantine time.Duration) (*Registry, error) {
	reg := &Registry{
		path:       path,
		min:        min,
		max:        max,
		quarantine: quarantine,
		now:        time.Now,
		state:      registryState{Instances: map[string]fleet.Instance{}, Pairs: map[string]pair{}},
	}
	b, err := os.ReadFile(reg.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		reg.fresh = true
		return reg, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", reg.path, err)
	}
	if err := json.Unmarshal(b, &reg.state); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", reg.path, err)
	}
	if reg.state.Instances == nil {
		reg.state.Instances = map[string]fleet.Instance{}
	}
	if reg.state.Pairs == nil {
		reg.state.Pairs = map[string]pair{}
	}
	if err := reg.checkLoaded(); err != nil {
		return nil, fmt.Errorf("%s: %w", reg.path, err)
	}
	return reg, nil
}

// checkLoaded checks a registry just read from its file (hand-edited or corrupt) for
// what the registry itself never writes (caller is OpenRegistry):
//
//   - Two applications' instances on one port: an error naming the port and both
//     applications. The node refuses to start, as for an undecodable file: two
//     tenants' hostnames must never dial one process, and which one owns the port is
//     the operator's call, not a guess.
//   - A pair that does not fit is dropped (its instance stays, unpaired, and is
//     paired again at its next Allocate or Set, as for files written before pairs):
//     its instance gone or of another incarnation, both members one port, the
//     instance's port not a member, its idle member outside ports.min..ports.max
//     (the instance's own port may be outside: the admin may set any port), a member
//     that is another application's instance's port or quarantined for another
//     application (or incarnation), and a member of another application's pair (both
//     pairs that share it are dropped: neither is known to own it).
func (r *Registry) checkLoaded() error {
	byPort := map[int]string{}
	for _, app := range sortedKeys(r.state.Instances) {
		p := r.state.Instances[app].Port
		if other, ok := byPort[p]; ok {
			return fmt.Errorf("corrupt instances: port %d is the instance of both %s and %s (two applications' hostnames would dial one process); fix or remove the file", p, other, app)
		}
		byPort[p] = app
	}
	now := r.now()
	for app, pr := range r.state.Pairs {
		i, ok := r.state.Instances[app]
		keep := ok && i.AppID == pr.AppID && pr.Ports[0] != pr.Ports[1] && pr.has(i.Port)
		if keep {
			if idle := pr.other(i.Port); idle < r.min || idle > r.max {
				keep = false
			}
		}
		for _, m := range pr.Ports {
			if h, ok := byPort[m]; keep && ok && h != app {
				keep = false
			}
			for _, q := range r.state.Quarantine {
				if keep && q.Port == m && (q.Pending || now.Before(q.Until)) && (q.App != app || q.AppID != pr.AppID) {
					keep = false
				}
			}
		}
		if !keep {
			delete(r.state.Pairs, app)
			continue
		}
		r.state.Pairs[app] = newPair(pr.AppID, pr.Ports[0], pr.Ports[1])
	}
	members := map[int][]string{}
	for app, pr := range r.state.Pairs {
		for _, m := range pr.Ports {
			members[m] = append(members[m], app)
		}
	}
	for _, apps := range members {
		if len(apps) > 1 {
			for _, app := range apps {
				delete(r.state.Pairs, app)
			}
		}
	}
	return nil
}

func (r *Registry) clone() registryState {
	c := registryState{Instances: maps.Clone(r.state.Instances), Pairs: maps.Clone(r.state.Pairs)}
	c.Quarantine = append([]quarantined(nil), r.state.Quarantine...)
	return c
}

// save writes the registry atomically (temp file, fsync, rename).
func (r *Registry) save() error {
	sort.Slice(r.state.Quarantine, func(i, j int) bool { return r.state.Quarantine[i].Port < r.state.Quarantine[j].Port })
	b, err := json.MarshalIndent(r.state, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".instances-*.tmp")
	if err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	return nil
}
