package testnode

import (
	"fmt"
	"sync"
)

// addresses gives every node name a test starts its own loopback address, so two live
// nodes over one store never share a node.address (node/self/address.go refuses the
// second). vps-a, the node of most tests, is 127.0.0.1: the tests that probe a real
// listener run it there.
var addresses = struct {
	sync.Mutex
	byName map[string]string
}{byName: map[string]string{"vps-a": "127.0.0.1"}}

// Address is name's node.address in tests: the same for every node of that name,
// distinct across names (127.0.1.1 onwards, clear of the 127.0.0.x tests pick by hand).
func Address(name string) string {
	addresses.Lock()
	defer addresses.Unlock()
	if a, ok := addresses.byName[name]; ok {
		return a
	}
	n := len(addresses.byName) // 1 onwards: vps-a is in the map
	a := fmt.Sprintf("127.%d.%d.%d", 1+n/(250*250), 1+n/250%250, 1+n%250)
	addresses.byName[name] = a
	return a
}
