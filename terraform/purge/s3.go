package purge

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// pageSize is the most versions one listing returns and one DeleteObjects takes.
const pageSize = 1000

// Result is what a purge did.
type Result struct {
	// Deleted counts the versions and delete markers deleted.
	Deleted int
	// HandedOver counts the versions under an object lock, tagged for the bucket's
	// lifecycle rule to expire once the lock allows it.
	HandedOver int
}

// version is one version or delete marker of a key.
type version struct{ key, id string }

// purgeS3 deletes every version and delete marker whose key starts with prefix, as
// Gardener's AWS extension deletes a BackupEntry's backups; a version under an object
// lock is handed to the lifecycle rule (handOver). Each round lists from the same place
// again, where what was deleted is gone; a page of handed-over versions only is passed.
func purgeS3(ctx context.Context, c *s3.Client, bucket, prefix string) (Result, error) {
	var result Result
	handed := map[version]bool{}
	// lastDeleted are the versions the last round deleted: listed again, the server did
	// not delete them, and the purge would never end.
	lastDeleted := map[version]bool{}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(pageSize)}
	for {
		page, err := c.ListObjectVersions(ctx, in)
		if err != nil {
			return result, fmt.Errorf("listing the versions under s3://%s/%s: %w", bucket, prefix, err)
		}
		if todo := pending(page, prefix, handed); len(todo) > 0 {
			if lastDeleted[todo[0]] {
				return result, fmt.Errorf("%w: s3://%s lists %s (version %s) again after it reported it deleted", ErrNotPurged, bucket, todo[0].key, todo[0].id)
			}
			deleted, locked, err := deleteVersions(ctx, c, bucket, todo)
			result.Deleted += deleted
			if err != nil {
				return result, err
			}
			clear(lastDeleted)
			for _, v := range todo {
				lastDeleted[v] = true
			}
			for _, v := range locked {
				handed[v] = true
				delete(lastDeleted, v)
			}
			result.HandedOver += len(locked)
			if aws.ToBool(page.IsTruncated) {
				continue
			}
			return result, nil
		}
		if !aws.ToBool(page.IsTruncated) {
			return result, nil
		}
		if page.NextKeyMarker == nil {
			return result, fmt.Errorf("listing the versions under s3://%s/%s: a truncated page names no key to go on from", bucket, prefix)
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// pending are the versions and delete markers of page left to delete: under prefix (the
// server's listing is not relied on for that) and not handed over yet.
func pending(page *s3.ListObjectVersionsOutput, prefix string, handed map[version]bool) []version {
	var todo []version
	add := func(key, id *string) {
		v := version{key: aws.ToString(key), id: aws.ToString(id)}
		if strings.HasPrefix(v.key, prefix) && !handed[v] {
			todo = append(todo, v)
		}
	}
	for _, v := range page.Versions {
		add(v.Key, v.VersionId)
	}
	for _, m := range page.DeleteMarkers {
		add(m.Key, m.VersionId)
	}
	return todo
}

// deleteVersions deletes versions, at most pageSize, in one request, and returns how many
// it deleted and those an object lock keeps, handed over; any other version not deleted
// fails it.
func deleteVersions(ctx context.Context, c *s3.Client, bucket string, versions []version) (int, []version, error) {
	objects := make([]types.ObjectIdentifier, len(versions))
	for i, v := range versions {
		objects[i] = types.ObjectIdentifier{Key: aws.String(v.key)}
		if v.id != "" {
			objects[i].VersionId = aws.String(v.id)
		}
	}
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(bucket),
		Delete: &types.Delete{Objects: objects, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return 0, nil, fmt.Errorf("deleting %d versions in s3://%s: %w", len(versions), bucket, err)
	}
	deleted := len(versions) - len(out.Errors)
	var locked []version
	var failed []string
	for _, e := range out.Errors {
		v := version{key: aws.ToString(e.Key), id: aws.ToString(e.VersionId)}
		handedOver, err := handOver(ctx, c, bucket, v, aws.ToString(e.Code))
		switch {
		case err != nil:
			return deleted, locked, err
		case handedOver:
			locked = append(locked, v)
		default:
			failed = append(failed, fmt.Sprintf("%s (version %s): %s: %s", v.key, v.id, aws.ToString(e.Code), aws.ToString(e.Message)))
		}
	}
	if len(failed) > 0 {
		return deleted, locked, fmt.Errorf("%w: %d in s3://%s, the first: %s", ErrNotPurged, len(failed), bucket, failed[0])
	}
	return deleted, locked, nil
}
