package strictjson

import (
	"strings"
	"testing"
)

// benchDocs are documents of the shapes the host parses strictly: an
// HTTP API request envelope and a connector call's arguments, with
// escapes, numbers and nesting.
var benchDocs = []struct{ name, doc string }{
	{"envelope", `{"session_id":"sess_8f2c1d","tool_call_id":"call_01HZX4K9Q2","tool":"email.send",` +
		`"arguments":{"to":["ada@example.com"],"subject":"Hello","text":"Hi Ada"}}`},
	{"arguments", `{"to":["ada@example.com","grace@example.org","edsger@example.net"],` +
		`"cc":[],"subject":"Quarterly report \u2014 Q3","reply_to":null,"priority":3,"track_opens":false,` +
		`"text":"` + strings.Repeat(`Dear all,\nplease find the figures attached. \"Totals\" are in EUR.\n`, 8) + `",` +
		`"attachments":[{"filename":"q3.csv","content_type":"text/csv","size":18204},` +
		`{"filename":"notes.txt","content_type":"text/plain","size":512}],` +
		`"metadata":{"campaign":"q3-report","team":"finance","amount":1234.56,"ratio":-1.5e-3}}`},
}

func BenchmarkParseObject(b *testing.B) {
	for _, d := range benchDocs {
		doc := []byte(d.doc)
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseObject(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
