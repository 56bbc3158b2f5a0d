package kinds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
)

// AnnotationImport adopts existing infrastructure into an Infrastructure: a JSON object
// of resource addresses to the IDs `terraform import` takes for them. The next apply
// imports them instead of creating them. It is part of the run's digest, so that a run
// waiting or under way when it was set is not taken for the apply that imports, and it is
// removed only once an apply left every address it names in the state under the ID it
// names.
const AnnotationImport = run.LabelPrefix + "import"

// applyScope is what the phases of one apply read and write.
type applyScope struct {
	// restore writes the state kept in .status.state back before the run (see restore).
	restore bool

	provider served
	secret   *corev1.Secret
	// restored is the state of .status.state a restore writes back.
	restored []byte
	rendered *templates.Rendered
	// env is the credentials of the run.
	env map[string]string
	// adoptions are the imports the operator asks for (AnnotationImport).
	adoptions map[string]string
	request   run.Request
	// result is the outcome of the run once it ended.
	result *run.Result
	// report is what the apply reports of the run's outputs, the sensitive ones only into Secrets.
	report report
	// outputs are the run's outputs, the sensitive ones included: only Secrets get those.
	outputs map[string]any
}

// apply makes the infrastructure the Infrastructure describes exist: it renders the
// provider's configuration, runs terraform apply, and reports the outputs, and the state
// for Gardener's backup of the shoot's state. It takes several reconciles: the first
// submits the run, the one after its end reads the outcome.
func (op *operation) apply(ctx context.Context, s *applyScope) error {
	return runPhases(ctx, s, []phase[applyScope]{
		op.readInputs,      // the provider, the credentials secret, the namespace of a local one
		op.readRestored,    // the state a restore writes back
		op.render,          // the configuration, the credentials, the adoptions
		op.request,         // the apply request, its guard and its digest
		op.runOrWaitApply,  // the run's outcome once it ended; until then prepare and submit it
		op.keepOutputs,     // sensitive outputs into their Secret, the provider status of the others
		op.writeEtcdBackup, // a BackupEntry's Secret etcd-backup in the shoot's namespace
		op.recordApply,     // LastPlan and InSync; annotations used up; a recovery done
		op.writeStatus,     // the provider status, the state's history, the state in the status
		op.keepDeleted,     // a state object deleted while the run wrote it, written anew
	})
}

// prepare writes what the apply's run reads, once, before it is submitted.
func (op *operation) prepare(ctx context.Context, s *applyScope) error {
	return runPhases(ctx, s, []phase[applyScope]{
		op.ensureFinalizer,  // the finalizer, before anything exists to destroy
		op.storeCredentials, // the credentials of the run, and the secret's version
		op.restoreState,     // a restore's state, unless a newer one of it is there
		op.writeConfig,      // the configuration with its imports (recovered, adopted), the variables
		op.warnAllowDestroy, // an event when the deprecated allow-destroy=true allows the run
	})
}

func (op *operation) readInputs(ctx context.Context, s *applyScope) error {
	var err error
	if s.provider, s.secret, err = op.inputs(ctx); err != nil {
		return err
	}
	return s.provider.check(ctx, op)
}

func (op *operation) render(ctx context.Context, s *applyScope) (err error) {
	ctx, span := tracing.Start(ctx, "render")
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	if s.rendered, err = s.provider.render(op.obj, op.req.Cluster, templates.IsWorkloadIdentity(s.secret)); err != nil {
		return err
	}
	if s.env, err = s.provider.Credentials(s.secret); err != nil {
		return err
	}
	if s.adoptions, err = op.adoptions(s.provider); err != nil {
		return err
	}
	if err := op.adoptsNoOthers(ctx, s.adoptions); err != nil {
		return err
	}
	if err := op.checkOwnedNamespace(ctx, s); err != nil {
		return err
	}
	// The run indexes every state it saves with the provider's import IDs.
	s.rendered.Files[imports.IDsKey] = s.provider.ImportIDsFile()
	// The destroy's run purges first what the configuration names (a BackupEntry's backups).
	if s.rendered.Purge != "" {
		s.rendered.Files[purge.Key] = s.rendered.Purge
	}
	return nil
}

