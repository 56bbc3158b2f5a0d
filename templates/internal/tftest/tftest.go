package tftest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

// Terraform is a working directory holding a rendered configuration, with local state.
type Terraform struct {
	Dir string
	tf  *tfexec.Terraform
}

// New writes the rendered files into a fresh directory. Terraform runs with its own CLI
// configuration (providers from the mirror only) and with env, which is set on the test
// process: terraform-exec refuses TF_VAR_ variables in its own environment map, so they
// can only be inherited. Tests using it must not run in parallel.
func New(t testing.TB, out *templates.Rendered, env map[string]string) *Terraform {
	t.Helper()
	dir := t.TempDir()
	for name, content := range out.Files {
		write(t, filepath.Join(dir, name), []byte(content))
	}
	write(t, filepath.Join(dir, "terraform.tfvars.json"), out.TFVarsJSON)
	if st, ok := t.(interface{ Setenv(string, string) }); ok {
		st.Setenv("TF_CLI_CONFIG_FILE", testenv.TerraformCLIConfig(t))
		for k, v := range env {
			st.Setenv(k, v)
		}
	} else {
		t.Fatal("tftest needs a *testing.T or *testing.B")
	}
	tf, err := tfexec.NewTerraform(dir, testenv.Terraform(t))
	if err != nil {
		t.Fatal(err)
	}
	return &Terraform{Dir: dir, tf: tf}
}

// Rewrite replaces the configuration with another rendering, keeping the state: the
// next apply changes what the first one made.
func (tf *Terraform) Rewrite(t testing.TB, out *templates.Rendered) {
	t.Helper()
	for name, content := range out.Files {
		write(t, filepath.Join(tf.Dir, name), []byte(content))
	}
	write(t, filepath.Join(tf.Dir, "terraform.tfvars.json"), out.TFVarsJSON)
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Init installs the providers from the mirror.
func (tf *Terraform) Init(ctx context.Context) error {
	return tf.tf.Init(ctx, tfexec.Backend(false))
}

// Validate runs terraform validate and returns its diagnostics when it fails.
func (tf *Terraform) Validate(ctx context.Context) (*ValidateResult, error) {
	out, err := tf.tf.Validate(ctx)
	if err != nil {
		return nil, err
	}
	res := &ValidateResult{Valid: out.Valid}
	for _, d := range out.Diagnostics {
		res.Diagnostics = append(res.Diagnostics, d.Summary+": "+d.Detail)
	}
	return res, nil
}

// ValidateResult is terraform validate's verdict.
type ValidateResult struct {
	Valid       bool
	Diagnostics []string
}

// FormatCheck reports the files terraform fmt would change.
func (tf *Terraform) FormatCheck(ctx context.Context) (bool, []string, error) {
	return tf.tf.FormatCheck(ctx)
}

// Apply applies with local state in the working directory.
func (tf *Terraform) Apply(ctx context.Context) error { return tf.tf.Apply(ctx) }

// Destroy destroys what Apply created.
func (tf *Terraform) Destroy(ctx context.Context) error { return tf.tf.Destroy(ctx) }

// Outputs returns the outputs as JSON-typed values, the way the controller reads them.
func (tf *Terraform) Outputs(ctx context.Context) (map[string]any, error) {
	meta, err := tf.tf.Output(ctx)
	if err != nil {
		return nil, err
	}
	outputs := map[string]any{}
	for name, m := range meta {
		var v any
		if err := json.Unmarshal(m.Value, &v); err != nil {
			return nil, err
		}
		outputs[name] = v
	}
	return outputs, nil
}
