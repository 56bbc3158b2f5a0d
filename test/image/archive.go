package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File is one entry of an image layer.
type File struct {
	// Path is absolute, inside the image.
	Path string
	// Mode holds the permission bits and the type (fs.ModeDir, fs.ModeSymlink; none for
	// a regular file).
	Mode     fs.FileMode
	UID, GID int
	// Source is the file of this machine a regular file's content comes from, unless
	// Data is set.
	Source string
	Data   []byte
	// Link is a symlink's target.
	Link string
}

// Layer is a filesystem layer: files added over the layers below it.
type Layer []File

// Config is the part of an OCI image configuration a container runtime uses.
type Config struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// Image is an image to be written as an archive.
type Image struct {
	Config Config
	Layers []Layer
}

const (
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// WriteArchive writes img as an OCI image layout in a tar file at path, holding one
// image named name (a reference such as localhost/terraseed/terraseed:e2e), for
// `ctr images import`. Layers are uncompressed and their entries carry no timestamps,
// so the same files give the same digests. It returns the manifest's digest.
// It is long because the OCI layout is one fixed sequence of blobs (layers, config,
// manifest, index), each written the same way.
func WriteArchive(path, name string, img Image) (string, error) {
	blobs, err := os.MkdirTemp(filepath.Dir(path), ".oci-blobs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(blobs)

	var layers []descriptor
	var diffIDs []string
	for i, layer := range img.Layers {
		d, err := writeLayer(blobs, layer)
		if err != nil {
			return "", fmt.Errorf("layer %d: %w", i, err)
		}
		layers = append(layers, d)
		diffIDs = append(diffIDs, d.Digest)
	}
	config := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       img.Config,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history":      []map[string]string{{"created_by": "test/image WriteArchive"}},
	}
	configDesc, err := writeJSONBlob(blobs, mediaTypeConfig, config)
	if err != nil {
		return "", err
	}
	manifestDesc, err := writeJSONBlob(blobs, mediaTypeManifest, map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        configDesc,
		"layers":        layers,
	})
	if err != nil {
		return "", err
	}
	tag := name[strings.LastIndex(name, ":")+1:]
	manifestDesc.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{manifestDesc}})
	if err != nil {
		return "", err
	}

	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return "", err
	}
	if err := add("index.json", index); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := addFile(tw, "blobs/sha256/"+e.Name(), filepath.Join(blobs, e.Name())); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return manifestDesc.Digest, out.Close()
}

func addFile(tw *tar.Writer, name, source string) error {
	f, err := os.Open(source)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: info.Size(), Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func writeJSONBlob(dir, mediaType string, v any) (descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, hexSum), data, 0o644); err != nil {
		return descriptor{}, err
	}
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hexSum, Size: int64(len(data))}, nil
}

// writeLayer writes the layer's tar into dir under its digest.
func writeLayer(dir string, layer Layer) (descriptor, error) {
	tmp, err := os.CreateTemp(dir, ".layer-")
	if err != nil {
		return descriptor{}, err
	}
	defer tmp.Close()
	hash := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(tmp, hash)}
	tw := tar.NewWriter(counter)
	files := append(Layer(nil), layer...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return descriptor{}, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return descriptor{}, err
	}
	if err := tmp.Close(); err != nil {
		return descriptor{}, err
	}
	hexSum := hex.EncodeToString(hash.Sum(nil))
	if err := os.Rename(tmp.Name(), filepath.Join(dir, hexSum)); err != nil {
		return descriptor{}, err
	}
	return descriptor{MediaType: mediaTypeLayer, Digest: "sha256:" + hexSum, Size: counter.n}, nil
}

func writeEntry(tw *tar.Writer, f File) error {
	if !path.IsAbs(f.Path) {
		return fmt.Errorf("not an absolute path")
	}
	name := strings.TrimPrefix(path.Clean(f.Path), "/")
	header := &tar.Header{Name: name, Mode: int64(f.Mode.Perm()), Uid: f.UID, Gid: f.GID, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if f.Mode&fs.ModeSticky != 0 {
		header.Mode |= 0o1000
	}
	switch {
	case f.Mode.IsDir():
		header.Typeflag = tar.TypeDir
		header.Name += "/"
		return tw.WriteHeader(header)
	case f.Mode&fs.ModeSymlink != 0:
		header.Typeflag = tar.TypeSymlink
		header.Linkname = f.Link
		return tw.WriteHeader(header)
	case f.Mode.IsRegular():
		header.Typeflag = tar.TypeReg
		if f.Source == "" {
			header.Size = int64(len(f.Data))
			if err := tw.WriteHeader(header); err != nil {
				return err
			}
			_, err := tw.Write(f.Data)
			return err
		}
		src, err := os.Open(f.Source)
		if err != nil {
			return err
		}
		defer src.Close()
		info, err := src.Stat()
		if err != nil {
			return err
		}
		header.Size = info.Size()
		if err := tw.WriteHeader(header); err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		return err
	}
	return fmt.Errorf("unsupported file mode %s", f.Mode)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Tree returns the entries that copy a file or a directory tree of this machine to dest
// in the image, as a Dockerfile COPY does: a directory's contents go into dest, modes are
// kept, and the owner is uid:gid. Missing parent directories of dest are added, owned by
// root with mode 0755.
func Tree(source, dest string, uid, gid int) (Layer, error) {
	var layer Layer
	for dir := path.Dir(dest); dir != "/"; dir = path.Dir(dir) {
		layer = append(layer, File{Path: dir, Mode: fs.ModeDir | 0o755})
	}
	err := filepath.WalkDir(source, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(source, p)
		if err != nil {
			return err
		}
		f := File{Path: path.Join(dest, filepath.ToSlash(rel)), Mode: info.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSticky), UID: uid, GID: gid}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if f.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			f.Source = p
		case !info.IsDir():
			return fmt.Errorf("%s: not a regular file, directory or symlink", p)
		}
		layer = append(layer, f)
		return nil
	})
	return layer, err
}
