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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
)

// A run reports how far it got and what it planned in annotations of its configuration
// ConfigMap: a run pod may write ConfigMaps and nothing the controller reads otherwise,
// and neither annotation holds more than resource addresses.
const (
	AnnotationProgress = run.LabelPrefix + "progress"
	AnnotationPlan     = run.LabelPrefix + "plan"
)

// DefaultProgressInterval is how often at most a run writes its progress.
const DefaultProgressInterval = 3 * time.Second

// Progress is how far a run got.
type Progress struct {
	Command string `json:"command"`
	// Phase is "planning" until terraform changes anything, then "applying" or "destroying".
	Phase string `json:"phase"`
	// Done of Total changes of the plan are made.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Current is the change under way, e.g. "creating aws_nat_gateway.natgw_z1".
	Current string `json:"current,omitempty"`
}

// Description reads like "applying 12/40: creating aws_nat_gateway.natgw_z1".
func (p Progress) Description() string {
	s := p.Phase
	if p.Total > 0 {
		s += fmt.Sprintf(" %d/%d", p.Done, p.Total)
	}
	if p.Current != "" {
		s += ": " + p.Current
	}
	return s
}

// Percent maps the changes made to Gardener's progress: 1 when started, 99 at most
// before the operation succeeded.
func (p Progress) Percent() int32 {
	if p.Total == 0 {
		return 1
	}
	return int32(1 + min(p.Done, p.Total)*98/p.Total)
}

// Change is one planned change of a resource.
type Change struct {
	Address string `json:"address"`
	Type    string `json:"type"`
	// Action is terraform's: create, update, delete, replace, move, read, noop.
	Action string `json:"action"`
}

// PlanSummary is what a plan found: the changes it would make, and the resources changed
// outside terraform since the last run.
type PlanSummary struct {
	Changes []Change `json:"changes,omitempty"`
	Drift   []Change `json:"drift,omitempty"`
}

// HasChanges is true when the plan changes a resource.
func (p *PlanSummary) HasChanges() bool {
	return p != nil && len(p.Addresses("create", "update", "delete", "replace")) > 0
}

// Addresses lists the addresses of the changes with one of actions.
func (p *PlanSummary) Addresses(actions ...string) []string {
	if p == nil {
		return nil
	}
	var addresses []string
	for _, c := range p.Changes {
		if slices.Contains(actions, c.Action) {
			addresses = append(addresses, c.Address)
		}
	}
	return addresses
}

// Destroys returns the changes that destroy one of types, as replaced or deleted.
func (p *PlanSummary) Destroys(types []string) []Change {
	if p == nil {
		return nil
	}
	var hits []Change
	for _, c := range p.Changes {
		if (c.Action == "delete" || c.Action == "replace") && slices.Contains(types, c.Type) {
			hits = append(hits, c)
		}
	}
	return hits
}

// Summary reads like "2 to add (a, b), 0 to change, 1 to replace (c), 0 to destroy",
// listing at most limit addresses per kind.
func (p *PlanSummary) Summary(limit int) string {
	kinds := []struct{ name, action string }{{"add", "create"}, {"change", "update"}, {"replace", "replace"}, {"destroy", "delete"}}
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		addresses := p.Addresses(k.action)
		part := fmt.Sprintf("%d to %s", len(addresses), k.name)
		if len(addresses) > 0 {
			part += " (" + listed(addresses, limit) + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// DriftSummary lists the addresses changed outside terraform, at most limit of them.
func (p *PlanSummary) DriftSummary(limit int) string {
	if p == nil {
		return ""
	}
	addresses := make([]string, len(p.Drift))
	for i, d := range p.Drift {
		addresses[i] = d.Address
	}
	return listed(addresses, limit)
}

// listed joins at most limit names, saying how many more there are.
func listed(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:limit], ", ") + fmt.Sprintf(" and %d more", len(names)-limit)
}

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
// the plan, the progress and the error diagnostics, and writes the progress to the
// configuration ConfigMap at most every interval.
type tracker struct {
	out io.Writer
	// report merges annotations into the configuration ConfigMap.
	report   func(ctx context.Context, annotations map[string]string) error
	interval time.Duration

	mu       sync.Mutex
	progress Progress
	plan     PlanSummary
	output   output
	// planDue is set when the plan is to be published, planPublished after.
	planDue, planPublished bool
	// running are the changes under way, in the order they started.
	running     []string
	diagnostics []string
	dirty       bool
	parsed      chan struct{}
	// kick has the ticker write at once what is due.
	kick       chan struct{}
	stopTicker chan struct{}
	tickerDone chan struct{}
}

