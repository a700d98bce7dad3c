package witness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const id1 = "0123456789abcdef0123456789abcdef"

func sample() File {
	return File{
		Version: Version, Backend: BackendPostgres, Identity: id1, Generation: 2, Position: 77,
		Probe:   &Probe{ID: "ex_\xff\x00odd", Events: 3},
		Horizon: 5,
		Sessions: []Session{
			{Namespace: "default", ID: "s1", Position: 70},
			{Namespace: "ns\x00", ID: "\xfe\xfd", Position: 60},
		},
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// TestRoundTrip: what Encode writes, Decode reads back exactly, ids that
// are not UTF-8 included (JSON strings cannot hold them).
func TestRoundTrip(t *testing.T) {
	f := sample()
	b := f.Encode()
	require.Contains(t, string(b), `"s64":`)
	require.Contains(t, string(b), `"id64":`)
	require.Contains(t, string(b), `"s":"s1"`)
	got, err := Decode(bytes.TrimSpace(b))
	require.NoError(t, err)
	require.Equal(t, f, got)

	empty := File{Version: Version, Backend: BackendPebble, Identity: id1, UpdatedAt: f.UpdatedAt}
	got, err = Decode(empty.Encode())
	require.NoError(t, err)
	require.Empty(t, got.Sessions)
	require.Nil(t, got.Probe)
}

// TestDecodeRefuses: every malformed witness is an error, never a guess.
func TestDecodeRefuses(t *testing.T) {
	ok := string(sample().Encode())
	for name, in := range map[string]string{
		"empty":          ``,
		"not json":       `{"witness":`,
		"trailing data":  strings.TrimSpace(ok) + ` {}`,
		"newer format":   strings.Replace(ok, `"witness":1`, `"witness":2`, 1),
		"no format":      strings.Replace(ok, `"witness":1,`, ``, 1),
		"backend":        strings.Replace(ok, `"postgres"`, `"sqlite"`, 1),
		"identity":       strings.Replace(ok, id1, "0123", 1),
		"upper identity": strings.Replace(ok, id1, strings.ToUpper(id1), 1),
		"session no id":  strings.Replace(ok, `"s":"s1",`, ``, 1),
		"session twice":  strings.Replace(ok, `"s":"s1"`, `"s":"s1","s64":"czE="`, 1),
		"bad base64":     strings.Replace(ok, `"s64":"/v0="`, `"s64":"!!"`, 1),
		"probe no id":    strings.Replace(ok, `"id64":"ZXhf/wBvZGQ=",`, ``, 1),
		"negative":       strings.Replace(ok, `"position":77`, `"position":-1`, 1),
		"too large":      strings.Repeat(" ", MaxBytes+1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(in))
			require.Error(t, err)
		})
	}
	// Unknown members are a later release's additions.
	f, err := Decode([]byte(strings.Replace(ok, `"witness":1`, `"witness":1,"later":{"x":1}`, 1)))
	require.NoError(t, err)
	require.Equal(t, sample(), f)
}

// TestWriteRead: a written witness reads back, a missing one is nil, a
// malformed one is a *MalformedError naming the file, and the file is
// its owner's only.
func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "w.witness")
	got, err := Read(path)
	require.NoError(t, err)
	require.Nil(t, got)
	require.NoError(t, Write(path, sample()))
	got, err = Read(path)
	require.NoError(t, err)
	require.Equal(t, sample(), *got)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	left, err := filepath.Glob(path + ".tmp-*")
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file left behind")

	require.NoError(t, os.WriteFile(path, []byte(`{"witness":1}`), 0o600))
	_, err = Read(path)
	var me *MalformedError
	require.ErrorAs(t, err, &me)
	require.Contains(t, err.Error(), path)

	to, err := SetAside(path, "x")
	require.NoError(t, err)
	require.Equal(t, path+".aside-x", to)
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	to, err = SetAside(path, "x")
	require.NoError(t, err)
	require.Equal(t, path+".aside-x-2", to)
	to, err = SetAside(path, "x")
	require.NoError(t, err)
	require.Empty(t, to, "nothing to set aside")
}

// TestConcurrentWriters: processes sharing a witness each replace it
// whole; a reader always finds one of the versions, never a torn one.
func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.witness")
	require.NoError(t, Write(path, sample()))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			f := sample()
			for j := range 50 {
				f.Position = uint64(100*i + j)
				require.NoError(t, Write(path, f))
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			_, err := Read(path)
			require.NoError(t, err)
		}
	})
	wg.Wait()
}

