package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/client"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
)

// storeInitCommand is `scafo-node store init`: create the store the node's configuration
// names, read exactly as the node reads it (--configFile, SCAFO_* and the node's flags).
// With store.s3.endpoint set, the bucket store.s3.bucket is created when it does not
// exist; otherwise the directory store (store.dir.path, default <stateDir>/store) is.
// Idempotent: a store that exists is left as it is. An operator runs it once per fleet
// before the first node starts (docs/install.md); a node never creates its bucket.
func storeInitCommand() *cli.Command {
	cfg := node.NewConfig()
	usage := "scafo-node store init [--configFile=<file>] [node flags]"
	return &cli.Command{
		Name: "init",
		Description: "Create the store the node's configuration names (the S3 bucket store.s3.bucket, or the " +
			"directory store), read as the node reads it; a store that exists is left as it is.",
		Configuration:  cfg,
		Resources:      node.Loaders(os.Environ()),
		CustomHelpFunc: client.Help(usage, nil),
		Run: func([]string) error { // the arguments are the flags the loaders decoded
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return storeInit(ctx, cfg, os.Stdout)
		},
	}
}

// storeInit creates cfg's store if it does not exist and says what it found or did.
func storeInit(ctx context.Context, cfg *node.Config, out io.Writer) error {
	c := cfg.Store.S3
	if c.Endpoint == "" {
		return dirStoreInit(cfg, out)
	}
	if c.Bucket == "" {
		return errors.New("store.s3.bucket is empty: name the fleet's bucket (SCAFO_STORE_S3_BUCKET, --store.s3.bucket)")
	}
	st, err := s3.New(ctx, s3.Config{
		Endpoint: c.Endpoint, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Insecure: c.Insecure,
		MaxRetries: 1, // an operator at a terminal: say at once what is wrong
	})
	if err != nil {
		return fmt.Errorf("store.s3: %w", err)
	}
	where := fmt.Sprintf("s3://%s/%s", strings.TrimPrefix(strings.TrimPrefix(c.Endpoint, "https://"), "http://"), c.Bucket)
	err = st.CheckBucket(ctx)
	if err == nil {
		fmt.Fprintf(out, "store %s exists: nothing to do\n", where)
		return nil
	}
	var er minio.ErrorResponse
	if !strings.Contains(err.Error(), "no such bucket") && !(errors.As(err, &er) && er.Code == "NoSuchBucket") {
		return explainS3(err, c)
	}
	if err := st.CreateBucket(ctx, c.Region); err != nil {
		return explainS3(err, c)
	}
	if err := st.CheckBucket(ctx); err != nil { // created, and these credentials reach it
		return explainS3(err, c)
	}
	fmt.Fprintf(out, "store %s created\n", where)
	return nil
}

// explainS3 turns a failed bucket request into an error that names the setting to
// fix: the node's own explanation (s3.Explain), one for both.
func explainS3(err error, c node.S3StoreConfig) error {
	_, e := s3.Explain(c, err)
	return e
}

// dirStoreInit creates the directory store, owned like the state dir that holds it (a
// root shell creating the store of a node that runs as its own user must not leave it
// root's).
func dirStoreInit(cfg *node.Config, out io.Writer) error {
	path := cfg.Store.Dir.Path
	if path == "" {
		path = filepath.Join(cfg.StateDir, "store")
	}
	_, statErr := os.Stat(path)
	st, err := dir.New(path)
	if err != nil {
		return fmt.Errorf("store.dir.path: %w", err)
	}
	st.Close()
	if fi, err := os.Stat(filepath.Dir(path)); err == nil && os.Geteuid() == 0 {
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			if err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, int(sys.Uid), int(sys.Gid))
			}); err != nil {
				return fmt.Errorf("store.dir.path %s: giving it the owner of %s: %w", path, filepath.Dir(path), err)
			}
		}
	}
	if statErr == nil {
		fmt.Fprintf(out, "store dir:%s exists: nothing to do\n", path)
	} else {
		fmt.Fprintf(out, "store dir:%s created\n", path)
	}
	return nil
}
