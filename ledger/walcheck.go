package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// Pebble replays the newest write-ahead log up to its first invalid chunk
// and treats that chunk as the log's end: after a crash the tail of the log
// may be torn or hold leftovers of a recycled log, and that is normal. A
// chunk damaged in the middle of the log looks the same, and Pebble reports
// it only when a later 32 KiB block carries a sync offset past it; damage
// within the last block, or before records written in the same sync, ends
// the replay silently and every write after it is lost. Pebble has no
// stricter recovery mode to switch on, so Open checks the newest log
// itself before Pebble replays it: an invalid chunk followed by a valid
// chunk of the same log is damage, not a torn tail. (Older logs must end
// cleanly; Pebble's replay already refuses them otherwise.)
//
// The chunk format (pebble/record): within 32 KiB blocks, each chunk is
// checksum (4, masked CRC-32C of everything after the length), length (2),
// encoding (1), log number (4, recyclable and sync formats), synced offset
// (8, sync format), then length bytes of payload. A block's last bytes are
// zero when no further header fits. Log numbers are never reused, so a
// recycled file's stale chunks carry an older number and never pass for
// this log's records.

const (
	walBlockSize         = 32 << 10
	walLegacyHeader      = 7
	walRecyclableHeader  = 11
	walSyncHeader        = 19
	walRecyclableFullEnc = 5
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// walChecksum is Pebble's masked CRC-32C.
func walChecksum(b []byte) uint32 {
	c := crc32.Checksum(b, crcTable)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walHeaderSize returns the header size of a chunk encoding, and whether
// the encoding carries a log number; 0 for an invalid encoding.
func walHeaderSize(enc byte) (int, bool) {
	switch {
	case enc >= 1 && enc <= 4:
		return walLegacyHeader, false
	case enc >= 5 && enc <= 8:
		return walRecyclableHeader, true
	case enc >= 9 && enc <= 12:
		return walSyncHeader, true
	}
	return 0, false
}

// chunk results of walChunk.
const (
	chunkValid   = iota // a valid chunk; next is the offset after it
	chunkPadding        // zeroes to the end of the block
	chunkEOF            // the log's end-of-file trailer: the log was closed cleanly
	chunkInvalid        // anything else
)

// walChunk classifies the chunk at block[i:] of log num and returns the
// offset after it (for chunkValid).
func walChunk(block []byte, i int, num uint32) (kind, next int) {
	n := len(block)
	if i+walLegacyHeader > n {
		if n == walBlockSize && allZero(block[i:]) {
			return chunkPadding, n
		}
		return chunkInvalid, 0
	}
	checksum := binary.LittleEndian.Uint32(block[i:])
	length := int(binary.LittleEndian.Uint16(block[i+4:]))
	enc := block[i+6]
	if checksum == 0 && length == 0 && enc == 0 {
		// The writer zeroes a block's rest when no sync header fits.
		if i+walSyncHeader > n && allZero(block[i:]) {
			return chunkPadding, n
		}
		return chunkInvalid, 0
	}
	hdr, numbered := walHeaderSize(enc)
	if hdr == 0 || i+hdr > n {
		return chunkInvalid, 0
	}
	if numbered {
		switch got := binary.LittleEndian.Uint32(block[i+7:]); {
		case got == num+1 && enc == walRecyclableFullEnc && length == 0:
			return chunkEOF, 0
		case got != num:
			return chunkInvalid, 0
		}
	}
	end := i + hdr + length
	if end > n || walChecksum(block[i+6:end]) != checksum {
		return chunkInvalid, 0
	}
	return chunkValid, end
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walDamage is an invalid chunk at Offset followed by a valid chunk of the
// same log at Next.
type walDamage struct {
	Path         string
	Offset, Next int64
}

// checkWAL checks the newest write-ahead log in dir (see above).
func checkWAL(fsys vfs.FS, dir string) (*walDamage, error) {
	logs, err := wal.Scan(wal.Dir{FS: fsys, Dirname: dir})
	if err != nil {
		return nil, fmt.Errorf("ledger: list write-ahead logs in %s: %w", dir, err)
	}
	if len(logs) == 0 {
		return nil, nil
	}
	ll := logs[len(logs)-1]
	for i := range ll.NumSegments() {
		sfs, path := ll.SegmentLocation(i)
		f, err := sfs.Open(path)
		if err != nil {
			return nil, fmt.Errorf("ledger: check write-ahead log: %w", err)
		}
		dmg, err := checkLogFile(f, uint32(ll.Num))
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("ledger: check write-ahead log %s: %w", path, err)
		}
		if dmg != nil {
			dmg.Path = path
			return dmg, nil
		}
	}
	return nil, nil
}

// checkLogFile reads one log file of log num: its chunks in order up to
// the first one that is not valid, then the rest of the file for any
// valid chunk of the same log.
func checkLogFile(r io.Reader, num uint32) (*walDamage, error) {
	buf := make([]byte, walBlockSize)
	bad := int64(-1) // offset of the first invalid chunk
	for blockNum := int64(0); ; blockNum++ {
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		block := buf[:n]
		base := blockNum * walBlockSize
		i := 0
		if bad < 0 {
		chunks:
			for i < n {
				kind, next := walChunk(block, i, num)
				switch kind {
				case chunkValid:
					i = next
				case chunkPadding:
					i = n
				case chunkEOF:
					return nil, nil
				default:
					bad = base + int64(i)
					i++
					break chunks
				}
			}
			if bad < 0 {
				continue
			}
		}
		if j, ok := findChunk(block, i, num); ok {
			return &walDamage{Offset: bad, Next: base + int64(j)}, nil
		}
	}
}

// findChunk returns the offset of the first valid chunk of log num at or
// after from in block that carries the log's number (chunks of the legacy
// format carry none and prove nothing).
func findChunk(block []byte, from int, num uint32) (int, bool) {
	var pat [4]byte
	binary.LittleEndian.PutUint32(pat[:], num)
	for from+walRecyclableHeader <= len(block) {
		k := bytes.Index(block[from+7:], pat[:])
		if k < 0 {
			return 0, false
		}
		c := from + k
		if kind, _ := walChunk(block, c, num); kind == chunkValid {
			if _, numbered := walHeaderSize(block[c+6]); numbered {
				return c, true
			}
		}
		from = c + 1
	}
	return 0, false
}
