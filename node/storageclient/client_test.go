package storageclient_test

import (
	"testing"

	"github.com/scafo/ingress/node/storageclient"
)

// TestRefusesBadEndpoints: the client refuses what it cannot use.
func TestRefusesBadEndpoints(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:7400", "ftp://h", "http://", "http://h?x=1", "http://u:p@h"} {
		if _, err := storageclient.New(ep, "tok", storageclient.Options{}); err == nil {
			t.Errorf("New(%q) accepted", ep)
		}
	}
	if _, err := storageclient.New("http://127.0.0.1:7400", "", storageclient.Options{}); err == nil {
		t.Error("New with no token accepted")
	}
}
