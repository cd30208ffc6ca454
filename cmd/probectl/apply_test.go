package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestApplyCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()

	v1 := writeFile(t, "web.yaml", `
name: web
labels:
  app: web
readinessProbe:
  tcpSocket: {host: 127.0.0.1, port: 1}
  periodSeconds: 1
  periodMilliseconds: -900
`)
	if r := probectl(ctx, s.Addr, "", "apply", "-f", v1); r.code != 0 || r.out != "target/web created\n" {
		t.Fatalf("apply (create): code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	v2 := writeFile(t, "web.json", `{"name": "web", "labels": {"app": "web", "tier": "front"}}`)
	if r := probectl(ctx, s.Addr, "", "apply", "-f", v2); r.code != 0 || r.out != "target/web configured\n" {
		t.Fatalf("apply (update): code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	got, err := c.Get(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["tier"] != "front" || got.GetReadinessProbe() != nil {
		t.Errorf("after apply: %v, want the JSON spec (tier=front, no readiness probe)", got)
	}

	stdin := "name: a\n---\n# second\nname: b\nlabels: {x: \"1\"}\n"
	if r := probectl(ctx, s.Addr, stdin, "apply", "-f", "-"); r.code != 0 || r.out != "target/a created\ntarget/b created\n" {
		t.Errorf("apply from stdin: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}

	r := probectl(ctx, s.Addr, "name: c\n", "-o", "json", "apply", "-f", "-")
	var applied probev1.Target
	if r.code != 0 || unmarshalJSON(r.out, &applied) != nil || applied.GetName() != "c" || applied.GetStatus() == nil {
		t.Errorf("apply -o json: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	s, _ := server(t)
	tests := []struct {
		name    string
		spec    string
		wantErr string
	}{
		{
			name: "server-side violations",
			spec: `
name: Bad_Name
readinessProbe:
  tcpSocket: {host: 127.0.0.1, port: 1}
  periodMilliseconds: 1000
`,
			wantErr: "invalid target:\n" +
				`  target.name: Invalid value: "Bad_Name": ` + "{{any}}\n" +
				"  target.readinessProbe.periodMilliseconds: Invalid value: 1000: must be greater than -1000 and less than 1000\n",
		},
		{
			name:    "unknown field",
			spec:    "name: web\nreadinessProbe:\n  tcpSocket: {host: h, port: 1}\n  periodSecond: 1\n",
			wantErr: `Error: stdin: target.readinessProbe: unknown field "periodSecond" (did you mean "periodSeconds"?)` + "\n",
		},
		{
			name:    "unknown nested field",
			spec:    "name: web\nlivenessProbe:\n  httpGet: {host: h, port: 1, httpHeaders: [{name: a, valu: b}]}\n",
			wantErr: `Error: stdin: target.livenessProbe.httpGet.httpHeaders[0]: unknown field "valu" (did you mean "value"?)` + "\n",
		},
		{
			name:    "wrong type",
			spec:    "name: web\nreadinessProbe:\n  periodSeconds: often\n",
			wantErr: "Error: stdin: target: invalid value for int32 field periodSeconds: \"often\"\n",
		},
		{
			name:    "not an object",
			spec:    "- just\n- strings\n",
			wantErr: "Error: stdin: [0]: want an object, got a string\nstdin: [1]: want an object, got a string\n",
		},
		{
			name:    "empty",
			spec:    "# nothing\n",
			wantErr: "Error: stdin: no target in it\n",
		},
		{
			name:    "duplicate key",
			spec:    "name: a\nname: b\n",
			wantErr: "Error: stdin: yaml: unmarshal errors:\n  line 2: key \"name\" already set in map\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(t.Context(), s.Addr, tt.spec, "apply", "-f", "-")
			if r.code != 1 || r.out != "" || !matchPattern(tt.wantErr, r.err) {
				t.Errorf("got code %d, stdout %q, stderr:\n%s\nwant code 1 and stderr:\n%s", r.code, r.out, r.err, tt.wantErr)
			}
		})
	}
}

// matchPattern reports whether s is pattern, where each "{{any}}" matches
// any text within one line.
func matchPattern(pattern, s string) bool {
	parts := strings.Split(pattern, "{{any}}")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `[^\n]*`) + `$`).MatchString(s)
}

func TestParseTargets(t *testing.T) {
	t.Parallel()
	ms := int32(-900)
	tests := []struct {
		name string
		in   string
		want []*probev1.Target
		err  error
	}{
		{"json", `{"name":"a","readinessProbe":{"exec":{"command":["true"]},"periodMilliseconds":-900}}`, []*probev1.Target{{
			Name:           "a",
			ReadinessProbe: &probev1.Probe{Handler: &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: []string{"true"}}}, PeriodMilliseconds: &ms},
		}}, nil},
		{"proto names", "name: a\nreadiness_probe:\n  period_milliseconds: -900\n", []*probev1.Target{{
			Name: "a", ReadinessProbe: &probev1.Probe{PeriodMilliseconds: &ms},
		}}, nil},
		{"yaml list", "- name: a\n- name: b\n", []*probev1.Target{{Name: "a"}, {Name: "b"}}, nil},
		{"documents", "---\nname: a\n--- # b\nname: b\n---\n", []*probev1.Target{{Name: "a"}, {Name: "b"}}, nil},
		{"big int64", "name: a\nterminationGracePeriodSeconds: 9007199254740993\n", []*probev1.Target{{
			Name: "a", TerminationGracePeriodSeconds: new(int64(9007199254740993)),
		}}, nil},
		{"status is accepted", "name: a\nstatus: {ready: true, createTime: \"2025-01-02T03:04:05Z\"}\n", nil, nil},
		{"typo", "nam: a\n", nil, errUnknownField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := parseTargets("spec", []byte(tt.in))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
					t.Errorf("targets (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestApplySeveralFiles(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"b.yaml":       "name: b\n",
		"a.json":       `{"name": "a"}`,
		"c.yml":        "name: c\n---\nname: d\n",
		"notes.txt":    "not a spec",
		"sub/e.yaml":   "name: e\n", // subdirectories are not read
		"f.YAML":       "name: f\n",
		".hidden.yaml": "name: hidden\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	single := writeFile(t, "g.yaml", "name: g\n")

	// A file, a directory and stdin, in the order given; the directory's
	// files in name order.
	r := probectl(ctx, s.Addr, "name: h\n", "apply", "-f", single, "-f", dir, "-f", "-")
	want := "target/g created\ntarget/hidden created\ntarget/a created\ntarget/b created\ntarget/c created\ntarget/d created\ntarget/f created\ntarget/h created\n"
	if r.code != 0 || r.out != want || r.err != "" {
		t.Fatalf("apply -f file -f dir -f -: code %d, stdout:\n%s\nstderr %q; want:\n%s", r.code, r.out, r.err, want)
	}
	all, err := c.ListAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range all {
		names = append(names, tg.GetName())
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "f", "g", "h", "hidden"}, names); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

func TestApplyReportsEveryProblem(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	typos := writeFile(t, "typos.yaml", "name: web\nlabel: {a: b}\nreadinessProbe:\n  periodSecond: 1\n  tcpSocket: {host: h, prot: 1}\n")
	first := writeFile(t, "first.yaml", "name: twice\n")
	second := writeFile(t, "second.yaml", "name: twice\n")
	empty := t.TempDir()

	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantErr string
	}{
		{
			name: "every unknown field",
			args: []string{"-f", typos},
			wantErr: "Error: " + typos + `: target: unknown field "label" (did you mean "labels"?)` + "\n" +
				typos + `: target.readinessProbe: unknown field "periodSecond" (did you mean "periodSeconds"?)` + "\n" +
				typos + `: target.readinessProbe.tcpSocket: unknown field "prot" (did you mean "port"?)` + "\n",
		},
		{
			name:    "every file",
			args:    []string{"-f", typos, "-f", "-", "-f", filepath.Join(empty, "nope.yaml")},
			stdin:   "name: ok\n---\n- 3\n",
			wantErr: "Error: " + typos + ": target: unknown field {{any}}\n{{any}}\n{{any}}\nstdin (document 2): [0]: want an object, got a number\n" + filepath.Join(empty, "nope.yaml") + ": no such file or directory\n",
		},
		{
			name:    "a target named twice",
			args:    []string{"-f", first, "-f", second},
			wantErr: "Error: " + second + `: target "twice" is also in ` + first + "\n",
		},
		{
			name:    "stdin twice",
			args:    []string{"-f", "-", "-f", "-"},
			stdin:   "name: x\n",
			wantErr: `Error: "-f -" (standard input) given twice` + "\n",
		},
		{
			name:    "a directory without specs",
			args:    []string{"-f", empty},
			wantErr: "Error: " + empty + ": no .yaml, .yml, .json file in this directory\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, tt.stdin, append([]string{"apply"}, tt.args...)...)
			if r.code != 1 || r.out != "" || !matchPattern(tt.wantErr, r.err) {
				t.Errorf("got code %d, stdout %q, stderr:\n%s\nwant code 1 and stderr:\n%s", r.code, r.out, r.err, tt.wantErr)
			}
		})
	}
	// Nothing was applied.
	if all, err := c.ListAll(ctx, nil); err != nil || len(all) != 0 {
		t.Errorf("targets after failed applies: %v, %v; want none", all, err)
	}
}

// TestApplyGoesOnAfterARejectedTarget: the server rejects one target; the
// others are applied, the rejected one is named with its file and every
// violation, and apply fails.
func TestApplyGoesOnAfterARejectedTarget(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	a := writeFile(t, "a.yaml", "name: a\n")
	bad := writeFile(t, "bad.yaml", "name: bad\nreadinessProbe:\n  tcpSocket: {host: 127.0.0.1}\n  periodMilliseconds: 1000\n")
	z := writeFile(t, "z.yaml", "name: z\n")
	r := probectl(ctx, s.Addr, "", "apply", "-f", a, "-f", bad, "-f", z)
	wantErr := "target/bad (" + bad + "): invalid:\n" +
		"  target.readinessProbe.tcpSocket.port: Required value: a port between 1 and 65535 is required\n" +
		"  target.readinessProbe.periodMilliseconds: Invalid value: 1000: must be greater than -1000 and less than 1000\n" +
		"Error: 1 of 3 targets not applied\n"
	if r.code != 1 || r.out != "target/a created\ntarget/z created\n" || r.err != wantErr {
		t.Errorf("got code %d, stdout %q, stderr:\n%s\nwant code 1, a and z created, stderr:\n%s", r.code, r.out, r.err, wantErr)
	}
	if _, err := c.Get(ctx, "z"); err != nil {
		t.Errorf("z after the apply: %v", err)
	}
}
