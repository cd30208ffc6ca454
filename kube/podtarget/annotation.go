package podtarget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
)

// member is one key of a JSON object and its value, in the order written.
// The annotation is rewritten (named ports resolved) as a list of members,
// so that protojson still sees every key the pod author wrote, duplicates
// included, and refuses what it refuses.
type member struct {
	key   string
	value json.RawMessage
}

// errNotObject: the value is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// objectMembers parses raw, which must be one JSON object.
func objectMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the JSON object")
	}
	return ms, nil
}

// encodeObject writes ms back as a JSON object, keeping every member.
func encodeObject(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// fieldByKey finds the field a JSON key names, exactly as protojson does:
// by its JSON name, else by its proto (text) name.
func fieldByKey(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	fds := md.Fields()
	if fd := fds.ByJSONName(key); fd != nil {
		return fd
	}
	return fds.ByTextName(key)
}

// resolvePorts rewrites a message of md given as JSON: every int32 field
// named "port", at any depth and under any spelling protojson accepts,
// whose value is a string becomes the number that string names (a
// container port name, as kubelet resolves it). Anything it cannot read
// is left for protojson to refuse. It only resolves names: the
// destination rules are enforced on the decoded message (aim).
func resolvePorts(pod *corev1.Pod, md protoreflect.MessageDescriptor, path string, raw json.RawMessage) (json.RawMessage, []FieldError) {
	ms, err := objectMembers(raw)
	if err != nil {
		return raw, nil
	}
	var errs []FieldError
	for i, m := range ms {
		fd := fieldByKey(md, m.key)
		if fd == nil {
			continue
		}
		fpath := path + "." + fd.JSONName()
		switch {
		case fd.Name() == "port" && fd.Kind() == protoreflect.Int32Kind && !fd.IsList():
			var name string
			if !bytes.HasPrefix(bytes.TrimSpace(m.value), []byte(`"`)) || json.Unmarshal(m.value, &name) != nil {
				continue // a number, null, or what protojson refuses
			}
			port, detail := resolvePort(pod, name)
			if detail != "" {
				errs = append(errs, FieldError{Field: fpath, Detail: detail})
				continue
			}
			ms[i].value = json.RawMessage(strconv.Itoa(port))
		case fd.Message() != nil && !fd.IsMap() && !fd.IsList():
			v, ferrs := resolvePorts(pod, fd.Message(), fpath, m.value)
			errs = append(errs, ferrs...)
			ms[i].value = v
		case fd.Message() != nil && fd.IsList():
			var elems []json.RawMessage
			if json.Unmarshal(m.value, &elems) != nil {
				continue
			}
			for j, e := range elems {
				v, ferrs := resolvePorts(pod, fd.Message(), fmt.Sprintf("%s[%d]", fpath, j), e)
				errs = append(errs, ferrs...)
				elems[j] = v
			}
			v, err := json.Marshal(elems)
			if err == nil {
				ms[i].value = v
			}
		}
	}
	return encodeObject(ms), errs
}

// resolvePort resolves a port given as a string as kubelet does
// (pkg/probe.ResolveContainerPort): the containerPort of the first
// container port by that name, else the string as a number; it must be
// 1-65535. kubelet looks in the probe's container; a pod's probes belong
// to no container, so every container is searched in order. detail says
// why the port is bad, "" when it is not.
func resolvePort(pod *corev1.Pod, name string) (port int, detail string) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort), ""
			}
		}
	}
	port, err := strconv.Atoi(name)
	if err != nil {
		return 0, fmt.Sprintf("Not found: %s: no container port by that name", quote(name))
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Sprintf("Invalid value: %d: must be between 1 and 65535", port)
	}
	return port, ""
}
