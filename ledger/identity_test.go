package ledger

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExecutionIDDeterministic(t *testing.T) {
	a := ExecutionID("default", "sess-1", "call-1")
	require.Equal(t, a, ExecutionID("default", "sess-1", "call-1"))
	require.True(t, strings.HasPrefix(a, "ex_"))
	require.Len(t, a, 3+32)
	require.NotEqual(t, a, ExecutionID("default", "sess-1", "call-2"))
	require.NotEqual(t, a, ExecutionID("other", "sess-1", "call-1"))
}

// TestExecutionIDSeparators: moving bytes between the parts never yields
// the same id (each part is length-prefixed before hashing).
func TestExecutionIDSeparators(t *testing.T) {
	tests := []struct {
		name string
		a, b [3]string
	}{
		{"session/tool boundary", [3]string{"ns", "ab", "c"}, [3]string{"ns", "a", "bc"}},
		{"ns/session boundary", [3]string{"n", "s1", "c"}, [3]string{"ns", "1", "c"}},
		{"nul separator", [3]string{"ns", "a\x00b", "c"}, [3]string{"ns", "a", "b\x00c"}},
		{"slash separator", [3]string{"ns/s", "c", ""}, [3]string{"ns", "s/c", ""}},
		{"empty parts", [3]string{"", "", "x"}, [3]string{"", "x", ""}},
		{"length prefix lookalike", [3]string{"a", "\x00\x00\x00\x01b", ""}, [3]string{"a\x00\x00\x00\x01b", "", ""}},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := ExecutionID(tc.a[0], tc.a[1], tc.a[2])
			y := ExecutionID(tc.b[0], tc.b[1], tc.b[2])
			require.NotEqual(t, x, y)
			for _, id := range []string{x, y} {
				if prev, ok := seen[id]; ok && prev != tc.name {
					t.Errorf("id %s repeats across cases %s and %s", id, prev, tc.name)
				}
				seen[id] = tc.name
			}
		})
	}
}

func TestIdempotencyKeyScoped(t *testing.T) {
	ex := ExecutionID("default", "s", "c")
	k := IdempotencyKey("default", "payments", ex)
	require.Equal(t, k, IdempotencyKey("default", "payments", ex))
	require.NotEqual(t, k, IdempotencyKey("default", "email", ex))
	require.NotEqual(t, k, IdempotencyKey("other", "payments", ex))
	require.NotEqual(t, ApprovalID(ex), ApprovalID(ExecutionID("default", "s", "d")))
}

// TestIdentityGolden pins derived ids: they are keys of records already on
// disk and keys already sent to providers, so they can never change.
func TestIdentityGolden(t *testing.T) {
	require.Equal(t, "ex_wgysujihjvjvf7cr7vdjdsu655t6lw2h", ExecutionID("default", "sess-1", "call-1"))
	require.Equal(t, "ex_x37cqzcewllgyktcjpqjn5xgd2low43s", ExecutionID("", "", ""))
	require.Equal(t, "ex_mflhvswsm7ygdtvvvy3f7srvlqkh4f4v", ExecutionID("ns", "\u00e9\x00", "toolu_01ABC"))
	require.Equal(t, "ck_xleymptirsipvzc3vkxfczkqef2huqxc", IdempotencyKey("default", "payments", "ex_wgysujihjvjvf7cr7vdjdsu655t6lw2h"))
}
