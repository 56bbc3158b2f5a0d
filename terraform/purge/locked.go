package purge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// The tag that hands a version under an object lock to the bucket's lifecycle rule,
// which expires it once the lock allows it: Gardener's AWS extension's tag, so that a
// bucket it set up expires what either left behind.
const (
	ExpiryTagKey   = "gardener.cloud/to-be-deleted"
	ExpiryTagValue = "true"
)

// handOver tags a version S3 refused to delete (code) for the lifecycle rule when an
// object lock is what keeps it: a retention period not over yet, or a legal hold. It
// says false for a version refused for any other reason.
func handOver(ctx context.Context, c *s3.Client, bucket string, v version, code string) (bool, error) {
	if code != "AccessDenied" || v.id == "" {
		return false, nil
	}
	isLocked, err := locked(ctx, c, bucket, v)
	if err != nil || !isLocked {
		return false, err
	}
	if err := tag(ctx, c, bucket, v); err != nil {
		return false, fmt.Errorf("tagging %s (version %s) in s3://%s for expiry: %w", v.key, v.id, bucket, err)
	}
	return true, nil
}

// locked says whether an object lock keeps v: its retention runs, or a legal hold is on.
// A bucket without object lock answers with an error, which says no lock.
func locked(ctx context.Context, c *s3.Client, bucket string, v version) (bool, error) {
	retention, err := c.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(v.key), VersionId: aws.String(v.id)})
	if err == nil && retention.Retention != nil && aws.ToTime(retention.Retention.RetainUntilDate).After(time.Now()) {
		return true, nil
	}
	if err != nil && !noLock(err) {
		return false, fmt.Errorf("reading the retention of %s (version %s) in s3://%s: %w", v.key, v.id, bucket, err)
	}
	hold, err := c.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String(bucket), Key: aws.String(v.key), VersionId: aws.String(v.id)})
	if err != nil {
		if noLock(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the legal hold of %s (version %s) in s3://%s: %w", v.key, v.id, bucket, err)
	}
	return hold.LegalHold != nil && hold.LegalHold.Status == types.ObjectLockLegalHoldStatusOn, nil
}

// noLock says whether err is S3's answer for a version that has no retention or legal
// hold, or a bucket without object lock.
func noLock(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case "NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError", "InvalidRequest":
		return true
	}
	return false
}

// tag adds the expiry tag to v's tags, keeping the others.
func tag(ctx context.Context, c *s3.Client, bucket string, v version) error {
	current, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(v.key), VersionId: aws.String(v.id)})
	if err != nil {
		return err
	}
	tags := []types.Tag{{Key: aws.String(ExpiryTagKey), Value: aws.String(ExpiryTagValue)}}
	for _, t := range current.TagSet {
		if aws.ToString(t.Key) != ExpiryTagKey {
			tags = append(tags, t)
		}
	}
	_, err = c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{
		Bucket: aws.String(bucket), Key: aws.String(v.key), VersionId: aws.String(v.id),
		Tagging: &types.Tagging{TagSet: tags},
	})
	return err
}
