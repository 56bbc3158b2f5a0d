package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Placement is where run pods may go on a busy seed: their priority class, the nodes
// they may run on, the taints they tolerate and how they spread. The seed's scheduler
// places them; the executor only says so in each pod's spec.
type Placement struct {
	PriorityClassName string
	NodeSelector      map[string]string
	Tolerations       []corev1.Toleration
	// TopologySpreadConstraints without a labelSelector spread the run pods among
	// themselves: they get one selecting every run pod.
	TopologySpreadConstraints []corev1.TopologySpreadConstraint
}

// Validate names the field of the first value the API server would refuse in a pod, or
// that could not mean what it says.
func (p Placement) Validate() error {
	if p.PriorityClassName != "" {
		if errs := validation.IsDNS1123Subdomain(p.PriorityClassName); len(errs) > 0 {
			return fmt.Errorf("priorityClassName %q: %s", p.PriorityClassName, strings.Join(errs, "; "))
		}
	}
	for key, value := range p.NodeSelector {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Errorf("nodeSelector key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return fmt.Errorf("nodeSelector %q value %q: %s", key, value, strings.Join(errs, "; "))
		}
	}
	for i, t := range p.Tolerations {
		if err := validateToleration(t); err != nil {
			return fmt.Errorf("tolerations[%d].%w", i, err)
		}
	}
	for i, c := range p.TopologySpreadConstraints {
		if err := validateSpread(c); err != nil {
			return fmt.Errorf("topologySpreadConstraints[%d].%w", i, err)
		}
	}
	return nil
}

func validateToleration(t corev1.Toleration) error {
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("key %q: %s", t.Key, strings.Join(errs, "; "))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			return fmt.Errorf("operator: a toleration without a key must be Exists, it tolerates every taint")
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("value %q: %s", t.Value, strings.Join(errs, "; "))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return fmt.Errorf("value %q: must be empty with operator Exists", t.Value)
		}
	default:
		return fmt.Errorf("operator %q: is neither Equal nor Exists", t.Operator)
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("effect %q: is none of NoSchedule, PreferNoSchedule and NoExecute (empty: every effect)", t.Effect)
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		return fmt.Errorf("tolerationSeconds: applies to effect NoExecute only, not %q", t.Effect)
	}
	return nil
}

func validateSpread(c corev1.TopologySpreadConstraint) error {
	if c.MaxSkew < 1 {
		return fmt.Errorf("maxSkew %d: must be at least 1", c.MaxSkew)
	}
	if errs := validation.IsQualifiedName(c.TopologyKey); len(errs) > 0 {
		return fmt.Errorf("topologyKey %q: %s", c.TopologyKey, strings.Join(errs, "; "))
	}
	if !slices.Contains([]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}, c.WhenUnsatisfiable) {
		return fmt.Errorf("whenUnsatisfiable %q: is neither DoNotSchedule nor ScheduleAnyway", c.WhenUnsatisfiable)
	}
	if c.LabelSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(c.LabelSelector); err != nil {
			return fmt.Errorf("labelSelector: %w", err)
		}
	}
	return nil
}

// ParseTolerations reads tolerations as JSON (a list of Kubernetes tolerations, as the
// chart passes them), refusing fields a toleration does not have, and checks them.
func ParseTolerations(data string) ([]corev1.Toleration, error) {
	var tolerations []corev1.Toleration
	if err := decodeStrict(data, &tolerations); err != nil {
		return nil, err
	}
	return tolerations, Placement{Tolerations: tolerations}.Validate()
}

// ParseTopologySpreadConstraints reads topology spread constraints as JSON, refusing
// fields a constraint does not have, and checks them.
func ParseTopologySpreadConstraints(data string) ([]corev1.TopologySpreadConstraint, error) {
	var constraints []corev1.TopologySpreadConstraint
	if err := decodeStrict(data, &constraints); err != nil {
		return nil, err
	}
	return constraints, Placement{TopologySpreadConstraints: constraints}.Validate()
}

func decodeStrict(data string, into any) error {
	if strings.TrimSpace(data) == "" {
		return nil
	}
	decoder := json.NewDecoder(bytes.NewReader([]byte(data)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(into); err != nil {
		return fmt.Errorf("not a JSON list of them: %w", err)
	}
	return nil
}

// apply sets the placement on a run pod's spec; labels are the run pods' own, which a
// spread constraint without a selector selects on.
func (p Placement) apply(spec *corev1.PodSpec) {
	spec.PriorityClassName = p.PriorityClassName
	spec.NodeSelector = p.NodeSelector
	spec.Tolerations = p.Tolerations
	for _, c := range p.TopologySpreadConstraints {
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelCommand, Operator: metav1.LabelSelectorOpExists}}}
		}
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
	}
}
