package rulesandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxFrame bounds one frame either way: a request carries at most a
// 256 KiB delivery and 50 programs of 4 KiB; a reply carries one program's
// answer, its text cut to textMax.
const maxFrame = 4 << 20

// textMax bounds the text a worker returns for one program's output.
const textMax = 64 << 10

// request is one job for a worker.
type request struct {
	// Op is "compile" (answer whether each program compiles) or "eval"
	// (run each on Input and answer its first output).
	Op    string   `json:"op"`
	Exprs []string `json:"exprs"`
	// Input is the delivery, one JSON value (eval only). It travels as a
	// raw frame after the request's, not inside its JSON, so that neither
	// side scans it twice.
	Input []byte `json:"-"`
	// TimeoutMS is each program's own timeout, checked by gojq between
	// steps; the parent's kill is the bound.
	TimeoutMS int64 `json:"timeout_ms"`
	// CPUSeconds is how much CPU time this request may use: the worker
	// sets its soft RLIMIT_CPU that far past what it has used.
	CPUSeconds int64 `json:"cpu_s"`
	// Unchecked skips the checked subset and its rewrite (tests only).
	Unchecked bool `json:"unchecked,omitempty"`
}

// reply is a worker's answer about one program, or (Done) the end of a
// request.
type reply struct {
	Index int `json:"i"`
	// Ready says the worker read and decoded the request and its input:
	// the first program's deadline starts then. Done ends the request;
	// Retire asks the parent not to reuse the worker (its heap stayed
	// large).
	Ready  bool `json:"ready,omitempty"`
	Done   bool `json:"done,omitempty"`
	Retire bool `json:"retire,omitempty"`
	// NotAllowed names the construct outside the checked subset.
	NotAllowed string `json:"not_allowed,omitempty"`
	// CompileErr is why the program does not compile.
	CompileErr string `json:"compile_err,omitempty"`
	// Err is why the program failed when run.
	Err string `json:"err,omitempty"`
	// Output is true when the program produced an output; Truthy when
	// that output is neither false nor null; Text is it as text when it is
	// a string, number or boolean.
	Output bool    `json:"output,omitempty"`
	Truthy bool    `json:"truthy,omitempty"`
	Text   *string `json:"text,omitempty"`
}

// writeFrame writes v as a 4-byte big-endian length and its JSON.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("frame of %d bytes past the limit of %d", len(b), maxFrame)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(append(n[:], b...)); err != nil {
		return err
	}
	return nil
}

// writeRaw writes b as one frame, as it is.
func writeRaw(w io.Writer, b []byte) error {
	if len(b) > maxFrame {
		return fmt.Errorf("frame of %d bytes past the limit of %d", len(b), maxFrame)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readRaw reads one frame as it is.
func readRaw(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, errFrameTooLarge
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

var errFrameTooLarge = errors.New("frame past the limit")

// readFrame reads one frame into v.
func readFrame(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return errFrameTooLarge
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return json.Unmarshal(b, v)
}
