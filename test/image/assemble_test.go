package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// stubStages stands for the build stages with small files, as the end-to-end tests
// stand for them with the binaries, terraform and the provider mirror built here.
func stubStages(t *testing.T) map[string]map[string]string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, content string, mode fs.FileMode) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("mirror/registry.terraform.io/gavinbunney/kubectl/1.19.0/linux_amd64/terraform-provider-kubectl_v1.19.0", "provider", 0o755)
	return map[string]map[string]string{
		"build": {
			"/out/terraseed":   write("terraseed", "controller", 0o755),
			"/out/terraformer": write("terraformer", "terraformer", 0o755),
		},
		"terraform": {"/out/terraform": write("terraform", "terraform", 0o755)},
		"providers": {"/mirror": filepath.Join(dir, "mirror")},
	}
}

func assemble(t *testing.T, text string) (Image, error) {
	t.Helper()
	return Assembly{Dockerfile: parseDockerfile(t, text), Context: root, Stages: stubStages(t), Base: Distroless()}.Image()
}

// The assembly follows the Dockerfile's final stage: its files where it copies them,
// owned by root, and its user, environment, entrypoint and command.
func TestAssemblyFollowsTheDockerfile(t *testing.T) {
	g := NewWithT(t)
	img, err := assemble(t, dockerfileText(t))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(img.Config.User).To(Equal("65532:65532"))
	g.Expect(img.Config.Entrypoint).To(Equal([]string{"/terraseed"}))
	g.Expect(img.Config.Cmd).To(Equal([]string{"run"}))
	g.Expect(img.Config.Env).To(ContainElements(
		"TF_CLI_CONFIG_FILE=/etc/terraseed/terraformrc",
		"TERRASEED_TERRAFORM=/usr/local/bin/terraform",
		"TERRASEED_PROVIDER_MIRROR=/opt/terraseed/plugins",
		"TERRAFORM_PROVIDER_MIRROR=/opt/terraseed/plugins",
		HavePrefix("PATH=/usr/local/sbin:/usr/local/bin:"),
	))
	files := map[string]File{}
	for _, layer := range img.Layers {
		for _, f := range layer {
			files[f.Path] = f
		}
	}
	for _, p := range []string{"/terraseed", "/terraformer", "/usr/local/bin/terraform",
		"/opt/terraseed/plugins/registry.terraform.io/gavinbunney/kubectl/1.19.0/linux_amd64/terraform-provider-kubectl_v1.19.0"} {
		g.Expect(files).To(HaveKey(p))
		g.Expect(files[p].Mode.Perm()).To(Equal(fs.FileMode(0o755)), p)
		g.Expect(files[p].UID).To(BeZero(), "%s: COPY without --chown gives root the file", p)
	}
	g.Expect(files["/etc/terraseed/terraformrc"].Source).To(Equal(filepath.Join(root, "build/terraformrc")))
	g.Expect(files["/tmp"].Mode & fs.ModeSticky).NotTo(BeZero())
	g.Expect(string(files["/etc/passwd"].Data)).To(ContainSubstring("nonroot:x:65532:65532:"))
}

// An instruction or a source the assembly cannot follow is refused, so the assembled
// image cannot silently differ from what the Dockerfile builds.
func TestAssemblyRefusesWhatItCannotFollow(t *testing.T) {
	text := dockerfileText(t)
	for _, c := range []struct{ name, old, new, want string }{
		{"a RUN in the image", "USER 65532:65532", "RUN mkdir /data\nUSER 65532:65532", "cannot follow"},
		{"a shell-form entrypoint", `ENTRYPOINT ["/terraseed"]`, "ENTRYPOINT /terraseed", "shell form"},
		{"an unknown stage output", "COPY --from=build /out/terraformer /terraformer", "COPY --from=build /out/other /terraformer", "nothing standing for"},
		{"another base", "gcr.io/distroless/static-debian12:nonroot@", "gcr.io/distroless/base-debian12:nonroot@", "stands in for"},
		{"a volume", "USER 65532:65532", "VOLUME /data\nUSER 65532:65532", "cannot follow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(text).To(ContainSubstring(c.old))
			_, err := assemble(t, strings.Replace(text, c.old, c.new, 1))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}

// The archive is an OCI image layout: an index naming the image, a manifest, a
// configuration and layers, each blob stored under its digest.
func TestWriteArchive(t *testing.T) {
	g := NewWithT(t)
	img, err := assemble(t, dockerfileText(t))
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "image.tar")
	digest, err := WriteArchive(path, "localhost/terraseed/terraseed:test", img)
	g.Expect(err).NotTo(HaveOccurred())

	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		entries[h.Name] = data
	}
	for name, data := range entries {
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			sum := sha256.Sum256(data)
			g.Expect(hex.EncodeToString(sum[:])).To(Equal(hexDigest), name)
		}
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	g.Expect(json.Unmarshal(entries["index.json"], &index)).To(Succeed())
	g.Expect(index.Manifests).To(HaveLen(1))
	g.Expect(index.Manifests[0].Digest).To(Equal(digest))
	g.Expect(index.Manifests[0].Annotations).To(HaveKeyWithValue("io.containerd.image.name", "localhost/terraseed/terraseed:test"))
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	g.Expect(json.Unmarshal(entries["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")], &manifest)).To(Succeed())
	g.Expect(manifest.Layers).To(HaveLen(len(img.Layers)))
	var config struct {
		Config Config `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	g.Expect(json.Unmarshal(entries["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &config)).To(Succeed())
	g.Expect(config.Config.User).To(Equal("65532:65532"))
	g.Expect(config.RootFS.DiffIDs).To(HaveLen(len(img.Layers)))

	// The layer with the terraformer holds it at /terraformer, executable, owned by root.
	var found bool
	for _, l := range manifest.Layers {
		lr := tar.NewReader(strings.NewReader(string(entries["blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:")])))
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			if h.Name == "terraformer" {
				found = true
				g.Expect(h.Mode).To(BeEquivalentTo(0o755))
				g.Expect(h.Uid).To(BeZero())
			}
		}
	}
	g.Expect(found).To(BeTrue())
}
