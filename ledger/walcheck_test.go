package ledger

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The logs of these tests are written by Pebble's own log writer, in the
// chunk format Pebble writes at FormatNewest, so the checker is tested
// against the real format, not against its own reading of it.
const (
	testLogNum  = 7 // the log being checked
	staleLogNum = 5 // an older log whose file was recycled for it
)

// writeLog returns the bytes of a cleanly closed log (ending in the EOF
// trailer) of number num holding recs.
func writeLog(t testing.TB, num uint32, recs [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	cfg := record.LogWriterConfig{
		WALFsyncLatency:     prometheus.NewHistogram(prometheus.HistogramOpts{}),
		WriteWALSyncOffsets: func() bool { return true },
	}
	var w *record.LogWriter
	switch num {
	case testLogNum:
		w = record.NewLogWriter(&buf, testLogNum, cfg)
	case staleLogNum:
		w = record.NewLogWriter(&buf, staleLogNum, cfg)
	default:
		t.Fatalf("no log number %d", num)
	}
	for _, r := range recs {
		if _, err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testRecords returns records of the given sizes with pseudo-random
// contents.
func testRecords(seed uint64, sizes ...int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	recs := make([][]byte, len(sizes))
	for i, n := range sizes {
		recs[i] = make([]byte, n)
		for j := range recs[i] {
			recs[i][j] = byte(rng.Uint32())
		}
	}
	return recs
}

// chunkStarts returns the offsets of the valid chunks of a clean log, up
// to its EOF trailer.
func chunkStarts(t testing.TB, log []byte, num uint32) []int {
	t.Helper()
	var starts []int
	for blk := 0; blk < len(log); blk += walBlockSize {
		block := log[blk:min(blk+walBlockSize, len(log))]
		for i := 0; i < len(block); {
			kind, next := walChunk(block, i, num)
			switch kind {
			case chunkValid:
				starts = append(starts, blk+i)
				i = next
			case chunkPadding:
				i = len(block)
			case chunkEOF:
				return starts
			default:
				t.Fatalf("clean log: invalid chunk at %d", blk+i)
			}
		}
	}
	t.Fatal("clean log without an EOF trailer")
	return nil
}

func check(t testing.TB, log []byte) *walDamage {
	t.Helper()
	dmg, err := checkLogFile(bytes.NewReader(log), testLogNum)
	if err != nil {
		t.Fatal(err)
	}
	return dmg
}

// checkTornTails: every way a crash can end the log at cut is accepted:
// the file ends there, is zeroed from there (preallocation), or holds the
// rest of an older log from there (recycling).
func checkTornTails(t testing.TB, log, stale []byte, cut int) {
	t.Helper()
	cut = min(cut, len(log))
	if dmg := check(t, log[:cut]); dmg != nil {
		t.Fatalf("log cut at %d: reported damage %+v", cut, *dmg)
	}
	zeroed := append(bytes.Clone(log[:cut]), make([]byte, len(log)-cut)...)
	if dmg := check(t, zeroed); dmg != nil {
		t.Fatalf("log zeroed from %d: reported damage %+v", cut, *dmg)
	}
	if cut < len(stale) {
		recycled := append(bytes.Clone(log[:cut]), stale[cut:]...)
		if dmg := check(t, recycled); dmg != nil {
			t.Fatalf("log over a recycled one from %d: reported damage %+v", cut, *dmg)
		}
	}
}

// checkFlip: a byte flipped inside a chunk that has a later data chunk
// is damage at that chunk, and the next chunk is named.
func checkFlip(t testing.TB, log []byte, starts []int, which, at int) {
	t.Helper()
	if len(starts) < 2 {
		return
	}
	c := which % (len(starts) - 1)
	start, next := starts[c], starts[c+1]
	end := next
	if blockEnd := (start/walBlockSize + 1) * walBlockSize; end > blockEnd {
		end = blockEnd // the next chunk starts a block: this one ends before the padding
	}
	length := int(binary.LittleEndian.Uint16(log[start+4:]))
	end = min(end, start+walSyncHeader+length)
	pos := start + at%(end-start)
	damaged := bytes.Clone(log)
	damaged[pos] ^= 0x5a
	dmg := check(t, damaged)
	if dmg == nil {
		t.Fatalf("byte %d flipped in chunk %d (%d..%d): no damage reported", pos, c, start, end)
	}
	if dmg.Offset != int64(start) || dmg.Next != int64(next) {
		t.Fatalf("byte %d flipped in chunk %d..%d: damage %+v, want at %d, next %d", pos, start, end, *dmg, start, next)
	}
}

// TestCheckLog runs the checker over logs of Pebble's writer: clean,
// cut, zeroed or recycled at many points (a crash: accepted), and with a
// flipped byte in each chunk but the last (damage).
func TestCheckLog(t *testing.T) {
	recs := testRecords(1, 100, 40_000, 10, 5_000, 70_000, 300, 32_700, 1, 2_000)
	log := writeLog(t, testLogNum, recs)
	stale := writeLog(t, staleLogNum, testRecords(2, 50_000, 50_000, 50_000))
	require.Greater(t, len(log), 4*walBlockSize)
	require.Nil(t, check(t, log))
	starts := chunkStarts(t, log, testLogNum)
	require.Greater(t, len(starts), len(recs), "records span blocks")

	for cut := 0; cut <= len(log); cut += 997 {
		checkTornTails(t, log, stale, cut)
	}
	for _, s := range starts {
		for _, d := range []int{0, 1, 6, 7, walSyncHeader} {
			checkTornTails(t, log, stale, s+d)
		}
	}
	for c := range len(starts) - 1 {
		for _, at := range []int{0, 4, 6, 7, 11, walSyncHeader, walSyncHeader + 3} {
			checkFlip(t, log, starts, c, at)
		}
	}
}

// TestCheckLogMidBlock is the case Pebble's replay misses: damage in the
// only block of a small log, before records of the same sync.
func TestCheckLogMidBlock(t *testing.T) {
	log := writeLog(t, testLogNum, testRecords(3, 500, 500, 500, 500))
	require.Less(t, len(log), walBlockSize)
	starts := chunkStarts(t, log, testLogNum)
	require.Len(t, starts, 4)
	damaged := bytes.Clone(log)
	copy(damaged[starts[1]+30:], []byte{0xde, 0xad, 0xbe, 0xef})
	require.Equal(t, &walDamage{Offset: int64(starts[1]), Next: int64(starts[2])}, check(t, damaged))

	// Pebble's own reader takes the damage for the end of the log.
	r := record.NewReader(bytes.NewReader(damaged), testLogNum)
	_, err := r.Next()
	require.NoError(t, err)
	_, err = r.Next()
	require.ErrorIs(t, err, record.ErrUnexpectedEOF)
}

// FuzzCheckLog: on any bytes the checker never panics; on a log of
// Pebble's writer, every torn tail is accepted and every flipped byte
// before the last chunk is found.
func FuzzCheckLog(f *testing.F) {
	f.Add([]byte{}, uint64(1), uint32(0), uint32(0), uint32(0))
	f.Add([]byte("\x00\x00\x00\x00"), uint64(2), uint32(40_000), uint32(3), uint32(9))
	f.Add(bytes.Repeat([]byte{7, 0, 0, 0, 9}, 100), uint64(3), uint32(70_000), uint32(1), uint32(20))
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64, cut, which, at uint32) {
		// Two blocks of arbitrary bytes reach every path; more only make
		// the search after an invalid chunk, which checksums every
		// candidate, slow on inputs built of candidates.
		if len(raw) > 2*walBlockSize {
			raw = raw[:2*walBlockSize]
		}
		if _, err := checkLogFile(bytes.NewReader(raw), testLogNum); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		sizes := make([]int, 1+rng.IntN(6))
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(3*walBlockSize)
		}
		log := writeLog(t, testLogNum, testRecords(seed, sizes...))
		stale := writeLog(t, staleLogNum, testRecords(seed+1, 3*walBlockSize))
		checkTornTails(t, log, stale, int(cut))
		checkFlip(t, log, chunkStarts(t, log, testLogNum), int(which), int(at))
	})
}
