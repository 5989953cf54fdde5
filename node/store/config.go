package store

import (
	"errors"
	"fmt"
	"strings"
)

// Config selects the store backend (the node's store.* settings): S3 when an endpoint
// is set, else a directory.
type Config struct {
	Dir DirConfig `description:"Directory store." json:"dir"`
	S3  S3Config  `description:"S3-compatible store." json:"s3"`
}

// DirConfig is the directory store.
type DirConfig struct {
	Path string `description:"Store directory (default <stateDir>/store)." json:"path,omitempty" default:"<stateDir>/store"`
}

// S3Config is an S3-compatible bucket.
type S3Config struct {
	Endpoint        string `description:"S3 endpoint host[:port]." json:"endpoint,omitempty"`
	Bucket          string `description:"Bucket." json:"bucket,omitempty"`
	Prefix          string `description:"Key prefix, so several fleets can share a bucket." json:"prefix,omitempty"`
	Region          string `description:"Region." json:"region,omitempty"`
	AccessKeyID     string `description:"Access key ID." json:"accessKeyID,omitempty" loggable:"false"`
	SecretAccessKey string `description:"Secret access key." json:"secretAccessKey,omitempty" loggable:"false"`
	Insecure        bool   `description:"Plain HTTP instead of HTTPS." json:"insecure,omitempty"`
}

// Validate lists what is wrong with c; it changes nothing. An S3 setting without
// store.s3.endpoint is refused: the node would otherwise run on its directory store, a
// fleet node that has silently left the fleet.
func (c Config) Validate() []error {
	s3 := c.S3
	if s3.Endpoint == "" {
		var set []string
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"bucket", s3.Bucket != ""}, {"prefix", s3.Prefix != ""}, {"region", s3.Region != ""},
			{"accessKeyID", s3.AccessKeyID != ""}, {"secretAccessKey", s3.SecretAccessKey != ""}, {"insecure", s3.Insecure},
		} {
			if f.set {
				set = append(set, "store.s3."+f.name)
			}
		}
		if len(set) > 0 {
			return []error{fmt.Errorf("%s set without store.s3.endpoint: the node would run on its directory store (%s); set the endpoint, or remove them",
				strings.Join(set, ", "), c.Dir.Path)}
		}
		return nil
	}
	var errs []error
	if !endpointIsHostPort(s3.Endpoint) {
		// The value is not repeated: what makes it wrong is most often a credential
		// written into it (https://KEY:SECRET@host), and the error goes to the journal.
		errs = append(errs, errors.New("store.s3.endpoint: want host[:port], optionally after http:// or https://, with no user, password, path, query or fragment (credentials go in store.s3.accessKeyID and store.s3.secretAccessKey); the value is not repeated here"))
	}
	if s3.Bucket == "" {
		errs = append(errs, errors.New("store.s3.bucket: required with store.s3.endpoint"))
	}
	return errs
}

// endpointIsHostPort reports whether ep is host[:port], bare or after http:// or
// https:// (a trailing slash allowed), as the S3 store takes it.
func endpointIsHostPort(ep string) bool {
	if rest, ok := strings.CutPrefix(ep, "https://"); ok {
		ep = rest
	} else if rest, ok := strings.CutPrefix(ep, "http://"); ok {
		ep = rest
	}
	ep = strings.TrimSuffix(ep, "/")
	return ep != "" && !strings.ContainsAny(ep, "/?#@ \t\n\\")
}

// String names the store: "dir:<path>" or "s3://<endpoint>/<bucket>[/<prefix>]" (the
// start line's store=).
func (c Config) String() string {
	if c.S3.Endpoint == "" {
		return "dir:" + c.Dir.Path
	}
	host := strings.TrimPrefix(strings.TrimPrefix(c.S3.Endpoint, "https://"), "http://")
	s := "s3://" + strings.TrimSuffix(host, "/") + "/" + c.S3.Bucket
	if p := strings.Trim(c.S3.Prefix, "/"); p != "" {
		s += "/" + p
	}
	return s
}
