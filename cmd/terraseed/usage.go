package main

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
)

// setUsage has --help print the command's synopsis and its flags, each written as it is
// given and as errors and the docs name it: --name, not the flag package's -name.
func setUsage(flags *flag.FlagSet, synopsis string) {
	flags.Usage = func() {
		out := flags.Output()
		var defaults strings.Builder
		flags.SetOutput(&defaults)
		flags.PrintDefaults()
		flags.SetOutput(out)
		fmt.Fprintf(out, "usage: %s\n\nflags:\n%s", synopsis, flagStart.ReplaceAllString(defaults.String(), "  --"))
	}
}

// flagStart is where PrintDefaults starts the line of a flag.
var flagStart = regexp.MustCompile(`(?m)^  -`)
