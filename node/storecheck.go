package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/scafo/ingress/node/store/s3"
)

// bucketChecker is the S3 store's one-call reachability check (s3.Store.CheckBucket).
type bucketChecker interface {
	CheckBucket(ctx context.Context) error
}

// storeCheckTimeout bounds the start's store check.
const storeCheckTimeout = 10 * time.Second

// checkStoreAtStart reads the S3 bucket once before the node serves. A failure is an
// ERROR naming the setting at fault (ExplainS3Error); the node still starts: it does not
// report ready (GET /v1/readyz answers 503) and serves no document until it has read
// the store, and one it served before a restart (a store outage is not a
// misconfiguration) is served as remembered.
func checkStoreAtStart(ctx context.Context, c S3StoreConfig, st bucketChecker, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	err := st.CheckBucket(ctx)
	if err == nil {
		return nil
	}
	setting, explained := s3.Explain(c, err)
	log.Error("the store cannot be read: not ready until it can", "setting", setting, "err", explained.Error())
	return explained
}

// ExplainS3Error turns a failed S3 call into what the operator fixes: the setting at
// fault and an error naming it (s3.Explain).
func ExplainS3Error(c S3StoreConfig, err error) (string, error) { return s3.Explain(c, err) }
