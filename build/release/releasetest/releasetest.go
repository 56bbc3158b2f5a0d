package releasetest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Release is one version of a product for this machine's platform.
type Release struct {
	Product, Version string
	// Files are the archive's files by name, each executable.
	Files map[string][]byte
	// Sums, when set, replaces the true SHA256SUMS.
	Sums string
}

// ZipName is the archive's name on the site.
func (r Release) ZipName() string {
	return fmt.Sprintf("%s_%s_%s_%s.zip", r.Product, r.Version, runtime.GOOS, runtime.GOARCH)
}

// Dir is the path of the release's directory on the site.
func (r Release) Dir() string { return "/" + r.Product + "/" + r.Version + "/" }

// Server serves one release: the version's index.json, the zip, its SHA256SUMS and a
// detached signature of those.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

// Hits says how often path was served.
func (s *Server) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// NewServer serves r signed by signer until the test ends.
// It is long because it builds the release's four files (archive, SHA256SUMS, its
// signature, the index) before serving them.
func NewServer(t testing.TB, signer *openpgp.Entity, r Release) *Server {
	t.Helper()
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for name, body := range r.Files {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zipName := r.ZipName()
	sums := r.Sums
	if sums == "" {
		sum := sha256.Sum256(zbuf.Bytes())
		sums = hex.EncodeToString(sum[:]) + "  " + zipName + "\n"
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, signer, strings.NewReader(sums), nil); err != nil {
		t.Fatal(err)
	}
	dir := r.Dir()
	shasums := r.Product + "_" + r.Version + "_SHA256SUMS"
	index, err := json.Marshal(map[string]any{
		"name":              r.Product,
		"version":           r.Version,
		"shasums":           shasums,
		"shasums_signature": shasums + ".sig",
		"builds": []map[string]string{{
			"name": r.Product, "version": r.Version, "os": runtime.GOOS, "arch": runtime.GOARCH,
			"filename": zipName,
			// The address of the real site: hc-install keeps only its path when given a base URL.
			"url": "https://releases.hashicorp.com" + dir + zipName,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]struct {
		body []byte
		typ  string
	}{
		dir + "index.json":     {index, "application/json"},
		dir + zipName:          {zbuf.Bytes(), "application/zip"},
		dir + shasums:          {[]byte(sums), "text/plain"},
		dir + shasums + ".sig": {sig.Bytes(), "application/octet-stream"},
	}
	s := &Server{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f, ok := files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		s.mu.Lock()
		s.hits[req.URL.Path]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", f.typ)
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(s.Close)
	return s
}

// NewKey makes a signing key and returns it with its armored public key.
func NewKey(t testing.TB) (*openpgp.Entity, string) {
	t.Helper()
	e, err := openpgp.NewEntity("terraseed test releases", "", "releases@terraseed.test", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return e, buf.String()
}

// WriteKey writes an armored key into a file of its own and returns the file's path.
func WriteKey(t testing.TB, key string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(path, []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// SilentHost is the address of a host that accepts connections and never answers, until
// the test ends.
func SilentHost(t testing.TB) string {
	t.Helper()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return silent.Addr().String()
}

// ClosedHost is the address of a port nothing listens on: connections are refused.
func ClosedHost(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
