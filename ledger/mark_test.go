package ledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecodeMark(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	good := mark{Identity: id, Protocol: 2, HighWater: 42, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m, err := decodeMark(good.encode())
	require.NoError(t, err)
	require.Equal(t, good, m)
	m, err = decodeMark([]byte(`{"identity":"` + id + `","protocol":2,"high_water":7,"updated_at":"2026-01-02T03:04:05Z","later":"field"}`))
	require.NoError(t, err, "members of a later release are ignored")
	require.Equal(t, uint64(7), m.HighWater)
	require.Zero(t, m.Generation, "a mark of an earlier release is of generation 0")
	gen := good
	gen.Generation = 3
	m, err = decodeMark(gen.encode())
	require.NoError(t, err)
	require.Equal(t, gen, m)
	require.NotContains(t, string(good.encode()), "generation", "generation 0 is not written: earlier releases read the mark as before")

	for name, b := range map[string]string{
		"empty":          ``,
		"truncated":      `{"identity":"` + id + `","protocol":2`,
		"not an object":  `[]`,
		"no identity":    `{"protocol":2,"high_water":1}`,
		"short identity": `{"identity":"0123","protocol":2}`,
		"upper-case hex": `{"identity":"0123456789ABCDEF0123456789ABCDEF","protocol":2}`,
		"no protocol":    `{"identity":"` + id + `","high_water":1}`,
		"negative count": `{"identity":"` + id + `","protocol":2,"high_water":-1}`,
		"fraction":       `{"identity":"` + id + `","protocol":2,"high_water":1.5}`,
		"trailing data":  `{"identity":"` + id + `","protocol":2} {}`,
		"too large":      `{"identity":"` + id + `","protocol":2,"x":"` + string(make([]byte, maxMarkBytes)) + `"}`,
	} {
		_, err := decodeMark([]byte(b))
		require.Error(t, err, name)
	}
}

// FuzzDecodeMark: the mark decoder never panics, and what it accepts
// encodes to a mark it decodes to the same value.
func FuzzDecodeMark(f *testing.F) {
	f.Add([]byte(`{"identity":"0123456789abcdef0123456789abcdef","protocol":2,"high_water":42,"updated_at":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"identity":"0123456789abcdef0123456789abcdef","protocol":1,"high_water":18446744073709551615}`))
	f.Add([]byte(`{"identity":"0123456789abcdef0123456789abcdef","protocol":4,"generation":2,"high_water":42}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMark(b)
		if err != nil {
			return
		}
		again, err := decodeMark(m.encode())
		if err != nil {
			t.Fatalf("re-encoded mark %q does not decode: %v", m.encode(), err)
		}
		if !again.UpdatedAt.Equal(m.UpdatedAt) {
			t.Fatalf("time %v became %v", m.UpdatedAt, again.UpdatedAt)
		}
		again.UpdatedAt = m.UpdatedAt
		if again != m {
			t.Fatalf("%+v became %+v", m, again)
		}
	})
}
