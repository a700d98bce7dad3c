package httpapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

type openAPIDoc struct {
	Paths      map[string]map[string]openAPIOp `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Enum []string `json:"enum"`
		} `json:"schemas"`
	} `json:"components"`
}

type openAPIOp struct {
	Roles     []Role `json:"x-roles"`
	Responses map[string]struct {
		ProblemCodes []Code `json:"x-problem-codes"`
	} `json:"responses"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// TestOpenAPIRoutes: every route New registers is documented with the same
// method and path, and the document describes no route that is not served.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	var served, documented []string
	for _, r := range routes() {
		served = append(served, r.method+" "+r.path)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("routes and openapi.json differ:\nserved:     %v\ndocumented: %v", served, documented)
	}
}

// TestOpenAPIRoles: each operation's x-roles are exactly the roles its
// route admits (open routes list none), every operation that some role
// may not call documents forbidden_role, and the human decisions document
// approval_not_configured.
func TestOpenAPIRoles(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, r := range routes() {
		op := doc.Paths[r.path][strings.ToLower(r.method)]
		if !slices.Equal(op.Roles, r.roles) {
			t.Errorf("%s %s: x-roles %v, served with %v", r.method, r.path, op.Roles, r.roles)
		}
		codes := op.Responses["403"].ProblemCodes
		if restricted := r.roles != nil && len(r.roles) < len(Roles); restricted != slices.Contains(codes, CodeForbiddenRole) {
			t.Errorf("%s %s: roles %v, 403 documents %v", r.method, r.path, r.roles, codes)
		}
		if r.decision != slices.Contains(codes, CodeApprovalNotConfigured) {
			t.Errorf("%s %s: roles %v, 403 documents %v", r.method, r.path, r.roles, codes)
		}
	}
}

// TestOpenAPIProblemCodes: the ProblemCode enum lists exactly the codes the
// handlers can emit (every Code constant of problems.go, each in the codes
// table), and each operation's documented problems use known codes under
// their real HTTP status.
func TestOpenAPIProblemCodes(t *testing.T) {
	doc := loadOpenAPI(t)

	declared := codeConstants(t)
	var table []string
	for c := range codes {
		table = append(table, string(c))
	}
	sort.Strings(table)
	if !slices.Equal(declared, table) {
		t.Fatalf("Code constants and the codes table differ:\nconstants: %v\ntable:     %v", declared, table)
	}
	enum := slices.Clone(doc.Components.Schemas["ProblemCode"].Enum)
	sort.Strings(enum)
	if !slices.Equal(enum, table) {
		t.Fatalf("openapi ProblemCode enum and the codes table differ:\nenum:  %v\ntable: %v", enum, table)
	}

	used := map[Code]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for status, resp := range op.Responses {
				for _, c := range resp.ProblemCodes {
					ci, ok := codes[c]
					if !ok {
						t.Errorf("%s %s: unknown problem code %q", method, path, c)
						continue
					}
					if strconv.Itoa(ci.status) != status {
						t.Errorf("%s %s: code %s documented under %s, emitted with %d", method, path, c, status, ci.status)
					}
					used[c] = true
				}
			}
		}
	}
	for c := range codes {
		if !used[c] && !cliOnly[c] {
			t.Errorf("problem code %s is not documented on any operation", c)
		}
		if used[c] && cliOnly[c] {
			t.Errorf("problem code %s is the CLI's, yet documented on an operation", c)
		}
	}
}

// codeConstants parses problems.go for the constants of type Code, so a
// code added without an entry in the table (or the document) fails.
func codeConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "problems.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("Code constant with a non-literal value")
				}
				s, _ := strconv.Unquote(lit.Value)
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestProblemOfCoversSentinels: every executor sentinel a handler can
// receive maps to its documented code, not to internal.
func TestProblemOfCoversSentinels(t *testing.T) {
	for _, tt := range problemOfCases() {
		if got := ProblemOf(tt.err, tt.res).Code; got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.err, got, tt.want)
		}
	}
}
