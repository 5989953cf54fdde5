package s3_test

import (
	"context"
	"strings"
	"testing"

	s3store "github.com/scafo/ingress/node/store/s3"
)

// TestAnEndpointHoldingACredentialIsNotRepeatedByTheStore: an S3 store given an
// endpoint holding a credential does not open, and its error does not repeat the
// secret into the journal (from node/config_input_test.go's
// TestAnEndpointHoldingACredentialIsRefusedWithoutRepeatingIt; the loader's refusal is
// node/store's TestStoreSettingsLoadOrAreRefusedNamingTheirSource).
func TestAnEndpointHoldingACredentialIsNotRepeatedByTheStore(t *testing.T) {
	for _, ep := range []string{"https://AKIA:s3cr3t@s3.example.com", "AKIA:s3cr3t@s3.example.com", "https://AKIA:s3cr3t@s3.example.com/x?y"} {
		_, err := s3store.New(context.Background(), s3store.Config{Endpoint: ep, Bucket: "b"})
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the S3 store opened on %s: %v, want an error that does not repeat the secret", ep, err)
		}
	}
}
