package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/terraseed/terraseed/build/release"
)

const usage = `usage:
  providers list DIR...
      prints the providers the provider directories require, one <source>@<version> a line
  providers mirror -out MIRROR [-extra "<source>@<version>[=<module>@<version>] ..."] [-skip-unreachable] DIR...
      mirrors them, and the -extra ones, into MIRROR

A DIR is a provider directory (it holds provider.yaml) or a parent of provider directories.
HashiCorp's providers are downloaded as release archives (TERRASEED_RELEASES_URL,
TERRASEED_RELEASES_KEY: another releases site and the key that signs its checksums); every
other provider is built from github.com/<namespace>/terraform-provider-<type>@v<version>, or
from the module an -extra entry names after "=".`

func main() {
	code, err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "providers:", err)
	}
	os.Exit(code)
}

// run is the command: it returns the exit status and the error that explains it.
// It is long because it is one switch over the subcommands and their flags.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (int, error) {
	if len(args) == 0 {
		return 2, fmt.Errorf("no command\n%s", usage)
	}
	fs := flag.NewFlagSet("providers "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var extra string
	m := Mirror{Log: stdout, Site: release.Site{URL: getenv("TERRASEED_RELEASES_URL")}}
	switch args[0] {
	case "list":
	case "mirror":
		fs.StringVar(&m.Dir, "out", "", "the mirror")
		fs.StringVar(&extra, "extra", "", "more providers, separated by spaces")
		fs.BoolVar(&m.SkipUnreachable, "skip-unreachable", false, "leave out, and say so, a provider whose releases site does not answer")
		fs.DurationVar(&m.Site.ProbeTimeout, "probe-timeout", 5*time.Second, "how long a releases site may take to answer its first request")
		fs.DurationVar(&m.Site.Timeout, "timeout", 10*time.Minute, "how long one download may take")
	default:
		return 2, fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2, fmt.Errorf("%w\n%s", err, usage)
	}
	if fs.NArg() == 0 {
		return 2, fmt.Errorf("no provider directories\n%s", usage)
	}
	required, err := Required(fs.Args()...)
	if err != nil {
		return 1, err
	}
	if args[0] == "list" {
		for _, p := range required {
			fmt.Fprintln(stdout, p)
		}
		return 0, nil
	}

	if m.Dir == "" {
		return 2, fmt.Errorf("-out is required\n%s", usage)
	}
	extras, err := parseExtra(extra)
	if err != nil {
		return 2, err
	}
	all, err := merge(append(required, extras...))
	if err != nil {
		return 1, err
	}
	if path := getenv("TERRASEED_RELEASES_KEY"); path != "" {
		key, err := os.ReadFile(path)
		if err != nil {
			return 1, err
		}
		m.Site.Key = string(key)
	}
	// The mirror exists even when everything was left out, for the image to copy.
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return 1, err
	}
	for _, p := range all {
		if _, err := m.Add(ctx, p); err != nil {
			return 1, err
		}
	}
	return 0, nil
}

// parseExtra parses -extra: <source>@<version>[=<module>@<version>], separated by spaces.
func parseExtra(s string) ([]Provider, error) {
	var out []Provider
	for _, entry := range strings.Fields(s) {
		spec, module, _ := strings.Cut(entry, "=")
		source, v, ok := strings.Cut(spec, "@")
		p, err := parseSource(source)
		if !ok || err != nil || !exactVersion.MatchString(v) || strings.HasPrefix(strings.TrimSpace(v), "=") {
			return nil, fmt.Errorf("-extra %s is not <source>@<version>[=<module>@<version>] with one exact version", entry)
		}
		if module != "" && !strings.Contains(module, "@") {
			return nil, fmt.Errorf("-extra %s: the module %s has no @<version>", entry, module)
		}
		p.Version, p.Module, p.From = v, module, "-extra"
		out = append(out, p)
	}
	return out, nil
}
