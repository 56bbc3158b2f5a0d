package terraformer

import (
	"flag"
	"os"
	"strconv"
	"time"
)

// Settings are how an executor's runs run terraform, the same for each of them: the binary,
// where the providers come from, how many operations at once, how long terraform may take
// to stop, how often the progress is written. They are a field of the executor's
// configuration and travel whole to the Runner: the local executor hands them over as they
// are; the pod executor turns them into a run pod's arguments (Args), which the run pod's
// Main parses back into the same Settings (bindFlags). A request's own parallelism replaces
// Parallelism for its run.
type Settings struct {
	// Terraform is the terraform binary (see FindTerraform); a run of another version
	// fails. In a run pod, the image's when empty.
	Terraform string
	// OpenTofu says that Terraform is OpenTofu of OpenTofuVersion instead.
	OpenTofu bool
	Plugins  Plugins
	// Parallelism limits concurrent operations of apply and destroy; zero keeps terraform's default.
	Parallelism int
	// StopTimeout bounds the wait for terraform after an interrupt; DefaultStopTimeout when zero.
	StopTimeout time.Duration
	// ProgressInterval is how often at most the progress is written, and the executor reads
	// it; defaultProgressInterval when zero.
	ProgressInterval time.Duration
}

// Args are the terraformer's flags that carry s to a run pod, whose Main parses them back
// (bindFlags). A setting left at its default is left out, so that a terraformer of a version
// without its flag still runs.
func (s Settings) Args() []string {
	var args []string
	if s.Plugins.Mirror != "" {
		args = append(args, "--plugin-mirror", s.Plugins.Mirror)
	}
	if s.Plugins.CacheDir != "" {
		args = append(args, "--plugin-cache-dir", s.Plugins.CacheDir)
	}
	if s.Plugins.AllowDownload {
		args = append(args, "--allow-provider-download")
	}
	if s.Parallelism > 0 {
		args = append(args, "--parallelism", strconv.Itoa(s.Parallelism))
	}
	if s.Terraform != "" {
		args = append(args, "--terraform", s.Terraform)
	}
	if s.OpenTofu {
		args = append(args, "--opentofu")
	}
	if s.ProgressInterval > 0 {
		args = append(args, "--progress-interval", s.ProgressInterval.String())
	}
	if s.StopTimeout != 0 && s.StopTimeout != DefaultStopTimeout {
		args = append(args, "--stop-timeout", s.StopTimeout.String())
	}
	return args
}

// bindFlags binds the flags of Args to s.
func (s *Settings) bindFlags(flags *flag.FlagSet) {
	flags.StringVar(&s.Plugins.Mirror, "plugin-mirror", os.Getenv("TERRAFORM_PROVIDER_MIRROR"), "filesystem mirror of provider plugins")
	flags.StringVar(&s.Plugins.CacheDir, "plugin-cache-dir", "", "plugin cache shared between runs")
	flags.BoolVar(&s.Plugins.AllowDownload, "allow-provider-download", false, "download providers the mirror does not hold")
	flags.IntVar(&s.Parallelism, "parallelism", 0, "concurrent terraform operations (default: terraform's)")
	flags.StringVar(&s.Terraform, "terraform", "", "terraform binary of version "+TerraformVersion+" (default: found on PATH)")
	flags.BoolVar(&s.OpenTofu, "opentofu", false, "the binary of --terraform is OpenTofu "+OpenTofuVersion)
	flags.DurationVar(&s.ProgressInterval, "progress-interval", defaultProgressInterval, "how often at most the progress is written to the configuration ConfigMap")
	flags.DurationVar(&s.StopTimeout, "stop-timeout", DefaultStopTimeout, "how long terraform may take to stop after an interrupt (SIGTERM, SIGINT) before it is killed; the final save follows")
}

// stopTimeout is StopTimeout, or its default.
func (s Settings) stopTimeout() time.Duration {
	if s.StopTimeout == 0 {
		return DefaultStopTimeout
	}
	return s.StopTimeout
}

// DefaultStopTimeout is how long terraform may take to stop after an interrupt before it is killed.
const DefaultStopTimeout = 10 * time.Minute

// StopBound is how long a run interrupted with the given stop timeout may take to end:
// terraform stops (or is killed) within the stop timeout, then the final save, and the
// runner's own exit. What waits for an interrupted run (a run pod's grace period, the
// controller's shutdown) waits as long.
func StopBound(stopTimeout time.Duration) time.Duration {
	return stopTimeout + DefaultFinalSaveTimeout + 10*time.Second
}

// defaultProgressInterval is how often at most a run writes its progress.
const defaultProgressInterval = 3 * time.Second

// Plugins says where terraform finds provider plugins.
type Plugins struct {
	// Mirror is a filesystem mirror (unpacked layout) holding the pinned providers.
	Mirror string
	// CacheDir is the plugin cache shared by all runs on this machine or volume, for the
	// providers terraform downloads; providers of the mirror are linked from the mirror.
	CacheDir string
	// AllowDownload lets terraform download providers the mirror does not hold.
	AllowDownload bool
}
