package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/api/scheme"
	"github.com/terraseed/terraseed/test/image"
	"github.com/terraseed/terraseed/test/realnode"
)

// The terraseed image as the tests assemble it from the Dockerfile.
const (
	imageRepository = "localhost/terraseed/terraseed"
	imageTag        = "e2e"
	ImageName       = imageRepository + ":" + imageTag
)

var (
	node       *realnode.Node
	kube       client.Client
	clientset  kubernetes.Interface
	skipReason string
	repoRoot   = func() string {
		p, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			panic(err)
		}
		return p
	}()
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// What the executors log is not what these tests look at; the pods are.
	ctrllog.SetLogger(logr.Discard())
	if realnode.Disabled() {
		skipReason = "TERRASEED_E2E=skip"
		return m.Run()
	}
	if err := realnode.Available(realnode.Options{}); err != nil {
		if !realnode.Required() {
			skipReason = err.Error()
			return m.Run()
		}
		fmt.Fprintln(os.Stderr, err, "(TERRASEED_E2E=require)")
		return 1
	}
	// Time to wait for another package's node to stop, and to start this one.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	// The image is assembled while the node comes up.
	archive := make(chan error, 1)
	buildDir, err := os.MkdirTemp("", "terraseed-e2e-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(buildDir)
	archivePath := filepath.Join(buildDir, "terraseed.tar")
	go func() { archive <- assembleImage(buildDir, archivePath) }()

	started := time.Now()
	node, err = realnode.Start(ctx, realnode.Options{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the node:", err)
		<-archive
		return 1
	}
	defer func() {
		if err := node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node:", err)
		}
	}()
	if err := <-archive; err != nil {
		fmt.Fprintln(os.Stderr, "assembling the image:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "image %s assembled %s after the start\n", ImageName, time.Since(started).Round(time.Second))
	if err := node.ImportImage(ctx, archivePath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = client.New(node.Config, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clientset = node.Clientset
	if err := installChart(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprint(os.Stderr, node.LogTails(8<<10))
	}
	return code
}

// assembleImage builds the image the Dockerfile describes: the binaries with the build
// stage's commands, the provider mirror with the providers stage's command (from the
// module and build caches `make tools` filled; a provider whose releases site this
// machine cannot reach is left out, and the stage's output, on stderr, says so), terraform as `make tools` built it at the
// version the Dockerfile pins (test/image checks the pins), and a stand-in for the
// distroless base; and writes it as an archive.
func assembleImage(buildDir, archivePath string) error {
	d, err := image.ParseFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return err
	}
	built, err := image.BuildStage(d, "build", repoRoot, filepath.Join(buildDir, "bin"))
	if err != nil {
		return err
	}
	mirror, err := image.ProvidersStage(d, repoRoot, filepath.Join(buildDir, "mirror"), os.Stderr)
	if err != nil {
		return err
	}
	terraform := os.Getenv("TERRASEED_TERRAFORM")
	if terraform == "" {
		return errors.New("TERRASEED_TERRAFORM is not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	img, err := image.Assembly{
		Dockerfile: d,
		Context:    repoRoot,
		Stages: map[string]map[string]string{
			"build":     built,
			"terraform": {"/out/terraform": terraform},
			"providers": mirror,
		},
		Base: image.Distroless(),
	}.Image()
	if err != nil {
		return err
	}
	_, err = image.WriteArchive(archivePath, ImageName, img)
	return err
}

// requireNode skips the test where no node runs.
func requireNode(t *testing.T) {
	t.Helper()
	if node == nil {
		t.Skip(skipReason)
	}
}
