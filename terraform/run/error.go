package run

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	// ErrRunInProgress is returned when another run of the same ID has not finished.
	ErrRunInProgress = errors.New("another terraform run of the same object is in progress")
	// ErrTerraformFailed is returned when terraform itself reported an error.
	ErrTerraformFailed = errors.New("terraform failed")
)

// Error is a failed run: what terraform said, for a reader and for Gardener's
// classification, which is the controller's business.
type Error struct {
	// Command is the terraform command that failed.
	Command string
	// Blocks are terraform's error blocks, each one line; when it printed none, the last
	// line of the output: the text that says what failed.
	Blocks []string
	// Message is short and readable: the blocks, or what else failed.
	Message string
	// Invalid is set when the run's input can never work as it is.
	Invalid bool
	// Protected is set when the run refused to destroy protected resources (ErrDestroyProtected).
	Protected bool
	// PlanDigest is the digest of the plan a Protected run refused (plan.Summary.Digest).
	PlanDigest string
	// Phases are the terraform commands the run got to, and how long they took.
	Phases Phases
	// Interrupted are the resources whose create was under way when the run ended: the
	// provider may have made them, and no state holds them.
	Interrupted []string
	// Err is the cause, e.g. ErrTerraformFailed or ErrRunInProgress, for errors.Is.
	Err error
}

func (e *Error) Error() string {
	if e.Command == "" {
		return e.Message
	}
	return fmt.Sprintf("terraform %s: %s", e.Command, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// NewError reads terraform's output of a failed command.
func NewError(command, output string, cause error) *Error {
	blocks := errorBlocks(output)
	if len(blocks) == 0 {
		if line := lastLine(output); line != "" {
			blocks = []string{truncate(line, maxBlock)}
		} else if cause != nil {
			blocks = []string{truncate(cleanText(cause.Error()), maxBlock)}
		}
	}
	return &Error{
		Command: command,
		Blocks:  blocks,
		Message: messageOf(blocks),
		Err:     errors.Join(ErrTerraformFailed, cause),
	}
}

// ErrorOfBlocks is a failed command whose error blocks are known already, e.g. from
// terraform's JSON diagnostics.
func ErrorOfBlocks(command string, blocks []string, cause error) *Error {
	return &Error{Command: command, Blocks: blocks, Message: messageOf(blocks), Err: cause}
}

// DiagnosticBlock is one error block of a JSON diagnostic of terraform, as errorBlocks
// makes one of its text output.
func DiagnosticBlock(summary, detail string) string {
	if detail == "" {
		return truncate(cleanText(summary), maxBlock)
	}
	return truncate(cleanText(summary+": "+detail), maxBlock)
}

// messageOf joins blocks into a Error's message.
func messageOf(blocks []string) string { return truncate(strings.Join(blocks, "; "), maxMessage) }

// maxMessage keeps a message short enough for a status field; maxBlock keeps several
// blocks within a termination message.
const (
	maxMessage = 3000
	maxBlock   = 600
)

var (
	ansiPattern = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	uuidPattern = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// longNumber matches the random parts of temporary file names, which would keep
	// otherwise equal errors apart.
	longNumber = regexp.MustCompile(`\d{6,}`)
	// sourceLine matches the parts of an error block that point into the configuration
	// rather than say what is wrong.
	sourceLine = regexp.MustCompile(`^\s*(on .* line \d+|with [^ ]+,|\d+: |\(and \d+ more similar\))`)
	spaces     = regexp.MustCompile(`\s+`)
)

func cleanText(s string) string {
	s = ansiPattern.ReplaceAllString(s, "")
	s = uuidPattern.ReplaceAllString(s, "<id>")
	s = longNumber.ReplaceAllString(s, "<n>")
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

// FailurePrefix starts the line with which the terraformer reports a failed run.
const FailurePrefix = "terraformer failed: "

// errorBlocks returns terraform's `Error:` blocks of output, each as one line of summary
// and detail, without colour codes, source excerpts or UUIDs, each once.
func errorBlocks(output string) []string {
	var blocks []string
	var current []string
	inBlock := false
	flush := func() {
		if len(current) > 0 {
			block := truncate(cleanText(strings.Join(current, " ")), maxBlock)
			if !slices.Contains(blocks, block) {
				blocks = append(blocks, block)
			}
		}
		current, inBlock = nil, false
	}
	blankLines := 0
	for _, line := range strings.Split(ansiPattern.ReplaceAllString(output, ""), "\n") {
		line = strings.TrimRight(line, " \r")
		trimmed := strings.TrimLeft(line, "│╷╵ ")
		if line == "" {
			blankLines++
		} else {
			blankLines = 0
		}
		switch {
		case strings.HasPrefix(line, FailurePrefix):
			// The terraformer's own last word sums up the blocks before it.
			flush()
		case inBlock && blankLines == 2:
			// Without colour, terraform ends a block with two blank lines; what follows
			// (another tool's output, as in a pod's log) is not part of it.
			flush()
		case strings.HasPrefix(trimmed, "Error: "):
			flush()
			inBlock = true
			current = append(current, strings.TrimPrefix(trimmed, "Error: ")+":")
		case strings.HasPrefix(trimmed, "Warning: "), strings.HasPrefix(line, "╵"):
			flush()
		case inBlock && !sourceLine.MatchString(trimmed) && trimmed != "":
			current = append(current, trimmed)
		}
	}
	flush()
	for i, b := range blocks {
		blocks[i] = strings.TrimSuffix(b, ":")
	}
	return blocks
}

func lastLine(output string) string {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	return cleanText(lines[len(lines)-1])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
