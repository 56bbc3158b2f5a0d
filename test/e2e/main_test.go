package e2e

import (
	"context"
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

// assembleImage builds the image the Dockerfile describes from the working tree, as
// image.AssembleRepository does, and writes it as an archive.
func assembleImage(buildDir, archivePath string) error {
	return image.AssembleRepository(repoRoot, buildDir, archivePath, ImageName, os.Stderr)
}

// requireNode skips the test where no node runs.
func requireNode(t *testing.T) {
	t.Helper()
	if node == nil {
		t.Skip(skipReason)
	}
}
