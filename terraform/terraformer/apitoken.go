package terraformer

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// The variables a run pod's executor gives it its API access in, instead of a token the
// kubelet mounts: the token requested for the pod, the CA the API server is verified by,
// and the time the pod must have started by for the token to outlive its run.
const (
	EnvAPIToken   = "TERRASEED_API_TOKEN"
	EnvAPICA      = "TERRASEED_API_CA"
	EnvAPIStartBy = "TERRASEED_API_TOKEN_START_BY"
)

// ErrStartedTooLate is returned by a run pod that started after its token allows for:
// the token could expire before the run's final save, so nothing is run.
var ErrStartedTooLate = fmt.Errorf("the run pod started too late for its API token (%s)", EnvAPIStartBy)

// requestedTokenConfig is the API access of a run pod whose executor requested its token,
// or nil when it did not. The variables are removed from the process's environment, so
// that terraform and its providers do not inherit them, and erased from the block the
// process was started with, so that they cannot read them in /proc/<pid>/environ of the
// terraformer either; nor its memory, which is made unreadable to them (eraseFromEnviron).
// A token that cannot be erased runs nothing.
func requestedTokenConfig(now time.Time) (*rest.Config, error) {
	// Copied: the values point into the block that is erased.
	token, ca, startBy := strings.Clone(os.Getenv(EnvAPIToken)), strings.Clone(os.Getenv(EnvAPICA)), strings.Clone(os.Getenv(EnvAPIStartBy))
	names := []string{EnvAPIToken, EnvAPICA, EnvAPIStartBy}
	for _, name := range names {
		if err := os.Unsetenv(name); err != nil {
			return nil, err
		}
	}
	if token == "" {
		return nil, nil
	}
	if err := eraseFromEnviron(names...); err != nil {
		return nil, fmt.Errorf("%s: erasing it from the process's environment: %w", EnvAPIToken, err)
	}
	deadline, err := time.Parse(time.RFC3339, startBy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvAPIStartBy, err)
	}
	if now.After(deadline) {
		return nil, fmt.Errorf("%w: it had to start by %s, and started %s later", ErrStartedTooLate, startBy, now.Sub(deadline).Round(time.Second))
	}
	// The kubelet gives every container the address of the API server's Service.
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("%s: given, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set", EnvAPIToken)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)},
	}, nil
}
