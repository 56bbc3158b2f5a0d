package purge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Key is the key of the configuration ConfigMap that carries a run's purge: the
// provider's declaration rendered for one object. A run that finds it purges before its
// destroy; the file never reaches terraform's working directory.
const Key = "terraseed-purge.json"

// KindS3 purges every version and delete marker under a prefix of an S3 bucket.
const KindS3 = "s3"

// Purpose is the purpose of the runs that may purge: a BackupEntry's.
const Purpose = "backupentry"

var (
	// ErrInvalid says a purge declaration can never work as it is.
	ErrInvalid = errors.New("invalid purge")
	// ErrNoCredentials says the run's environment holds none of the credentials the purge
	// names.
	ErrNoCredentials = errors.New("no credentials for the purge")
	// ErrNotPurged says objects under the prefix could be neither deleted nor handed to the
	// bucket's lifecycle rule.
	ErrNotPurged = errors.New("objects under the prefix were not deleted")
)

// Spec is one object's purge, resolved: what to delete, and the environment variables of
// the run that hold the credentials to do it with.
type Spec struct {
	// Kind is what is purged: KindS3.
	Kind string `json:"kind"`
	// Bucket and Prefix name what is deleted: every key that starts with Prefix, which ends
	// with "/" so that "entry/" never reaches "entry-2/".
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	Region string `json:"region"`
	// Env names the run's environment variables holding the credentials; none of their
	// values is ever written here.
	Env Env `json:"env"`
}

// Env names the environment variables of a run that hold each credential of a purge;
// empty: the run has no such credential.
type Env struct {
	AccessKeyID     string `json:"accessKeyID,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
	// Endpoint is an S3-compatible endpoint, addressed path-style.
	Endpoint string `json:"endpoint,omitempty"`
	// WebIdentityTokenFile holds the path of a workload identity's token, RoleARN the role
	// it assumes with it.
	WebIdentityTokenFile string `json:"webIdentityTokenFile,omitempty"`
	RoleARN              string `json:"roleARN,omitempty"`
}

// Parse reads a purge from the configuration and checks it.
func Parse(data []byte) (*Spec, error) {
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check refuses a purge that could delete more than one prefix, naming the field.
func (s *Spec) Check() error {
	switch {
	case s.Kind != KindS3:
		return fmt.Errorf("%w: kind: %q is not a kind of purge (one of: %s)", ErrInvalid, s.Kind, KindS3)
	case s.Bucket == "":
		return fmt.Errorf("%w: bucket: must not be empty", ErrInvalid)
	case s.Prefix == "" || s.Prefix == "/":
		// An empty prefix is the whole bucket.
		return fmt.Errorf("%w: prefix: must not be empty: it would name every object of the bucket", ErrInvalid)
	case !strings.HasSuffix(s.Prefix, "/"):
		return fmt.Errorf("%w: prefix: %q must end with \"/\", else it names the keys of other prefixes that start the same", ErrInvalid, s.Prefix)
	case s.Region == "":
		return fmt.Errorf("%w: region: must not be empty", ErrInvalid)
	}
	return nil
}
