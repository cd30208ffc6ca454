package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"
)

//go:embed static
var static embed.FS

// assets are the page's files by URL path ("/" is index.html).
var assets = loadAssets()

// asset is one embedded file, served with an ETag so a browser revalidates
// it cheaply and sees a new version as soon as probed is upgraded.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

func loadAssets() map[string]*asset {
	out := make(map[string]*asset)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{body: body, ctype: mime.TypeByExtension(path.Ext(p)), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		name := "/" + p[len("static/"):]
		if name == "/index.html" {
			name = "/{$}"
		}
		out[name] = a
		return nil
	})
	if err != nil {
		panic("ui: reading the embedded files: " + err.Error())
	}
	return out
}

func (a *asset) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
