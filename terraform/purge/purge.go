package purge

import (
	"context"
	"fmt"
)

// Run purges what s names with the credentials of the run's environment (environ,
// "NAME=value" entries). It is idempotent: a purge that failed half-way deletes the rest
// when run again.
func Run(ctx context.Context, s *Spec, environ []string) (Result, error) {
	if err := s.Check(); err != nil {
		return Result{}, err
	}
	c, err := newS3Client(s, environment(environ))
	if err != nil {
		return Result{}, err
	}
	result, err := purgeS3(ctx, c, s.Bucket, s.Prefix)
	if err != nil {
		return result, fmt.Errorf("purging s3://%s/%s: %w", s.Bucket, s.Prefix, err)
	}
	return result, nil
}
