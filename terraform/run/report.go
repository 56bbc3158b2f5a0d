package run

import (
	"fmt"
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