func newTracker(ctx context.Context, command Command, out io.Writer, interval time.Duration, report func(ctx context.Context, annotations map[string]string) error) *tracker {
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	tr := &tracker{
		out: out, report: report, interval: interval,
		progress: Progress{Command: string(command), Phase: "planning"},
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
			tr.plan.Changes = append(tr.plan.Changes, Change{Address: m.Change.Resource.Addr, Type: m.Change.Resource.ResourceType, Action: m.Change.Action})
			tr.progress.Total += weight(m.Change.Action)
		}
	case "resource_drift":
		if m.Change != nil && tr.output != appliedPlanOutput {
			tr.plan.Drift = append(tr.plan.Drift, Change{Address: m.Change.Resource.Addr, Type: m.Change.Resource.ResourceType, Action: m.Change.Action})
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
		}
	case "apply_complete", "apply_errored":
		if m.Hook != nil {
			tr.running = slices.DeleteFunc(tr.running, func(r string) bool { return strings.HasSuffix(r, " "+m.Hook.Resource.Addr) })
			tr.progress.Done++
			tr.progress.Current = ""
			if len(tr.running) > 0 {
				tr.progress.Current = tr.running[len(tr.running)-1]
			}
			tr.dirty = true
		}
	case "diagnostic":
		if d := m.Diagnostic; d != nil && d.Severity == "error" {
			block := truncate(cleanText(d.Summary+": "+d.Detail), maxBlock)
			if d.Detail == "" {
				block = truncate(cleanText(d.Summary), maxBlock)
			}
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
	if tr.progress.Command == string(Destroy) {
		return "destroying"
	}
	return "applying"
}

// Plan returns what the last plan found.
func (tr *tracker) Plan() *PlanSummary {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := PlanSummary{Changes: slices.Clone(tr.plan.Changes), Drift: slices.Clone(tr.plan.Drift)}
	return &p
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
	annotations := map[string]string{}
	if tr.planDue {
		tr.planDue, tr.planPublished = false, true
		annotations[AnnotationPlan] = tr.planJSON()
	}
	if tr.dirty {
		tr.dirty = false
		annotations[AnnotationProgress] = tr.progressJSON()
	}
	tr.mu.Unlock()
	if len(annotations) == 0 {
		return
	}
	if err := tr.report(ctx, annotations); err != nil {
		if _, ok := annotations[AnnotationPlan]; ok {
			logf.FromContext(ctx).Info("planNotWritten", "reason", err.Error())
			return
		}
		logf.FromContext(ctx).V(1).Info("progressNotWritten", "reason", err.Error())
	}
}

func (tr *tracker) planJSON() string {
	data, _ := json.Marshal(tr.plan)
	return string(data)
}

func (tr *tracker) progressJSON() string {
	data, _ := json.Marshal(tr.progress)
	return string(data)
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

// AnnotateConfig merges annotations into a run's configuration ConfigMap; a nil value
// removes the annotation.
func AnnotateConfig(ctx context.Context, c client.Client, config client.ObjectKey, annotations map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: config.Namespace, Name: config.Name}}
	return c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
}

// ReadRunAnnotations reads the progress and the plan a run wrote on its configuration
// ConfigMap; either is nil when absent or unreadable.
func ReadRunAnnotations(annotations map[string]string) (*Progress, *PlanSummary) {
	var progress *Progress
	var plan *PlanSummary
	if data, ok := annotations[AnnotationProgress]; ok {
		p := &Progress{}
		if json.Unmarshal([]byte(data), p) == nil {
			progress = p
		}
	}
	if data, ok := annotations[AnnotationPlan]; ok {
		p := &PlanSummary{}
		if json.Unmarshal([]byte(data), p) == nil {
			plan = p
		}
	}
	return progress, plan
}