// TestMerge: processes sharing a witness (a one-shot command beside a
// server, on a shared ledger) each merge their update into it under its
// lock: no session one of them noted is lost, the higher position wins
// with its probe, and a later generation is left as it is.
func TestMerge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.witness")
	base := File{Version: Version, Backend: BackendPostgres, Identity: id1, Generation: 1}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			f := base
			for j := range 20 {
				f.Position = uint64(10*i + j)
				f.Probe = &Probe{ID: fmt.Sprint("p", f.Position), Events: 1}
				f.Note([]Session{{"default", fmt.Sprintf("s%d-%d", i, j), f.Position}}, 1000)
				merged, err := Merge(path, f, 1000)
				require.NoError(t, err)
				f = merged
			}
		})
	}
	wg.Wait()
	got, err := Read(path)
	require.NoError(t, err)
	require.Len(t, got.Sessions, 160, "every process's sessions")
	require.Equal(t, uint64(89), got.Position)
	require.Equal(t, "p89", got.Probe.ID, "the probe of the highest position")

	later := base
	later.Generation = 2
	require.NoError(t, Write(path, later))
	merged, err := Merge(path, base, 1000)
	require.NoError(t, err)
	require.Equal(t, uint64(2), merged.Generation, "a later generation is not overwritten")
	got, err = Read(path)
	require.NoError(t, err)
	require.Equal(t, uint64(2), got.Generation)

	other := base
	other.Identity = "ffffffffffffffffffffffffffffffff"
	merged, err = Merge(path, other, 1000)
	require.NoError(t, err)
	require.Equal(t, other.Identity, merged.Identity, "another ledger's witness is replaced")
}

// TestNote: the most recently written sessions are kept, each with its
// last write's position; dropping one raises the horizon, so After says
// when the list no longer names every session written after a position.
func TestNote(t *testing.T) {
	var f File
	f.Note([]Session{{"default", "a", 3}, {"default", "b", 5}}, 3)
	f.Note([]Session{{"default", "a", 7}, {"default", "c", 6}}, 3)
	require.Equal(t, []Session{{"default", "a", 7}, {"default", "c", 6}, {"default", "b", 5}}, f.Sessions)
	require.Zero(t, f.Horizon)
	after, complete := f.After(5)
	require.True(t, complete)
	require.Equal(t, []Session{{"default", "a", 7}, {"default", "c", 6}}, after)

	f.Note([]Session{{"default", "d", 9}}, 3)
	require.Equal(t, []Session{{"default", "d", 9}, {"default", "a", 7}, {"default", "c", 6}}, f.Sessions)
	require.Equal(t, uint64(5), f.Horizon, "b was dropped")
	_, complete = f.After(4)
	require.False(t, complete, "b, written at 5, is no longer named")
	after, complete = f.After(5)
	require.True(t, complete)
	require.Len(t, after, 3)
}

// TestCheck is the decision table of a ledger against its witness.
func TestCheck(t *testing.T) {
	w := File{Identity: id1, Generation: 1, Position: 10, Probe: &Probe{ID: "x", Events: 4}}
	for _, tc := range []struct {
		name  string
		found Found
		want  Verdict
		says  string
	}{
		{"same", Found{id1, 1, 10, 4}, Holds, ""},
		{"ahead", Found{id1, 1, 12, 6}, Holds, ""},
		{"another ledger", Found{"ffffffffffffffffffffffffffffffff", 1, 10, 4}, Other, "names ledger " + id1},
		{"restore accepted since", Found{id1, 2, 3, -1}, Accepted, ""},
		{"older generation", Found{id1, 0, 99, 9}, Behind, "before a restore was accepted"},
		{"lower position", Found{id1, 1, 7, 4}, Behind, "at least 3 acknowledged writes are missing"},
		{"probe missing", Found{id1, 1, 10, -1}, Behind, `"x", which the witness saw with 4 events, is missing`},
		{"probe short", Found{id1, 1, 10, 2}, Behind, `"x" holds 2 events, but the witness saw 4`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, says := Check(w, tc.found, func(found, seen uint64) string {
				return fmt.Sprintf("at least %d acknowledged writes are missing", seen-found)
			})
			require.Equal(t, tc.want, v)
			require.Contains(t, says, tc.says)
		})
	}
}