// adoptions are the imports the Infrastructure's annotation asks for, checked, each ID
// in the canonical form the provider's index holds it in.
func (op *operation) adoptions(provider served) (map[string]string, error) {
	imports, err := importAnnotation(op.obj)
	if err != nil {
		return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%w", err)
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationImport)
	for _, address := range slices.Sorted(maps.Keys(imports)) {
		typ, _, _ := strings.Cut(address, ".")
		if imports[address], err = provider.ImportIDForms().Canonical(typ, imports[address]); err != nil {
			return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%s: %s: %w", field, address, err)
		}
	}
	return imports, nil
}

// importAnnotation reads the import annotation of infra: nil without one; an address
// must be a plain resource instance address and an ID must not be empty.
func importAnnotation(obj client.Object) (map[string]string, error) {
	raw, ok := obj.GetAnnotations()[AnnotationImport]
	if !ok {
		return nil, nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationImport)
	var imports map[string]string
	if err := json.Unmarshal([]byte(raw), &imports); err != nil {
		return nil, fmt.Errorf("%s: must be a JSON object of resource addresses to import IDs: %w", field, err)
	}
	for _, address := range slices.Sorted(maps.Keys(imports)) {
		switch {
		case !instanceAddress.MatchString(address):
			return nil, fmt.Errorf("%s: %q is not a resource instance address such as aws_vpc.vpc or aws_subnet.nodes[\"a\"]", field, address)
		case imports[address] == "":
			return nil, fmt.Errorf("%s: the import ID of %s is empty", field, address)
		}
	}
	return imports, nil
}

// adoptsNoOthers refuses an adoption of an ID that the index of another object of any
// kind served holds: adopting it would make one resource two objects', and the adopting
// apply could change, replace or destroy what the other one holds (a shoot's network, its
// etcd backups). IDs compare in their canonical form (adoptions), the one indexes hold.
// The indexes asked are those this controller wrote into each object's status, never one
// a run wrote.
func (op *operation) adoptsNoOthers(ctx context.Context, adoptions map[string]string) error {
	if len(adoptions) == 0 {
		return nil
	}
	held := map[string]holder{}
	for _, kind := range op.adoptionKinds() {
		if err := op.heldBy(ctx, kind, held); err != nil {
			return err
		}
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationImport)
	for _, address := range slices.Sorted(maps.Keys(adoptions)) {
		if h, ok := held[adoptions[address]]; ok {
			return extension.InvalidInput(ReasonInvalidConfiguration,
				"%s: %s: the ID %q is %s %s's (its %s): an adoption never takes what another object's state holds",
				field, address, adoptions[address], h.kind, h.object, h.address)
		}
	}
	return nil
}

// holder is the object whose index holds an ID, and its address there.
type holder struct{ kind, object, address string }

