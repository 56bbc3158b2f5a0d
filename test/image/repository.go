package image

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// AssembleRepository builds the image the Dockerfile of the repository at root describes,
// without a container engine, and writes it as the archive path named name: the binaries
// with the build stage's commands, the provider mirror with the providers stage's command
// (from the module and build caches `make tools` filled; a provider whose releases site
// this machine cannot reach is left out, and the stage's output, on log, says so),
// terraform as `make tools` built it at the version the Dockerfile pins (test/image
// checks the pins, $TERRASEED_TERRAFORM names it), and a stand-in for the distroless
// base. buildDir receives the stages' output.
func AssembleRepository(root, buildDir, path, name string, log io.Writer) error {
	d, err := ParseFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return err
	}
	built, err := BuildStage(d, "build", root, filepath.Join(buildDir, "bin"))
	if err != nil {
		return err
	}
	mirror, err := ProvidersStage(d, root, filepath.Join(buildDir, "mirror"), log)
	if err != nil {
		return err
	}
	terraform := os.Getenv("TERRASEED_TERRAFORM")
	if terraform == "" {
		return errors.New("TERRASEED_TERRAFORM is not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	img, err := Assembly{
		Dockerfile: d,
		Context:    root,
		Stages: map[string]map[string]string{
			"build":     built,
			"terraform": {"/out/terraform": terraform},
			"providers": mirror,
		},
		Base: Distroless(),
	}.Image()
	if err != nil {
		return err
	}
	_, err = WriteArchive(path, name, img)
	return err
}
