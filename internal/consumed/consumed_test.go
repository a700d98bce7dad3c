package consumed

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func entry(id string, attempt int) Entry {
	return Entry{Execution: id, Attempt: attempt, Approval: "ap_1", Node: "a", At: t0, KeepUntil: t0.Add(time.Hour)}
}

// TestClaimOnce: each attempt of an execution is claimed once, by
// whichever of the journals sharing a directory claims it first; an
// applied execution takes no claim at all.
func TestClaimOnce(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir) // another node on the same directory
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(entry("ex_1", 1)); err != nil {
		t.Fatal(err)
	}
	var re *RepeatError
	err = b.Claim(entry("ex_1", 1))
	if !errors.As(err, &re) || !errors.Is(err, ErrRepeat) || re.Entry.Node != "a" || re.Entry.Attempt != 1 {
		t.Fatalf("second claim of attempt 1: %v", err)
	}
	if err := b.Claim(entry("ex_1", 2)); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	if err := a.Claim(entry("ex_2", 1)); err != nil {
		t.Fatalf("another execution: %v", err)
	}
	if err := a.Applied(entry("ex_2", 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Applied(entry("ex_2", 1)); err != nil {
		t.Fatalf("applied twice: %v", err)
	}
	err = b.Claim(entry("ex_2", 7))
	if !errors.As(err, &re) || !re.Entry.Applied {
		t.Fatalf("a claim after applied: %v", err)
	}
	if _, _, ok, err := a.Seen("ex_3", 1); ok || err != nil {
		t.Fatalf("Seen of an unknown execution: %v %v", ok, err)
	}
}

// TestClaimRace: of many claims of one attempt at once, exactly one wins.
func TestClaimRace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	wins := make(chan int, 16)
	for i := range 16 {
		j, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if j.Claim(entry("ex_race", 1)) == nil {
				wins <- i
			}
		})
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d claims won", n)
	}
}

// TestUnreadableEntryCounts: an entry whose content is lost (an empty
// file after a crash, garbage) is still a dispatch made.
func TestUnreadableEntryCounts(t *testing.T) {
	j, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(j.path("ex_1", "1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := j.Claim(entry("ex_1", 1)); !errors.Is(err, ErrRepeat) {
		t.Fatalf("claim over an empty entry: %v", err)
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, keep := entry("ex_old", 1), entry("ex_new", 1)
	old.KeepUntil, keep.KeepUntil = t0.Add(time.Hour), t0.Add(48*time.Hour)
	for _, e := range []Entry{old, keep} {
		if err := j.Claim(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, stem("ex_bad")+".1"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := j.Prune(t0.Add(2*time.Hour), 24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	if _, _, ok, _ := j.Seen("ex_old", 1); ok {
		t.Fatal("an expired entry was kept")
	}
	for _, id := range []string{"ex_new", "ex_bad"} {
		if _, _, ok, _ := j.Seen(id, 1); !ok {
			t.Fatalf("%s pruned early", id)
		}
	}
}

func TestOpenRefusesAnUnwritableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes everywhere")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if _, err := Open(dir); err == nil {
		t.Fatal("an unwritable journal opened")
	}
}

// FuzzDecode: entry files may be edited by hand or cut short; Decode
// never panics and what it accepts encodes an execution.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"execution":"ex_1","attempt":1,"node":"a","at":"2026-11-29T12:00:00Z","keep_until":"2026-12-06T12:00:00Z"}`))
	f.Add([]byte(`{"execution":"","attempt":-1}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err == nil && (e.Execution == "" || e.Attempt < 0) {
			t.Fatalf("accepted %+v", e)
		}
	})
}
