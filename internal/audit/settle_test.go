package audit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/manifests"
)

// TestSettleWordingAgrees: the verdict and a diff of reconcile_settle say
// from when the settle counts in the same words (from the dispatch, which
// is what the host measures), so a reviewer reading one and then the
// other is not told two different things.
func TestSettleWordingAgrees(t *testing.T) {
	manifest := func(settle string) *manifests.Manifest {
		m, err := manifests.Parse("records.toml", []byte(`[connector]
name = "records"
version = "1.0.0"
abi = 1
module = "records.wasm"
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"

[capabilities]
http = ["https://records.example.com:443"]

[[operation]]
name = "create_record"
description = "Create a record with a name; returns its id."
effect = "external"
recovery = "reconcile"
reconcile_settle = "`+settle+`"
requires_approval = true
input_schema = '''{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}'''
`))
		require.NoError(t, err)
		return m
	}
	const phrase = "0s after the attempt was dispatched"
	rep := Audit([]*manifests.Manifest{manifest("0s")}, Options{})
	require.Len(t, rep.Connectors, 1)
	require.Contains(t, rep.Connectors[0].Operations[0].Verdict.ReliesOn, phrase)
	for _, d := range []DiffReport{
		Diff(manifest("30s"), manifest("0s"), ModuleFacts{}, ModuleFacts{}),
		Diff(manifest("0s"), manifest("30s"), ModuleFacts{}, ModuleFacts{}),
	} {
		var msgs []string
		for _, c := range d.Changes {
			if c.Field == "reconcile_settle" {
				msgs = append(msgs, c.Message)
			}
		}
		require.Len(t, msgs, 1)
		require.Contains(t, strings.ReplaceAll(msgs[0], "30s", "0s"), phrase)
	}
}
