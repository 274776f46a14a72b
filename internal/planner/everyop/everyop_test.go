package everyop

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every type of the planner with a phase method is an operation (Op's
// unexported method, so only the planner declares them): Ops must hold
// each.
func TestOpsHoldsEveryKind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name == "phase" {
				kinds = append(kinds, fn.Recv.List[0].Type.(*ast.Ident).Name)
			}
		}
	}
	var have []string
	for _, op := range Ops() {
		have = append(have, reflect.TypeOf(op).Name())
	}
	slices.Sort(kinds)
	slices.Sort(have)
	if len(kinds) == 0 || !slices.Equal(kinds, have) {
		t.Errorf("the planner's operations are %v; Ops gives %v", kinds, have)
	}
}
