package purge

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// environment reads a run's environment, "NAME=value" entries, into a map.
func environment(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// newS3Client is a client of the bucket's S3 with the run's credentials: the workload
// identity's role assumed with its token where the run has one, else the static keys.
// The endpoint, when given, is S3-compatible and addressed path-style, STS's too.
func newS3Client(ctx context.Context, s *Spec, env map[string]string) (*s3.Client, error) {
	endpoint := env[s.Env.Endpoint]
	// Only the run's own credentials: never a shared file or profile of the machine,
	// which in the local executor is the controller's.
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(s.Region),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	}
	roleARN, tokenFile := env[s.Env.RoleARN], env[s.Env.WebIdentityTokenFile]
	webIdentity := s.Env.RoleARN != "" && roleARN != "" && tokenFile != ""
	if !webIdentity {
		id, secret := env[s.Env.AccessKeyID], env[s.Env.SecretAccessKey]
		if s.Env.AccessKeyID == "" || id == "" || secret == "" {
			return nil, fmt.Errorf("%w: the run has neither a workload identity's role and token nor an access key ID and secret access key", ErrNoCredentials)
		}
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("configuring the S3 client: %w", err)
	}
	if webIdentity {
		// The token file is read for every assumption: the executor keeps it fresh.
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(stsClient, roleARN, stscreds.IdentityTokenFile(tokenFile)))
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	}), nil
}
