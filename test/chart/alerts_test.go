package chart

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// alertCase is a rule unit test as promtool runs them: series loaded in promqltest's
// notation (one sample a minute from time 0), the chart's alerting rule evaluated every
// minute for as long as the series last, and whether it fires at the end.
type alertCase struct {
	name   string
	alert  string
	series []string
	fires  bool
}

// Series of the release's namespace, as the ServiceMonitor's scrape labels them.
const (
	ns       = `namespace="garden-terraseed"`
	instance = `instance="10.0.0.1:8080"`
)

// series is one input series of the release's namespace and the instance, unless labels
// name others.
func series(name, labels, values string) string {
	sel := labels
	for _, l := range []string{ns, instance} {
		key, _, _ := strings.Cut(l, "=")
		if !strings.HasPrefix(labels, key+"=") && !strings.Contains(labels, ","+key+"=") {
			sel = strings.TrimPrefix(sel+","+l, ",")
		}
	}
	return name + "{" + sel + "} " + values
}

// Labels naming one Infrastructure in the per-Infrastructure metrics.
const (
	infraA = `infrastructure_namespace="shoot--dev--a",infrastructure_name="a"`
	infraB = `infrastructure_namespace="shoot--dev--b",infrastructure_name="b"`
)

var alertCases = []alertCase{
	{"failures of several Infrastructures are a large share of the runs", "TerraseedRunsFailing", []string{
		series("terraseed_terraform_runs_total", `command="apply",result="failed"`, "0+1x120"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "0+1x120"),
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "0+1x120"),
		series("terraseed_infrastructure_failed_runs", infraB+`,command="apply"`, "1 0 1 0x10 1x107"),
	}, true},
	{"one Infrastructure's failures are a large share of the runs", "TerraseedRunsFailing", []string{
		series("terraseed_terraform_runs_total", `command="apply",result="failed"`, "0+1x120"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "0+1x120"),
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "0+1x120"),
		series("terraseed_infrastructure_failed_runs", infraB+`,command="apply"`, "0x120"),
	}, false},
	{"one failure in an hour", "TerraseedRunsFailing", []string{
		series("terraseed_terraform_runs_total", `command="apply",result="failed"`, "0x60 1x60"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "0+1x120"),
	}, false},
	{"a few failures among many runs", "TerraseedRunsFailing", []string{
		series("terraseed_terraform_runs_total", `command="apply",result="failed"`, "0+0.1x120"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "0+2x120"),
	}, false},

	{"runs under way and none ended for longer than runTimeout", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x80"),
		series("terraseed_terraform_runs_in_flight", "", "1x80"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "3x80"),
	}, true},
	{"runs under way since the start, none ever ended", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x80"),
		series("terraseed_terraform_runs_in_flight", "", "2x80"),
	}, true},
	{"runs under way, and runs end", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x80"),
		series("terraseed_terraform_runs_in_flight", "", "1x80"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "0+1x80"),
	}, false},
	{"runs under way for less than runTimeout", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x80"),
		series("terraseed_terraform_runs_in_flight", "", "0x30 1x50"),
		series("terraseed_terraform_runs_total", `command="apply",result="succeeded"`, "3x80"),
	}, false},
	{"runs under way in a controller restarted less than runTimeout ago", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x30 1860x50"),
		series("terraseed_terraform_runs_in_flight", "", "1x80"),
	}, false},
	{"runs under way for less than runTimeout since the data begins", "TerraseedRunPastDeadline", []string{
		series("process_start_time_seconds", "", "0x50"),
		series("terraseed_terraform_runs_in_flight", "", "1x50"),
	}, false},

	{"one Infrastructure's applies fail one after the other", "TerraseedInfrastructureRunsFailing", []string{
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "1 2 3x20"),
		series("terraseed_infrastructure_failed_runs", infraB+`,command="apply"`, "0x22"),
	}, true},
	{"an Infrastructure's apply fails twice, then succeeds", "TerraseedInfrastructureRunsFailing", []string{
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "1 2 0x20"),
	}, false},
	{"an Infrastructure's apply failed twice, terminally", "TerraseedInfrastructureRunsFailing", []string{
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "1 2x30"),
	}, false},
	{"an Infrastructure's applies failed three times a while ago", "TerraseedInfrastructureRunsFailing", []string{
		series("terraseed_infrastructure_failed_runs", infraA+`,command="apply"`, "1 2 3x5 0x20"),
	}, false},

	{"an Infrastructure drifted an hour ago", "TerraseedInfrastructureDrifted", []string{
		series("terraseed_infrastructure_drift_state", infraA+`,state="in_sync"`, "1x10"),
		series("terraseed_infrastructure_drift_state", infraA+`,state="drifted"`, "_x10 1x70"),
	}, true},
	{"an Infrastructure drifted and was applied again", "TerraseedInfrastructureDrifted", []string{
		series("terraseed_infrastructure_drift_state", infraA+`,state="drifted"`, "1x30"),
		series("terraseed_infrastructure_drift_state", infraA+`,state="in_sync"`, "_x30 1x50"),
	}, false},
	{"the drift checks fail", "TerraseedInfrastructureDrifted", []string{
		series("terraseed_infrastructure_drift_state", infraA+`,state="check_failed"`, "1x90"),
	}, false},

	{"a state takes 86% of the limit", "TerraseedStateNearLimit", []string{
		series("terraseed_infrastructure_state_limit_bytes", "", "1048576x70"),
		series("terraseed_infrastructure_state_bytes", infraA, "900000x70"),
		series("terraseed_infrastructure_state_bytes", infraB, "1000x70"),
	}, true},
	{"states take half the limit", "TerraseedStateNearLimit", []string{
		series("terraseed_infrastructure_state_limit_bytes", "", "1048576x70"),
		series("terraseed_infrastructure_state_bytes", infraA, "524288x70"),
	}, false},
	{"a state past the limit", "TerraseedStateNearLimit", []string{
		series("terraseed_infrastructure_state_limit_bytes", "", "1048576x70"),
		series("terraseed_infrastructure_state_bytes", infraA, "2000000x70"),
	}, false},

	{"a state past the limit", "TerraseedStateTooLarge", []string{
		series("terraseed_infrastructure_state_limit_bytes", "", "1048576x10"),
		series("terraseed_infrastructure_state_bytes", infraA, "2000000x10"),
	}, true},
	{"a state near the limit", "TerraseedStateTooLarge", []string{
		series("terraseed_infrastructure_state_limit_bytes", "", "1048576x10"),
		series("terraseed_infrastructure_state_bytes", infraA, "1000000x10"),
	}, false},
	{"a state past the limit of another release", "TerraseedStateTooLarge", []string{
		series("terraseed_infrastructure_state_limit_bytes", `namespace="elsewhere"`, "1048576x10"),
		series("terraseed_infrastructure_state_bytes", infraA+`,namespace="elsewhere"`, "2000000x10"),
	}, false},

	{"no replica leads", "TerraseedNoHeartbeat", []string{
		series("leader_election_master_status", `name="terraseed-infrastructure-controller",pod="a"`, "1x10 0x20"),
		series("leader_election_master_status", `name="terraseed-infrastructure-controller",pod="b"`, "0x30"),
	}, true},
	{"no replica reports", "TerraseedNoHeartbeat", []string{
		series("terraseed_terraform_runs_in_flight", `namespace="elsewhere"`, "0x30"),
	}, true},
	{"one replica leads", "TerraseedNoHeartbeat", []string{
		series("leader_election_master_status", `name="terraseed-infrastructure-controller",pod="a"`, "1x10 0x20"),
		series("leader_election_master_status", `name="terraseed-infrastructure-controller",pod="b"`, "0x10 1x20"),
	}, false},

	{"admissions answered with HTTP 500", "TerraseedWebhookErrors", []string{
		series("controller_runtime_webhook_requests_total", `webhook="/controlplane/aws",code="200"`, "0+5x20"),
		series("controller_runtime_webhook_requests_total", `webhook="/controlplane/aws",code="500"`, "0x15 1x5"),
	}, true},
	{"admissions answered", "TerraseedWebhookErrors", []string{
		series("controller_runtime_webhook_requests_total", `webhook="/controlplane/aws",code="200"`, "0+5x20"),
		series("controller_runtime_webhook_requests_total", `webhook="/controlplane/aws",code="500"`, "0x20"),
	}, false},

	{"admissions take seconds", "TerraseedWebhookSlow", []string{
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="0.1"`, "0x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="1"`, "0x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="10"`, "0+5x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="+Inf"`, "0+5x40"),
	}, true},
	{"admissions take milliseconds", "TerraseedWebhookSlow", []string{
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="0.1"`, "0+5x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="1"`, "0+5x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="10"`, "0+5x40"),
		series("controller_runtime_webhook_latency_seconds_bucket", `webhook="/controlplane/aws",le="+Inf"`, "0+5x40"),
	}, false},

	{"init takes most of a minute", "TerraseedSlowInit", []string{
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="init",result="succeeded",le="25.6"`, "0x100"),
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="init",result="succeeded",le="51.2"`, "0+1x100"),
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="init",result="succeeded",le="+Inf"`, "0+1x100"),
	}, true},
	{"init takes seconds, the apply minutes", "TerraseedSlowInit", []string{
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="init",result="succeeded",le="3.2"`, "0+1x100"),
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="init",result="succeeded",le="+Inf"`, "0+1x100"),
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="apply",result="succeeded",le="3.2"`, "0x100"),
		series("terraseed_terraform_phase_duration_seconds_bucket", `command="apply",phase="apply",result="succeeded",le="+Inf"`, "0+1x100"),
	}, false},

	{"a creation waits", "TerraseedRunsQueued", []string{
		series("terraseed_terraform_runs_waiting", `priority="create"`, "0x10 2x20"),
	}, true},
	{"a creation waits a few minutes", "TerraseedRunsQueued", []string{
		series("terraseed_terraform_runs_waiting", `priority="create"`, "0x20 2x10 0x5"),
	}, false},
	{"drift plans wait", "TerraseedRunsQueued", []string{
		series("terraseed_terraform_runs_waiting", `priority="drift"`, "50x30"),
		series("terraseed_terraform_runs_waiting", `priority="create"`, "0x30"),
	}, false},

	{"Infrastructures wait for workers", "TerraseedBacklog", []string{
		series("workqueue_depth", `name="infrastructure"`, "30x30"),
	}, true},
	{"a few Infrastructures wait, many ControlPlanes", "TerraseedBacklog", []string{
		series("workqueue_depth", `name="infrastructure"`, "15x30"),
		series("workqueue_depth", `name="controlplane"`, "100x30"),
	}, false},
}

// The chart's alerts fire on what they describe and stay quiet otherwise; each has a case
// of both.
func TestAlertRules(t *testing.T) {
	// The cases of TerraseedRunPastDeadline are minutes of a runTimeout of an hour.
	rendered := chartRules(t, render(t, "garden-terraseed", append(monitoringValues, "--set", "runTimeout=1h")...))
	byName := map[string]rule{}
	for _, r := range rendered {
		byName[r.Alert] = r
	}
	tested := map[string][]bool{}
	for _, c := range alertCases {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			g := NewWithT(t)
			r, ok := byName[c.alert]
			g.Expect(ok).To(BeTrue(), "the chart has no alert %s", c.alert)
			g.Expect(evaluate(t, r, c.series)).To(Equal(c.fires))
		})
		tested[c.alert] = append(tested[c.alert], c.fires)
	}
	for _, r := range rendered {
		NewWithT(t).Expect(tested[r.Alert]).To(ContainElements(true, false), "%s needs a case where it fires and one where it does not", r.Alert)
	}
}

// The alert of a chart without leader election: no heartbeat when no replica reports.
func TestAlertNoHeartbeatWithoutLeaderElection(t *testing.T) {
	g := NewWithT(t)
	var r rule
	for _, rr := range chartRules(t, render(t, "garden-terraseed", append(monitoringValues, "--set", "leaderElection.enabled=false")...)) {
		if rr.Alert == "TerraseedNoHeartbeat" {
			r = rr
		}
	}
	g.Expect(evaluate(t, r, []string{series("terraseed_terraform_runs_in_flight", "", "0x10")})).To(BeFalse())
	g.Expect(evaluate(t, r, []string{series("terraseed_terraform_runs_in_flight", `namespace="elsewhere"`, "0x10")})).To(BeTrue())
}

// The alerts about one Infrastructure name it in their labels and their summary.
func TestAlertsNameTheInfrastructure(t *testing.T) {
	g := NewWithT(t)
	byName := map[string]rule{}
	for _, r := range chartRules(t, render(t, "garden-terraseed", monitoringValues...)) {
		byName[r.Alert] = r
	}
	for _, c := range alertCases {
		perInfrastructure := []string{"TerraseedInfrastructureRunsFailing", "TerraseedInfrastructureDrifted", "TerraseedStateNearLimit", "TerraseedStateTooLarge"}
		if !c.fires || !slices.Contains(perInfrastructure, c.alert) {
			continue
		}
		alerting := evaluateRule(t, byName[c.alert], c.series)
		active := alerting.ActiveAlerts()
		g.Expect(active).To(HaveLen(1), "%s: %s", c.alert, c.name)
		g.Expect(active[0].Labels.Get("infrastructure_namespace")).To(Equal("shoot--dev--a"), c.alert)
		g.Expect(active[0].Labels.Get("infrastructure_name")).To(Equal("a"), c.alert)
		g.Expect(active[0].Annotations.Get("summary")).To(ContainSubstring("shoot--dev--a/a"), c.alert)
	}
}

// evaluate loads the series, evaluates the rule every minute over them as Prometheus's
// rule manager does, and tells whether the alert fires at the end.
func evaluate(t *testing.T, r rule, input []string) bool {
	t.Helper()
	return evaluateRule(t, r, input).State() == rules.StateFiring
}

// evaluateRule is evaluate's rule after its last evaluation.
func evaluateRule(t *testing.T, r rule, input []string) *rules.AlertingRule {
	t.Helper()
	g := NewWithT(t)
	storage := promqltest.LoadedStorage(t, "load 1m\n  "+strings.Join(input, "\n  "))
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
	g.Expect(err).NotTo(HaveOccurred())
	var hold model.Duration
	if r.For != "" {
		hold, err = model.ParseDuration(r.For)
		g.Expect(err).NotTo(HaveOccurred())
	}
	alerting := rules.NewAlertingRule(r.Alert, expr, time.Duration(hold), 0, labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, nil)
	query := rules.EngineQueryFunc(engine, storage)
	// Evaluated up to the last sample: "a" is one sample, "axN" and "a+bxN" are N+1.
	minutes := 0
	for _, s := range input {
		count := 0
		for _, item := range strings.Fields(s[strings.LastIndex(s, "}")+1:]) {
			_, times, _ := strings.Cut(item, "x")
			n := 1
			if times != "" {
				repeat, err := strconv.Atoi(times)
				g.Expect(err).NotTo(HaveOccurred(), s)
				n = repeat + 1
			}
			count += n
		}
		minutes = max(minutes, count-1)
	}
	start := time.Unix(0, 0).UTC()
	for m := 0; m <= minutes; m++ {
		ts := start.Add(time.Duration(m) * time.Minute)
		_, err := alerting.Eval(context.Background(), 0, ts, query, nil, 0)
		g.Expect(err).NotTo(HaveOccurred())
		// As the rule group does after each evaluation.
		alerting.SetEvaluationTimestamp(ts)
	}
	return alerting
}
