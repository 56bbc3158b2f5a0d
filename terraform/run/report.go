package run

import (
	"fmt"
	"time"
)

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
	// Creating are the resources whose create is under way. A run that ends with some
	// (terraform killed) may leave them made by the provider and in no state.
	Creating []string `json:"creating,omitempty"`
	// Elapsed is how long the run had been under way when it reported this progress: the
	// executor that follows the run sets it; the run's report does not carry it.
	Elapsed time.Duration `json:"-"`
}

// Description reads like "applying 12/40: creating aws_nat_gateway.natgw_z1", followed by
// "(4m10s into the run)" when Elapsed is known: a change that takes long shows in
// lastOperation as the time of its report against the run's.
func (p Progress) Description() string {
	s := p.Phase
	if p.Total > 0 {
		s += fmt.Sprintf(" %d/%d", p.Done, p.Total)
	}
	if p.Current != "" {
		s += ": " + p.Current
	}
	if p.Elapsed > 0 {
		s += fmt.Sprintf(" (%s into the run)", p.Elapsed.Round(time.Second))
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
