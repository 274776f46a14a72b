package watcher

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufMagic starts an object in the API server's protobuf encoding;
// a runtime.Unknown follows, whose raw field holds the object itself.
var protobufMagic = []byte("k8s\x00")

// protoObject is an API object with its generated protobuf decoder.
type protoObject interface {
	runtime.Object
	Unmarshal(data []byte) error
}

// Protobuf wire types (the ones a list holds; groups are not used).
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

var errProtobuf = errors.New("watcher: malformed protobuf list")

// eachProtobufItem reads a list in the API server's protobuf encoding
// from r, past the magic, decoding its items one at a time into objects
// from newItem and calling each with them, and returns the list's
// metadata. A decoded list of a large cluster's EndpointSlices takes
// tens of megabytes; this holds one item at a time.
//
// The envelope (runtime.Unknown) has typeMeta = 1, raw = 2,
// contentEncoding = 3 and contentType = 4; every built-in list has
// metadata = 1 and items = 2.
func eachProtobufItem(r *bufio.Reader, newItem func() protoObject, each func(runtime.Object) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	seen := false
	for {
		field, wire, err := readTag(r)
		if err == io.EOF && seen {
			return meta, nil
		}
		if err != nil {
			return meta, protobufError(err)
		}
		if field != 2 || wire != wireBytes {
			if err := skipField(r, wire); err != nil {
				return meta, err
			}
			continue
		}
		n, err := readUvarint(r)
		if err != nil {
			return meta, protobufError(err)
		}
		if meta, err = readList(&boundedReader{r: r, n: n}, newItem, each); err != nil {
			return meta, err
		}
		seen = true
	}
}

// readList reads a list message's fields from r.
func readList(r *boundedReader, newItem func() protoObject, each func(runtime.Object) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	// The generated decoders copy what they keep, so one buffer serves
	// every item.
	var buf []byte
	for r.n > 0 {
		field, wire, err := readTag(r)
		if err != nil {
			return meta, protobufError(err)
		}
		if (field != 1 && field != 2) || wire != wireBytes {
			if err := skipField(r, wire); err != nil {
				return meta, err
			}
			continue
		}
		if buf, err = readBytes(r, buf); err != nil {
			return meta, err
		}
		if field == 1 {
			if err := meta.Unmarshal(buf); err != nil {
				return meta, fmt.Errorf("%w: list metadata: %w", errProtobuf, err)
			}
			continue
		}
		item := newItem()
		if err := item.Unmarshal(buf); err != nil {
			return meta, fmt.Errorf("%w: %T: %w", errProtobuf, item, err)
		}
		if err := each(item); err != nil {
			return meta, err
		}
	}
	return meta, nil
}

// byteReader is what the readers below need: bytes one at a time, or in
// a run.
type byteReader interface {
	io.ByteReader
	io.Reader
}

// boundedReader reads at most n bytes of r: one length-delimited field.
type boundedReader struct {
	r *bufio.Reader
	n uint64
}

func (b *boundedReader) ReadByte() (byte, error) {
	if b.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	c, err := b.r.ReadByte()
	if err == nil {
		b.n--
	}
	return c, err
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if uint64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= uint64(n)
	return n, err
}

// readUvarint reads a varint; one longer than 64 bits is malformed.
func readUvarint(r io.ByteReader) (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			if shift > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if shift == 63 && b > 1 {
			break
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: a varint over 64 bits", errProtobuf)
}

func readTag(r byteReader) (field uint64, wire byte, err error) {
	tag, err := readUvarint(r)
	if err != nil {
		return 0, 0, err
	}
	return tag >> 3, byte(tag & 7), nil
}

// readBytes reads a length-delimited field's contents into buf and
// returns them. The length is checked against what r can hold, but r's
// own bound is only what an enclosing length claims, so buf grows with
// the bytes that arrive, never by the length alone: a few bytes claiming
// terabytes cost a failed read, not the allocation.
func readBytes(r *boundedReader, buf []byte) ([]byte, error) {
	n, err := readUvarint(r)
	if err != nil {
		return buf, protobufError(err)
	}
	if n > r.n {
		return buf, fmt.Errorf("%w: a field of %d bytes in %d", errProtobuf, n, r.n)
	}
	buf = buf[:0]
	for uint64(len(buf)) < n {
		step := int(min(n-uint64(len(buf)), readStep))
		buf = slices.Grow(buf, step)
		got, err := io.ReadFull(r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+got]
		if err != nil {
			return buf, protobufError(err)
		}
	}
	return buf, nil
}

// readStep is the most readBytes allocates ahead of the bytes read.
const readStep = 1 << 20

func skipField(r byteReader, wire byte) error {
	var n uint64
	switch wire {
	case wireVarint:
		_, err := readUvarint(r)
		return protobufError(err)
	case wireFixed64:
		n = 8
	case wireFixed32:
		n = 4
	case wireBytes:
		var err error
		if n, err = readUvarint(r); err != nil {
			return protobufError(err)
		}
	default:
		return fmt.Errorf("%w: wire type %d", errProtobuf, wire)
	}
	if _, err := io.CopyN(io.Discard, r, int64(min(n, 1<<62))); err != nil {
		return protobufError(err)
	}
	return nil
}

// protobufError wraps a read error; a list that ends early is malformed.
func protobufError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: truncated", errProtobuf)
	default:
		return err
	}
}
