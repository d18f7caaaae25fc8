package engine

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/switchboard/notify/sinks"
)

// storedContent is an outbox row's payload: the content, and the top-level
// keys rows written before the reference host's todo fields moved into
// Content.Data carry (decodeContent).
type storedContent struct {
	sinks.Content
	Cause           string `json:"cause"`
	Attempts        int64  `json:"attempts"`
	AttemptSummary  string `json:"attempt_summary"`
	ArtifactHandle  string `json:"artifact_handle"`
	OriginDisplay   string `json:"origin_display"`
	OriginPermalink string `json:"origin_permalink"`
}

// contentParsers parse payloads for decodeStoredFast; a parser keeps its
// buffers between payloads.
var contentParsers fastjson.ParserPool

// decodeStoredFast reads a payload in the shape the engine stores it (keys
// as json.Marshal writes them, each once, strings, a list of strings and
// an object of strings, no null), without reflection: encoding/json's
// reflection and the allocations it makes cost a one-instance drain 2 to 6
// % of its CPU. Anything else, and any payload with a \u escape or bytes
// that are not UTF-8 (where decoders differ on what they make of them),
// is not read (false), nor one with a control character (the parser takes
// them raw inside strings, JSON does not; the database writes none, not
// even a newline between keys), and decodeContent reads it with encoding/json,
// whose result this one equals wherever it answers
// (FuzzDecodeStoredFastAgreesWithEncodingJSON).
func decodeStoredFast(payload []byte) (row storedContent, ok bool) {
	if !utf8.Valid(payload) || bytes.ContainsFunc(payload, isControl) || !plainEscapes(payload) {
		return row, false
	}
	p := contentParsers.Get()
	defer contentParsers.Put(p)
	v, err := p.ParseBytes(payload)
	if err != nil {
		return row, false
	}
	o, err := v.Object()
	if err != nil {
		return row, false
	}
	ok = true
	var seen uint32
	o.Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		k, dst := storedField(&row, key)
		if k < 0 || seen&(1<<k) != 0 {
			ok = false
			return
		}
		seen |= 1 << k
		switch {
		case dst != nil:
			ok = stringOf(v, dst)
		case string(key) == "lines":
			ok = linesOf(v, &row.Lines)
		case string(key) == "data":
			ok = dataOf(v, &row.Data)
		case string(key) == "attempts":
			ok = int64Of(v, &row.Attempts)
		}
	})
	return row, ok
}

func isControl(r rune) bool { return r < 0x20 }

// plainEscapes reports whether every backslash in b begins one of JSON's
// escapes other than \u.
func plainEscapes(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 == len(b) || bytes.IndexByte([]byte(`"\\/bfnrt`), b[i+1]) < 0 {
			return false
		}
		i++
	}
	return true
}

// storedField numbers a payload's key (-1 for a key it does not know) and
// gives the string it is read into, if it is one.
func storedField(row *storedContent, key []byte) (int, *string) {
	switch string(key) {
	case "title":
		return 0, &row.Title
	case "place":
		return 1, &row.Place
	case "summary":
		return 2, &row.Summary
	case "subject":
		return 3, &row.Subject
	case "link_path":
		return 4, &row.LinkPath
	case "body":
		return 5, &row.Body
	case "cause":
		return 6, &row.Cause
	case "attempt_summary":
		return 7, &row.AttemptSummary
	case "artifact_handle":
		return 8, &row.ArtifactHandle
	case "origin_display":
		return 9, &row.OriginDisplay
	case "origin_permalink":
		return 10, &row.OriginPermalink
	case "lines":
		return 11, nil
	case "data":
		return 12, nil
	case "attempts":
		return 13, nil
	}
	return -1, nil
}

func stringOf(v *fastjson.Value, dst *string) bool {
	b, err := v.StringBytes()
	if err != nil {
		return false
	}
	*dst = string(b)
	return true
}

// linesOf reads a list of strings; an empty list is an empty slice, as
// encoding/json makes it.
func linesOf(v *fastjson.Value, dst *[]string) bool {
	a, err := v.Array()
	if err != nil {
		return false
	}
	lines := make([]string, len(a))
	for i, e := range a {
		if !stringOf(e, &lines[i]) {
			return false
		}
	}
	*dst = lines
	return true
}

// dataOf reads an object of strings; a key given twice keeps its last
// value, as encoding/json keeps it.
func dataOf(v *fastjson.Value, dst *map[string]string) bool {
	o, err := v.Object()
	if err != nil {
		return false
	}
	data := make(map[string]string, o.Len())
	ok := true
	o.Visit(func(key []byte, v *fastjson.Value) {
		var s string
		if ok && stringOf(v, &s) {
			data[string(key)] = s
		} else {
			ok = false
		}
	})
	*dst = data
	return ok
}

// int64Of reads a whole number written as JSON writes one, in digits
// alone (what encoding/json reads into an int64 without an error; the
// parser takes leading zeros, which JSON does not).
func int64Of(v *fastjson.Value, dst *int64) bool {
	if v.Type() != fastjson.TypeNumber {
		return false
	}
	raw := v.MarshalTo(nil)
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' || bytes.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		return false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}