// TestToFence: which sessions a restore to a position forgot, by the
// generation of each witness, and whether they are all named.
func TestToFence(t *testing.T) {
	cur := &File{Generation: 1, Horizon: 4, Sessions: []Session{{"default", "a", 9}, {"default", "b", 6}, {"default", "c", 3}}}
	other := &File{Generation: 1, Sessions: []Session{{"default", "a", 12}, {"default", "d", 7}}}
	later := &File{Generation: 2, Sessions: []Session{{"default", "e", 2}}}
	earlier := &File{Generation: 0, Sessions: []Session{{"default", "f", 20}, {"default", "g", 5}}}
	accepted := func(gen uint64) (uint64, error) {
		require.Equal(t, uint64(1), gen)
		return 10, nil
	}
	got, complete, err := ToFence([]*File{cur, other}, 1, 5, accepted)
	require.NoError(t, err)
	require.True(t, complete)
	require.Equal(t, []Session{{"default", "a", 12}, {"default", "b", 6}, {"default", "d", 7}}, got)
	_, complete, _ = ToFence([]*File{cur}, 1, 3, accepted)
	require.False(t, complete, "c's horizon is above 3")
	got, complete, _ = ToFence([]*File{later}, 1, 5, accepted)
	require.False(t, complete)
	require.Equal(t, later.Sessions, got)
	got, complete, _ = ToFence([]*File{earlier}, 1, 5, accepted)
	require.True(t, complete)
	require.Equal(t, []Session{{"default", "f", 20}}, got)
	got, complete, _ = ToFence(nil, 1, 5, accepted)
	require.False(t, complete)
	require.Empty(t, got)
}

// TestTracker: concurrent touches are all drained, once, with each
// session's highest position.
func TestTracker(t *testing.T) {
	tr := NewTracker()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				tr.Touch("default", string(rune('a'+j%10)), uint64(i*100+j))
			}
		})
	}
	wg.Wait()
	got := tr.Drain()
	require.Len(t, got, 10)
	for _, s := range got {
		require.Equal(t, uint64(700+90+int(s.ID[0]-'a')), s.Position, s.ID)
	}
	require.Empty(t, tr.Drain())
}

// FuzzDecode: Decode never panics, and what it accepts encodes to a
// witness that decodes to the same value.
func FuzzDecode(f *testing.F) {
	f.Add(sample().Encode())
	f.Add([]byte(`{"witness":1,"backend":"pebble","identity":"` + id1 + `","sessions":[{"ns64":"AA==","s":"x","p":1}]}`))
	f.Add([]byte(`{"witness":1,"backend":"postgres","identity":"` + id1 + `","probe":{"id":"a","events":18446744073709551615}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(w.Encode())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if w.Sessions == nil {
			w.Sessions = []Session{}
		}
		if again.Sessions == nil {
			again.Sessions = []Session{}
		}
		a, _ := json.Marshal(w)
		b2, _ := json.Marshal(again)
		if !bytes.Equal(a, b2) {
			t.Fatalf("round trip changed the witness:\n%s\n%s", a, b2)
		}
	})
}

// BenchmarkWrite is what a witness costs a ledger that is written to
// every second (Pebble: with the mark; PostgreSQL: after the advance):
// noting the sessions written since the last update, and writing the
// whole file, synced, with its full DefaultSessions sessions; and, with
// one session, what writing it on every commit would add to each.
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{1, DefaultSessions} {
		b.Run(fmt.Sprint("sessions=", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "w.witness")
			f := File{Version: Version, Backend: BackendPebble, Identity: id1}
			var touched []Session
			for i := range n {
				touched = append(touched, Session{Namespace: "default", ID: fmt.Sprintf("session-%06d", i), Position: uint64(i)})
			}
			f.Note(touched, DefaultSessions)
			touched = touched[:min(n, 100)]
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				f.Position = uint64(n + i*100)
				for j := range touched {
					touched[j].Position = f.Position + uint64(j)
				}
				f.Note(touched, DefaultSessions)
				if err := Write(path, f); err != nil {
					b.Fatal(err)
				}
			}
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size()), "file-bytes")
		})
	}
}

// BenchmarkEncode is the encoding alone of a full witness.
func BenchmarkEncode(b *testing.B) {
	f := File{Version: Version, Backend: BackendPebble, Identity: id1}
	for i := range DefaultSessions {
		f.Sessions = append(f.Sessions, Session{Namespace: "default", ID: fmt.Sprintf("session-%06d", i), Position: uint64(i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = f.Encode()
	}
}

// BenchmarkTouch is what the witness costs a commit: noting its session,
// from parallel writers, each write in a session of its own.
func BenchmarkTouch(b *testing.B) {
	tr := NewTracker()
	names := make([]string, 8192)
	for i := range names {
		names[i] = "session-" + strconv.Itoa(i)
	}
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			tr.Touch("default", names[i%8192], i)
			if i%100_000 == 0 {
				tr.Drain() // about what a second's writes leave
			}
		}
	})
}
