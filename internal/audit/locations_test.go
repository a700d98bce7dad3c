package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/manifests"
)

// findingKeys says what the line of each finding must hold: the key it is
// about (a module finding: the module, sha256 or abi line; a host finding:
// the origin's own line; a schema finding: the schema keyword).
var findingKeys = map[Code][]string{
	CodeDuplicateConnector:             {"name ="},
	CodeModuleMissing:                  {"module ="},
	CodeModuleInvalid:                  {"module ="},
	CodeDigestUnpinned:                 {"sha256 =", "module ="},
	CodeDigestMismatch:                 {"sha256 ="},
	CodeABIMismatch:                    {"abi ="},
	CodeExportMissing:                  {"recovery =", "name ="},
	CodeReadExportsRecovery:            {"effect ="},
	CodeMetadataHost:                   {"169.254.169.254"},
	CodeUndeclaredOperation:            {"module ="},
	CodeExternalNoApprovalAutoRecovery: {"requires_approval ="},
	CodeManualWithoutApproval:          {"requires_approval ="},
	CodeReadSoundsExternal:             {"effect ="},
	CodePlainHTTPHost:                  {"http://"},
	CodeLoopbackHost:                   {"127.0.0.1"},
	CodeInternalHost:                   {"10.20.0.5", "[::]"},
	CodeIdempotencyUnknownProvider:     {"recovery ="},
	CodeMissingDescription:             {"description ="},
	CodePermissiveSchema:               {"input_schema", `"customer"`, `"metadata"`},
	CodeUnboundedAmount:                {`"amount"`, `"tipAmount"`},
	CodeApprovalTTLLong:                {"approval_ttl ="},
	CodeHighAttempts:                   {"max_attempts ="},
	CodeApprovalTTLIgnored:             {"approval_ttl ="},
	CodeModuleNotChecked:               {"module ="},
	CodeSecretInManifest:               {"sk_live_", "-----BEGIN RSA PRIVATE KEY"},
	CodeSecretLikeToken:                {"Zt4qX9mP"},
	CodeWaiverInvalid:                  {`"code"`},
	CodeWaiverStale:                    {`"code"`},
	CodeWaiverUnused:                   {`"code"`},
}

// TestFindingsNameTheirKey: every finding of every case points at the line
// of the key it is about, not at the [[operation]] header; findings inside
// an input schema or a line also name the column of what they are about.
func TestFindingsNameTheirKey(t *testing.T) {
	for name := range auditCases {
		r := auditCase(t, name)
		for _, f := range r.Findings {
			keys, ok := findingKeys[f.Code]
			if !ok {
				continue // file-level findings (manifest-invalid has its own test)
			}
			require.NotZero(t, f.Line, "%s: %s has no line", name, f.Code)
			data, err := os.ReadFile(f.File)
			require.NoError(t, err)
			line := strings.Split(string(data), "\n")[f.Line-1]
			require.True(t, slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(line, k) }),
				"%s: %s at %s: line %q names none of %q", name, f.Code, f.Where(), line, keys)
			if f.Column > 0 {
				rest := line[f.Column-1:]
				require.True(t, slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(rest, k) || strings.HasPrefix(rest, "{") }),
					"%s: %s column %d points at %q", name, f.Code, f.Column, rest)
			}
		}
	}
}

// TestManifestInvalidColumns: a TOML syntax error and a schema error are
// findings with their line and column, the way the parser reports them.
func TestManifestInvalidColumns(t *testing.T) {
	dir := t.TempDir()
	syntax := filepath.Join(dir, "syntax.toml")
	require.NoError(t, os.WriteFile(syntax, []byte("[connector]\nname = \"x\nversion = 1\n"), 0o644))
	r := AuditPaths([]string{syntax}, Options{})
	require.Len(t, r.Findings, 1)
	require.Equal(t, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: syntax, Line: 2, Column: 10,
		Message: r.Findings[0].Message}, r.Findings[0])
	require.Contains(t, r.Findings[0].Where(), "syntax.toml:2:10")

	data, err := os.ReadFile("testdata/clean/payments.toml")
	require.NoError(t, err)
	bad := strings.Replace(string(data), `"minimum": 1,`, `"minimum": "one",`, 1)
	schema := filepath.Join(dir, "payments.toml")
	require.NoError(t, os.WriteFile(schema, []byte(bad), 0o644))
	r = AuditPaths([]string{schema}, Options{})
	require.Len(t, r.Findings, 1)
	f := r.Findings[0]
	require.Equal(t, 20, f.Line)
	require.Equal(t, `"minimum": "one"`, strings.Split(bad, "\n")[19][f.Column-1:f.Column-1+len(`"minimum": "one"`)])
	require.Equal(t, "operation[create_payment].input_schema: schema keyword /properties/amount/minimum is not valid JSON Schema: got string, want number", f.Message,
		"one readable sentence, not the compiler's nested dump")
}

func TestMaxApprovalTTLOption(t *testing.T) {
	dir := filepath.Join("testdata", "approval-ttl-long")
	r := AuditPaths([]string{dir}, Options{Facts: fakeFacts(t, dir), MaxApprovalTTL: 96 * 3600e9})
	require.Empty(t, codes(r.Findings), "72h is within a 96h bound")
	r = AuditPaths([]string{dir}, Options{Facts: fakeFacts(t, dir)})
	require.Equal(t, []Code{CodeApprovalTTLLong}, codes(r.Findings))
	require.Contains(t, r.Findings[0].Message, "longer than 24h")
}

// TestEffectVerb: the verb that starts a name or a description gives a
// read away; a noun later in it does not.
func TestEffectVerb(t *testing.T) {
	for _, tc := range []struct{ name, desc, want string }{
		{"send_receipt", "Look it up.", "send"},
		{"create_item", "Look it up.", "create"},
		{"post_message", "Look it up.", "post"},
		{"receipt", "Deletes the stored receipt.", "Deletes"},
		{"item", "Charging a card, once.", "Charging"},
		{"get_order", "Look up an order by id.", ""},
		{"get_email", "Read one email.", ""},
		{"list_posts", "Lists posts and their charges.", ""},
		{"search_messages", "Search stored messages.", ""},
		{"get_payment", "Order details: status, amount.", ""},
	} {
		got := effectVerb(&manifests.Operation{Name: tc.name, Description: tc.desc})
		require.Equal(t, tc.want, got.word, "%s / %q", tc.name, tc.desc)
	}
}
