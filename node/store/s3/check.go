package s3

import (
	"context"
	"log/slog"
	"time"

	"github.com/scafo/ingress/node/store"
)

// BucketChecker is a store's one-call reachability check (Store.CheckBucket).
type BucketChecker interface {
	CheckBucket(ctx context.Context) error
}

// startCheckTimeout bounds the start's check.
const startCheckTimeout = 10 * time.Second

// CheckAtStart reads the bucket once before a node serves. A failure is an ERROR
// naming the setting at fault (Explain), and the explained error is returned; the
// node still starts: it does not report ready (GET /v1/readyz answers 503) and serves
// no document until it has read the store, and one it served before a restart (a
// store outage is not a misconfiguration) is served as remembered.
func CheckAtStart(ctx context.Context, c store.S3Config, st BucketChecker, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, startCheckTimeout)
	defer cancel()
	err := st.CheckBucket(ctx)
	if err == nil {
		return nil
	}
	setting, explained := Explain(c, err)
	log.Error("the store cannot be read: not ready until it can", "setting", setting, "err", explained.Error())
	return explained
}