// adoptionKinds are the Infrastructure and the kinds served besides it.
func (op *operation) adoptionKinds() []*kindSpec {
	kinds := []*kindSpec{infrastructureKind}
	for _, k := range op.actuator.kinds {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// heldBy adds to held the IDs the indexes of the objects of kind hold, the operation's
// own object's aside.
func (op *operation) heldBy(ctx context.Context, kind *kindSpec, held map[string]holder) error {
	// From the API server: the cache keeps no indexes (CachedObjects).
	list := kind.newList()
	if err := op.actuator.APIReader.List(ctx, list); err != nil {
		return fmt.Errorf("listing the %ss whose indexes an adoption must not take from: %w", kind.name, err)
	}
	for _, other := range listItems(list) {
		if other.GetUID() == op.obj.GetUID() {
			continue
		}
		index, err := statusIndex(other.GetExtensionStatus().State)
		if err != nil || index == nil {
			continue
		}
		object := strings.TrimPrefix(client.ObjectKeyFromObject(other).String(), "/")
		for address, id := range index.IDs {
			held[id] = holder{kind: kind.name, object: object, address: address}
		}
	}
	return nil
}

// request is the apply of this operation: with the provider's protected types, allowed
// to destroy them as the annotation says, and what the scheduler shares the runs by.
func (op *operation) request(_ context.Context, s *applyScope) error {
	allow, err := op.allowDestroy(time.Now())
	if err != nil {
		return err
	}
	req := run.Request{
		ID: op.objects().ID, Owner: op.owner(), Command: run.Apply, Env: s.env, Files: credentialFiles(s.provider, s.secret),
		ProtectedTypes: s.provider.protectedResources(), AllowDestroy: allow.any, AllowDestroyPlan: allow.plan,
		Progress: op.actuator.progressReporter(op.kind, client.ObjectKeyFromObject(op.obj)),
	}
	req = op.withFleet(req, s.provider, s.secret)
	req.Digest = configDigest(s.rendered.Files, s.rendered.TFVarsJSON, req, s.adoptions)
	req.LoadEnv = op.storedEnv()
	s.request = req
	return nil
}

func (op *operation) runOrWaitApply(ctx context.Context, s *applyScope) error {
	result, err := op.runOrWait(ctx, s.request, op.priority(), func(ctx context.Context) error { return op.prepare(ctx, s) })
	if err != nil {
		op.keepFailedState(ctx, err)
		return throttledError(s.provider, op.refused(err))
	}
	s.result = result
	return nil
}

func (op *operation) ensureFinalizer(ctx context.Context, _ *applyScope) error {
	return op.req.EnsureFinalizer(ctx)
}

func (op *operation) storeCredentials(ctx context.Context, s *applyScope) error {
	annotations := map[string]string{annotationSourceVersion: s.secret.ResourceVersion}
	if templates.IsWorkloadIdentity(s.secret) {
		annotations[annotationWorkloadIdentity] = "true"
	}
	return op.objects().WriteCredentials(ctx, op.actuator.Client, op.obj, annotations, s.env, state.CreateFirst(op.req.FirstRun))
}

func (op *operation) writeConfig(ctx context.Context, s *applyScope) error {
	files, err := op.withImports(ctx, s.rendered.Files, s.adoptions)
	if err != nil {
		return err
	}
	objects := op.objects()
	firstRun := state.CreateFirst(op.req.FirstRun)
	if err := objects.WriteConfig(ctx, op.actuator.Client, files, firstRun); err != nil {
		return err
	}
	return objects.WriteVars(ctx, op.actuator.Client, s.rendered.TFVarsJSON, firstRun)
}

// withImports adds to files the import blocks of the resources a lost state held and of
// those the operator adopts. The adoptions are in the run's digest (see configDigest);
// a recovery's imports are not: they follow from the state the run starts from.
func (op *operation) withImports(ctx context.Context, files map[string]string, adoptions map[string]string) (map[string]string, error) {
	r, err := op.recoverState(ctx, files)
	if err != nil {
		return nil, err
	}
	if err := op.refuseInterrupted(ctx, declaredResources(files)); err != nil {
		return nil, err
	}
	recovered := map[string]string{}
	if r != nil {
		for address, id := range r.imports {
			if _, adopted := adoptions[address]; !adopted {
				recovered[address] = id
			}
		}
	}
	if len(adoptions) == 0 && len(recovered) == 0 {
		return files, nil
	}
	files = maps.Clone(files)
	if len(adoptions) > 0 {
		files[imports.File] = importBlocks("resources adopted by their import IDs", adoptions)
	}
	if len(recovered) > 0 {
		files[imports.RecoveredFile] = importBlocks("resources a lost state's index names, found again by their import IDs", recovered)
	}
	return files, nil
}

// importBlocks is the terraform file importing each address from its ID, literally:
// terraform 1.5 and OpenTofu take no expressions there.
func importBlocks(what string, imports map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by terraseed: %s.\n", what)
	for _, address := range slices.Sorted(maps.Keys(imports)) {
		fmt.Fprintf(&b, "\nimport {\n  to = %s\n  id = %s\n}\n", address, hclString(imports[address]))
	}
	return b.String()
}

// hclString quotes s as an HCL string literal that interpolates nothing.
func hclString(s string) string {
	// JSON's escapes are HCL's: \uNNNN for anything unprintable.
	raw, _ := json.Marshal(s)
	quoted := strings.ReplaceAll(string(raw), "${", "$${")
	return strings.ReplaceAll(quoted, "%{", "%%{")
}

// instanceAddress is a resource instance address that can stand in an import block's
// `to` as it is: nothing in it can end the expression.
var instanceAddress = regexp.MustCompile(`^(module\.[A-Za-z_][A-Za-z0-9_-]*(\[(\d+|"[^"\\$%{}]*")\])?\.)*[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*(\[(\d+|"[^"\\$%{}]*")\])?$`)

func (op *operation) keepOutputs(ctx context.Context, s *applyScope) error {
	var err error
	if s.outputs, err = op.keepSensitiveOutputs(ctx, s.provider, s.result.State); err != nil {
		return err
	}
	s.report, err = s.provider.report(s.outputs)
	return err
}

// keepSensitiveOutputs writes the outputs the configuration marks sensitive into a Secret
// owned by the object, `<name>.<purpose>.outputs`, and returns every output once none the
// status reads is sensitive: the status is built from the others only, and Secrets (a
// BackupBucket's generated one, etcd-backup) may hold the sensitive ones.
func (op *operation) keepSensitiveOutputs(ctx context.Context, provider served, saved []byte) (map[string]any, error) {
	plain, sensitive, err := state.SplitOutputs(saved)
	if err != nil {
		return nil, err
	}
	for _, name := range provider.statusOutputs() {
		if _, ok := sensitive[name]; ok {
			return nil, extension.InvalidInput(ReasonInvalidConfiguration,
				"provider %s: status maps the output %q, which is sensitive: sensitive outputs go to the Secret %s, never to the status",
				op.spec().Type, name, op.objects().ID.OutputsName())
		}
	}
	data := make(map[string][]byte, len(sensitive))
	for name, value := range sensitive {
		if s, ok := value.(string); ok {
			data[name] = []byte(s)
			continue
		}
		encoded, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("encoding the output %s: %w", name, err)
		}
		data[name] = encoded
	}
	if err := op.objects().WriteSensitiveOutputs(ctx, op.actuator.Client, op.obj, data); err != nil {
		return nil, err
	}
	all := maps.Clone(plain)
	if all == nil {
		all = map[string]any{}
	}
	maps.Copy(all, sensitive)
	return all, nil
}

// recordApply records the plan that was applied and that the infrastructure is in sync,
// uses up a permission to destroy and the adoptions, and marks a recovery done.
func (op *operation) recordApply(ctx context.Context, s *applyScope) error {
	now := metav1.Now()
	if plan := s.result.Plan; plan != nil {
		extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
			Type: ConditionLastPlan, Status: extensionsv1alpha1.ConditionTrue, Reason: reasonPlanApplied,
			Message: appliedMessage(plan), LastUpdateTime: now, LastTransitionTime: now,
		})
	}
	if op.actuator.DriftInterval > 0 && op.kind.driftChecked {
		extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
			Type: ConditionInSync, Status: extensionsv1alpha1.ConditionTrue, Reason: reasonApplied,
			Message: "the last apply made the infrastructure match its configuration", LastUpdateTime: now, LastTransitionTime: now,
		})
	}
	// A confirmation of resources removed by hand is used up: the index this apply leaves
	// names none of them, and a later loss is another operator's call.
	for _, annotation := range []string{AnnotationAllowDestroy, AnnotationLostRemoved} {
		if _, ok := op.obj.GetAnnotations()[annotation]; ok {
			if err := op.req.RemoveAnnotation(ctx, annotation); err != nil {
				return err
			}
		}
	}
	op.recovered()
	return op.adopted(ctx, s)
}

