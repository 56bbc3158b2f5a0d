package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
)

// DefaultURL is HashiCorp's releases site, hc-install's default.
const DefaultURL = "https://releases.hashicorp.com"

// ErrUnreachable is returned when the site did not answer the probe in time: the only
// failure that says nothing about the release itself.
var ErrUnreachable = errors.New("not reachable")

// Site is where releases come from and how long they may take.
type Site struct {
	// URL is the releases site; empty: DefaultURL.
	URL string
	// Key is the armored PGP public key that signs the releases' checksums; empty:
	// HashiCorp's, built into hc-install.
	Key string
	// ProbeTimeout bounds the first request, so that a machine that cannot reach the site
	// learns so in seconds.
	ProbeTimeout time.Duration
	// Timeout bounds the whole download.
	Timeout time.Duration
}

func (s Site) base() string {
	if s.URL == "" {
		return DefaultURL
	}
	return strings.TrimSuffix(s.URL, "/")
}

// Install installs release v of p into dir, which should be empty and which the caller
// removes when Install fails, and returns the path of p's binary there. A site that does
// not answer the probe within s.ProbeTimeout is ErrUnreachable; every other failure,
// among them a checksum or a signature that does not match, is another error.
func (s Site) Install(ctx context.Context, p product.Product, v *version.Version, dir string) (string, error) {
	if err := Probe(ctx, fmt.Sprintf("%s/%s/%s/index.json", s.base(), p.Name, v), s.ProbeTimeout); err != nil {
		return "", err
	}
	ev := &releases.ExactVersion{
		Product:          p,
		Version:          v,
		InstallDir:       dir,
		Timeout:          s.Timeout,
		ApiBaseURL:       strings.TrimSuffix(s.URL, "/"),
		ArmoredPublicKey: s.Key,
	}
	var hclog bytes.Buffer
	ev.SetLogger(log.New(&hclog, "", 0))
	path, err := ev.Install(ctx)
	if err != nil {
		// hc-install v0.10.0 loses the error of an archive whose checksum does not match
		// (a deferred clean-up overwrites it) and fails afterwards on the binary it did not
		// unpack: its log says what happened.
		for _, line := range strings.Split(hclog.String(), "\n") {
			if strings.Contains(line, "checksum does not match") {
				return "", fmt.Errorf("%s %s refused: %s", p.Name, v, line)
			}
		}
		return "", fmt.Errorf("%s %s: %w", p.Name, v, err)
	}
	return path, nil
}

// Probe fetches url once within timeout: the source answers with 200 OK, or
// ErrUnreachable when it does not answer at all.
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %w within %s: %v", url, ErrUnreachable, timeout, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// CopyExecutable copies from to to, making to's directory, and leaves to readable and
// executable by anyone whatever the umask: an image's user owns none of its files.
func CopyExecutable(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, 0o755)
}
