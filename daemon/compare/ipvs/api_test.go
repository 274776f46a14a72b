//go:build !vmtest

// The VM has no Go toolchain to type-check sources with.

package ipvs_test

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"slices"
	"testing"
)

const (
	mobyPath   = "github.com/moby/ipvs"
	compatPath = "github.com/ipvsplane/ipvsplane/compat/moby/ipvs"
)

// Code written for moby/ipvs builds against compat/moby/ipvs with its
// import path changed: every exported constant, function, type, struct
// field and method of moby/ipvs is there under the same name with the same
// type, read from both packages' sources.
func TestCompatAPIMatchesMoby(t *testing.T) {
	imp := importer.ForCompiler(token.NewFileSet(), "source", nil).(types.ImporterFrom)
	moby, err := imp.ImportFrom(mobyPath, ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	compat, err := imp.ImportFrom(compatPath, ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range moby.Scope().Names() {
		m := moby.Scope().Lookup(name)
		if !m.Exported() {
			continue
		}
		n++
		c := compat.Scope().Lookup(name)
		if c == nil {
			t.Errorf("compat lacks %s", name)
			continue
		}
		for _, want := range shape(m) {
			if !slices.Contains(shape(c), want) {
				t.Errorf("compat's %s lacks %s", name, want)
			}
		}
	}
	t.Logf("%d exported identifiers of moby/ipvs matched", n)
}

// shape lists what code can rely on about an exported object: its kind
// and type, a constant's value, a type's underlying type and methods.
// Both packages print as "ipvs".
func shape(o types.Object) []string {
	qual := func(p *types.Package) string {
		if p.Path() == mobyPath || p.Path() == compatPath {
			return "ipvs"
		}
		return p.Path()
	}
	head := fmt.Sprintf("%T %s", o, types.TypeString(o.Type(), qual))
	switch o := o.(type) {
	case *types.Const:
		return []string{head + " = " + o.Val().ExactString()}
	case *types.TypeName:
		out := []string{head + " " + underlying(o.Type().Underlying(), qual)}
		ms := types.NewMethodSet(types.NewPointer(o.Type()))
		for i := range ms.Len() {
			if sel := ms.At(i); sel.Obj().Exported() {
				out = append(out, "method "+sel.Obj().Name()+types.TypeString(sel.Type(), qual))
			}
		}
		return out
	}
	return []string{head}
}

// underlying prints a type's underlying type. A struct with unexported
// fields prints as its exported fields: the others no importer sees. One
// without prints whole, so that unkeyed literals (the fields' order) are
// checked too.
func underlying(u types.Type, qual types.Qualifier) string {
	st, ok := u.(*types.Struct)
	if !ok {
		return types.TypeString(u, qual)
	}
	var exported []string
	for f := range st.Fields() {
		if f.Exported() {
			exported = append(exported, f.Name()+" "+types.TypeString(f.Type(), qual))
		}
	}
	if len(exported) == st.NumFields() {
		return types.TypeString(u, qual)
	}
	return fmt.Sprintf("struct with exported fields %q", exported)
}