// adopted removes the import annotation once the apply that succeeded left every address
// it names in the state under the ID it names: imported by its plan, or held already.
// An address the state holds under another ID (created by a run that was under way when
// the annotation was set) keeps the annotation, and an event names it: that resource and
// the one named are two, and which to keep is the operator's call.
func (op *operation) adopted(ctx context.Context, s *applyScope) error {
	if _, ok := op.obj.GetAnnotations()[AnnotationImport]; !ok {
		return nil
	}
	held := map[string]string{}
	if index := op.indexOf(s.result.State); index != nil {
		held = index.IDs
	}
	imported := map[string]bool{}
	for _, address := range s.result.Plan.Imports() {
		imported[address] = true
	}
	var differ []string
	for _, address := range slices.Sorted(maps.Keys(s.adoptions)) {
		if id := s.adoptions[address]; !imported[address] && held[address] != id {
			differ = append(differ, fmt.Sprintf("%s: %q named, the state holds %q", address, id, held[address]))
		}
	}
	if len(differ) > 0 {
		if op.actuator.Recorder != nil {
			op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, reasonAdoptionIncomplete, "Reconcile",
				"%s is kept: the state does not hold what it names (%s); remove the resource the state holds from it, or the address from the annotation",
				AnnotationImport, strings.Join(differ, "; "))
		}
		return nil
	}
	return op.req.RemoveAnnotation(ctx, AnnotationImport)
}

