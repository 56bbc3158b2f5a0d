package infrastructure

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// migratedState is the shape of .status.state: the terraform state, gzipped, so that it
// comes back byte for byte and stays small in the Infrastructure.
type migratedState struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// TerraformState is the gzipped state file; encoding/json writes it as base64.
	TerraformState []byte `json:"terraformState"`
}

const (
	migratedStateAPIVersion = "terraseed.gardener.cloud/v1alpha1"
	migratedStateKind       = "InfrastructureState"
)

// migrate keeps the state in .status.state and releases the run objects and the
// Infrastructure without destroying anything: another seed takes the resources over.
func (op *operation) migrate(ctx context.Context) error {
	opType := extensionsv1alpha1.LastOperationTypeMigrate
	if err := op.begin(ctx, opType, "Migrating the infrastructure"); err != nil {
		return err
	}
	state, err := op.objects().ReadState(ctx, op.reconciler.Client)
	if err != nil {
		return fmt.Errorf("reading the state: %w", err)
	}
	if state != nil {
		encoded, err := encodeState(state)
		if err != nil {
			return err
		}
		op.infra.Status.State = encoded
		// The state must be safe in the status before the objects that hold it go.
		if err := op.patchStatus(ctx); err != nil {
			return err
		}
	}
	if err := op.deleteRunObjects(ctx); err != nil {
		return err
	}
	if err := op.succeed(ctx, opType, "The infrastructure is migrated: its state is in .status.state", ReasonMigrated); err != nil {
		return err
	}
	return op.removeFinalizerAndOperation(ctx)
}

func encodeState(state []byte) (*runtime.RawExtension, error) {
	var compressed bytes.Buffer
	writer := gzip.NewWriter(&compressed)
	if _, err := writer.Write(state); err != nil {
		return nil, err
	}
	if err := writer.Close(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(migratedState{APIVersion: migratedStateAPIVersion, Kind: migratedStateKind, TerraformState: compressed.Bytes()})
	if err != nil {
		return nil, err
	}
	return &runtime.RawExtension{Raw: raw}, nil
}

// decodeState returns the terraform state kept in .status.state, nil when there is none.
func decodeState(raw *runtime.RawExtension) ([]byte, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	invalid := func(err error) error {
		return &operationError{
			reason: ReasonInvalidConfiguration, terminal: true, invalid: true,
			codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
			err:   fmt.Errorf("status.state: %w", err),
		}
	}
	var kept migratedState
	if err := json.Unmarshal(raw.Raw, &kept); err != nil {
		return nil, invalid(err)
	}
	if kept.Kind != migratedStateKind || kept.APIVersion != migratedStateAPIVersion {
		return nil, invalid(fmt.Errorf("want apiVersion %s, kind %s; got %q, %q", migratedStateAPIVersion, migratedStateKind, kept.APIVersion, kept.Kind))
	}
	if len(kept.TerraformState) == 0 {
		return nil, nil
	}
	reader, err := gzip.NewReader(bytes.NewReader(kept.TerraformState))
	if err != nil {
		return nil, invalid(fmt.Errorf("terraformState: %w", err))
	}
	state, err := io.ReadAll(reader)
	if err != nil {
		return nil, invalid(fmt.Errorf("terraformState: %w", err))
	}
	return state, nil
}
