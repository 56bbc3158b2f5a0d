package terraformer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
	"github.com/terraseed/terraseed/terraform/run/report"
)

// uiMessage is the part of a line of terraform's machine-readable UI the run reads.
type uiMessage struct {
	Message string `json:"@message"`
	Type    string `json:"type"`
	// Changes is set on a change summary: "plan" ends the plan an apply shows before acting on it.
	Changes *struct {
		Operation string `json:"operation"`
	} `json:"changes"`
	// Change is set on planned changes and drift, Hook on the steps of an apply.
	Change     *uiAction `json:"change"`
	Hook       *uiAction `json:"hook"`
	Diagnostic *struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
	} `json:"diagnostic"`
}

type uiAction struct {
	Resource uiResource `json:"resource"`
	Action   string     `json:"action"`
	// Importing is set on a planned change that imports the resource first.
	Importing *struct{} `json:"importing"`
}

type uiResource struct {
	Addr         string `json:"addr"`
	ResourceType string `json:"resource_type"`
}

var verbs = map[string]string{"create": "creating", "update": "updating", "delete": "destroying", "replace": "replacing", "read": "reading"}

// output is what a terraform command's JSON output holds.
type output int

const (
	// planOutput is a plan's, or a destroy's: its planned changes are the plan.
	planOutput output = iota
	// appliedPlanOutput is an apply's of a saved plan: it repeats the plan's changes, known already.
	appliedPlanOutput
	// planningApplyOutput is an apply's that plans itself: its planned changes are the
	// plan, published once terraform acts on it, so that a plan that failed is not.
	planningApplyOutput
)

// tracker follows terraform's JSON output: it prints the human part of every line, keeps
// the plan, the progress and the error diagnostics, and writes the progress to the run's
// report at most every interval.
type tracker struct {
	out io.Writer
	// report is where the progress and the plan are written.
	report   report.Transport
	interval time.Duration

	mu       sync.Mutex
	progress run.Progress
	plan     plan.Summary
	// configuration is the digest of the files and variables the plans are made of.
	configuration string
	output        output
	// planDue is set when the plan is to be published, planPublished after.
	planDue, planPublished bool
	// running are the changes under way, in the order they started.
	running     []string
	diagnostics []string
	// goneErrors count the error diagnostics of imported objects that do not exist,
	// otherErrors the rest (see dropGoneImports).
	goneErrors, otherErrors int
	dirty                   bool
	parsed                  chan struct{}
	// kick has the ticker write at once what is due.
	kick       chan struct{}
	stopTicker chan struct{}
	tickerDone chan struct{}
}

func newTracker(ctx context.Context, command run.Command, out io.Writer, interval time.Duration, report report.Transport) *tracker {
	if interval <= 0 {
		interval = defaultProgressInterval
	}
	tr := &tracker{
		out: out, report: report, interval: interval,
		progress: run.Progress{Command: string(command), Phase: "planning"},
		kick:     make(chan struct{}, 1), stopTicker: make(chan struct{}), tickerDone: make(chan struct{}),
	}
	tr.dirty = true
	go tr.tick(ctx)
	return tr
}