// reasonAdoptionIncomplete is the event of an apply that left the import annotation.
const reasonAdoptionIncomplete = "AdoptionIncomplete"

// writeStatus reports the provider's status, keeps the state in the history, and in
// .status.state for Gardener's backup of the shoot's state.
func (op *operation) writeStatus(ctx context.Context, s *applyScope) error {
	if err := s.report(ctx, op); err != nil {
		return err
	}
	index := op.indexOf(s.result.State)
	op.keepHistory(ctx, s.result.State)
	return op.keepStateInStatus(s.result.State, index)
}

// keepDeleted writes anew a state object deleted while the run was under way: its
// end may reconcile nothing more.
func (op *operation) keepDeleted(ctx context.Context, _ *applyScope) error {
	return op.keepDeletedState(ctx)
}

// priority is the run priority of the operation: a first apply or a restoration before
// the reconciles of objects that exist.
func (op *operation) priority() run.Priority {
	switch op.req.Operation {
	case extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationTypeRestore:
		return run.PriorityCreate
	case extensionsv1alpha1.LastOperationTypeDelete:
		return run.PriorityDelete
	default:
		return run.PriorityReconcile
	}
}

// configDigest identifies what a run works on: the files, the variables, the guard and
// the adoptions asked for, not the credentials. A run pod of another digest is never
// adopted as this run, and a run of another digest never ends this operation.
func configDigest(files map[string]string, vars []byte, req run.Request, adoptions map[string]string) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", name, len(files[name]), files[name])
	}
	fmt.Fprintf(h, "vars\x00%d\x00%s\x00", len(vars), vars)
	fmt.Fprintf(h, "guard\x00%s\x00%t", strings.Join(req.ProtectedTypes, ","), req.AllowDestroy)
	// Only when set: the digests of runs under way from before plans could be allowed stay.
	if req.AllowDestroyPlan != "" {
		fmt.Fprintf(h, "\x00%s", req.AllowDestroyPlan)
	}
	// Only when set, as the plan allowed: the digests of runs without adoptions stay.
	for _, address := range slices.Sorted(maps.Keys(adoptions)) {
		fmt.Fprintf(h, "\x00import\x00%d\x00%s\x00%d\x00%s", len(address), address, len(adoptions[address]), adoptions[address])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
