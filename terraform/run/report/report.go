package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// Report is what a run reports while it runs: how far it got, and what it planned. The
// runner writes it as it goes and the executor reads it, through one of two transports:
// the annotations of the run's configuration ConfigMap (Annotations, a run pod's),
// or a file beside the controller (File, a local run's). Either holds the same
// annotations: AnnotationProgress and AnnotationPlan, each the JSON of its part. The
// format does not change: run pods of an older version may still write it.
type Report struct {
	// Progress is nil when none was reported (or it is unreadable).
	Progress *run.Progress
	// Plan is nil when none was reported (or it is unreadable).
	Plan *plan.Summary
}

// The annotations of a report. A run pod may write ConfigMaps and nothing the controller
// reads otherwise, and neither annotation holds more than resource addresses.
const (
	AnnotationProgress = run.LabelPrefix + "progress"
	AnnotationPlan     = run.LabelPrefix + "plan"
)

// Transport is where a run's report goes and is read from.
type Transport interface {
	// Write merges the parts of the report that are set into what was reported.
	Write(ctx context.Context, r Report) error
	// Read reads what was reported so far.
	Read(ctx context.Context) (Report, error)
	// Clear removes what an earlier run reported.
	Clear(ctx context.Context) error
}

// annotations are the parts of r that are set, as they are written.
func (r Report) annotations() map[string]*string {
	annotations := map[string]*string{}
	if r.Progress != nil {
		data, _ := json.Marshal(r.Progress)
		annotations[AnnotationProgress] = ptrTo(string(data))
	}
	if r.Plan != nil {
		data, _ := json.Marshal(r.Plan)
		annotations[AnnotationPlan] = ptrTo(string(data))
	}
	return annotations
}

func ptrTo(s string) *string { return &s }

// reportOf reads a report from its annotations; a part absent or unreadable is nil.
func reportOf(annotations map[string]string) Report {
	var r Report
	if data, ok := annotations[AnnotationProgress]; ok {
		p := &run.Progress{}
		if json.Unmarshal([]byte(data), p) == nil {
			r.Progress = p
		}
	}
	if data, ok := annotations[AnnotationPlan]; ok {
		p := &plan.Summary{}
		if json.Unmarshal([]byte(data), p) == nil {
			r.Plan = p
		}
	}
	return r
}

// clearedReport removes the annotations of a report and of a run's end.
var clearedReport = map[string]*string{AnnotationProgress: nil, AnnotationPlan: nil, AnnotationSucceeded: nil}

// AnnotationSucceeded is written by a run pod whose run succeeded, as the last thing it
// does, after the final save of the state: the pod's UID and its termination message
// (Succeeded). The executor takes the run's outcome from it as soon as it is written;
// the kubelet reports the container's end up to a second or more later.
const AnnotationSucceeded = run.LabelPrefix + "succeeded"

// Succeeded is what AnnotationSucceeded holds.
type Succeeded struct {
	// Pod is the UID of the run pod that wrote it.
	Pod types.UID `json:"pod"`
	// Message is the pod's termination message.
	Message string `json:"message,omitempty"`
}

// SucceededOf reads AnnotationSucceeded from annotations; ok is false when there is none
// or it cannot be read.
func SucceededOf(annotations map[string]string) (s Succeeded, ok bool) {
	data, found := annotations[AnnotationSucceeded]
	if !found || json.Unmarshal([]byte(data), &s) != nil || s.Pod == "" {
		return Succeeded{}, false
	}
	return s, true
}

// Annotations is the report of the run of ID on its configuration ConfigMap: a run
// pod's, which the pod executor reads.
type Annotations struct {
	Client client.Client
	ID     run.ID
}

func (a Annotations) key() client.ObjectKey {
	return client.ObjectKey{Namespace: a.ID.Namespace, Name: a.ID.ConfigName()}
}

// Write merges the report's parts into the ConfigMap's annotations.
func (a Annotations) Write(ctx context.Context, r Report) error {
	return a.annotate(ctx, r.annotations())
}

// WriteSucceeded writes AnnotationSucceeded.
func (a Annotations) WriteSucceeded(ctx context.Context, s Succeeded) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return a.annotate(ctx, map[string]*string{AnnotationSucceeded: ptrTo(string(data))})
}

// Read reads the report; an empty one when the ConfigMap is gone.
func (a Annotations) Read(ctx context.Context) (Report, error) {
	cm := &corev1.ConfigMap{}
	if err := a.Client.Get(ctx, a.key(), cm); err != nil {
		return Report{}, client.IgnoreNotFound(err)
	}
	return reportOf(cm.Annotations), nil
}

// Clear removes the report's annotations; a ConfigMap that is gone fails with NotFound.
func (a Annotations) Clear(ctx context.Context) error {
	return a.annotate(ctx, clearedReport)
}

// annotate merges annotations into the ConfigMap; a nil value removes the annotation.
func (a Annotations) annotate(ctx context.Context, annotations map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	key := a.key()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return a.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
}

// File is the report of a run beside the controller, in the file at this path, a
// JSON object of the annotations: a file the local executor reads costs no request to the
// API server.
type File string

var _ Transport = File("")

// Write merges the report's parts into the file. The file is replaced, never written in
// place, so that a reader sees a whole report.
func (f File) Write(_ context.Context, r Report) error {
	report, err := f.annotations()
	if err != nil {
		return err
	}
	for k, v := range r.annotations() {
		report[k] = *v
	}
	data, err := json.Marshal(report)
	if err != nil {
		return err
	}
	path := string(f)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the run's report: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the run's report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the run's report: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// Read reads the report; an empty one when the file does not exist.
func (f File) Read(context.Context) (Report, error) {
	annotations, err := f.annotations()
	if err != nil {
		return Report{}, err
	}
	return reportOf(annotations), nil
}

// Clear removes the file.
func (f File) Clear(context.Context) error {
	if err := os.Remove(string(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// annotations reads the annotations in the file; none when it does not exist.
func (f File) annotations() (map[string]string, error) {
	report := map[string]string{}
	data, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) {
		return report, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the run's report: %w", err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("reading the run's report %s: %w", string(f), err)
	}
	return report, nil
}
