package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/connhost/connhost/internal/strictjson"
)

// parseArgs parses a call's arguments, which must be one JSON object. It
// returns the decoded document (numbers as json.Number, the form the
// schema validator reads) and the hex sha256 of its canonical form: object
// keys sorted, insignificant white space removed, numbers kept as written.
// Two argument documents that mean the same thing have the same digest;
// any change of value changes it.
//
// Arguments that two different documents could share a digest with are
// refused by the strict parser (internal/strictjson): invalid UTF-8 and
// unpaired UTF-16 surrogate escapes (decoding turns both into U+FFFD) and
// duplicate object keys (decoding keeps the last one). So are documents
// nested deeper than maxArgsDepth.
func parseArgs(args []byte) (doc map[string]any, digest string, err error) {
	if doc, err = strictjson.ParseObject(args); err != nil {
		return nil, "", err
	}
	// encoding/json sorts map keys and writes json.Number verbatim.
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, "", fmt.Errorf("canonicalize arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return doc, hex.EncodeToString(sum[:]), nil
}

// maxArgsDepth bounds the nesting of arguments, as encoding/json's Decode
// does.
const maxArgsDepth = strictjson.MaxDepth
