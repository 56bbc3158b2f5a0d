package purge

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
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
//
// The configuration is the SDK's defaults and env alone, not config.LoadDefaultConfig's:
// that reads this process's environment and shared files (a profile, an endpoint URL),
// which in the local executor are the controller's, not the run's.
func newS3Client(s *Spec, env map[string]string) (*s3.Client, error) {
	var endpoint *string
	if url := env[s.Env.Endpoint]; url != "" {
		endpoint = aws.String(url)
	}
	cfg := aws.Config{Region: s.Region}
	roleARN, tokenFile := env[s.Env.RoleARN], env[s.Env.WebIdentityTokenFile]
	id, secret := env[s.Env.AccessKeyID], env[s.Env.SecretAccessKey]
	switch {
	case roleARN != "" && tokenFile != "":
		// The token file is read for every assumption: the executor keeps it fresh.
		stsClient := sts.New(sts.Options{Region: s.Region, BaseEndpoint: endpoint})
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(stsClient, roleARN, stscreds.IdentityTokenFile(tokenFile)))
	case id != "" && secret != "":
		cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, ""))
	default:
		return nil, fmt.Errorf("%w: the run has neither a workload identity's role and token nor an access key ID and secret access key", ErrNoCredentials)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != nil {
			o.BaseEndpoint = endpoint
			o.UsePathStyle = true
		}
	}), nil
}
