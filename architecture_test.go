package ipvsplane_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docs/architecture.md follows one endpoint change through the code in a
// table of steps, each naming a file and a function. The test parses
// every file named (the daemon's module included: its files are on disk
// under daemon/) and fails when a row names a file that is gone or a
// function the file does not declare, so that a rename or a move breaks
// the unit tests instead of leaving the doc wrong. It also holds the
// doc's sentence on how many files and packages the path crosses to the
// table's own count.
func TestArchitectureStepsExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := stepRows(t, string(doc))
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md: no step table (a table whose header starts | # | file | function |)")
	}

	decls := map[string]map[string]bool{} // by file; nil when it cannot be read
	files, dirs := map[string]bool{}, map[string]bool{}
	for i, r := range rows {
		if r.num != strconv.Itoa(i+1) {
			t.Errorf("docs/architecture.md line %d: step %d is numbered %q", r.line, i+1, r.num)
		}
		if !filepath.IsLocal(filepath.FromSlash(r.file)) || !strings.HasSuffix(r.file, ".go") {
			t.Errorf("docs/architecture.md line %d (step %s): %q is not a Go file's path in the repository", r.line, r.num, r.file)
			continue
		}
		d, seen := decls[r.file]
		if !seen {
			if _, err := os.Stat(filepath.FromSlash(r.file)); errors.Is(err, fs.ErrNotExist) {
				t.Errorf("docs/architecture.md line %d (step %s): %s does not exist", r.line, r.num, r.file)
			} else if d, err = declaredFuncs(r.file); err != nil {
				t.Errorf("docs/architecture.md line %d (step %s): %v", r.line, r.num, err)
			}
			decls[r.file] = d
		}
		if d == nil {
			continue
		}
		files[r.file] = true
		dirs[path.Dir(r.file)] = true
		if !d[r.function] {
			t.Errorf("docs/architecture.md line %d (step %s): %s declares no %s", r.line, r.num, r.file, r.function)
		}
	}

	t.Logf("the endpoint change's path: %d steps, %d distinct files, %d distinct packages (directories)", len(rows), len(files), len(dirs))
	want := fmt.Sprintf("%d steps cross %d files in %d packages", len(rows), len(files), len(dirs))
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
		t.Errorf("docs/architecture.md should say %q, the count of its table", want)
	}
}

// stepRow is one row of the step table.
type stepRow struct {
	line                int
	num, file, function string
}

// stepRows returns the rows of the doc's step table: the first table
// whose header starts with the columns #, file and function.
func stepRows(t *testing.T, doc string) []stepRow {
	t.Helper()
	var rows []stepRow
	in := false
	for i, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.Trim(strings.TrimSpace(cells[j]), "`")
		}
		switch {
		case !in:
			in = len(cells) >= 3 && cells[0] == "#" && cells[1] == "file" && cells[2] == "function"
		case strings.Trim(cells[0], "-: ") == "":
			// The header's separator.
		case len(cells) < 4:
			t.Errorf("docs/architecture.md line %d: a step needs four columns: %s", i+1, line)
		default:
			rows = append(rows, stepRow{line: i + 1, num: cells[0], file: cells[1], function: cells[2]})
		}
	}
	return rows
}

// declaredFuncs parses a Go file (a path relative to the repository's
// root) and returns the functions it declares, by name, and its methods
// as Type.Method whatever their receiver's pointer or type parameters.
func declaredFuncs(file string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.FromSlash(file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	funcs := map[string]bool{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fn.Name.Name
		if fn.Recv != nil && len(fn.Recv.List) == 1 {
			name = receiverType(fn.Recv.List[0].Type) + "." + name
		}
		funcs[name] = true
	}
	return funcs, nil
}

// receiverType returns the name of a receiver's type: T for T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}