// writer returns a writer for one terraform command's JSON output; close it when the command ended.
func (tr *tracker) writer(kind output) io.WriteCloser {
	r, w := io.Pipe()
	tr.mu.Lock()
	tr.output = kind
	tr.parsed = make(chan struct{})
	parsed := tr.parsed
	tr.mu.Unlock()
	go func() {
		defer close(parsed)
		scanner := bufio.NewScanner(r)
		scanner.Buffer(make([]byte, 64<<10), 16<<20)
		for scanner.Scan() {
			tr.line(scanner.Bytes())
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return &pipeCloser{PipeWriter: w, parsed: parsed}
}

type pipeCloser struct {
	*io.PipeWriter
	parsed chan struct{}
}

// Close waits until every line written was read.
func (p *pipeCloser) Close() error {
	err := p.PipeWriter.Close()
	<-p.parsed
	return err
}

// line reads one message of terraform's machine-readable UI. It is long because it is
// one switch over the message types, each case a few lines.
func (tr *tracker) line(data []byte) {
	var m uiMessage
	if err := json.Unmarshal(data, &m); err != nil {
		// Not terraform's JSON: passed on as it is.
		fmt.Fprintf(tr.out, "%s\n", data)
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch m.Type {
	case "planned_change":
		if m.Change != nil && tr.output != appliedPlanOutput {
			tr.plan.Changes = append(tr.plan.Changes, plan.Change{Address: m.Change.Resource.Addr, Type: m.Change.Resource.ResourceType, Action: m.Change.Action, Importing: m.Change.Importing != nil})
			tr.progress.Total += weight(m.Change.Action)
		}
	case "resource_drift":
		if m.Change != nil && tr.output != appliedPlanOutput {
			tr.plan.Drift = append(tr.plan.Drift, plan.Change{Address: m.Change.Resource.Addr, Type: m.Change.Resource.ResourceType, Action: m.Change.Action})
		}
	case "change_summary":
		// An apply with nothing to change starts no change: its summary says it applied.
		if m.Changes != nil && m.Changes.Operation == "apply" {
			tr.planApplied()
		}
	case "apply_start":
		if m.Hook != nil {
			tr.planApplied()
			tr.progress.Phase = tr.changingPhase()
			verb := verbs[m.Hook.Action]
			if verb == "" {
				verb = m.Hook.Action
			}
			tr.running = append(tr.running, verb+" "+m.Hook.Resource.Addr)
			tr.progress.Current = tr.running[len(tr.running)-1]
			tr.dirty = true
			if m.Hook.Action == "create" {
				// Written at once: should terraform die before it records the resource,
				// this is all that tells it may exist.
				tr.progress.Creating = append(slices.Clone(tr.progress.Creating), m.Hook.Resource.Addr)
				tr.kickTicker()
			}
		}
	case "apply_complete", "apply_errored":
		if m.Hook != nil {
			tr.running = slices.DeleteFunc(tr.running, func(r string) bool { return strings.HasSuffix(r, " "+m.Hook.Resource.Addr) })
			if slices.Contains(tr.progress.Creating, m.Hook.Resource.Addr) {
				tr.progress.Creating = slices.DeleteFunc(slices.Clone(tr.progress.Creating), func(a string) bool { return a == m.Hook.Resource.Addr })
			}
			tr.progress.Done++
			tr.progress.Current = ""
			if len(tr.running) > 0 {
				tr.progress.Current = tr.running[len(tr.running)-1]
			}
			tr.dirty = true
		}
	case "diagnostic":
		if d := m.Diagnostic; d != nil && d.Severity == "error" {
			if goneImport(d.Summary, d.Detail) {
				tr.goneErrors++
			} else {
				tr.otherErrors++
			}
			block := run.DiagnosticBlock(d.Summary, d.Detail)
			if !slices.Contains(tr.diagnostics, block) {
				tr.diagnostics = append(tr.diagnostics, block)
			}
		}
	}
	if m.Message != "" {
		fmt.Fprintln(tr.out, m.Message)
	}
	if m.Diagnostic != nil && m.Diagnostic.Detail != "" {
		fmt.Fprintln(tr.out, m.Diagnostic.Detail)
	}
}

// planApplied notes that terraform acts on the plan it showed: a planning apply's plan is
// complete and published now, while terraform goes on.
func (tr *tracker) planApplied() {
	if tr.output != planningApplyOutput || tr.planDue || tr.planPublished {
		return
	}
	tr.planDue = true
	tr.kickTicker()
}

// weight is how many apply hooks terraform runs for a planned action: a replacement
// destroys and creates.
func weight(action string) int {
	switch action {
	case "create", "update", "delete":
		return 1
	case "replace":
		return 2
	}
	return 0
}

// changingPhase is the phase once terraform changes resources.
func (tr *tracker) changingPhase() string {
	if tr.progress.Command == string(run.Destroy) {
		return "destroying"
	}
	return "applying"
}

// Plan returns what the last plan found.
func (tr *tracker) Plan() *plan.Summary {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := plan.Summary{Changes: slices.Clone(tr.plan.Changes), Drift: slices.Clone(tr.plan.Drift), Digest: tr.digest()}
	return &p
}

// digest is the plan's digest; tr.mu is held.
func (tr *tracker) digest() string {
	if tr.configuration == "" {
		return ""
	}
	return plan.Digest(tr.configuration, tr.plan.Changes)
}

// setConfiguration records the digest of the configuration the plans are made of.
func (tr *tracker) setConfiguration(digest string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.configuration = digest
}

// importOutcome is what the last plan did with its imports: the addresses it planned to
// import, and its error diagnostics of objects that do not exist and others.
func (tr *tracker) importOutcome() (importing []string, gone, other int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.plan.Changes {
		if c.Importing {
			importing = append(importing, c.Address)
		}
	}
	return importing, tr.goneErrors, tr.otherErrors
}

// restartPlan forgets the last plan, its progress and errors, before the plan is made again.
func (tr *tracker) restartPlan() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.plan = plan.Summary{}
	tr.progress.Total = 0
	tr.diagnostics = nil
	tr.goneErrors, tr.otherErrors = 0, 0
}

// errorBlocks returns terraform's error diagnostics, each one line.
func (tr *tracker) errorBlocks() []string {
	if tr == nil {
		return nil
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.diagnostics)
}

func (tr *tracker) tick(ctx context.Context) {
	defer close(tr.tickerDone)
	ticker := time.NewTicker(tr.interval)
	defer ticker.Stop()
	for {
		tr.flush(ctx)
		select {
		case <-ticker.C:
		case <-tr.kick:
		case <-tr.stopTicker:
			return
		}
	}
}

// flush writes the progress when it changed, with the plan when it is due, in one request.
func (tr *tracker) flush(ctx context.Context) {
	tr.mu.Lock()
	var report report.Report
	if tr.planDue {
		tr.planDue, tr.planPublished = false, true
		report.Plan = &plan.Summary{Changes: slices.Clone(tr.plan.Changes), Drift: slices.Clone(tr.plan.Drift), Digest: tr.digest()}
	}
	if tr.dirty {
		tr.dirty = false
		progress := tr.progress
		report.Progress = &progress
	}
	tr.mu.Unlock()
	if report.Plan == nil && report.Progress == nil {
		return
	}
	if err := tr.report.Write(ctx, report); err != nil {
		if report.Plan != nil {
			logf.FromContext(ctx).Info("planNotWritten", "reason", err.Error())
			return
		}
		logf.FromContext(ctx).V(1).Info("progressNotWritten", "reason", err.Error())
	}
}

// publishPlan has the plan of a plan run written, or of an apply's own plan that is
// checked before it is applied (applying) or found to have nothing to apply. The ticker
// writes it at once, beside terraform, and stop at the latest.
func (tr *tracker) publishPlan(applying bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.progress.Phase = "planned"
	if applying {
		tr.progress.Phase = tr.changingPhase()
	}
	tr.dirty = true
	tr.planDue = true
	tr.kickTicker()
}

func (tr *tracker) kickTicker() {
	select {
	case tr.kick <- struct{}{}:
	default:
	}
}

// stop writes the last progress and ends the writes.
func (tr *tracker) stop(ctx context.Context) {
	close(tr.stopTicker)
	<-tr.tickerDone
	tr.flush(ctx)
}
